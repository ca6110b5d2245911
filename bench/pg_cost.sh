#!/usr/bin/env bash
# What one transfer costs PostgreSQL in rows, index entries and WAL: counts that do not depend on
# how busy the machine is, unlike CPU time.
#
# Starts private PostgreSQL (fsync and synchronous_commit on) and Redis, migrates an empty
# database, starts a Release wallet-server (build-bench), creates N payers and one hot merchant
# (16 shards) with wallet-loadgen's setup, takes a CHECKPOINT, then sends the payments (POST
# /v1/transfers, the hot-merchant workload) at a modest fixed open-loop rate. Before and after the
# run it reads pg_stat_user_tables / pg_stat_user_indexes / relation sizes, pg_stat_statements,
# the WAL position, and the CPU time of the PostgreSQL processes from /proc; the WAL written in
# between is read back record by record with pg_walinspect, so WAL bytes (with and without
# full-page images) and index entries are attributed to each table and index.
#
#   bench/pg_cost.sh [--transfers N] [--rate R] [--payers P] [--label NAME]
#       defaults: 20000 transfers at 1000/s from 10000 payers, label "run"
#   PGCOST_PG_PORT / PGCOST_REDIS_PORT / PGCOST_HTTP_PORT: ports (default 55473 / 56423 / 18900).
#   PGCOST_BUILD_DIR: where the Release binaries are (default build-bench); PGCOST_SKIP_BUILD=1 uses
#   them as they are instead of building them first.
#   BENCH_SETUP_SQL: SQL run in the migrated database before the setup, to measure one schema
#   change on the same binaries, e.g. an index a migration dropped, created again:
#     BENCH_SETUP_SQL='CREATE INDEX ledger_entry_transaction ON ledger_entry (transaction_id)'
#
# Writes bench/out/pg-cost/LABEL/report.md (a markdown section) and prints it; raw snapshots beside
# it. The private PostgreSQL gets pg_stat_statements preloaded (ALTER SYSTEM in its own data
# directory) and the pg_stat_statements and pg_walinspect extensions in its wallet database.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

transfers=20000
rate=1000
payers=10000
label=run
while (($#)); do
  case $1 in
    --transfers) transfers=$2; shift ;;
    --rate) rate=$2; shift ;;
    --payers) payers=$2; shift ;;
    --label) label=$2; shift ;;
    *) echo "pg_cost: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

var_dir=var/pg-cost
out=bench/out/pg-cost/$label
pg_port=${PGCOST_PG_PORT:-55473}
redis_port=${PGCOST_REDIS_PORT:-56423}
http_port=${PGCOST_HTTP_PORT:-18900}
build_dir=${PGCOST_BUILD_DIR:-build-bench}
rm -rf "$out"
mkdir -p "$out"

if [[ -z ${PGCOST_SKIP_BUILD:-} ]]; then
  build_release "$build_dir" "$out/build.log" wallet-server wallet-loadgen wallet-admin
fi

bash scripts/services.sh start "$var_dir" "$pg_port" "$redis_port" --huge-pages
trap 'stop_server; bash scripts/services.sh stop "$var_dir"' EXIT

# pg_stat_statements must be preloaded: set in this instance's own postgresql.auto.conf, then
# restarted once.
if ! psql_admin -d postgres -Atc "SHOW shared_preload_libraries" | grep -q pg_stat_statements; then
  psql_admin -d postgres -c "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"
  bash scripts/services.sh stop "$var_dir"
  bash scripts/services.sh start "$var_dir" "$pg_port" "$redis_port" --huge-pages
fi
# Planning counts too: the writer's four writes go as one unprepared query, planned every batch.
psql_admin -d postgres -c "ALTER SYSTEM SET pg_stat_statements.track_planning = on" -c "SELECT pg_reload_conf()" \
  >/dev/null
