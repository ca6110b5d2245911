-- A webhook endpoint can be changed in place (docs/events.md, "Changing an endpoint") rather than
-- deleted and made again, which would lose its place in the feed.
--
-- Its URL and event types: every attempt claimed after the change goes to the new URL, and the
-- types apply to the events not yet made into its deliveries.
--
-- Its signing secret, rotated: the new secret signs every delivery claimed from then on, and the
-- one it replaced goes on signing them too, beside it, until `previous_secret_expires_at`, so that
-- a receiver can move to the new secret without refusing a delivery meanwhile. A rotation while
-- the previous secret still signs replaces it: at most two secrets sign at once. An expired
-- previous secret is never used again, and the next rotation overwrites it.
ALTER TABLE webhook_endpoint
  ADD COLUMN previous_signing_secret TEXT CHECK (length(previous_signing_secret) BETWEEN 16 AND 200),
  ADD COLUMN previous_secret_expires_at TIMESTAMPTZ,
  ADD COLUMN secret_rotated_at TIMESTAMPTZ,
  ADD CONSTRAINT webhook_endpoint_previous_secret
    CHECK ((previous_signing_secret IS NULL) = (previous_secret_expires_at IS NULL));

GRANT UPDATE (url, event_types, signing_secret, previous_signing_secret, previous_secret_expires_at,
              secret_rotated_at)
  ON webhook_endpoint TO wallet_app;
