-- Answers kept for management requests sent with an Idempotency-Key (docs/events.md, "Idempotency-Key
-- on registration and rotation"): registering a webhook endpoint and rotating a signing secret create
-- secrets that are shown once, in the answer, so an answer lost on the way was lost for good, and
-- a retry made a second endpoint, or another secret. With a key, the request's effect and its
-- answer commit together here, and the same request under the same key is answered from this row.
-- Money-moving requests keep their answers with their own rows (journal, stored batches, holds).
CREATE TABLE request_replay (
  principal_id     BIGINT NOT NULL REFERENCES principal (id),
  idempotency_key  TEXT NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  route            TEXT NOT NULL CHECK (length(route) BETWEEN 1 AND 64),
  request_hash     TEXT NOT NULL,
  response_status  INT NOT NULL,
  response_body    TEXT NOT NULL,
  created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (principal_id, idempotency_key)
);

GRANT SELECT, INSERT ON request_replay TO wallet_app;
GRANT UPDATE (response_status, response_body) ON request_replay TO wallet_app;
