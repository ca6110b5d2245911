-- Kept answers (request_replay, migration 031) are deleted once they are older than
-- ledger.replay_retention_hours (docs/events.md, "Idempotency-Key on registration and rotation"):
-- a rotation's answer holds the secret it made, and no answer is needed after its client's last
-- retry. The replay pruner deletes them oldest first, a bounded number at a time, through this
-- index. A key whose answer was deleted names a new request.
CREATE INDEX request_replay_created ON request_replay (created_at);

GRANT DELETE ON request_replay TO wallet_app;
