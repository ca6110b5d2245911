#!/usr/bin/env bash
# One spike of bench/run.sh, alone, at a capacity given instead of measured: to compare server
# settings (or binaries) on the same overload, side by side. From a base of 0.1 C for 15 s, ramps
# over 2 s to MULTIPLIER x 0.1 C, holds it 10 s, ramps down and runs to 60 s; hot merchant,
# 10,000 payers, the server's default per-user rate limit, retries after Retry-After, 2,048
# connections, and for x15 a 2 s client deadline: exactly the spike runs of bench/run.sh.
#
#   bench/spike.sh --capacity C [--multiplier 15] [NAME=VALUE ...]
#
# NAME=VALUE pairs are passed to the server's environment, e.g.
#   bench/spike.sh --capacity 9611 WALLET_RATELIMIT_LOCAL_TOKENS=0
# Prints the load generator's spike line; the whole report goes to bench/out/spike/.
# Uses the benchmark's private services under var/bench (PostgreSQL 55434, Redis 56381).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh
capacity=
multiplier=15
overrides=()
while (($#)); do
  case $1 in
    --capacity) capacity=$2; shift ;;
    --multiplier) multiplier=$2; shift ;;
    *=*) overrides+=("$1") ;;
    *) echo "spike: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[[ $capacity =~ ^[0-9]+$ ]] || { echo "spike: --capacity C (transfers/s) is required" >&2; exit 2; }
[[ $multiplier =~ ^[0-9]+$ ]] || { echo "spike: --multiplier is a whole number" >&2; exit 2; }
base_rate=$((capacity / 10 > 50 ? capacity / 10 : 50))

var_dir=var/bench
http_port=18481
out=bench/out/spike
mkdir -p "$out"

bash scripts/install-deps.sh
build_release build-bench "$out/build.log" wallet-server wallet-loadgen wallet-admin
bash scripts/services.sh start "$var_dir" 55434 56381 --huge-pages >/dev/null
bash scripts/services.sh reset-db "$var_dir" >/dev/null
redis-cli -p 56381 flushall >/dev/null
trap 'stop_server; bash scripts/services.sh stop "$var_dir" >/dev/null' EXIT

operator_key="spike-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
# The setup runs with the limit lifted (10,000 principals through one operator key would take
# minutes at the default), then the server restarts on the same database with the default limit.
start() {
  stop_server
  (
    set -a
    # shellcheck disable=SC1091
    source "$var_dir/services.env"
    set +a
    export WALLET_AUTH_BOOTSTRAP_KEY=$operator_key WALLET_LOG_LEVEL=warn
    export WALLET_RATELIMIT_READ_RATE_PER_SECOND=1000000 WALLET_RATELIMIT_READ_BURST=2000000
    "$@"
    for kv in "${overrides[@]}"; do export "${kv?}"; done
    build-bench/tools/admin/wallet-admin migrate >/dev/null
    exec build-bench/tools/server/wallet-server --http-port "$http_port"
  ) >> "$out/server.log" 2>&1 &
  server_pid=$!
  wait_until_ready "$http_port" "$out/server.log"
}
unlimited() { export WALLET_RATELIMIT_RATE_PER_SECOND=1000000 WALLET_RATELIMIT_BURST=2000000; }
: > "$out/server.log"
rm -f "$out/setup.json"
start unlimited
loadgen() {
  nice -n -10 build-bench/tools/loadgen/wallet-loadgen --host 127.0.0.1 --port "$http_port" \
    --operator-key "$operator_key" --workload hot-merchant --accounts 10000 --hot-shards 16 \
    --setup-file "$out/setup.json" "$@"
}
loadgen --setup-only --quiet >/dev/null
start true
deadline=()
[[ $multiplier == 15 ]] && deadline=(--timeout-ms 2000)
echo "spike: capacity $capacity/s, base $base_rate/s, x$multiplier; server settings: ${overrides[*]:-defaults}"
loadgen --mode open --profile spike --rate "$base_rate" --spike-multiplier "$multiplier" --spike-start 15 \
  --spike-duration 10 --spike-ramp-seconds 2 --duration 60 --connections 2048 --retries "${deadline[@]}" \
  --quiet --out-dir "$out/run" > "$out/run.txt" || echo "spike: the load generator reported FAIL" >&2
grep -E '^spike:|^requests:|^verify' "$out/run.txt" || tail -20 "$out/run.txt"
