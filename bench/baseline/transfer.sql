-- One classic row-lock transfer as its own database transaction, statement by statement from the
-- client (docs/baseline.md). The pick_*.sql header chosen by run.sh sets :payer, :payee and
-- :amount; run with `pgbench -M prepared` so every statement is prepared once per connection.
\set lo least(:payer, :payee)
\set hi greatest(:payer, :payee)
\set neg_amount -1 * :amount
BEGIN;
INSERT INTO journal_transaction (id, idempotency_key, type)
  VALUES (gen_random_uuid(), gen_random_uuid()::text, 'TRANSFER')
  ON CONFLICT (idempotency_key) DO NOTHING RETURNING id AS tx_id \gset
SELECT balance AS lo_balance FROM account WHERE id = :lo FOR UPDATE \gset
SELECT balance AS hi_balance FROM account WHERE id = :hi FOR UPDATE \gset
\set payer_balance CASE WHEN :payer = :lo THEN :lo_balance ELSE :hi_balance END
\if :payer_balance >= :amount
UPDATE account SET balance = balance - :amount WHERE id = :payer RETURNING balance AS payer_after \gset
INSERT INTO ledger_entry (transaction_id, account_id, amount, balance_after)
  VALUES (:tx_id, :payer, :neg_amount, :payer_after);
UPDATE account SET balance = balance + :amount WHERE id = :payee RETURNING balance AS payee_after \gset
INSERT INTO ledger_entry (transaction_id, account_id, amount, balance_after)
  VALUES (:tx_id, :payee, :amount, :payee_after);
INSERT INTO outbox_event (topic, payload)
  VALUES ('transfer', jsonb_build_object('transactionId', :tx_id::text, 'from', :payer::bigint,
                                         'to', :payee::bigint, 'amount', :amount::bigint));
COMMIT;
\else
ROLLBACK;
\endif
