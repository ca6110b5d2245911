#!/usr/bin/env bash
# The webhook fan-out with many endpoints (docs/events.md, "Fan-out: one read of the feed for every
# endpoint"): bench/webhooks.py with one endpoint of the paid merchant and N endpoints of other
# merchants, which get none of the events but which every fan-out step serves, against one or more
# wallet-server binaries in turn, each run on an emptied database.
#
#   bench/webhook_fanout.sh [--other-owners 200] [--transfers 1000] [--rounds 2] [BIN ...]
#
# BIN: the wallet-server binaries to compare (default: build/tools/server/wallet-server), run
# alternately, --rounds times each. Services are private (var/bench-fanout, fsync on); the
# database is migrated with build/tools/admin/wallet-admin. Raw outputs go to bench/out/fanout/.
set -euo pipefail
cd "$(dirname "$0")/.."

others=200
transfers=1000
rounds=2
bins=()
while (($#)); do
  case $1 in
    --other-owners) others=$2; shift ;;
    --transfers) transfers=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    -*) echo "bench: unknown argument $1" >&2; exit 2 ;;
    *) bins+=("$1") ;;
  esac
  shift
done
((${#bins[@]})) || bins=(build/tools/server/wallet-server)

var_dir=var/bench-fanout
pg_port=${BENCH_PG_PORT:-55437}
redis_port=${BENCH_REDIS_PORT:-56384}
http_port=${BENCH_HTTP_PORT:-18482}
out=bench/out/fanout
mkdir -p "$out"
cp /proc/loadavg "$out/load-start.txt"

# shellcheck source=bench/lib.sh
source bench/lib.sh
bash scripts/services.sh start "$var_dir" "$pg_port" "$redis_port"
trap 'stop_server; bash scripts/services.sh stop "$var_dir"' EXIT
set -a
# shellcheck disable=SC1091
source "$var_dir/services.env"
set +a

run() {
  local bin=$1 name=$2
  bash scripts/services.sh reset-db "$var_dir" >/dev/null
  redis-cli -p "$redis_port" flushall >/dev/null
  build/tools/admin/wallet-admin migrate >/dev/null
  local key="bench-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  WALLET_AUTH_BOOTSTRAP_KEY=$key WALLET_LOG_LEVEL=warn WALLET_WEBHOOKS_ALLOW_LOOPBACK=true \
    WALLET_RATELIMIT_RATE_PER_SECOND=1000000 WALLET_RATELIMIT_BURST=2000000 \
    WALLET_RATELIMIT_READ_RATE_PER_SECOND=1000000 WALLET_RATELIMIT_READ_BURST=2000000 \
    "$bin" --http-port "$http_port" > "$out/server-$name.log" 2>&1 &
  server_pid=$!
  wait_until_ready "$http_port" "$out/server-$name.log"
  echo "== $name: $bin"
  python3 bench/webhooks.py --url "http://127.0.0.1:$http_port" --operator-key "$key" --transfers "$transfers" \
    --endpoints 1 --other-owners "$others" | tee "$out/$name.txt"
  stop_server
  # Every row the run wrote to the endpoints' table and the deliveries' (the server's backends have
  # exited, so their statistics are in).
  psql_admin -d wallet -At -F ' ' -c "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
      WHERE relname IN ('webhook_endpoint', 'webhook_delivery') ORDER BY relname" |
    awk '{ printf "  %s: %d rows inserted, %d updated (%d in place)\n", $1, $2, $3, $4 }' | tee -a "$out/$name.txt"
}

echo "webhook fan-out ($(date -u +%Y-%m-%dT%H:%MZ), load at start: $(cut -d' ' -f1-3 "$out/load-start.txt")):" \
  "$transfers payments to one merchant with one endpoint, $others other merchants with an endpoint each"
for r in $(seq 1 "$rounds"); do
  for i in "${!bins[@]}"; do run "${bins[$i]}" "bin$i-round$r"; done
done
