-- Reconciliation checks held money (docs/reconciliation.md): an account's `held` (migration 011)
-- equals the sum of its ACTIVE holds; a finding of that check is named `held_mismatch`. The list
-- of check names is extended as it stands (other migrations may have extended it too), not
-- restated.
DO $do$
DECLARE
  def TEXT;
BEGIN
  SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
   WHERE conname = 'reconciliation_finding_check_name_check' AND conrelid = 'reconciliation_finding'::regclass;
  IF position('''held_mismatch''' IN def) = 0 THEN
    EXECUTE 'ALTER TABLE reconciliation_finding DROP CONSTRAINT reconciliation_finding_check_name_check';
    EXECUTE 'ALTER TABLE reconciliation_finding ADD CONSTRAINT reconciliation_finding_check_name_check '
            || replace(def, 'ARRAY[', 'ARRAY[''held_mismatch''::text, ');
  END IF;
END
$do$;
