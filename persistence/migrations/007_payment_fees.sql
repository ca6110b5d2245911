-- Merchant flows (docs/money-flows.md): the fee schedule of the payments an account receives, and
-- refunds of payments (REFUND) that together never exceed the payment.

-- A user account's fee schedule, set by an operator: fee = fee_fixed + floor(amount × fee_bps /
-- 10000), never more than the amount. NULL (both): the account never had one. A hot account's
-- schedule lives on its main row only; the ledger writer reads it there when it locks a shard.
ALTER TABLE account ADD COLUMN fee_bps INT CHECK (fee_bps BETWEEN 0 AND 10000);
ALTER TABLE account ADD COLUMN fee_fixed BIGINT CHECK (fee_fixed >= 0);
ALTER TABLE account ADD CONSTRAINT account_fee_shape
  CHECK ((fee_bps IS NULL) = (fee_fixed IS NULL) AND (fee_bps IS NULL OR kind = 'user'));
GRANT UPDATE (fee_bps, fee_fixed) ON account TO wallet_app;

ALTER TABLE journal_transaction DROP CONSTRAINT journal_transaction_type_check;
ALTER TABLE journal_transaction ADD CONSTRAINT journal_transaction_type_check
  CHECK (type IN ('DEPOSIT', 'TRANSFER', 'SWEEP', 'WITHDRAWAL', 'PAYOUT', 'PAYOUT_FAILED', 'DEPOSIT_REFUND',
                  'CHARGEBACK', 'REFUND'));

-- What has been refunded of a payment, written with its first refund (a row per payment would
-- cost every payment an insert on the hot path; most are never refunded). The ledger writer locks
-- it FOR UPDATE before it plans a refund; the CHECK is the database's own guarantee that refunds
-- never exceed the payment, whoever writes.
CREATE TABLE payment_refund_total (
  transaction_id  UUID PRIMARY KEY REFERENCES journal_transaction (id),
  payee_id        BIGINT NOT NULL,
  payer_id        BIGINT NOT NULL,
  currency        CHAR(3) NOT NULL,
  amount          BIGINT NOT NULL CHECK (amount > 0),
  refunded        BIGINT NOT NULL CHECK (refunded > 0),
  CONSTRAINT payment_refund_total_not_exceeded CHECK (refunded <= amount)
);

-- Each refund of a payment, in the refund's own transaction.
CREATE TABLE payment_refund (
  transaction_id          UUID PRIMARY KEY REFERENCES journal_transaction (id),
  payment_transaction_id  UUID NOT NULL REFERENCES payment_refund_total (transaction_id),
  amount                  BIGINT NOT NULL CHECK (amount > 0),
  created_at              TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX payment_refund_payment ON payment_refund (payment_transaction_id, created_at);

GRANT SELECT, INSERT ON payment_refund_total, payment_refund TO wallet_app;
GRANT UPDATE (refunded) ON payment_refund_total TO wallet_app;