bash scripts/services.sh reset-db "$var_dir"
redis-cli -p "$redis_port" flushall >/dev/null
psql_admin -d postgres -Atc "SELECT name || ' = ' || current_setting(name) FROM pg_settings WHERE name IN
  ('fsync', 'synchronous_commit', 'full_page_writes', 'wal_compression', 'wal_buffers', 'commit_delay',
   'commit_siblings', 'shared_buffers', 'max_wal_size', 'checkpoint_timeout') ORDER BY name" > "$out/settings.txt"

operator_key="pgcost-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
(
  set -a
  # shellcheck disable=SC1091
  source "$var_dir/services.env"
  set +a
  "$build_dir"/tools/admin/wallet-admin migrate
  export WALLET_AUTH_BOOTSTRAP_KEY=$operator_key WALLET_RATELIMIT_RATE_PER_SECOND=1000000
  export WALLET_RATELIMIT_BURST=2000000 WALLET_LOG_LEVEL=warn
  exec "$build_dir"/tools/server/wallet-server --http-port "$http_port"
) > "$out/server.log" 2>&1 &
server_pid=$!
wait_until_ready "$http_port" "$out/server.log"
psql_admin -d wallet -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" \
  -c "CREATE EXTENSION IF NOT EXISTS pg_walinspect"
if [[ -n ${BENCH_SETUP_SQL:-} ]]; then
  psql_admin -d wallet -c "$BENCH_SETUP_SQL"
  echo "$BENCH_SETUP_SQL" > "$out/setup.sql"
fi

loadgen() {
  nice -n -10 "$build_dir"/tools/loadgen/wallet-loadgen --host 127.0.0.1 --port "$http_port" \
    --operator-key "$operator_key" --quiet --workload hot-merchant --accounts "$payers" --hot-shards 16 \
    --setup-file "$out/setup.json" "$@"
}
echo "pg_cost: setup, $payers payers and one hot merchant" >&2
loadgen --setup-only > "$out/setup.txt"

# The CPU time of every PostgreSQL process, in clock ticks: the postmaster with its reaped
# children (cutime, cstime: exited autovacuum workers) and every live child.
pg_cpu_ticks() {
  local postmaster total=0 pid
  postmaster=$(runuser -u postgres -- head -1 "$(readlink -f "$var_dir/postgres")/data/postmaster.pid")
  total=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$postmaster/stat")
  for pid in $(pgrep -P "$postmaster"); do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
  done
  echo "$total"
}

# The same, per live process (pid, ticks), and what each process is: which CPU went to the
# writer, the readers, the relay, autovacuum or the WAL writer.
pg_cpu_by_process() {
  local name=$1 postmaster pid
  postmaster=$(runuser -u postgres -- head -1 "$(readlink -f "$var_dir/postgres")/data/postmaster.pid")
  {
    echo -e "pid\tticks"
    echo -e "exited\t$(awk '{print $16 + $17}' "/proc/$postmaster/stat")"
    echo -e "postmaster\t$(awk '{print $14 + $15}' "/proc/$postmaster/stat")"
    for pid in $(pgrep -P "$postmaster"); do
      echo -e "$pid\t$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)"
    done
  } > "$out/$name-cpu-processes.tsv"
  psql_admin -d postgres -A -P footer=off -F $'\t' -c "SELECT pid, backend_type,
      COALESCE(NULLIF(application_name, ''), usename, '') AS application_name FROM pg_stat_activity" \
    > "$out/$name-activity.tsv"
}

