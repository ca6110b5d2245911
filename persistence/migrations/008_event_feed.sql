-- Events out (docs/events.md): the outbox relay gives every committed outbox row a position in
-- the event feed, then publishes the row's transactions to the Redis Stream in that order.
--
-- Why a position of its own and not the row id: ids are taken from a sequence when the writer
-- inserts the row, before its COMMIT, so rows become visible out of id order (a batch that took
-- id 10 may commit after the one that took id 11). A reader paging by id could pass 11 and never
-- see 10. The relay assigns feed_seq only to committed rows, one relay at a time (a transaction-
-- scoped advisory lock), each round above every position assigned before: a position, once
-- visible, never has a smaller one appear after it, so `after=<cursor>` pages lose nothing.
ALTER TABLE outbox_event ADD COLUMN feed_seq BIGINT CHECK (feed_seq > 0);
CREATE UNIQUE INDEX outbox_event_feed_seq ON outbox_event (feed_seq) WHERE feed_seq IS NOT NULL;
-- The rows still to be sequenced, and the sequenced rows still to be published, in their order.
CREATE INDEX outbox_event_unsequenced ON outbox_event (id) WHERE feed_seq IS NULL;
CREATE INDEX outbox_event_unpublished_seq ON outbox_event (feed_seq)
  WHERE published_at IS NULL AND feed_seq IS NOT NULL;

GRANT UPDATE (feed_seq) ON outbox_event TO wallet_app;
