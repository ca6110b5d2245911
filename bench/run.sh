#!/usr/bin/env bash
# Side-by-side benchmark of the classic row-lock transfer (docs/baseline.md, under pgbench) and
# the wallet server (under wallet-loadgen), on this machine and the same PostgreSQL, in one go.
# Writes bench/RESULTS.md; raw outputs go to bench/out/ (not committed).
#
#   bench/run.sh                      # baseline, then the server, then the report
#   bench/run.sh --baseline-only      # only the pgbench part (and a report of it)
#   bench/run.sh --server-only        # only the server part (reuses bench/out/baseline.tsv)
#   options: --duration S (pgbench run length, default 15), --clients "8 16 32 64",
#            --step-seconds S (loadgen search step, default 10), --payers N (default 10000),
#            --keep-services (leave PostgreSQL and Redis running afterwards)
#   BENCH_SERVER_BIN=PATH runs that binary instead of building wallet-server (e.g. the loadgen's
#   test double, build-bench/tests/loadgen/loadgen-fake-wallet, to try the script itself).
#
# Services are private to the benchmark: var/bench, PostgreSQL on 55434 and Redis on 56381, with
# fsync on (never --fast): a benchmark that does not flush its commits measures nothing useful.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

run_baseline=yes
run_server=yes
duration=15
clients="8 16 32 64"
step_seconds=10
payers=10000
keep_services=no
while (($#)); do
  case $1 in
    --baseline-only) run_server=no ;;
    --server-only) run_baseline=no ;;
    --duration) duration=$2; shift ;;
    --clients) clients=$2; shift ;;
    --step-seconds) step_seconds=$2; shift ;;
    --payers) payers=$2; shift ;;
    --keep-services) keep_services=yes ;;
    *) echo "bench: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

var_dir=var/bench
out=bench/out
pg_port=55434
redis_port=56381
http_port=18480
mkdir -p "$out"
# A server left running on the benchmark's port would take the server part's place: refuse early,
# before the baseline's minutes are spent.
if [[ $run_server == yes ]] && (exec 3<>"/dev/tcp/127.0.0.1/$http_port") 2>/dev/null; then
  echo "bench: port $http_port is in use (a server from an earlier run?); stop it first" >&2
  exit 1
fi
# Other work on this machine changes every figure; the report states the load it ran under.
cp /proc/loadavg "$out/load-start.txt"

bash scripts/install-deps.sh
bash scripts/services.sh start "$var_dir" "$pg_port" "$redis_port" --huge-pages
if [[ $keep_services == no ]]; then
  trap 'bash scripts/services.sh stop "$var_dir"' EXIT
fi


# ---------------------------------------------------------------------------------------------
# Part 1: the classic row-lock design under pgbench.
# ---------------------------------------------------------------------------------------------

# Checks the baseline's own invariants after a run: the closed system still sums to zero, every
# cached balance equals the sum of its entries, and no ordinary account is negative.
check_baseline() {
  local bad
  bad=$(psql_admin -d baseline -At <<'SQL'
SELECT (SELECT coalesce(sum(balance), 0) FROM account) <> 0
    OR EXISTS (SELECT 1 FROM account a
                 LEFT JOIN (SELECT account_id, sum(amount) AS s FROM ledger_entry GROUP BY 1) e
                   ON e.account_id = a.id
                WHERE a.balance <> coalesce(e.s, 0))
    OR EXISTS (SELECT 1 FROM account WHERE balance < 0 AND NOT allow_negative);
SQL
)
  [[ $bad == f ]]
}

# p50, p99 and max in ms from pgbench's per-transaction logs, whose third column is the latency in us.
log_percentiles() {
  python3 - "$@" <<'PY'
import sys
lat = []
for path in sys.argv[1:]:
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3:
                lat.append(int(parts[2]))
lat.sort()
def pct(p):
    if not lat:
        return 0.0
    i = min(len(lat) - 1, max(0, int(round(p / 100.0 * len(lat) + 0.5)) - 1))
    return lat[i] / 1000.0
print(f"{pct(50):.1f}\t{pct(99):.1f}\t{lat[-1] / 1000.0 if lat else 0:.1f}")
PY
}

