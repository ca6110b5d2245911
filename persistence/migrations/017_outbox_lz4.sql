-- The batch's outbox payload (one jsonb row per writer batch, about 250 bytes a transaction) is
-- over PostgreSQL's TOAST threshold from about eight transactions on, so the writer's backend
-- compresses it inside the batch's write statement. With the default method (pglz) that was
-- 2.5% of the backend's samples (bench/PROFILE.md, "Round 2, twelfth part"); lz4 compresses the
-- same JSON several times faster, for a few more bytes. Rows already written keep their pglz
-- data, which PostgreSQL reads as before (each value records its own method).
-- A server built without lz4 refuses the method; the column then keeps the default.
DO $do$
BEGIN
  ALTER TABLE outbox_event ALTER COLUMN payload SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
  RAISE NOTICE 'outbox_event.payload keeps the default compression: this PostgreSQL has no lz4';
END
$do$;
