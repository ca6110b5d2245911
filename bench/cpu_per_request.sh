#!/usr/bin/env bash
# CPU time per request of every process on the machine (wallet-server, postgres, wallet-loadgen,
# redis-server) while wallet-loadgen drives the server at a fixed open-loop rate: the figures of
# bench/PROFILE.md. Each run starts from an empty database, creates the workload's setup through
# the API, warms up for 3 s, then reads /proc/<pid>/stat of every process over 10 s of an 18 s run.
# The requests of that window are counted from the server's own counter (transfers answered), and
# Redis's own time per call of the rate-limit script and of the relay's XADD over the same window
# is printed from INFO commandstats.
#
#   bench/cpu_per_request.sh [--workload hot-merchant|payday] [--rate N] [--client loadgen|wrk]
#                            [--connections N] [--count-mallocs] [--threads] [NAME=VALUE ...]
#
# --client wrk sends the same transfers with wrk (bench/wrk/transfers.lua), closed loop over
# --connections connections (default 64) and one thread, instead of wallet-loadgen's open loop:
# a cross-check of what the load generator itself costs. --rate is then not used.
#
# --count-mallocs counts the server's calls to malloc over the window instead, per transfer and
# per thread, with a perf uprobe on libc's malloc (root; the probe is added if missing). The probe
# slows every allocation down, so no CPU figures are given in that mode.
#
# --threads also prints the server's CPU per request by thread name (/proc/<pid>/task/*/stat over
# the same window): which of the HTTP, rate-limit, actor, writer and relay threads spends it,
# and PostgreSQL's by backend (the server's connections by application_name, PostgreSQL's own
# processes by type).
#
# NAME=VALUE pairs are passed to the server's environment, to compare settings side by side, e.g.
#   bench/cpu_per_request.sh --rate 5300 WALLET_ACTORS_SCHEDULER_THREADS=2
# BENCH_SETUP_SQL, when set, runs in the migrated database before the setup, to compare one schema
# change on the same binaries (as in bench/pg_cost.sh), e.g. an index a migration dropped:
#   BENCH_SETUP_SQL='CREATE INDEX ledger_entry_transaction ON ledger_entry (transaction_id)' bench/cpu_per_request.sh
# CPU_SERVER_BIN, when set, is the wallet-server binary run instead of build-bench's, to compare two
# builds in alternation on the same load generator, e.g. a copy of main's:
#   CPU_SERVER_BIN=/tmp/wallet-server.main bench/cpu_per_request.sh --threads --rate 9000
# Uses the benchmark's private services under var/bench (PostgreSQL 55434, Redis 56381).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

workload=hot-merchant
rate=4500
client=loadgen
connections=
count_mallocs=no
threads=no
overrides=()
while (($#)); do
  case $1 in
    --workload) workload=$2; shift ;;
    --rate) rate=$2; shift ;;
    --client) client=$2; shift ;;
    --connections) connections=$2; shift ;;
    --count-mallocs) count_mallocs=yes ;;
    --threads) threads=yes ;;
    *=*) overrides+=("$1") ;;
    *) echo "cpu_per_request: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
case $client in
  loadgen) connections=${connections:-512} ;;
  wrk) connections=${connections:-64} ;;
  *) echo "cpu_per_request: --client is loadgen or wrk, not $client" >&2; exit 2 ;;
esac

var_dir=var/bench
http_port=18480
out=bench/out/cpu
mkdir -p "$out"

bash scripts/install-deps.sh
if [[ $count_mallocs == yes ]] && ! perf probe -l 2>/dev/null | grep -q 'probe_libc:malloc'; then
  perf probe -q -x "$(ldconfig -p | awk '/libc\.so\.6 .*x86-64/ { print $NF; exit }')" -a malloc
fi
build_release build-bench "$out/build.log" wallet-server wallet-loadgen wallet-admin
bash scripts/services.sh start "$var_dir" 55434 56381 --huge-pages >/dev/null
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
  exec "${CPU_SERVER_BIN:-build-bench/tools/server/wallet-server}" --http-port "$http_port"
) > "$out/server.log" 2>&1 &
server_pid=$!
wait_until_ready "$http_port" "$out/server.log"
[[ -n ${CPU_SERVER_BIN:-} ]] && echo "server binary: $CPU_SERVER_BIN"
if [[ -n ${BENCH_SETUP_SQL:-} ]]; then
  pg_port=55434 psql_admin -d wallet -c "$BENCH_SETUP_SQL" >/dev/null
fi

loadgen() {
  nice -n -10 build-bench/tools/loadgen/wallet-loadgen --host 127.0.0.1 --port "$http_port" \
    --operator-key "$operator_key" --quiet --workload "$workload" --accounts 10000 --hot-shards 16 \
    --connections "$connections" --setup-file "$out/setup.json" --no-verify "$@"
}
rm -f "$out/setup.json"
loadgen --setup-only >/dev/null
loadgen --mode open --rate "$rate" --duration 3 >/dev/null

