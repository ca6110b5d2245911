-- The classic row-lock schema of docs/baseline.md, verbatim, recreated from empty on every run.
DROP TABLE IF EXISTS outbox_event, ledger_entry, journal_transaction, account CASCADE;

CREATE TABLE account (id BIGINT PRIMARY KEY, owner_id BIGINT NOT NULL, currency CHAR(3) NOT NULL,
  balance BIGINT NOT NULL DEFAULT 0, allow_negative BOOLEAN NOT NULL DEFAULT FALSE,
  CHECK (allow_negative OR balance >= 0));
CREATE TABLE journal_transaction (id UUID PRIMARY KEY, idempotency_key VARCHAR(64) NOT NULL UNIQUE,
  type VARCHAR(32) NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now());
CREATE TABLE ledger_entry (id BIGSERIAL PRIMARY KEY,
  transaction_id UUID NOT NULL REFERENCES journal_transaction(id),
  account_id BIGINT NOT NULL REFERENCES account(id), amount BIGINT NOT NULL,
  balance_after BIGINT NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now());
CREATE INDEX idx_entry_account ON ledger_entry(account_id, id);
CREATE TABLE outbox_event (id BIGSERIAL PRIMARY KEY, topic VARCHAR(64) NOT NULL,
  payload JSONB NOT NULL, published BOOLEAN NOT NULL DEFAULT FALSE);
