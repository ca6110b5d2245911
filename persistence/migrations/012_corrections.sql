-- Corrections and currencies (docs/corrections.md): reversals, two-person adjustments, exchange
-- rates, quotes and exchanges.

-- The new transaction types. The type CHECK is extended rather than rewritten, so that types
-- other migrations add (in any order) are kept.
DO $do$
DECLARE
  def TEXT;
BEGIN
  SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
   WHERE conrelid = 'journal_transaction'::regclass AND conname = 'journal_transaction_type_check';
  IF def IS NULL OR position('ARRAY[' IN def) = 0 THEN
    RAISE EXCEPTION 'journal_transaction_type_check has an unexpected shape: %', def;
  END IF;
  ALTER TABLE journal_transaction DROP CONSTRAINT journal_transaction_type_check;
  EXECUTE 'ALTER TABLE journal_transaction ADD CONSTRAINT journal_transaction_type_check '
       || replace(def, 'ARRAY[', 'ARRAY[''REVERSAL''::text, ''ADJUSTMENT''::text, ''EXCHANGE''::text, ');
END
$do$;

-- A transaction is reversed once: the primary key refuses a second reversal whoever writes it.
-- Both directions of the link are here (the journal is append-only, so the original cannot be
-- marked); the reversal's own metadata names the original as `reverses` too.
CREATE TABLE transaction_reversal (
  transaction_id  UUID PRIMARY KEY REFERENCES journal_transaction (id),
  reversal_id     UUID NOT NULL UNIQUE REFERENCES journal_transaction (id),
  principal_id    BIGINT NOT NULL REFERENCES principal (id),
  reason          TEXT NOT NULL CHECK (length(reason) BETWEEN 1 AND 500),
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  CHECK (transaction_id <> reversal_id)
);
CREATE TRIGGER transaction_reversal_append_only BEFORE UPDATE OR DELETE ON transaction_reversal
  FOR EACH ROW EXECUTE FUNCTION ledger_append_only();

-- An adjustment waits for a second operator. The CHECK refuses a decision by the operator who
-- requested it, for every role (the owner's manual UPDATE in psql included).
CREATE TABLE adjustment (
  id               UUID PRIMARY KEY,
  account_id       BIGINT NOT NULL REFERENCES account (id),
  currency         CHAR(3) NOT NULL,
  amount           BIGINT NOT NULL CHECK (amount <> 0),
  reason           TEXT NOT NULL CHECK (length(reason) BETWEEN 1 AND 500),
  requested_by     BIGINT NOT NULL REFERENCES principal (id),
  idempotency_key  TEXT NOT NULL,
  request_hash     TEXT NOT NULL,
  status           TEXT NOT NULL DEFAULT 'PENDING_APPROVAL'
                   CHECK (status IN ('PENDING_APPROVAL', 'APPROVED', 'REJECTED')),
  decided_by       BIGINT REFERENCES principal (id),
  decided_at       TIMESTAMPTZ,
  transaction_id   UUID REFERENCES journal_transaction (id),
  created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  UNIQUE (requested_by, idempotency_key),
  CONSTRAINT adjustment_two_people CHECK (decided_by IS NULL OR decided_by <> requested_by),
  CONSTRAINT adjustment_decision_shape CHECK (
    (status = 'PENDING_APPROVAL' AND decided_by IS NULL AND transaction_id IS NULL)
    OR (status = 'APPROVED' AND decided_by IS NOT NULL AND transaction_id IS NOT NULL)
    OR (status = 'REJECTED' AND decided_by IS NOT NULL AND transaction_id IS NULL))
);

-- Decided once; nothing but the decision is ever written.
CREATE FUNCTION adjustment_decides_once() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF OLD.status <> 'PENDING_APPROVAL' THEN
    RAISE EXCEPTION 'adjustment % is already %', OLD.id, OLD.status USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.id <> OLD.id OR NEW.account_id <> OLD.account_id OR NEW.amount <> OLD.amount
     OR NEW.currency <> OLD.currency OR NEW.reason <> OLD.reason OR NEW.requested_by <> OLD.requested_by
     OR NEW.idempotency_key <> OLD.idempotency_key OR NEW.request_hash <> OLD.request_hash THEN
    RAISE EXCEPTION 'adjustment %: only its decision may be written', OLD.id USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$fn$;
CREATE TRIGGER adjustment_decides_once BEFORE UPDATE ON adjustment
  FOR EACH ROW EXECUTE FUNCTION adjustment_decides_once();
CREATE TRIGGER adjustment_no_delete BEFORE DELETE ON adjustment
  FOR EACH ROW EXECUTE FUNCTION ledger_append_only();

-- Exchange rates: 1 base = rate quote, an exact decimal kept as its canonical text (never a
-- float); the NUMERIC check is the database's own guard of its shape.
CREATE TABLE fx_rate (
  base        CHAR(3) NOT NULL CHECK (base ~ '^[A-Z]{3}$'),
  quote       CHAR(3) NOT NULL CHECK (quote ~ '^[A-Z]{3}$'),
  rate        TEXT NOT NULL CHECK (rate ~ '^[0-9]+(\.[0-9]+)?$' AND rate::numeric > 0),
  source      TEXT NOT NULL CHECK (length(source) BETWEEN 1 AND 100),
  updated_by  BIGINT NOT NULL REFERENCES principal (id),
  updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (base, quote),
  CHECK (base <> quote)
);

-- A quote is used by one exchange at most.
CREATE TABLE fx_quote (
  id              UUID PRIMARY KEY,
  principal_id    BIGINT NOT NULL REFERENCES principal (id),
  from_account    BIGINT NOT NULL REFERENCES account (id),
  to_account      BIGINT NOT NULL REFERENCES account (id),
  from_currency   CHAR(3) NOT NULL,
  to_currency     CHAR(3) NOT NULL,
  rate            TEXT NOT NULL,
  source          TEXT NOT NULL,
  from_amount     BIGINT NOT NULL CHECK (from_amount > 0),
  to_amount       BIGINT NOT NULL CHECK (to_amount > 0),
  expires_at      TIMESTAMPTZ NOT NULL,
  transaction_id  UUID UNIQUE REFERENCES journal_transaction (id),
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE FUNCTION fx_quote_used_once() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF OLD.transaction_id IS NOT NULL OR NEW.transaction_id IS NULL OR NEW.id <> OLD.id
     OR NEW.from_amount <> OLD.from_amount OR NEW.to_amount <> OLD.to_amount OR NEW.rate <> OLD.rate
     OR NEW.from_account <> OLD.from_account OR NEW.to_account <> OLD.to_account THEN
    RAISE EXCEPTION 'quote %: used once, and nothing else of it changes', OLD.id USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$fn$;
CREATE TRIGGER fx_quote_used_once BEFORE UPDATE ON fx_quote
  FOR EACH ROW EXECUTE FUNCTION fx_quote_used_once();

GRANT SELECT, INSERT ON transaction_reversal, adjustment, fx_quote TO wallet_app;
GRANT UPDATE (status, decided_by, decided_at, transaction_id) ON adjustment TO wallet_app;
GRANT UPDATE (transaction_id) ON fx_quote TO wallet_app;
GRANT SELECT, INSERT, UPDATE ON fx_rate TO wallet_app;
