-- Holds: authorize now, capture later (docs/money-flows.md, "Holds"). A hold lowers what its payer
-- may spend (available) and leaves its balance alone; a capture posts CAPTURE and releases the
-- rest; a void or the expiry releases all of it. Placing, voiding and expiring move no money and
-- write no journal rows.

-- What the payer's active holds keep from its debits: the sum of their amounts, maintained with
-- the hold rows in the same transaction, under the account's row lock (the ledger writer's, or the
-- hold expirer's). held_version counts its changes, so that an account actor keeps the newest
-- value it hears of (held changes without an entry, so `version` cannot tell).
ALTER TABLE account ADD COLUMN held BIGINT NOT NULL DEFAULT 0;
ALTER TABLE account ADD COLUMN held_version BIGINT NOT NULL DEFAULT 0 CHECK (held_version >= 0);
ALTER TABLE account ADD CONSTRAINT account_held_not_negative CHECK (held >= 0);
-- Active holds never exceed the balance of an account that may not go negative. A hot account's
-- money is spread over its main row and its shards, which one row's CHECK cannot see: the deferred
-- trigger below checks main + shards at COMMIT instead.
ALTER TABLE account ADD CONSTRAINT account_held_within_balance
  CHECK (allow_negative OR shard_count > 0 OR held <= balance);

CREATE FUNCTION account_hot_held_within_balance() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  main_id BIGINT := COALESCE(NEW.parent_id, NEW.id);
  main RECORD;
  total NUMERIC;
BEGIN
  SELECT held, balance, allow_negative INTO main FROM account WHERE id = main_id;
  IF main.held = 0 OR main.allow_negative OR main.held <= main.balance THEN
    RETURN NULL;
  END IF;
  SELECT main.balance + COALESCE(sum(balance), 0) INTO total FROM account WHERE parent_id = main_id;
  IF main.held > total THEN
    RAISE EXCEPTION 'account %: active holds (%) exceed its balance (%)', main_id, main.held, total
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END
$fn$;

-- Checked at COMMIT, when every row of the statement that moved money has its final balance: a hot
-- main row whose holds exceed its own balance, and every debited shard (its parent may now hold
-- too little). Rows without holds return after one lookup by primary key.
CREATE CONSTRAINT TRIGGER account_hot_held_main AFTER INSERT OR UPDATE ON account
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (NEW.shard_count > 0 AND NOT NEW.allow_negative AND NEW.held > NEW.balance)
  EXECUTE FUNCTION account_hot_held_within_balance();
CREATE CONSTRAINT TRIGGER account_hot_held_shard AFTER UPDATE ON account
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (NEW.parent_id IS NOT NULL AND NEW.balance < OLD.balance)
  EXECUTE FUNCTION account_hot_held_within_balance();

-- One row per hold. Placing it is idempotent per (principal, Idempotency-Key), like a journal
-- transaction: the stored answer is returned to a retry. It settles once: ACTIVE becomes CAPTURED
-- (with its CAPTURE transaction), VOIDED or EXPIRED, and then never changes.
CREATE TABLE hold (
  id                      UUID PRIMARY KEY,
  payer_id                BIGINT NOT NULL REFERENCES account (id),
  payee_id                BIGINT NOT NULL REFERENCES account (id),
  principal_id            BIGINT NOT NULL REFERENCES principal (id),
  idempotency_key         TEXT NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  request_hash            TEXT NOT NULL,
  response_body           TEXT NOT NULL,
  currency                CHAR(3) NOT NULL,
  amount                  BIGINT NOT NULL CHECK (amount > 0),
  captured                BIGINT NOT NULL DEFAULT 0,
  status                  TEXT NOT NULL DEFAULT 'ACTIVE'
                            CHECK (status IN ('ACTIVE', 'CAPTURED', 'VOIDED', 'EXPIRED')),
  expires_at              TIMESTAMPTZ NOT NULL,
  created_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
  settled_at              TIMESTAMPTZ,
  capture_transaction_id  UUID REFERENCES journal_transaction (id),
  CONSTRAINT hold_captured_within_amount CHECK (captured >= 0 AND captured <= amount),
  CONSTRAINT hold_capture_shape CHECK ((status = 'CAPTURED') = (capture_transaction_id IS NOT NULL AND captured > 0)),
  CONSTRAINT hold_settled_shape CHECK ((status = 'ACTIVE') = (settled_at IS NULL)),
  CONSTRAINT hold_not_self CHECK (payer_id <> payee_id),
  UNIQUE (principal_id, idempotency_key)
);
-- What the expirer scans every tick, and what an account's holds are found by.
CREATE INDEX hold_active_expiry ON hold (expires_at) WHERE status = 'ACTIVE';
CREATE INDEX hold_payer ON hold (payer_id) WHERE status = 'ACTIVE';

CREATE FUNCTION hold_settles_once() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF OLD.status <> 'ACTIVE' THEN
    RAISE EXCEPTION 'hold % is already %', OLD.id, OLD.status USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.id <> OLD.id OR NEW.payer_id <> OLD.payer_id OR NEW.payee_id <> OLD.payee_id OR NEW.amount <> OLD.amount
     OR NEW.expires_at <> OLD.expires_at OR NEW.principal_id <> OLD.principal_id THEN
    RAISE EXCEPTION 'hold %: only its settlement may be written', OLD.id USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$fn$;
CREATE TRIGGER hold_settles_once BEFORE UPDATE ON hold FOR EACH ROW EXECUTE FUNCTION hold_settles_once();

-- CAPTURE joins the journal's types. The list is extended as it stands (other migrations may have
-- extended it too), not restated.
DO $do$
DECLARE
  def TEXT;
BEGIN
  SELECT pg_get_constraintdef(oid) INTO def FROM pg_constraint
   WHERE conname = 'journal_transaction_type_check' AND conrelid = 'journal_transaction'::regclass;
  IF position('''CAPTURE''' IN def) = 0 THEN
    EXECUTE 'ALTER TABLE journal_transaction DROP CONSTRAINT journal_transaction_type_check';
    EXECUTE 'ALTER TABLE journal_transaction ADD CONSTRAINT journal_transaction_type_check '
            || replace(def, 'ARRAY[', 'ARRAY[''CAPTURE''::text, ');
  END IF;
END
$do$;

GRANT UPDATE (held, held_version) ON account TO wallet_app;
GRANT SELECT, INSERT ON hold TO wallet_app;
GRANT UPDATE (status, captured, settled_at, capture_transaction_id) ON hold TO wallet_app;
