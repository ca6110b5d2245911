-- Reconciliation checks held money (docs/reconciliation.md): an account's `held` (migration 011)
-- equals the sum of its ACTIVE holds. A finding of that check is named `held_mismatch`.
ALTER TABLE reconciliation_finding DROP CONSTRAINT reconciliation_finding_check_name_check;
ALTER TABLE reconciliation_finding ADD CONSTRAINT reconciliation_finding_check_name_check
  CHECK (check_name IN ('currency_zero_sum', 'transaction_zero_sum', 'account_cache', 'balance_after',
                        'negative_balance', 'entry_account', 'checkpoint', 'held_mismatch'));
