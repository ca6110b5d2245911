#!/usr/bin/env bash
# What the outbox relay costs and how far behind it falls (docs/events.md), on this machine:
#
# 1. payments into one hot merchant at a fixed open-loop rate, relay off and on alternately
#    (after a warm-up run): p50/p99 of the 201s, and the relay's lag sampled every 250 ms;
# 2. the server restarted with the relay on and no load after the first run: how fast it
#    publishes that run's backlog;
# 3. every outbox row made 31 days old, the server restarted with the relay polling every 1 ms and
#    pruning every 10 ms, no load: how fast the relay deletes the feed past its retention
#    (events.feed_retention_days), and the WAL that costs.
#
#   bench/events.sh [--rate N] [--duration S] [--payers N]
#   BENCH_PG_PORT / BENCH_REDIS_PORT: the private services' ports (default 55436 / 56383);
#   BENCH_BUILD_DIR: the build whose wallet-server, wallet-admin and wallet-loadgen run (default build).
#
# Services are private (var/bench-events, fsync on); raw outputs go to bench/out/events/.
set -euo pipefail
cd "$(dirname "$0")/.."

rate=2000
duration=20
payers=2000
while (($#)); do
  case $1 in
    --rate) rate=$2; shift ;;
    --duration) duration=$2; shift ;;
    --payers) payers=$2; shift ;;
    *) echo "bench: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

var_dir=var/bench-events
pg_port=${BENCH_PG_PORT:-55436}
redis_port=${BENCH_REDIS_PORT:-56383}
http_port=${BENCH_HTTP_PORT:-18481}
build=${BENCH_BUILD_DIR:-build}
out=bench/out/events
mkdir -p "$out"
# The database is emptied below: a setup (ids and keys) of an earlier run names nothing any more.
rm -f "$out/setup.json"
: > "$out/server.log"
cp /proc/loadavg "$out/load-start.txt"

bash scripts/services.sh start "$var_dir" "$pg_port" "$redis_port" --huge-pages
bash scripts/services.sh reset-db "$var_dir"
redis-cli -p "$redis_port" flushall >/dev/null
set -a
# shellcheck disable=SC1091
source "$var_dir/services.env"
set +a
"$build/tools/admin/wallet-admin" migrate >/dev/null
operator_key="bench-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"

server_pid=
stop_server() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=
}
trap 'stop_server; bash scripts/services.sh stop "$var_dir"' EXIT

start_server() {
  local events=$1
  stop_server
  WALLET_AUTH_BOOTSTRAP_KEY=$operator_key WALLET_LOG_LEVEL=warn WALLET_EVENTS_ENABLED=$events \
    WALLET_RATELIMIT_RATE_PER_SECOND=1000000 WALLET_RATELIMIT_BURST=2000000 \
    WALLET_RATELIMIT_READ_RATE_PER_SECOND=1000000 WALLET_RATELIMIT_READ_BURST=2000000 \
    "$build/tools/server/wallet-server" --http-port "$http_port" >> "$out/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 300); do
    curl -fsS "http://127.0.0.1:$http_port/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "bench: the server did not become ready" >&2
  tail -20 "$out/server.log" >&2
  exit 1
}

metric() {
  curl -fsS "http://127.0.0.1:$http_port/metrics" | awk -v name="$1" '$1 == name { print $2 }'
}

loadgen() {
  nice -n -10 "$build/tools/loadgen/wallet-loadgen" --host 127.0.0.1 --port "$http_port" \
    --operator-key "$operator_key" --quiet --workload hot-merchant --accounts "$payers" --hot-shards 16 \
    --setup-file "$out/setup.json" --database-url "$WALLET_DATABASE_URL" "$@"
}

percentiles() {
  python3 - "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
lat = s.get("latency_ms") or s.get("latency") or {}
def find(d, *keys):
    for k in keys:
        if isinstance(d, dict) and k in d:
            return d[k]
    return None
acc = s.get("statuses", {}).get("201", {})
print("201s %s, p50 %s ms, p99 %s ms" % (acc.get("count"), find(acc, "p50_ms", "p50"), find(acc, "p99_ms", "p99")))
PY
}

unpublished() {
  psql -XAtq "$WALLET_DATABASE_OWNER_URL" -c "SELECT count(*) FROM outbox_event WHERE published_at IS NULL"
}
wait_caught_up() {
  for _ in $(seq 1 6000); do
    [[ $(unpublished) == 0 ]] && return 0
    sleep 0.05
  done
  echo "bench: the relay did not catch up within 300 s" >&2
  exit 1
}
# One measured run: relay on (true) or off (false); sets `result` to the 201s and their p50/p99.
# (Not called in a $(...) subshell: the server it starts must be the one stop_server knows.)
result=
run() {
  local events=$1 name=$2
  start_server "$events"
  if [[ $events == true ]]; then wait_caught_up; fi
  : > "$out/lag-$name.txt"
  if [[ $events == true ]]; then
    ( while kill -0 "$server_pid" 2>/dev/null; do
        metric wallet_events_relay_lag_seconds >> "$out/lag-$name.txt" || true
        sleep 0.25
      done ) &
    sampler=$!
  fi
  loadgen --mode open --profile constant --rate "$rate" --duration "$duration" --out-dir "$out/$name" > "$out/$name.txt"
  if [[ $events == true ]]; then kill "$sampler" 2>/dev/null || true; fi
  result=$(percentiles "$out/$name/summary.json")
}

