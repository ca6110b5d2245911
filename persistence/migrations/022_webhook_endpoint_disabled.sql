-- A webhook endpoint can be disabled (docs/events.md, "A receiver that stays down"): by the
-- dispatcher when one of its deliveries is given up at the end of its retry span, or by its owner
-- or an operator. A disabled endpoint gets no new delivery rows (its feed cursor stays where it
-- was) and no attempt. Enabling it again goes on from its cursor, so it misses no event, and makes
-- the delivery that disabled it (`disabled_by_delivery`) PENDING again.
ALTER TABLE webhook_endpoint
  ADD COLUMN disabled_at TIMESTAMPTZ,
  ADD COLUMN disabled_reason TEXT CHECK (length(disabled_reason) BETWEEN 1 AND 700),
  ADD COLUMN disabled_by_delivery BIGINT REFERENCES webhook_delivery (id),
  ADD CONSTRAINT webhook_endpoint_disabled_reason CHECK ((disabled_at IS NULL) = (disabled_reason IS NULL)),
  ADD CONSTRAINT webhook_endpoint_disabled_by CHECK (disabled_by_delivery IS NULL OR disabled_at IS NOT NULL);

-- The fan-out's idle check: is an enabled endpoint's cursor behind where the last round left them?
CREATE INDEX webhook_endpoint_enabled_cursor ON webhook_endpoint (feed_cursor)
  WHERE deleted_at IS NULL AND disabled_at IS NULL;

GRANT UPDATE (disabled_at, disabled_reason, disabled_by_delivery) ON webhook_endpoint TO wallet_app;
