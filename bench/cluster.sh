#!/usr/bin/env bash
# Throughput of one wallet-server node against three nodes behind HAProxy, on the same machine
# and the same PostgreSQL (fsync on), with wallet-loadgen in closed loop (docs/scaling.md,
# "Measured"). Three runs, one after the other, on the same accounts:
#   1. one node in single mode (cluster.enabled = false), the load generator straight at it;
#   2. one node in cluster mode behind HAProxy (what HAProxy and the fence cost);
#   3. three nodes in cluster mode behind HAProxy (scripts/cluster.sh start 3).
# Prints a table (also in bench/out/cluster/RESULTS.md); raw outputs go to bench/out/cluster/.
#
#   bench/cluster.sh [--duration S] [--workload p2p|hot-merchant|payday] [--concurrency N]
#   BENCH_PG_PORT / BENCH_REDIS_PORT choose the private services' ports (default 55445 / 56395),
#   BENCH_HTTP_PORT the base port (default 18600). Builds in Release in build-bench unless
#   BENCH_BUILD_DIR names a build directory to use as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=20
workload=p2p
concurrency=64
while (($#)); do
  case $1 in
    --duration) duration=$2; shift ;;
    --workload) workload=$2; shift ;;
    --concurrency) concurrency=$2; shift ;;
    *) echo "bench: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

var_dir=var/bench-cluster
out=bench/out/cluster
pg_port=${BENCH_PG_PORT:-55445}
redis_port=${BENCH_REDIS_PORT:-56395}
base_port=${BENCH_HTTP_PORT:-18600}
accounts=2000
rm -rf "$out"
mkdir -p "$out" "$var_dir"
cp /proc/loadavg "$out/load-start.txt"

if [[ -n ${BENCH_BUILD_DIR:-} ]]; then
  build=$BENCH_BUILD_DIR
else
  build=build-bench
  cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS="-Wno-error=restrict -Wno-error=stringop-overflow" >/dev/null
  nice ninja -j2 -C build-bench wallet-server wallet-loadgen wallet-admin > "$out/build.log" 2>&1 \
    || { tail -40 "$out/build.log" >&2; exit 1; }
fi
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$build/CMakeCache.txt")

bash scripts/services.sh start "$var_dir" "$pg_port" "$redis_port" --huge-pages
bash scripts/services.sh reset-db "$var_dir"
set -a
# shellcheck disable=SC1091
source "$var_dir/services.env"
set +a
"$build/tools/admin/wallet-admin" migrate >/dev/null
export WALLET_AUTH_BOOTSTRAP_KEY="wk_op_bench_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
# Rate limits out of the way: the bench measures the ledger, not the limiter.
export WALLET_RATELIMIT_RATE_PER_SECOND=1000000 WALLET_RATELIMIT_BURST=1000000 \
  WALLET_RATELIMIT_READ_RATE_PER_SECOND=1000000 WALLET_RATELIMIT_READ_BURST=1000000 \
  WALLET_LOG_LEVEL=warn
export WALLET_CLUSTER_VAR=$var_dir/cluster WALLET_BUILD_DIR=$build WALLET_CLUSTER_NO_BUILD=1
mkdir -p "$WALLET_CLUSTER_VAR"
echo "$WALLET_AUTH_BOOTSTRAP_KEY" > "$WALLET_CLUSTER_VAR/operator.key"

single_pid=
cleanup() {
  [[ -n $single_pid ]] && kill "$single_pid" 2>/dev/null && wait "$single_pid" 2>/dev/null
  bash scripts/cluster.sh stop >/dev/null 2>&1 || true
  bash scripts/services.sh stop "$var_dir" || true
}
trap cleanup EXIT

wait_ready() {
  local deadline=$((SECONDS + 120))
  until curl -fsS -m 2 "http://127.0.0.1:$1/readyz" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { echo "bench: nothing ready on port $1" >&2; exit 1; }
    sleep 0.2
  done
}

# Closed loop: throughput is what the system sustains with `concurrency` users waiting for their
# answers; the accounts are made once (--setup-file) and reused by the next runs.
run_load() {
  local name=$1 port=$2
  "$build/tools/loadgen/wallet-loadgen" --host 127.0.0.1 --port "$port" \
    --workload "$workload" --accounts "$accounts" --hot-shards 16 --mode closed --concurrency "$concurrency" \
    --duration "$duration" --retries --retries-max 20 --retry-after-max 2 --connections "$concurrency" \
    --setup-file "$var_dir/setup.json" --database-url "$WALLET_DATABASE_URL" --out-dir "$out/$name" --quiet \
    > "$out/$name.out" 2> "$out/$name.err" || { tail -30 "$out/$name.out" >&2; exit 1; }
}

rm -f "$var_dir/setup.json"
echo "== 1 node, single mode, direct" >&2
WALLET_HTTP_HOST=127.0.0.1 WALLET_HTTP_PORT=$((base_port + 50)) "$build/tools/server/wallet-server" \
  > "$out/single-node.log" 2>&1 &
single_pid=$!
wait_ready $((base_port + 50))
# The accounts are made, and the database's caches and the server warmed, in a run of its own
# that is not reported: without it the first measured run pays for them.
run_load warmup $((base_port + 50))
run_load single $((base_port + 50))
kill "$single_pid"
wait "$single_pid" || true
single_pid=

for n in 1 3; do
  echo "== $n node(s), cluster mode, behind HAProxy" >&2
  # Leases of the previous run are handed back at shutdown; a fresh start splits them anew.
  bash scripts/cluster.sh start "$n" --base-port "$base_port" > "$out/cluster-$n.start"
  run_load "cluster-$n" "$base_port"
  bash scripts/cluster.sh stop
done
cp /proc/loadavg "$out/load-end.txt"

{
  echo "- Date: $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) CPUs; build: $build_type ($build); fsync on."
  echo "- Workload: $workload, $accounts accounts, closed loop with $concurrency users, ${duration} s per run."
  echo "- Load average at the start: $(cut -d' ' -f1-3 "$out/load-start.txt"); at the end: $(cut -d' ' -f1-3 "$out/load-end.txt")."
  echo
  echo "| setup | transfers/s | p50 ms | p99 ms | 503 answers | verification |"
  echo "| --- | ---: | ---: | ---: | ---: | --- |"
  for name in single cluster-1 cluster-3; do
    case $name in
      single) label="1 node, single mode, direct" ;;
      cluster-1) label="1 node, cluster mode, behind HAProxy" ;;
      cluster-3) label="3 nodes, cluster mode, behind HAProxy" ;;
    esac
    jq -r --arg setup "$label" '[$setup, (.achieved_rate | floor), .accepted.p50_ms, .accepted.p99_ms,
        ([.every_attempt | to_entries[] | select(.key | startswith("503")) | .value] | add // 0),
        (if .verify.pass then "PASS" else "FAIL" end)] | "| " + (map(tostring) | join(" | ")) + " |"' \
      "$out/$name/summary.json"
  done
} | tee "$out/RESULTS.md"
