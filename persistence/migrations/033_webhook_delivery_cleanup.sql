-- Deleting finished deliveries (migration 027) checks, for every row deleted, that no endpoint
-- names it as the delivery that disabled it (the foreign key of migration 022): without an index
-- on that column each check read the whole webhook_endpoint table. Few endpoints name one.
CREATE INDEX webhook_endpoint_disabled_by ON webhook_endpoint (disabled_by_delivery)
  WHERE disabled_by_delivery IS NOT NULL;

-- A deleted endpoint's pending deliveries are ended with it (persistence::delete_webhook_endpoint):
-- nothing would ever send them, the retention deletes only finished ones, and every claim walked
-- past them. Those of endpoints deleted before this migration end here.
UPDATE webhook_delivery d SET status = 'FAILED', completed_at = now(), lease_until = NULL,
       last_error = 'the endpoint was deleted'
  FROM webhook_endpoint e
 WHERE d.endpoint_id = e.id AND e.deleted_at IS NOT NULL AND d.status = 'PENDING';
