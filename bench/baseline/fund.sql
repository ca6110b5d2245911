-- Accounts 1..100000 are funded payers / salary receivers; 100001..100016 are the merchant row
-- and its 15 further credit sub-accounts; 200000 is the employer. The system clearing account 0
-- may go negative: every opening balance is a real double-entry deposit from it, so the total of
-- all balances is zero before and after a run (checked by run.sh).
INSERT INTO account (id, owner_id, currency, balance, allow_negative) VALUES (0, 0, 'EUR', 0, TRUE);
INSERT INTO account (id, owner_id, currency, balance)
  SELECT g, g, 'EUR', 0 FROM generate_series(1, 100000) g;
INSERT INTO account (id, owner_id, currency, balance)
  SELECT g, 100001, 'EUR', 0 FROM generate_series(100001, 100016) g;
INSERT INTO account (id, owner_id, currency, balance) VALUES (200000, 200000, 'EUR', 0);

INSERT INTO journal_transaction (id, idempotency_key, type)
  VALUES ('00000000-0000-0000-0000-000000000001', 'opening-balances', 'DEPOSIT');
INSERT INTO ledger_entry (transaction_id, account_id, amount, balance_after)
  SELECT '00000000-0000-0000-0000-000000000001', g, 100000000, 100000000 FROM generate_series(1, 100000) g;
INSERT INTO ledger_entry (transaction_id, account_id, amount, balance_after)
  VALUES ('00000000-0000-0000-0000-000000000001', 200000, 1000000000000, 1000000000000);
INSERT INTO ledger_entry (transaction_id, account_id, amount, balance_after)
  VALUES ('00000000-0000-0000-0000-000000000001', 0, -(100000::BIGINT * 100000000 + 1000000000000),
          -(100000::BIGINT * 100000000 + 1000000000000));
UPDATE account SET balance = 100000000 WHERE id BETWEEN 1 AND 100000;
UPDATE account SET balance = 1000000000000 WHERE id = 200000;
UPDATE account SET balance = -(100000::BIGINT * 100000000 + 1000000000000) WHERE id = 0;
VACUUM ANALYZE;