if [[ $run_baseline == yes ]]; then
  psql_admin -d postgres -c "DROP DATABASE IF EXISTS baseline WITH (FORCE)" -c "CREATE DATABASE baseline"
  printf 'workload\tclients\ttps\tp50_ms\tp99_ms\tmax_ms\tfailed\tcommitted\tinvariants\n' > "$out/baseline.tsv"
  for workload in hot_merchant hot_merchant_16 payday uniform; do
    cat "bench/baseline/pick_$workload.sql" bench/baseline/transfer.sql > "$out/$workload.pgbench"
    for c in $clients; do
      echo "bench: baseline $workload, $c clients, ${duration}s" >&2
      psql_admin -d baseline -f bench/baseline/schema.sql >/dev/null 2>&1
      psql_admin -d baseline -f bench/baseline/fund.sql >/dev/null
      psql_admin -d baseline -c CHECKPOINT >/dev/null
      logdir="$out/pgbench-$workload-$c"
      rm -rf "$logdir" && mkdir -p "$logdir"
      pgbench -h 127.0.0.1 -p "$pg_port" -U postgres -n -M prepared -c "$c" -j 2 -T "$duration" \
        -f "$out/$workload.pgbench" -l --log-prefix="$logdir/tx" baseline > "$logdir/pgbench.out" 2>&1 \
        || { cat "$logdir/pgbench.out" >&2; exit 1; }
      tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$logdir/pgbench.out" | head -1)
      failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$logdir/pgbench.out" | head -1)
      percentiles=$(log_percentiles "$logdir"/tx*)
      invariants=ok
      check_baseline || invariants=BROKEN
      committed=$(psql_admin -d baseline -At -c "SELECT count(*) FROM journal_transaction WHERE type = 'TRANSFER'")
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$workload" "$c" "$tps" "$percentiles" "${failed:-0}" "$committed" \
        "$invariants" \
        >> "$out/baseline.tsv"
      echo "bench:   $tps transfers/s, p50/p99/max ms: $percentiles, invariants $invariants" >&2
    done
  done
fi

# ---------------------------------------------------------------------------------------------
# Part 2: the wallet server under wallet-loadgen.
# ---------------------------------------------------------------------------------------------


# Starts the server. Arguments: the per-user rate limit of money-moving requests per second, and
# whether to start from an empty database. The throughput runs set the limit far above what one
# principal sends (one employer pays every salary); the spike run keeps the default, so that 429
# shows up where it would in production. Reads (the verification's, all by the operator) are never
# the limit.
start_server() {
  local rate_per_second=$1 fresh=$2
  stop_server
  if [[ $fresh == fresh ]]; then
    bash scripts/services.sh reset-db "$var_dir"
    redis-cli -p "$redis_port" flushall >/dev/null
  fi
  (
    set -a
    # shellcheck disable=SC1091
    source "$var_dir/services.env"
    set +a
    export WALLET_AUTH_BOOTSTRAP_KEY=$operator_key
    export WALLET_RATELIMIT_RATE_PER_SECOND=$rate_per_second
    export WALLET_RATELIMIT_BURST=$((rate_per_second * 2))
    export WALLET_RATELIMIT_READ_RATE_PER_SECOND=1000000
    export WALLET_RATELIMIT_READ_BURST=2000000
    export WALLET_LOG_LEVEL=warn
    if [[ $fresh == fresh && -x build-bench/tools/admin/wallet-admin ]]; then
      build-bench/tools/admin/wallet-admin migrate
    fi
    exec "$server_bin" --http-port "$http_port"
  ) >> "$out/server.log" 2>&1 &
  server_pid=$!
  wait_until_ready "$http_port" "$out/server.log"
}

# The load generator runs at a higher scheduling priority: it needs little CPU (a few percent of a
# core at these rates) but needs it on time, and on two cores shared with the server and
# PostgreSQL it would otherwise send late and understate the load (it reports its own send lag).
loadgen() {
  nice -n -10 build-bench/tools/loadgen/wallet-loadgen --host 127.0.0.1 --port "$http_port" \
    --operator-key "$operator_key" --quiet "${verify_args[@]}" "$@"
}

