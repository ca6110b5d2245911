-- Runs once, when the postgres container initialises an empty data directory (as the superuser,
-- from /docker-entrypoint-initdb.d). The roles of docs/design.md §1: wallet_owner owns the database
-- and runs the migrations; wallet_app is what the server connects as, and the migrations grant
-- it only what it needs (append to the ledger, update balance caches).
-- Passwords come from the container's environment (psql 15 \getenv); docker-compose.yml passes them.
\set ON_ERROR_STOP on
\getenv owner_password WALLET_OWNER_PASSWORD
\getenv app_password WALLET_APP_PASSWORD

CREATE ROLE wallet_owner LOGIN PASSWORD :'owner_password';
CREATE ROLE wallet_app LOGIN PASSWORD :'app_password';
CREATE DATABASE wallet OWNER wallet_owner;
REVOKE ALL ON DATABASE wallet FROM PUBLIC;
GRANT CONNECT ON DATABASE wallet TO wallet_app;
