-- How often an account's status changed (freeze, unfreeze), so that its actor keeps the newest it
-- has heard of (actors/accounts.cpp). Two operators' changes commit in one order, but their
-- notices can reach the actor in the other: without a version, the later notice of the earlier
-- change won, and an account the database holds active was refused as frozen until its actor
-- went idle.
ALTER TABLE account ADD COLUMN status_version BIGINT NOT NULL DEFAULT 0 CHECK (status_version >= 0);

GRANT UPDATE (status_version) ON account TO wallet_app;
