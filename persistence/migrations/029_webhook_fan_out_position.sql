-- The webhook fan-out's shared position (docs/events.md, "Fan-out"). Until now every fan-out step
-- moved the cursor of every enabled endpoint, also of those none of the step's events were for:
-- one row update per endpoint and step (and a read of every endpoint), so that the fan-out's cost
-- grew with the endpoints registered rather than with the deliveries made.
--
-- Now the endpoints that keep up with the feed follow one shared position, webhook_fan_out.cursor:
-- a step reads the feed after it, makes the deliveries of the following endpoints its events are
-- for (found by owner, and the operators' endpoints apart) and moves the position, without writing
-- any endpoint's row. A following endpoint stands at GREATEST(feed_cursor, webhook_fan_out.cursor):
-- its own cursor is where it joined (a new endpoint starts at the feed's end, which may be ahead of
-- the position).
--
-- An endpoint that does not follow (new, enabled again after a pause, or from before this
-- migration) stands at its own cursor and is brought to the feed's end by steps of its own, as
-- before; it joins once its cursor has reached the position. Disabling an endpoint writes where it
-- stands into its own cursor and takes it out. Every change that decides what a following
-- endpoint is given (disabling, deleting, new event types) first takes the position's row FOR
-- SHARE, and a step holds it FOR UPDATE from reading the endpoints until it commits: a step sees
-- such a change whole or not at all.
CREATE TABLE webhook_fan_out (
  singleton  BOOLEAN PRIMARY KEY DEFAULT true CHECK (singleton),
  cursor     BIGINT NOT NULL CHECK (cursor >= 0)
);
-- The position starts at the feed's end (the last event of the highest position given): the
-- endpoints that exist now catch up on their own and then join.
INSERT INTO webhook_fan_out (cursor)
  SELECT COALESCE((SELECT (feed_seq << 16) | 65535 FROM outbox_event WHERE feed_seq IS NOT NULL
                    ORDER BY feed_seq DESC LIMIT 1), 0);

ALTER TABLE webhook_endpoint ADD COLUMN follows_fan_out BOOLEAN NOT NULL DEFAULT false;

-- A step's endpoints: the following ones of the owners its events touch, and the operators'.
CREATE INDEX webhook_endpoint_following_owner ON webhook_endpoint (owner_id)
  WHERE follows_fan_out AND deleted_at IS NULL AND disabled_at IS NULL;
CREATE INDEX webhook_endpoint_following_all ON webhook_endpoint (id)
  WHERE follows_fan_out AND all_accounts AND deleted_at IS NULL AND disabled_at IS NULL;
-- The enabled endpoints that do not follow, by cursor (the fan-out's steps of their own, the
-- feed's retention); the index of every enabled endpoint's cursor is no longer read.
CREATE INDEX webhook_endpoint_lagging_cursor ON webhook_endpoint (feed_cursor, id)
  WHERE NOT follows_fan_out AND deleted_at IS NULL AND disabled_at IS NULL;
DROP INDEX webhook_endpoint_enabled_cursor;

GRANT SELECT, UPDATE (cursor) ON webhook_fan_out TO wallet_app;
GRANT UPDATE (follows_fan_out) ON webhook_endpoint TO wallet_app;
