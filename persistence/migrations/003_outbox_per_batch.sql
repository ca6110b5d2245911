-- One outbox row per committed batch instead of one per transaction. A batch commits hundreds of
-- transactions at once; a row, its two index entries and its WAL per transaction cost the
-- database about as much as a journal row, to announce what the batch row announces at once.
-- The payload is {"transactions": [...]}, one element per transaction in commit order, each as
-- the per-transaction payload was ({"transactionId","type","currency","amount","entries"}).
-- Rows written before this migration keep their single transaction_id.
ALTER TABLE outbox_event ALTER COLUMN transaction_id DROP NOT NULL;
ALTER TABLE outbox_event ADD COLUMN transaction_ids UUID[];
ALTER TABLE outbox_event ADD CONSTRAINT outbox_event_names_transactions
  CHECK ((transaction_id IS NULL) <> (transaction_ids IS NULL)) NOT VALID;