if [[ $run_server == yes ]]; then
  server_bin=${BENCH_SERVER_BIN:-build-bench/tools/server/wallet-server}
  verify_args=()
  targets=(wallet-server wallet-loadgen)
  [[ -n ${BENCH_SERVER_BIN:-} ]] && targets=(wallet-loadgen "$(basename "$server_bin")")
  build_release build-bench "$out/build.log" "${targets[@]}"
  if [[ -z ${BENCH_SERVER_BIN:-} ]]; then
    ninja -j2 -C build-bench wallet-admin >> "$out/build.log" 2>&1 || true
    # Acknowledged transactions are checked with one query per 2,000 ids instead of one GET each:
    # the spike alone acknowledges hundreds of thousands.
    verify_args=(--database-url "$(sed -n 's/^WALLET_DATABASE_URL=//p' "$var_dir/services.env")")
  fi
  operator_key="bench-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  : > "$out/server.log"
  trap 'stop_server; if [[ $keep_services == no ]]; then bash scripts/services.sh stop "$var_dir"; fi' EXIT

  # The same three workloads as the baseline: payments into one hot merchant, salaries from one
  # hot employer, P2P among many accounts. Each finds the highest open-loop rate whose p99 stays
  # within 100 ms, stepping the rate up by half each step and refining between the last good and
  # the first bad rate.
  #
  # Then, on the same server and setup, the CPU each process spends per transfer (server,
  # PostgreSQL, load generator, Redis) at a fixed open-loop rate: 6,000/s, or three quarters of the
  # capacity found when that is less, so that runs on this machine compare at the same rate. The
  # processes' /proc ticks are read over 10 s of a 15 s run.
  rm -f "$out"/cpu-*.txt
  for workload in hot-merchant payday p2p; do
    echo "bench: server $workload" >&2
    start_server 1000000 fresh
    rm -rf "$out/server-$workload" "$out/setup-$workload.json"
    loadgen --workload "$workload" --accounts "$payers" --hot-shards 16 --mode search \
      --search-start-rate 200 --search-step-factor 1.5 --search-refine 3 \
      --search-step-seconds "$step_seconds" --p99-target-ms 100 --connections 512 \
      --setup-file "$out/setup-$workload.json" \
      --out-dir "$out/server-$workload" > "$out/server-$workload.txt" \
      || echo "bench: loadgen reported FAIL for $workload (see $out/server-$workload.txt)" >&2
    [[ $workload == p2p ]] && continue
    best=$(jq -r '.search.best_achieved // 0' "$out/server-$workload/summary.json" 2>/dev/null || echo 0)
    cpu_rate=$(python3 -c "print(min(6000, int(float('$best') * 3 / 4)))")
    if ((cpu_rate > 0)); then
      echo "bench: CPU per transfer, $workload at $cpu_rate/s" >&2
      rm -rf "$out/cpu-run-$workload"
      loadgen --workload "$workload" --accounts "$payers" --hot-shards 16 --setup-file "$out/setup-$workload.json" \
        --mode open --rate "$cpu_rate" --duration 15 --connections 512 --no-verify \
        --out-dir "$out/cpu-run-$workload" > "$out/cpu-run-$workload.txt" &
      cpu_loadgen=$!
      sleep 3
      cpu_snapshot > "$out/cpu-before.txt"
      sleep 10
      cpu_snapshot > "$out/cpu-after.txt"
      wait "$cpu_loadgen" || true
      { echo "rate $cpu_rate"; cpu_per_request "$out/cpu-before.txt" "$out/cpu-after.txt" 10 "$cpu_rate"; } \
        > "$out/cpu-$workload.txt"
    fi
  done

  # Spikes against the measured capacity C, the best hot-merchant rate within p99 100 ms above:
  # from a base of 0.1 C, ten times that (a peak of C), then fifteen times (an overload of 1.5 C,
  # with a 2 s client deadline: every answer must be a 201, 429 or 503, none a timeout). Both with
  # the server's default per-user rate limit and retries after Retry-After. The setup is made first
  # with the limit lifted (10,000 principals through one operator key would take minutes at 100/s),
  # then the server restarts on the same database with the default limit.
  capacity=$(jq -r '.search.best_achieved // 0' "$out/server-hot-merchant/summary.json" 2>/dev/null || echo 0)
  base_rate=$(python3 -c "print(max(50, int(float('$capacity') / 10)))")
  rm -rf "$out"/server-spike* "$out/spike-setup.json"
  start_server 1000000 fresh
  loadgen --workload hot-merchant --accounts "$payers" --hot-shards 16 --setup-only \
    --setup-file "$out/spike-setup.json"
  start_server 100 same-database
  for multiplier in 10 15; do
    echo "bench: server spike, capacity $capacity/s, base $base_rate/s, x$multiplier" >&2
    deadline=()
    [[ $multiplier == 15 ]] && deadline=(--timeout-ms 2000)
    loadgen --workload hot-merchant --accounts "$payers" --hot-shards 16 --setup-file "$out/spike-setup.json" \
      --mode open --profile spike --rate "$base_rate" --spike-multiplier "$multiplier" --spike-start 15 \
      --spike-duration 10 --spike-ramp-seconds 2 --duration 60 --connections 2048 --retries "${deadline[@]}" \
      --out-dir "$out/server-spike-x$multiplier" > "$out/server-spike-x$multiplier.txt" \
      || echo "bench: loadgen reported FAIL for the x$multiplier spike (see $out/server-spike-x$multiplier.txt)" >&2
    echo "$capacity" > "$out/server-spike-x$multiplier/capacity.txt"
  done
  stop_server
fi

python3 bench/report.py "$out" bench/RESULTS.md
echo "bench: wrote bench/RESULTS.md" >&2
