-- A transaction's entries are found through its journal row, not through an index of their own
-- (bench/PROFILE.md, "PostgreSQL: what one transfer writes"). The writer inserts a transaction's
-- entries and its journal row in one statement (persistence/batch.cpp), and the journal row
-- records the smallest and the largest id its entries were given. Every entry of the transaction
-- lies in that range of ledger_entry's primary key; entries of other transactions may lie in it
-- too (several writers draw ids from one sequence), so a reader takes the range and keeps the rows
-- that name the transaction: `e.id BETWEEN j.first_entry_id AND j.last_entry_id AND
-- e.transaction_id = j.id` (persistence/rows.hpp, entries_of_sql).
--
-- ledger_entry_transaction cost every transfer two index entries and about a tenth of its WAL;
-- the primary key each range is read by is maintained anyway. Reconciliation checks that every
-- entry lies in its journal row's range (docs/reconciliation.md, transactionsBalanced).
ALTER TABLE journal_transaction ADD COLUMN first_entry_id BIGINT, ADD COLUMN last_entry_id BIGINT;

-- The rows written before this migration get their ranges from their entries. The journal is
-- append-only for every session (migration 001); its trigger is switched off only inside this
-- migration's transaction, which holds the table's ACCESS EXCLUSIVE lock until it commits, so no
-- other session ever writes, or sees, the table without it.
ALTER TABLE journal_transaction DISABLE TRIGGER journal_transaction_append_only;
UPDATE journal_transaction j SET first_entry_id = r.first_id, last_entry_id = r.last_id
  FROM (SELECT transaction_id, min(id) AS first_id, max(id) AS last_id FROM ledger_entry GROUP BY transaction_id) r
 WHERE r.transaction_id = j.id;
ALTER TABLE journal_transaction ENABLE TRIGGER journal_transaction_append_only;

-- Every transaction has entries: a journal row without a range is refused.
ALTER TABLE journal_transaction
  ALTER COLUMN first_entry_id SET NOT NULL,
  ALTER COLUMN last_entry_id SET NOT NULL,
  ADD CONSTRAINT journal_transaction_entry_range CHECK (first_entry_id <= last_entry_id);

DROP INDEX ledger_entry_transaction;
