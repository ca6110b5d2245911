-- API keys that rotate and revoke, and an audit log of operator actions (docs/keys-and-audit.md).

-- Every key gets an id the API names it by, the last four characters of the key (to tell a
-- principal's keys apart; four of 43 random characters tell nothing useful about the rest), who
-- made it, and when and by whom it was revoked. A revoked key stays, for the audit trail; it
-- authenticates nobody. Keys made before this migration have no hint and no creator.
ALTER TABLE api_key ADD COLUMN id BIGSERIAL;
ALTER TABLE api_key ADD CONSTRAINT api_key_id_unique UNIQUE (id);
ALTER TABLE api_key ADD COLUMN hint TEXT CHECK (hint IS NULL OR hint ~ '^[A-Za-z0-9_-]{4}$');
ALTER TABLE api_key ADD COLUMN created_by BIGINT REFERENCES principal (id);
ALTER TABLE api_key ADD COLUMN revoked_at TIMESTAMPTZ;
ALTER TABLE api_key ADD COLUMN revoked_by BIGINT REFERENCES principal (id);
CREATE INDEX api_key_principal_id ON api_key (principal_id, id);
-- What every server reads every auth.key_cache_ttl_ms / 3: the keys revoked lately.
CREATE INDEX api_key_revoked ON api_key (revoked_at) WHERE revoked_at IS NOT NULL;

-- A key is revoked once, and nothing else of it ever changes.
CREATE FUNCTION api_key_revokes_once() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF OLD.revoked_at IS NOT NULL THEN
    RAISE EXCEPTION 'API key % is already revoked', OLD.id USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.revoked_at IS NULL OR NEW.key_hash <> OLD.key_hash OR NEW.principal_id <> OLD.principal_id
     OR NEW.id <> OLD.id THEN
    RAISE EXCEPTION 'API key %: only its revocation may be written', OLD.id USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$fn$;
CREATE TRIGGER api_key_revokes_once BEFORE UPDATE ON api_key
  FOR EACH ROW EXECUTE FUNCTION api_key_revokes_once();

-- Who did what, when, in which request: one row per operator action (and per change a principal
-- makes to its own keys or accounts), written in the transaction of the action itself. The detail
-- is a small JSON object that never holds a secret (no API key, no signing secret).
--
-- Rows are inserted under a transaction-scoped advisory lock held until COMMIT (see
-- persistence/audit.cpp), so ids become visible in commit order: a reader paging with
-- `after=<id>` never passes an id that a later commit fills in below it.
CREATE TABLE audit_log (
  id            BIGSERIAL PRIMARY KEY,
  principal_id  BIGINT NOT NULL,
  action        TEXT NOT NULL CHECK (action ~ '^[a-z][a-z_]*\.[a-z][a-z_]*$'),
  target        TEXT NOT NULL CHECK (length(target) BETWEEN 1 AND 200),
  detail        JSONB NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(detail) = 'object' AND octet_length(detail::text) <= 4096),
  request_id    TEXT NOT NULL CHECK (length(request_id) BETWEEN 1 AND 64),
  created_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Append-only, whoever asks, as the ledger is (migrations 001 and 002).
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
  FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_append_only();

GRANT UPDATE (revoked_at, revoked_by) ON api_key TO wallet_app;
GRANT USAGE, SELECT ON SEQUENCE api_key_id_seq TO wallet_app;
GRANT SELECT, INSERT ON audit_log TO wallet_app;
GRANT USAGE, SELECT ON SEQUENCE audit_log_id_seq TO wallet_app;
