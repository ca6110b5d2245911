-- The event feed keeps events.feed_retention_days (docs/events.md, "Retention"): the relay deletes
-- older outbox rows, a bounded number at a time, so that outbox_event grows with the traffic of
-- the retention, not with all traffic ever. The ledger itself (journal, entries) is never deleted.
--
-- What is deleted is always a prefix of the feed: the rows with the lowest positions, all of them
-- published, older than the retention, below the position every enabled webhook endpoint has
-- been fanned out to, and never the row with the highest position (the relay's next positions
-- follow it). outbox_pruned records the cursor of the last event deleted, in the transaction that
-- deletes it, so that a consumer asking for events after an older cursor is told what it missed
-- (GET /v1/events answers 410 cursor_expired) instead of being handed a page with a silent gap.
CREATE TABLE outbox_pruned (
  singleton       BOOLEAN PRIMARY KEY DEFAULT true CHECK (singleton),
  through_seq     BIGINT NOT NULL CHECK (through_seq >= 0),
  through_cursor  BIGINT NOT NULL CHECK (through_cursor >= 0),
  pruned_at       TIMESTAMPTZ
);
INSERT INTO outbox_pruned (through_seq, through_cursor) VALUES (0, 0);

GRANT SELECT, UPDATE ON outbox_pruned TO wallet_app;
GRANT DELETE ON outbox_event TO wallet_app;
