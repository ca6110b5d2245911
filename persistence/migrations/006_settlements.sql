-- Settlement reconciliation (docs/settlements.md): a payment provider's report of what it settled,
-- matched against the journal transactions of its clearing accounts. Each import is recorded with
-- what it found; each difference is an exception that an operator resolves, once, with a note.
-- These are the reconciliation's own tables, not ledger tables: nothing here moves money.

CREATE TABLE settlement_import (
  id                  BIGSERIAL PRIMARY KEY,
  provider            TEXT NOT NULL,
  -- SHA-256 of the report's bytes, as sent: the same file imported twice shows as such.
  file_hash           TEXT NOT NULL CHECK (file_hash ~ '^[0-9a-f]{64}$'),
  lines               BIGINT NOT NULL CHECK (lines > 0),
  -- The earliest and the latest settledAt of the report.
  settled_from        TIMESTAMPTZ NOT NULL,
  settled_to          TIMESTAMPTZ NOT NULL CHECK (settled_to >= settled_from),
  -- The period the report covers: ledger transactions posted from checked_from to settled_to that
  -- it does not name are posted but not settled. checked_from is the latest settled_to of the
  -- provider's imports before (within a day), so that consecutive reports leave no gap; else
  -- settled_from.
  checked_from        TIMESTAMPTZ NOT NULL CHECK (checked_from <= settled_from),
  matched             BIGINT NOT NULL CHECK (matched >= 0),
  posted_not_settled  BIGINT NOT NULL CHECK (posted_not_settled >= 0),
  settled_not_posted  BIGINT NOT NULL CHECK (settled_not_posted >= 0),
  amount_mismatch     BIGINT NOT NULL CHECK (amount_mismatch >= 0),
  new_exceptions      BIGINT NOT NULL CHECK (new_exceptions >= 0),
  -- Open exceptions of keys this report matched, resolved by it.
  resolved_exceptions BIGINT NOT NULL CHECK (resolved_exceptions >= 0),
  imported_by         TEXT NOT NULL CHECK (length(imported_by) BETWEEN 1 AND 200),
  created_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX settlement_import_file_hash ON settlement_import (file_hash);
CREATE INDEX settlement_import_provider ON settlement_import (provider, settled_to);

-- One difference between a report and the ledger, per (provider, payment id, type): what each
-- side holds that the other does not match (NUMERIC sums: a report may sum past what a BIGINT
-- holds, and must still be shown), the ledger's first such transaction, and who looks after it.
-- A ledger transaction without a payment id is an exception of its own, keyed by its id.
CREATE TABLE settlement_exception (
  id               BIGSERIAL PRIMARY KEY,
  -- Deferred: an import writes its exceptions first and its own row, with their count, last.
  import_id        BIGINT NOT NULL REFERENCES settlement_import (id) DEFERRABLE INITIALLY DEFERRED,
  kind             TEXT NOT NULL CHECK (kind IN ('posted_not_settled', 'settled_not_posted', 'amount_mismatch')),
  provider         TEXT NOT NULL,
  payment_id       TEXT CHECK (payment_id IS NULL OR length(payment_id) BETWEEN 1 AND 255),
  type             TEXT NOT NULL CHECK (type IN ('DEPOSIT', 'DEPOSIT_REFUND', 'CHARGEBACK', 'PAYOUT')),
  ledger_amount    NUMERIC CHECK (ledger_amount > 0),
  report_amount    NUMERIC CHECK (report_amount > 0),
  -- The ledger's currency when it has the key, else the report's; report_currency is the report's.
  currency         CHAR(3) NOT NULL,
  report_currency  CHAR(3),
  transaction_id   UUID,
  settled_at       TIMESTAMPTZ,
  owner            TEXT CHECK (owner IS NULL OR length(owner) BETWEEN 1 AND 200),
  status           TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved')),
  note             TEXT CHECK (note IS NULL OR length(note) BETWEEN 1 AND 2000),
  resolved_by      TEXT CHECK (resolved_by IS NULL OR length(resolved_by) BETWEEN 1 AND 200),
  resolved_at      TIMESTAMPTZ,
  created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  CONSTRAINT settlement_exception_sides CHECK (
    CASE kind
      WHEN 'posted_not_settled' THEN ledger_amount IS NOT NULL AND report_amount IS NULL AND transaction_id IS NOT NULL
      WHEN 'settled_not_posted' THEN report_amount IS NOT NULL AND ledger_amount IS NULL AND payment_id IS NOT NULL
      ELSE ledger_amount IS NOT NULL AND report_amount IS NOT NULL AND transaction_id IS NOT NULL
           AND payment_id IS NOT NULL
    END),
  CONSTRAINT settlement_exception_resolution CHECK (
    (status = 'resolved') = (note IS NOT NULL AND resolved_by IS NOT NULL AND resolved_at IS NOT NULL))
);
-- Importing a report again (or another report with the same differences) adds no exception that
-- is still open: at most one open exception per key and kind. An import also finds here the open
-- exceptions of the keys it matched, to resolve them.
CREATE UNIQUE INDEX settlement_exception_open_key
  ON settlement_exception (provider, (COALESCE(payment_id, transaction_id::text)), type, kind)
  WHERE status = 'open';
CREATE INDEX settlement_exception_status ON settlement_exception (status, id);

-- Resolves once, whoever writes: a resolved exception never changes again, so its resolution
-- (who, when, the note) is its audit record.
CREATE FUNCTION settlement_exception_resolves_once() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF OLD.status <> 'open' THEN
    RAISE EXCEPTION 'settlement exception % is already %', OLD.id, OLD.status USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$fn$;
CREATE TRIGGER settlement_exception_resolves_once BEFORE UPDATE ON settlement_exception
  FOR EACH ROW EXECUTE FUNCTION settlement_exception_resolves_once();

-- The ledger side of an import: the transactions of one provider within a time range, by the
-- provider the money flows write into their metadata. Partial: only the types that touch a
-- clearing account pay for it, never a transfer.
CREATE INDEX journal_transaction_provider_time ON journal_transaction ((metadata ->> 'provider'), created_at)
  WHERE type IN ('DEPOSIT', 'DEPOSIT_REFUND', 'CHARGEBACK', 'PAYOUT');

GRANT SELECT, INSERT ON settlement_import, settlement_exception TO wallet_app;
GRANT UPDATE (status, note, owner, resolved_by, resolved_at) ON settlement_exception TO wallet_app;
GRANT USAGE, SELECT ON SEQUENCE settlement_import_id_seq, settlement_exception_id_seq TO wallet_app;
