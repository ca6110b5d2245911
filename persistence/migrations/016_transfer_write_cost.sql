-- What one transfer costs the database (bench/PROFILE.md, "PostgreSQL: what one transfer writes",
-- measured with bench/pg_cost.sh). Nothing here changes a constraint, a trigger or what a row
-- says; each change is safe on a populated database and takes effect for rows written after it.

-- 1. No JIT compilation for the wallet's database. The event statements (persistence/outbox.cpp)
-- expand jsonb arrays, which the planner always takes for 100 elements each, so their estimated
-- cost passes jit_above_cost and every relay round compiled its statement: about 40 ms of CPU a
-- call, more than the rest of the statement by far. JIT pays only for long analytical queries;
-- the ledger's are short, and the reconciler's full run, the longest, is rare. Set on the database, so it
-- holds whoever connects and whatever the server's configuration; only the database's owner (or
-- a superuser) may set it, so a migration run by another role leaves it to the operator and says
-- so. Sessions opened after this migration see it.
DO $do$
BEGIN
  IF EXISTS (SELECT FROM pg_database d
              WHERE d.datname = current_database()
                AND (pg_has_role(current_user, d.datdba, 'MEMBER')
                     OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user))) THEN
    EXECUTE format('ALTER DATABASE %I SET jit = off', current_database());
  ELSE
    RAISE NOTICE 'jit stays as configured: % does not own database %', current_user, current_database();
  END IF;
END
$do$;

-- 2. The oldest unpublished row was found through an index of its own on id WHERE published_at
-- IS NULL, which every outbox row entered twice (its insert and its feed_seq update are not HOT).
-- The relay's lag now reads the heads of the two partial indexes of migration 008 instead (rows
-- still to be sequenced; sequenced rows still to be published), which together cover the same
-- rows. No other statement reads this index (persistence/outbox.cpp holds every statement on
-- outbox_event besides the writer's insert).
DROP INDEX IF EXISTS outbox_event_unpublished;
