-- The ledger schema. Run by the owner role; the application role (wallet_app) may only append
-- to the journal and the entries, and update the balance caches of accounts.

CREATE TABLE principal (
  id          BIGSERIAL PRIMARY KEY,
  name        TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  role        TEXT NOT NULL CHECK (role IN ('user', 'merchant', 'operator')),
  created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- API keys are stored as SHA-256 hashes, never in clear.
CREATE TABLE api_key (
  key_hash      BYTEA PRIMARY KEY CHECK (length(key_hash) = 32),
  principal_id  BIGINT NOT NULL REFERENCES principal (id),
  created_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX api_key_principal ON api_key (principal_id);

CREATE TABLE account (
  id              BIGSERIAL PRIMARY KEY,
  owner_id        BIGINT REFERENCES principal (id),
  currency        CHAR(3) NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
  kind            TEXT NOT NULL CHECK (kind IN ('user', 'system', 'shard')),
  status          TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'frozen', 'closed')),
  allow_negative  BOOLEAN NOT NULL DEFAULT FALSE,
  balance         BIGINT NOT NULL DEFAULT 0,
  -- The number of entries on this row: every batch that writes the row raises it.
  version         BIGINT NOT NULL DEFAULT 0 CHECK (version >= 0),
  -- Hot accounts: a shard row names its parent and its number; the parent names its shard count.
  parent_id       BIGINT REFERENCES account (id),
  shard_no        INT CHECK (shard_no >= 0),
  shard_count     INT NOT NULL DEFAULT 0 CHECK (shard_count >= 0),
  -- System accounts made on demand, e.g. 'clearing' (where deposits come from).
  system_role     TEXT,
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  CONSTRAINT account_balance_not_negative CHECK (allow_negative OR balance >= 0),
  CONSTRAINT account_shard_shape CHECK ((kind = 'shard') = (parent_id IS NOT NULL AND shard_no IS NOT NULL)),
  CONSTRAINT account_system_shape CHECK ((kind = 'system') = (system_role IS NOT NULL)),
  UNIQUE (parent_id, shard_no)
);
CREATE UNIQUE INDEX account_system_role ON account (currency, system_role) WHERE system_role IS NOT NULL;
CREATE INDEX account_owner ON account (owner_id);

-- One row per money movement. Ids are time-ordered UUIDs made by the server, so index inserts
-- stay near the right edge of the B-tree. The idempotency key is unique per principal; system
-- transactions (sweeps) have no principal.
CREATE TABLE journal_transaction (
  id               UUID PRIMARY KEY,
  principal_id     BIGINT,
  idempotency_key  TEXT NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  request_hash     TEXT NOT NULL,
  type             TEXT NOT NULL CHECK (type IN ('DEPOSIT', 'TRANSFER', 'SWEEP')),
  status           TEXT NOT NULL DEFAULT 'COMPLETED' CHECK (status IN ('COMPLETED')),
  response_status  INT NOT NULL,
  response_body    TEXT NOT NULL,
  metadata         JSONB,
  created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  UNIQUE (principal_id, idempotency_key)
);

-- Entries carry their currency so the zero-sum check needs no join. No per-row foreign keys:
-- the writer locks every account it writes, and the reconciler checks that each entry's
-- account exists with the entry's currency.
CREATE TABLE ledger_entry (
  id              BIGSERIAL PRIMARY KEY,
  transaction_id  UUID NOT NULL,
  account_id      BIGINT NOT NULL,
  currency        CHAR(3) NOT NULL,
  amount          BIGINT NOT NULL CHECK (amount <> 0),
  balance_after   BIGINT NOT NULL,
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX ledger_entry_account ON ledger_entry (account_id, id);
CREATE INDEX ledger_entry_transaction ON ledger_entry (transaction_id);

CREATE TABLE outbox_event (
  id              BIGSERIAL PRIMARY KEY,
  transaction_id  UUID NOT NULL,
  topic           TEXT NOT NULL,
  payload         JSONB NOT NULL,
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  published_at    TIMESTAMPTZ
);
CREATE INDEX outbox_event_unpublished ON outbox_event (id) WHERE published_at IS NULL;

-- Every statement that inserts entries must leave each of its transactions summing to zero per
-- currency. A statement-level trigger sees all rows of the statement at once, which keeps a
-- batch of hundreds of transactions cheap (one aggregate instead of one query per row).
CREATE FUNCTION ledger_entry_zero_sum() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  bad RECORD;
BEGIN
  SELECT transaction_id, currency, sum(amount) AS total INTO bad
    FROM new_entries
   GROUP BY transaction_id, currency
  HAVING sum(amount) <> 0
   LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION 'transaction % does not sum to zero in % (sum %)', bad.transaction_id, bad.currency, bad.total
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END
$fn$;

CREATE TRIGGER ledger_entry_zero_sum AFTER INSERT ON ledger_entry
  REFERENCING NEW TABLE AS new_entries
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_entry_zero_sum();

-- Append-only, whoever asks: mistakes are corrected by a new, reversing transaction.
CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  RAISE EXCEPTION '% is append-only: % is not allowed', TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'insufficient_privilege';
END
$fn$;

CREATE TRIGGER ledger_entry_append_only BEFORE UPDATE OR DELETE ON ledger_entry
  FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER journal_transaction_append_only BEFORE UPDATE OR DELETE ON journal_transaction
  FOR EACH ROW EXECUTE FUNCTION ledger_append_only();

GRANT USAGE ON SCHEMA public TO wallet_app;
GRANT SELECT, INSERT ON principal, api_key, journal_transaction, ledger_entry TO wallet_app;
GRANT SELECT, INSERT ON account TO wallet_app;
GRANT UPDATE (balance, version, status, shard_count) ON account TO wallet_app;
GRANT SELECT, INSERT ON outbox_event TO wallet_app;
GRANT UPDATE (published_at) ON outbox_event TO wallet_app;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO wallet_app;
