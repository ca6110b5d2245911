-- A provider's signing secret can be rotated (docs/money-flows.md, "Rotating a provider's signing
-- secret"): events signed with the new secret verify from then on, and those signed with the one
-- it replaced go on verifying until `previous_secret_expires_at`, so that the provider can move to
-- the new secret without an event refused meanwhile. A rotation while the previous secret still
-- verifies replaces it: at most two secrets verify at once. An expired previous secret is never
-- used again, and the next rotation overwrites it. The 'manual' provider, which sends no events,
-- has no secret to rotate.
ALTER TABLE provider
  ADD COLUMN previous_signing_secret TEXT CHECK (length(previous_signing_secret) >= 32),
  ADD COLUMN previous_secret_expires_at TIMESTAMPTZ,
  ADD COLUMN secret_rotated_at TIMESTAMPTZ,
  ADD CONSTRAINT provider_previous_secret
    CHECK ((previous_signing_secret IS NULL) = (previous_secret_expires_at IS NULL)),
  ADD CONSTRAINT provider_previous_secret_of_a_signer
    CHECK (previous_signing_secret IS NULL OR signing_secret IS NOT NULL);

GRANT UPDATE (signing_secret, previous_signing_secret, previous_secret_expires_at, secret_rotated_at)
  ON provider TO wallet_app;
