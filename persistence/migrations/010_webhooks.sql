-- Webhooks (docs/events.md, "Webhooks"): endpoints that principals register, and one delivery row
-- per event and endpoint, made from the event feed (migration 008) only, so that nothing is sent
-- for a transaction that has not committed.

-- An endpoint receives the events of its owner's accounts (all events when an operator made it),
-- or of one account, of the types it names ('*': all). Its signing secret is kept to sign: the
-- API shows it once, at creation. `feed_cursor` is the feed position up to which deliveries were
-- made for it: a new endpoint starts at the end of the feed. A deleted endpoint keeps its row (its
-- deliveries name it) and gets nothing more.
CREATE TABLE webhook_endpoint (
  id              BIGSERIAL PRIMARY KEY,
  owner_id        BIGINT NOT NULL REFERENCES principal (id),
  all_accounts    BOOLEAN NOT NULL,
  account_id      BIGINT REFERENCES account (id),
  url             TEXT NOT NULL CHECK (length(url) BETWEEN 8 AND 2048),
  event_types     TEXT[] NOT NULL CHECK (cardinality(event_types) BETWEEN 1 AND 64),
  signing_secret  TEXT NOT NULL CHECK (length(signing_secret) BETWEEN 16 AND 200),
  feed_cursor     BIGINT NOT NULL CHECK (feed_cursor >= 0),
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  deleted_at      TIMESTAMPTZ
);
CREATE INDEX webhook_endpoint_owner ON webhook_endpoint (owner_id, id);
CREATE INDEX webhook_endpoint_live ON webhook_endpoint (id) WHERE deleted_at IS NULL;

-- One event to send to one endpoint. PENDING until an attempt gets a 2xx (DELIVERED) or the retry
-- span since its first attempt is spent (FAILED). `lease_until`: the attempt in flight, claimed by
-- one server (FOR UPDATE SKIP LOCKED) until then; no other server claims it meanwhile.
-- `span_attempts` counts the attempts since the first one of the current retry span (an
-- operator's retry starts a new span); `attempts` counts them all.
CREATE TABLE webhook_delivery (
  id                BIGSERIAL PRIMARY KEY,
  endpoint_id       BIGINT NOT NULL REFERENCES webhook_endpoint (id),
  event_cursor      BIGINT NOT NULL CHECK (event_cursor > 0),
  event_id          TEXT NOT NULL,
  event_type        TEXT NOT NULL,
  body              TEXT NOT NULL,
  status            TEXT NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'DELIVERED', 'FAILED')),
  attempts          INT NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  span_attempts     INT NOT NULL DEFAULT 0 CHECK (span_attempts >= 0 AND span_attempts <= attempts),
  last_status_code  INT,
  last_error        TEXT CHECK (length(last_error) <= 500),
  next_attempt_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
  lease_until       TIMESTAMPTZ,
  first_attempt_at  TIMESTAMPTZ,
  last_attempt_at   TIMESTAMPTZ,
  completed_at      TIMESTAMPTZ,
  created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
  UNIQUE (endpoint_id, event_cursor),
  CHECK ((status = 'PENDING') = (completed_at IS NULL))
);
-- Each endpoint's oldest pending delivery is the only one that may be sent (order per endpoint).
CREATE INDEX webhook_delivery_pending ON webhook_delivery (endpoint_id, event_cursor) WHERE status = 'PENDING';
CREATE INDEX webhook_delivery_of_endpoint ON webhook_delivery (endpoint_id, id);

GRANT SELECT, INSERT ON webhook_endpoint TO wallet_app;
GRANT UPDATE (feed_cursor, deleted_at) ON webhook_endpoint TO wallet_app;
GRANT USAGE, SELECT ON SEQUENCE webhook_endpoint_id_seq TO wallet_app;
GRANT SELECT, INSERT ON webhook_delivery TO wallet_app;
GRANT UPDATE (status, attempts, span_attempts, last_status_code, last_error, next_attempt_at, lease_until,
              first_attempt_at, last_attempt_at, completed_at) ON webhook_delivery TO wallet_app;
GRANT USAGE, SELECT ON SEQUENCE webhook_delivery_id_seq TO wallet_app;
