-- Batch transfers (POST /v1/transfers/batch, docs/money-flows.md): the stored answer of a batch,
-- so that a replay of its Idempotency-Key returns it as it was. Each item is a journal transaction
-- of its own, keyed by the batch's key and its index; this row keeps what the batch answered as a
-- whole (which items were refused, and why), which the items' own rows cannot.
CREATE TABLE transfer_batch (
  principal_id     BIGINT NOT NULL REFERENCES principal (id),
  idempotency_key  TEXT NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
  request_hash     TEXT NOT NULL,
  items            INT NOT NULL CHECK (items > 0),
  response_status  INT NOT NULL,
  response_body    TEXT NOT NULL,
  created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (principal_id, idempotency_key)
);

GRANT SELECT, INSERT ON transfer_batch TO wallet_app;
