-- Incremental reconciliation (docs/reconciliation.md): every run is recorded with what it covered
-- and what it found, and leaves checkpoints behind (per account and per currency: the sum and the
-- count of the entries up to an entry id), so that the next run reads only the entries after them.
-- These are the reconciler's own tables, not ledger tables: the application role writes them.

CREATE TABLE reconciliation_run (
  id                    BIGSERIAL PRIMARY KEY,
  kind                  TEXT NOT NULL CHECK (kind IN ('incremental', 'full')),
  status                TEXT NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'finished', 'failed')),
  -- While running: 'waiting' for transactions that may still add entries up to the watermark,
  -- then 'checking'.
  phase                 TEXT CHECK (phase IN ('waiting', 'checking')),
  requested_by          TEXT NOT NULL CHECK (length(requested_by) BETWEEN 1 AND 200),
  started_at            TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
  finished_at           TIMESTAMPTZ,
  -- Coverage: entries with from_entry_id < id <= through_entry_id, plus whatever later entries the
  -- run's snapshot already saw. through_entry_id is the watermark the checkpoints were moved to.
  from_entry_id         BIGINT CHECK (from_entry_id >= 0),
  through_entry_id      BIGINT CHECK (through_entry_id >= 0),
  ok                    BOOLEAN,
  accounts_checked      BIGINT,
  entries_checked       BIGINT,
  transactions_checked  BIGINT,
  duration_ms           DOUBLE PRECISION,
  error                 TEXT,
  CONSTRAINT reconciliation_run_outcome CHECK ((status = 'finished') = (ok IS NOT NULL)),
  CONSTRAINT reconciliation_run_failure CHECK ((status = 'failed') = (error IS NOT NULL))
);
-- The watermark (latest finished run) and the run in progress are looked up by status.
CREATE INDEX reconciliation_run_status ON reconciliation_run (status, id);

-- What a run found: one row per broken invariant and what it names, at most a bounded number per
-- check and run.
CREATE TABLE reconciliation_finding (
  run_id          BIGINT NOT NULL REFERENCES reconciliation_run (id),
  seq             INT NOT NULL,
  check_name      TEXT NOT NULL CHECK (check_name IN ('currency_zero_sum', 'transaction_zero_sum', 'account_cache',
                                                      'balance_after', 'negative_balance', 'entry_account',
                                                      'checkpoint')),
  account_id      BIGINT,
  transaction_id  UUID,
  currency        CHAR(3),
  entry_id        BIGINT,
  detail          TEXT NOT NULL,
  PRIMARY KEY (run_id, seq)
);

-- The entries of an account with id <= through_entry_id sum to balance and number entry_count.
-- NUMERIC: a broken ledger may hold sums that no longer fit a BIGINT, and the reconciler must
-- still be able to say so. run_id (the run that wrote the row) has no foreign key: a full run
-- writes one row per account, and a per-row key check cost as much as the rest of its insert.
CREATE TABLE reconciliation_account_checkpoint (
  account_id        BIGINT PRIMARY KEY,
  through_entry_id  BIGINT NOT NULL CHECK (through_entry_id >= 0),
  balance           NUMERIC NOT NULL,
  entry_count       BIGINT NOT NULL CHECK (entry_count >= 0),
  run_id            BIGINT NOT NULL
);

-- The entries of a currency with id <= through_entry_id sum to balance (zero unless a transaction
-- straddles the watermark) and number entry_count.
CREATE TABLE reconciliation_currency_checkpoint (
  currency          CHAR(3) PRIMARY KEY,
  through_entry_id  BIGINT NOT NULL CHECK (through_entry_id >= 0),
  balance           NUMERIC NOT NULL,
  entry_count       BIGINT NOT NULL CHECK (entry_count >= 0),
  run_id            BIGINT NOT NULL
);

GRANT SELECT, INSERT, UPDATE ON reconciliation_run TO wallet_app;
GRANT SELECT, INSERT ON reconciliation_finding TO wallet_app;
-- A full run rebuilds the checkpoints: TRUNCATE and a fresh INSERT.
GRANT SELECT, INSERT, UPDATE, TRUNCATE ON reconciliation_account_checkpoint, reconciliation_currency_checkpoint
  TO wallet_app;
GRANT USAGE, SELECT ON SEQUENCE reconciliation_run_id_seq TO wallet_app;
