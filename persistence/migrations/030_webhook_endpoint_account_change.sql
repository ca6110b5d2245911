-- An endpoint's account may be changed in place (PATCH /v1/webhook-endpoints/{id} with accountId,
-- docs/events.md "Changing an endpoint"), as its URL and event types may.
GRANT UPDATE (account_id) ON webhook_endpoint TO wallet_app;