# The first run after the setup is slower whatever it runs (caches, the account actors, the
# keys): a warm-up run is thrown away, then runs alternate so that neither side always goes first.
echo "bench: setup and warm-up" >&2
start_server false
loadgen --setup-only
loadgen --mode open --profile constant --rate "$rate" --duration 10 --out-dir "$out/warmup" > "$out/warmup.txt"
echo "bench: relay off, $rate/s for $duration s" >&2
run false off1
off1=$result
backlog_rows=$(unpublished)
backlog_events=$(psql -XAtq "$WALLET_DATABASE_OWNER_URL" -c \
  "SELECT coalesce(sum(coalesce(array_length(transaction_ids, 1), 1)), 0) FROM outbox_event WHERE published_at IS NULL")

echo "bench: relay on, publishing the backlog of $backlog_events events in $backlog_rows rows" >&2
start_server true
started=$(date +%s.%N)
wait_caught_up
caught_up=$(date +%s.%N)
catch_up_s=$(python3 -c "print(f'{$caught_up - $started:.2f}')")
catch_up_rate=$(python3 -c "print(int($backlog_events / max(0.001, $caught_up - $started)))")

echo "bench: relay on, off, on" >&2
run true on1
on1=$result
run false off2
off2=$result
run true on2
on2=$result
lag=$(cat "$out/lag-on1.txt" "$out/lag-on2.txt" | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "median %.3f s, p99 %.3f s, max %.3f s over %d samples", v[int((NR+1)/2)], v[int(NR*0.99 > 1 ? NR*0.99 : 1)], v[NR], NR }')
echo "bench: the feed's retention: every row made 31 days old, deleted by the relay" >&2
stop_server
prune_rows=$(psql -XAtq "$WALLET_DATABASE_OWNER_URL" -c "SELECT count(*) FROM outbox_event")
prune_events=$(psql -XAtq "$WALLET_DATABASE_OWNER_URL" -c \
  "SELECT coalesce(sum(coalesce(array_length(transaction_ids, 1), 1)), 0) FROM outbox_event")
outbox_bytes=$(psql -XAtq "$WALLET_DATABASE_OWNER_URL" -c "SELECT pg_total_relation_size('outbox_event')")
psql -XAtq "$WALLET_DATABASE_OWNER_URL" -c "UPDATE outbox_event SET created_at = now() - interval '31 days'" >/dev/null
# The update left a dead version of every row: vacuumed, so that the deletes meet the table as it
# would be; a checkpoint, so that the WAL counted holds a full-page image of every page touched.
psql -XAtq -h 127.0.0.1 -p "$pg_port" -U postgres -d wallet -c "VACUUM outbox_event" -c "CHECKPOINT" >/dev/null
wal_start=$(psql -XAtq "$WALLET_DATABASE_OWNER_URL" -c "SELECT pg_current_wal_lsn()")
# The relay's first prune round starts with the server: the time counted includes the server's start.
started=$(date +%s.%N)
WALLET_EVENTS_POLL_INTERVAL_MS=1 WALLET_EVENTS_PRUNE_INTERVAL_MS=10 start_server true
for _ in $(seq 1 12000); do
  [[ $(psql -XAtq "$WALLET_DATABASE_OWNER_URL" -c "SELECT count(*) FROM outbox_event") == 1 ]] && break
  sleep 0.05
done
pruned_at=$(date +%s.%N)
pruned_rows=$(metric wallet_events_outbox_rows_pruned_total)
wal_bytes=$(psql -XAtq "$WALLET_DATABASE_OWNER_URL" -c "SELECT pg_current_wal_lsn() - '$wal_start'::pg_lsn")
prune_s=$(python3 -c "print(f'{$pruned_at - $started:.2f}')")
prune_rate=$(python3 -c "print(int($pruned_rows / max(0.001, $pruned_at - $started)))")
wal_per_row=$(python3 -c "print(int($wal_bytes / max(1, $pruned_rows)))")
stream_len=$(redis-cli -p "$redis_port" XLEN wallet:events)
redis_mem=$(redis-cli -p "$redis_port" INFO memory | awk -F: '/^used_memory:/ { print $2 }' | tr -d '\r')

cat <<EOF
events bench ($(date -u +%Y-%m-%dT%H:%MZ), load at start: $(cut -d' ' -f1-3 "$out/load-start.txt"))
hot merchant, $payers payers, open loop $rate/s for $duration s
  relay off: $off1
  relay on:  $on1
  relay off: $off2
  relay on:  $on2
  relay lag during the run: $lag
  backlog of $backlog_events events ($backlog_rows outbox rows) published in $catch_up_s s: $catch_up_rate events/s
  stream: $stream_len entries, Redis used_memory $redis_mem bytes
  retention: $pruned_rows of $prune_rows outbox rows ($prune_events events, outbox $outbox_bytes bytes) deleted within $prune_s s of the server's start: at least $prune_rate rows/s, $wal_per_row WAL bytes a row
EOF