snapshot() {
  local name=$1
  psql_admin -d wallet -A -P footer=off -F $'\t' -c "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del,
      pg_relation_size(relid), autovacuum_count, autoanalyze_count
      FROM pg_stat_user_tables ORDER BY relname" > "$out/$name-tables.tsv"
  psql_admin -d wallet -A -P footer=off -F $'\t' -c "SELECT s.indexrelname, s.relname, s.idx_scan,
      pg_relation_size(s.indexrelid), COALESCE(i.heap_blks_hit, 0) + COALESCE(i.heap_blks_read, 0)
      FROM pg_stat_user_indexes s JOIN pg_statio_user_tables i USING (relid) ORDER BY 1" \
    > "$out/$name-indexes.tsv"
  psql_admin -d wallet -A -P footer=off -F $'\t' -c "SELECT type, count(*) FROM journal_transaction GROUP BY 1" \
    > "$out/$name-journal.tsv"
  psql_admin -d postgres -Atc "SELECT pg_current_wal_lsn()" > "$out/$name-lsn.txt"
  pg_cpu_ticks > "$out/$name-cpu.txt"
  date +%s.%N > "$out/$name-time.txt"
  cp /proc/loadavg "$out/$name-loadavg.txt"
}

# Idle until the setup's work (outbox relay, statistics) has settled, then a checkpoint: every
# page the run touches first writes a full-page image, so the figures with images are those of
# a run that starts right after a checkpoint, the same in every run.
sleep 3
psql_admin -d wallet -c "SELECT pg_stat_statements_reset()" >/dev/null
psql_admin -d postgres -c CHECKPOINT
snapshot before
pg_cpu_by_process before

duration=$(python3 -c "print(${transfers} / ${rate})")
echo "pg_cost: $transfers transfers at $rate/s (${duration}s)" >&2
loadgen --mode open --rate "$rate" --duration "$duration" --no-verify --out-dir "$out/loadgen" \
  > "$out/loadgen.txt" || echo "pg_cost: the load generator reported a failure (see $out/loadgen.txt)" >&2
# Let the relay publish the last batches, then stop the server: its backends report their
# statistics when they exit.
sleep 2
cpu_after_run=$(pg_cpu_ticks)
pg_cpu_by_process after
stop_server
sleep 1
snapshot after
echo "$cpu_after_run" > "$out/after-cpu.txt"

lsn_before=$(cat "$out/before-lsn.txt")
lsn_after=$(cat "$out/after-lsn.txt")
# WAL records between the two positions, attributed to the relation of their first block.
psql_admin -d wallet -A -P footer=off -F $'\t' -c "
  WITH r AS (
    SELECT resource_manager, record_type, record_length, fpi_length, description,
           substring(block_ref FROM 'rel [0-9]+/[0-9]+/([0-9]+)')::oid AS filenode
      FROM pg_get_wal_records_info('$lsn_before', '$lsn_after'))
  SELECT COALESCE(c.relname, CASE WHEN r.filenode IS NULL THEN '(none)' ELSE 'filenode ' || r.filenode END)
           AS relation, r.resource_manager AS rmgr, r.record_type,
         -- An index entry on a leaf page: an insert, a posting-list split, or a leaf split.
         count(*) FILTER (WHERE r.resource_manager = 'Btree' AND (r.record_type IN ('INSERT_LEAF', 'INSERT_POST')
                          OR (r.record_type LIKE 'SPLIT_%' AND r.description LIKE 'level 0%'))) AS index_entries,
         count(*) AS records, sum(r.record_length) AS bytes, sum(r.fpi_length) AS fpi_bytes
    FROM r LEFT JOIN pg_class c ON c.relfilenode = r.filenode
   GROUP BY 1, 2, 3 ORDER BY 1, 2, 3" > "$out/wal.tsv"
psql_admin -d wallet -A -P footer=off -F $'\t' -c "
  SELECT calls, total_exec_time, total_plan_time, rows, regexp_replace(left(query, 100), '\s+', ' ', 'g') AS query
    FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = 'wallet')
     AND query NOT LIKE '%pg_stat%' AND query NOT LIKE '%pg_get_wal%'
   ORDER BY total_exec_time + total_plan_time DESC LIMIT 15" > "$out/statements.tsv"

python3 bench/pg_cost.py "$out" "$label" "$rate" "$payers" | tee "$out/report.md"
