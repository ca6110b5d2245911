#!/usr/bin/env bash
# Payday side by side, in one run on one PostgreSQL (fsync on):
#   1. the classic row-lock design (bench/baseline, pgbench, the payday workload);
#   2. the wallet server, payday as single requests (wallet-loadgen, closed loop);
#   3. the wallet server, payday through POST /v1/transfers/batch, 1,000 salaries per request
#      (wallet-loadgen --batch-size);
#   4. the database-only ceiling of the project's own schema: pgbench committing 500 transfers per
#      transaction through the ledger writer's statements (bench/batch/ceiling.py), one client, as
#      one employer's debits all commit on one writer's connection.
# Reports salaries/s and the p99 of one request for each, in bench/PAYDAY_BATCH.md; raw outputs go
# to bench/out/payday-batch/ (not committed). Builds in Release in build-bench.
#
#   bench/payday_batch.sh [--duration S] [--batch-users N]   (default 20 s per part, 2 batch users)
#   BENCH_PG_PORT / BENCH_REDIS_PORT choose the private services' ports (default 55444 / 56394).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

duration=20
batch_users=2
while (($#)); do
  case $1 in
    --duration) duration=$2; shift ;;
    --batch-users) batch_users=$2; shift ;;
    *) echo "bench: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

var_dir=var/bench-batch
out=bench/out/payday-batch
pg_port=${BENCH_PG_PORT:-55444}
redis_port=${BENCH_REDIS_PORT:-56394}
http_port=${BENCH_HTTP_PORT:-18494}
salaries=10000
mkdir -p "$out"
cp /proc/loadavg "$out/load-start.txt"

build_release build-bench "$out/build.log" wallet-server wallet-loadgen wallet-admin

bash scripts/services.sh start "$var_dir" "$pg_port" "$redis_port" --huge-pages
trap 'stop_server; bash scripts/services.sh stop "$var_dir"' EXIT

# Every measured part on the wallet database starts from the same state: the outbox published,
# the tables vacuumed and a fresh checkpoint. A page's first change after a checkpoint writes a
# full-page image to the WAL, so without this whichever part runs later in the checkpoint's cycle
# writes less WAL per salary (measured: the ceiling, run last, was helped most); and autovacuum,
# set off by the part before, would run during the next one.
quiesce() {
  if [[ -n $server_pid ]]; then
    for _ in $(seq 1 600); do
      [[ $(curl -fsS "http://127.0.0.1:$http_port/metrics" | awk '$1 == "wallet_events_relay_lag_seconds" {print $2}') == 0 ]] && break
      sleep 0.1
    done
  fi
  psql_admin -d wallet -c "VACUUM ANALYZE" -c CHECKPOINT >/dev/null
}
# The WAL position of the private instance, and the kB written between two positions per 1,000 of N.
wal_lsn() { psql_admin -At -d postgres -c "SELECT pg_current_wal_lsn()"; }
wal_kb_per_1000() {
  psql_admin -At -d postgres -c "SELECT round(pg_wal_lsn_diff('$2', '$1') / 1024.0 / greatest($3, 1) * 1000)"
}

# p99 and max in ms from pgbench's per-transaction logs (third column: latency in us).
log_p99() {
  python3 - "$@" <<'PY'
import sys
lat = sorted(int(l.split()[2]) for p in sys.argv[1:] for l in open(p) if len(l.split()) >= 3)
print(f"{lat[min(len(lat) - 1, int(0.99 * len(lat)))] / 1000.0:.1f}" if lat else "0")
PY
}

# 1. The classic design, payday: one employer row paying random accounts, 16 clients.
echo "bench: baseline payday, ${duration}s" >&2
psql_admin -d postgres -c "DROP DATABASE IF EXISTS baseline WITH (FORCE)" -c "CREATE DATABASE baseline"
psql_admin -d baseline -f bench/baseline/schema.sql >/dev/null 2>&1
psql_admin -d baseline -f bench/baseline/fund.sql >/dev/null
psql_admin -d baseline -c CHECKPOINT >/dev/null
cat bench/baseline/pick_payday.sql bench/baseline/transfer.sql > "$out/payday.pgbench"
rm -rf "$out/baseline" && mkdir -p "$out/baseline"
pgbench -h 127.0.0.1 -p "$pg_port" -U postgres -n -M prepared -c 16 -j 2 -T "$duration" -f "$out/payday.pgbench" \
  -l --log-prefix="$out/baseline/tx" baseline > "$out/baseline/pgbench.out" 2>&1
