-- Money in and out (docs/money-flows.md): payment providers and their signed events, deposits
-- that remember their provider payment (so that refunds and a chargeback can never exceed them),
-- and withdrawals that leave in two steps and settle exactly once. Each of these rows is written
-- in the same database transaction as the journal transaction it belongs to.

-- A provider acts as a principal of its own (role 'provider', no API key): its events are
-- journal transactions made by it, and their idempotency keys are its event ids.
ALTER TABLE principal DROP CONSTRAINT principal_role_check;
ALTER TABLE principal ADD CONSTRAINT principal_role_check
  CHECK (role IN ('user', 'merchant', 'operator', 'provider'));

ALTER TABLE journal_transaction DROP CONSTRAINT journal_transaction_type_check;
ALTER TABLE journal_transaction ADD CONSTRAINT journal_transaction_type_check
  CHECK (type IN ('DEPOSIT', 'TRANSFER', 'SWEEP', 'WITHDRAWAL', 'PAYOUT', 'PAYOUT_FAILED', 'DEPOSIT_REFUND',
                  'CHARGEBACK'));

CREATE TABLE provider (
  id              BIGSERIAL PRIMARY KEY,
  name            TEXT NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,39}$'),
  principal_id    BIGINT NOT NULL UNIQUE REFERENCES principal (id),
  -- The HMAC-SHA256 key of its events. NULL: the provider sends none (the operators' 'manual').
  signing_secret  TEXT CHECK (signing_secret IS NULL OR length(signing_secret) >= 32),
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

WITH p AS (INSERT INTO principal (name, role) VALUES ('provider manual', 'provider') RETURNING id)
INSERT INTO provider (name, principal_id) SELECT 'manual', id FROM p;

-- Every provider event that posted, once: a second delivery of (provider, event id) finds the
-- journal transaction of the first by its idempotency key and never reaches this table.
CREATE TABLE provider_event (
  provider_id     BIGINT NOT NULL REFERENCES provider (id),
  event_id        TEXT NOT NULL CHECK (length(event_id) BETWEEN 1 AND 255),
  type            TEXT NOT NULL CHECK (type IN ('payment.succeeded', 'payment.refunded', 'payout.paid',
                                                'payout.failed', 'chargeback.created')),
  payment_id      TEXT,
  payload         JSONB NOT NULL,
  transaction_id  UUID NOT NULL UNIQUE,
  received_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (provider_id, event_id)
);

-- Each deposit, with what has been refunded and charged back of it. The CHECKs are the
-- database's own guarantee, under the row lock the writer takes: refunds and the chargeback
-- together never exceed the deposit, and there is one chargeback at most.
CREATE TABLE deposit_payment (
  transaction_id             UUID PRIMARY KEY,
  account_id                 BIGINT NOT NULL,
  provider_id                BIGINT NOT NULL REFERENCES provider (id),
  payment_id                 TEXT CHECK (payment_id IS NULL OR length(payment_id) BETWEEN 1 AND 255),
  currency                   CHAR(3) NOT NULL,
  amount                     BIGINT NOT NULL CHECK (amount > 0),
  refunded                   BIGINT NOT NULL DEFAULT 0 CHECK (refunded >= 0),
  charged_back               BIGINT NOT NULL DEFAULT 0 CHECK (charged_back >= 0),
  chargeback_transaction_id  UUID UNIQUE,
  created_at                 TIMESTAMPTZ NOT NULL DEFAULT now(),
  CONSTRAINT deposit_payment_not_exceeded CHECK (refunded + charged_back <= amount),
  CONSTRAINT deposit_payment_chargeback_shape CHECK ((charged_back > 0) = (chargeback_transaction_id IS NOT NULL)),
  UNIQUE (provider_id, payment_id)
);
CREATE INDEX deposit_payment_account ON deposit_payment (account_id);

CREATE FUNCTION deposit_payment_one_chargeback() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF OLD.chargeback_transaction_id IS NOT NULL
     AND NEW.chargeback_transaction_id IS DISTINCT FROM OLD.chargeback_transaction_id THEN
    RAISE EXCEPTION 'deposit % was already charged back', OLD.transaction_id USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$fn$;
CREATE TRIGGER deposit_payment_one_chargeback BEFORE UPDATE ON deposit_payment
  FOR EACH ROW EXECUTE FUNCTION deposit_payment_one_chargeback();

-- A withdrawal: its amount and fee left the wallet when it was requested (WITHDRAWAL); it then
-- settles once, as PAID (PAYOUT) or FAILED (PAYOUT_FAILED).
CREATE TABLE withdrawal (
  id                      UUID PRIMARY KEY,
  account_id              BIGINT NOT NULL,
  principal_id            BIGINT NOT NULL,
  provider_id             BIGINT NOT NULL REFERENCES provider (id),
  currency                CHAR(3) NOT NULL,
  amount                  BIGINT NOT NULL CHECK (amount > 0),
  fee                     BIGINT NOT NULL CHECK (fee >= 0),
  destination             TEXT CHECK (destination IS NULL OR length(destination) <= 255),
  status                  TEXT NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'PAID', 'FAILED')),
  transaction_id          UUID NOT NULL UNIQUE,
  settled_transaction_id  UUID UNIQUE,
  provider_payment_id     TEXT,
  created_at              TIMESTAMPTZ NOT NULL DEFAULT now(),
  settled_at              TIMESTAMPTZ,
  CONSTRAINT withdrawal_settled_shape CHECK ((status = 'PENDING') = (settled_transaction_id IS NULL))
);
CREATE INDEX withdrawal_account ON withdrawal (account_id, created_at);

-- Settles once, whoever writes: a settled withdrawal never changes again.
CREATE FUNCTION withdrawal_settles_once() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF OLD.status <> 'PENDING' THEN
    RAISE EXCEPTION 'withdrawal % is already %', OLD.id, OLD.status USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$fn$;
CREATE TRIGGER withdrawal_settles_once BEFORE UPDATE ON withdrawal
  FOR EACH ROW EXECUTE FUNCTION withdrawal_settles_once();

GRANT SELECT, INSERT ON provider, provider_event, deposit_payment, withdrawal TO wallet_app;
GRANT UPDATE (refunded, charged_back, chargeback_transaction_id) ON deposit_payment TO wallet_app;
GRANT UPDATE (status, settled_transaction_id, provider_payment_id, settled_at) ON withdrawal TO wallet_app;
GRANT USAGE, SELECT ON SEQUENCE provider_id_seq TO wallet_app;