# Transfers answered 201 so far, by the server's own count.
answered() {
  curl -sf "http://127.0.0.1:$http_port/metrics" |
    awk '/^wallet_http_requests_total\{route="\/v1\/transfers",status="201"\}/ { n += $2 } END { print n + 0 }'
}

if [[ $client == wrk ]]; then
  # The setup's parties as "apiKey accountId" lines, the hub first, for the wrk script.
  python3 -c '
import json, sys
setup = json.load(open(sys.argv[1]))
for p in [setup["hub"]] + setup["parties"]:
    print(p["apiKey"], p["accountId"])' "$out/setup.json" > "$out/parties.tsv"
  WRK_PARTIES=$out/parties.tsv WRK_WORKLOAD=$workload WRK_RUN="run-$RANDOM$RANDOM" \
    wrk -t1 -c"$connections" -d18s --latency -s bench/wrk/transfers.lua "http://127.0.0.1:$http_port" \
    > "$out/run.txt" &
else
  loadgen --mode open --rate "$rate" --duration 18 > "$out/run.txt" &
fi
client_pid=$!
sleep 4
redis-cli -p 56381 config resetstat >/dev/null
cpu_snapshot > "$out/before.txt"
[[ $threads == yes ]] && thread_snapshot "$server_pid" > "$out/threads-before.txt"
[[ $threads == yes ]] && pg_backend_snapshot 55434 > "$out/pg-before.txt"
before=$(answered)
if [[ $count_mallocs == yes ]]; then
  perf stat -e probe_libc:malloc --per-thread -x, -o "$out/mallocs.csv" -p "$server_pid" -- sleep 10 2>/dev/null
else
  sleep 10
fi
after=$(answered)
cpu_snapshot > "$out/after.txt"
[[ $threads == yes ]] && thread_snapshot "$server_pid" > "$out/threads-after.txt"
[[ $threads == yes ]] && pg_backend_snapshot 55434 > "$out/pg-after.txt"
redis-cli -p 56381 info commandstats > "$out/redis-commandstats.txt"
wait "$client_pid" || true
measured_rate=$(((after - before) / 10))

if [[ $client == wrk ]]; then
  echo "$workload with wrk, closed loop over $connections connections, server settings: ${overrides[*]:-defaults}"
  grep -E 'Latency|99%|Requests/sec|Non-2xx|Socket errors' "$out/run.txt"
else
  echo "$workload at $rate/s, server settings: ${overrides[*]:-defaults}"
  grep -E '^(status|201|503|accepted)|achieved|sent late' "$out/run.txt"
fi
echo "transfers answered 201 during the window: $measured_rate/s"
# Redis's own time per command over the window (INFO commandstats): the rate-limit script
# (evalsha, its inner calls included) and the relay's stream writes (xadd).
awk -F'[:,=]' '/^cmdstat_(evalsha|xadd)/ { printf "redis %s: %s calls, %s us per call\n", substr($1, 9), $3, $7 }' \
  "$out/redis-commandstats.txt" | sort
if [[ $count_mallocs == yes ]]; then
  # Lines "comm-tid,count,,probe_libc:malloc,...": summed by thread name.
  echo "malloc calls per transfer, by server thread, over 10 s:"
  awk -F, -v n="$((after - before))" '$4 ~ /malloc/ && $2 ~ /^[0-9]+$/ {
      name = $1; sub(/-[0-9]+$/, "", name); gsub(/^ +/, "", name); calls[name] += $2; total += $2 }
    END { for (k in calls) if (calls[k] / n >= 0.05) printf "  %-16s %7.1f\n", k, calls[k] / n
          printf "  %-16s %7.1f\n", "total", total / n }' "$out/mallocs.csv" | sort -k2 -nr
  exit 0
fi
echo "CPU per request (us), over 10 s:"
cpu_per_request "$out/before.txt" "$out/after.txt" 10 "$measured_rate" | awk '
  { printf "  %-16s %6.0f\n", $1, $2; total += $2 } END { printf "  %-16s %6.0f\n", "total", total }'
if [[ $threads == yes ]]; then
  echo "wallet-server's CPU per request by thread (us), over 10 s:"
  cpu_per_request "$out/threads-before.txt" "$out/threads-after.txt" 10 "$measured_rate" |
    awk '{ printf "  %-16s %6.1f\n", $1, $2 }'
  echo "PostgreSQL's CPU per request by backend (us), over 10 s (processes that ran throughout):"
  cpu_per_request "$out/pg-before.txt" "$out/pg-after.txt" 10 "$measured_rate" |
    awk '{ printf "  %-24s %6.1f\n", $1, $2 }'
fi