baseline_tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$out/baseline/pgbench.out" | head -1)
baseline_p99=$(log_p99 "$out"/baseline/tx*)
psql_admin -d postgres -c "DROP DATABASE baseline WITH (FORCE)"

# 2 and 3. The server, on a fresh database, with the per-user rate limit lifted (one employer
# sends every salary).
bash scripts/services.sh reset-db "$var_dir"
redis-cli -p "$redis_port" flushall >/dev/null
operator_key="bench-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
(
  set -a
  # shellcheck disable=SC1091
  source "$var_dir/services.env"
  set +a
  build-bench/tools/admin/wallet-admin migrate
  export WALLET_AUTH_BOOTSTRAP_KEY=$operator_key WALLET_RATELIMIT_RATE_PER_SECOND=1000000
  export WALLET_RATELIMIT_BURST=2000000 WALLET_LOG_LEVEL=warn
  exec build-bench/tools/server/wallet-server --http-port "$http_port"
) > "$out/server.log" 2>&1 &
server_pid=$!
wait_until_ready "$http_port" "$out/server.log"
loadgen() {
  nice -n -10 build-bench/tools/loadgen/wallet-loadgen --host 127.0.0.1 --port "$http_port" \
    --operator-key "$operator_key" --quiet --workload payday --accounts "$salaries" --hot-shards 16 \
    --setup-file "$out/setup.json" "$@"
}
rm -f "$out/setup.json"
loadgen --setup-only --fund-amount 100000000
quiesce
echo "bench: server payday, single requests, 64 users, ${duration}s" >&2
loadgen --mode closed --concurrency 64 --duration "$duration" --no-verify --out-dir "$out/single" \
  > "$out/single.txt"
single_tps=$(jq -r '.achieved_rate' "$out/single/summary.json")
single_p99=$(jq -r '.accepted.p99_ms' "$out/single/summary.json")
echo "bench: server payday, batches of 1,000, $batch_users users, ${duration}s" >&2
# The writers' busy time over the batch part: how much of it the one writer of the employer's
# debits spent committing, and how long it took per batch (the server's answer to the ceiling).
writer_busy() {
  curl -fsS "http://127.0.0.1:$http_port/metrics" | awk '$1 == "wallet_writer_busy_seconds_total" {print $2}'
}
quiesce
busy_before=$(writer_busy)
batch_wal_before=$(wal_lsn)
loadgen --batch-size 1000 --concurrency "$batch_users" --duration "$duration" > "$out/batch.txt"
busy_after=$(writer_busy)
batch_wal_after=$(wal_lsn)
batch_line=$(grep '^payday-batch' "$out/batch.txt")
field() { awk -F'\t' -v k="$1" '{for (i = 1; i < NF; i++) if ($i == k) print $(i + 1)}' <<< "$batch_line"; }
batch_tps=$(field salaries_per_s)
batch_p99=$(field p99_ms)
batch_p50=$(field p50_ms)
batch_requests=$(field requests)
batch_salaries=$(python3 -c "print(round(float('$batch_tps') * $duration))")
batch_wal=$(wal_kb_per_1000 "$batch_wal_before" "$batch_wal_after" "$batch_salaries")
writer_share=$(python3 -c "print(round(100 * ($busy_after - $busy_before) / $duration))")
writer_ms=$(python3 -c "print(round(1000 * ($busy_after - $busy_before) / max(1, $batch_requests), 1))")
stop_server

