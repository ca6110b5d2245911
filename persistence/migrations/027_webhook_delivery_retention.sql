-- Finished webhook deliveries are deleted once they ended more than
-- webhooks.delivery_retention_days ago (docs/events.md, "Retention"), by the dispatcher, a bounded
-- number at a time. This index finds them, oldest first, without reading the pending ones; a FAILED
-- delivery that disabled its endpoint (webhook_endpoint.disabled_by_delivery) is kept while the
-- endpoint names it.
CREATE INDEX webhook_delivery_finished ON webhook_delivery (completed_at) WHERE status <> 'PENDING';

GRANT DELETE ON webhook_delivery TO wallet_app;
