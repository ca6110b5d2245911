#!/usr/bin/env bash
# CPU time per request of every process on the machine (wallet-server, postgres, wallet-loadgen,
# redis-server) while wallet-loadgen drives the server at a fixed open-loop rate: the figures of
# bench/PROFILE.md. Each run starts from an empty database, creates the workload's setup through
# the API, warms up for 3 s, then reads /proc/<pid>/stat of every process over 10 s of an 18 s run.
#
#   bench/cpu_per_request.sh [--workload hot-merchant|payday] [--rate N] [NAME=VALUE ...]
#
# NAME=VALUE pairs are passed to the server's environment, to compare settings side by side, e.g.
#   bench/cpu_per_request.sh --rate 5300 WALLET_ACTORS_SCHEDULER_THREADS=2
# Uses the benchmark's private services under var/bench (PostgreSQL 55434, Redis 56381).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

workload=hot-merchant
rate=4500
overrides=()
while (($#)); do
  case $1 in
    --workload) workload=$2; shift ;;
    --rate) rate=$2; shift ;;
    *=*) overrides+=("$1") ;;
    *) echo "cpu_per_request: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

var_dir=var/bench
http_port=18480
out=bench/out/cpu
mkdir -p "$out"

bash scripts/install-deps.sh
build_release build-bench "$out/build.log" wallet-server wallet-loadgen wallet-admin
bash scripts/services.sh start "$var_dir" 55434 56381 >/dev/null
bash scripts/services.sh reset-db "$var_dir" >/dev/null
redis-cli -p 56381 flushall >/dev/null
server_pid=
trap 'if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi;
      bash scripts/services.sh stop "$var_dir" >/dev/null' EXIT

operator_key="cpu-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
(
  set -a
  # shellcheck disable=SC1091
  source "$var_dir/services.env"
  set +a
  export WALLET_AUTH_BOOTSTRAP_KEY=$operator_key WALLET_LOG_LEVEL=warn
  export WALLET_RATELIMIT_RATE_PER_SECOND=1000000 WALLET_RATELIMIT_BURST=2000000
  export WALLET_RATELIMIT_READ_RATE_PER_SECOND=1000000 WALLET_RATELIMIT_READ_BURST=2000000
  for kv in "${overrides[@]}"; do export "${kv?}"; done
  build-bench/tools/admin/wallet-admin migrate >/dev/null
  exec build-bench/tools/server/wallet-server --http-port "$http_port"
) > "$out/server.log" 2>&1 &
server_pid=$!
wait_until_ready "$http_port" "$out/server.log"

loadgen() {
  nice -n -10 build-bench/tools/loadgen/wallet-loadgen --host 127.0.0.1 --port "$http_port" \
    --operator-key "$operator_key" --quiet --workload "$workload" --accounts 10000 --hot-shards 16 \
    --connections 512 --setup-file "$out/setup.json" --no-verify "$@"
}
rm -f "$out/setup.json"
loadgen --setup-only >/dev/null
loadgen --mode open --rate "$rate" --duration 3 >/dev/null

loadgen --mode open --rate "$rate" --duration 18 > "$out/run.txt" &
loadgen_pid=$!
sleep 4
cpu_snapshot > "$out/before.txt"
sleep 10
cpu_snapshot > "$out/after.txt"
wait "$loadgen_pid" || true

echo "$workload at $rate/s, server settings: ${overrides[*]:-defaults}"
grep -E '^(status|201|503|accepted)|achieved|sent late' "$out/run.txt"
echo "CPU per request (us), over 10 s:"
cpu_per_request "$out/before.txt" "$out/after.txt" 10 "$rate" | awk '
  { printf "  %-16s %6.0f\n", $1, $2; total += $2 } END { printf "  %-16s %6.0f\n", "total", total }'