# The ledger after both server runs: reconciled by the database's own sums.
set -a
# shellcheck disable=SC1091
source "$var_dir/services.env"
set +a
ledger_ok=$(psql -X -At "$WALLET_DATABASE_URL" -c \
  "SELECT (SELECT coalesce(sum(amount), 0) FROM ledger_entry) = 0
      AND NOT EXISTS (SELECT 1 FROM account a WHERE a.balance <>
                        (SELECT coalesce(sum(amount), 0) FROM ledger_entry e WHERE e.account_id = a.id))
      AND NOT EXISTS (SELECT 1 FROM account WHERE balance < 0 AND NOT allow_negative)")

# 4. The ceiling: 500 transfers per transaction through the writer's statements, one client, on
# the same database (the employer and salary accounts the server used).
employer=$(jq -r '.hub.accountId' "$out/setup.json")
principal=$(jq -r '.hub.principalId' "$out/setup.json")
mapfile -t ids < <(jq -r '.parties[].accountId' "$out/setup.json" | head -2000)
# The rows the writer locks beside the employer and the payees: the employer's shards and the
# fee_revenue shards (every item names a fee leg).
locked=$(psql -X -At "$WALLET_DATABASE_URL" -c \
  "SELECT coalesce(string_agg(id::text, ','), '-') FROM account
    WHERE parent_id = $employer
       OR parent_id = (SELECT id FROM account WHERE currency = 'EUR' AND system_role = 'fee_revenue')")
python3 bench/batch/ceiling.py "$employer" "$principal" EUR 500 "$locked" "${ids[@]}" > "$out/ceiling.pgbench"
echo "bench: ceiling, 500 transfers per transaction, 1 client, ${duration}s" >&2
rm -rf "$out/ceiling" && mkdir -p "$out/ceiling"
quiesce
ceiling_wal_before=$(wal_lsn)
pgbench -h 127.0.0.1 -p "$pg_port" -U postgres -n -M prepared -c 1 -j 1 -T "$duration" -f "$out/ceiling.pgbench" \
  -l --log-prefix="$out/ceiling/tx" wallet \
  > "$out/ceiling/pgbench.out" 2>&1 || { cat "$out/ceiling/pgbench.out" >&2; exit 1; }
ceiling_wal_after=$(wal_lsn)
ceiling_tx=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$out/ceiling/pgbench.out" | head -1)
ceiling_salaries=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out/ceiling/pgbench.out")
ceiling_wal=$(wal_kb_per_1000 "$ceiling_wal_before" "$ceiling_wal_after" "$((ceiling_salaries * 500))")
ceiling_tps=$(python3 -c "print(round($ceiling_tx * 500, 1))")
ceiling_ms=$(python3 -c "print(round(1e6 / $ceiling_tps, 1) if $ceiling_tps > 0 else 0)")
ceiling_p99=$(log_p99 "$out"/ceiling/tx*)
cp /proc/loadavg "$out/load-end.txt"

share=$(python3 -c "print(round(100 * $batch_tps / $ceiling_tps, 1) if $ceiling_tps > 0 else 0)")
round0() { python3 -c "print(f'{float(\"$1\"):,.0f}')"; }
round1() { python3 -c "print(f'{float(\"$1\"):.1f}')"; }
baseline_tps=$(round0 "$baseline_tps") single_tps=$(round0 "$single_tps") batch_tps=$(round0 "$batch_tps")
ceiling_tps=$(round0 "$ceiling_tps") single_p99=$(round1 "$single_p99")
[[ $ledger_ok == t ]] && ledger_ok=ok || ledger_ok=BROKEN
shared=""
if python3 -c "import sys; sys.exit(0 if float('$(cut -d' ' -f1 "$out/load-start.txt")') > 2.5 else 1)"; then
  shared="- **Other work ran on this 2-core machine during the run** (load average above 2.5): every figure is lower and noisier than on a quiet machine."
fi
{
  echo "# Payday: batch endpoint vs. single requests vs. the classic row-lock design"
  echo
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) CPUs, $(free -g | awk '/Mem:/ {print $2}') GB RAM."
  users_arg=""
  [[ $batch_users != 2 ]] && users_arg=" --batch-users $batch_users"
  echo "- Reproduce: \`bench/payday_batch.sh --duration $duration$users_arg\` (Release build in build-bench; private PostgreSQL and Redis, fsync on)."
  echo "- Load average at the start: $(cut -d' ' -f1-3 "$out/load-start.txt"); at the end: $(cut -d' ' -f1-3 "$out/load-end.txt")."
  echo "- Salary accounts: $salaries (the employer is hot, 16 shards); amounts 1 to 100 minor units."
  [[ -n $shared ]] && echo "$shared"
  echo
  echo "| design | salaries/s | p99 per request ms | notes |"
  echo "| --- | ---: | ---: | --- |"
  echo "| classic row-lock (pgbench, 16 clients) | $baseline_tps | $baseline_p99 | one transaction per salary |"
  echo "| server, single requests (64 users) | $single_tps | $single_p99 | one request per salary |"
  echo "| server, batch endpoint (1,000 per request, $batch_users users) | $batch_tps | $batch_p99 | p50 $batch_p50 ms per request of 1,000; the writer busy ${writer_share}% of the run, $writer_ms ms per batch; $batch_wal kB of WAL per 1,000 salaries |"
  echo "| database-only ceiling (pgbench, 500 per transaction, 1 client) | $ceiling_tps | $ceiling_p99 | per transaction of 500, $ceiling_ms ms per 1,000 salaries; $ceiling_wal kB of WAL per 1,000 |"
  echo
  echo "The batch endpoint reached ${share}% of the ceiling. Ledger after the server runs (zero-sum, caches = entries, no bad negative): $ledger_ok."
} > bench/PAYDAY_BATCH.md
cat bench/PAYDAY_BATCH.md
