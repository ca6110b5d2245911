#!/usr/bin/env bash
# The sanitizer runs (not part of the test command: a full build each and several times slower).
#
#   scripts/sanitize.sh [asan|tsan|all]      (default all)
#
# asan: builds every target in build-asan/ with AddressSanitizer + UndefinedBehaviorSanitizer
#       (-DWALLET_SANITIZE=address) and runs every CTest suite, the fuzz corpus replays included,
#       but deploy_checks (it compares what the binaries link with the Dockerfile, and sanitized
#       binaries carry the sanitizer runtimes). LeakSanitizer runs at every exit, with
#       scripts/lsan.supp for the one leak libpqxx makes by itself.
# tsan: builds in build-tsan/ with ThreadSanitizer (-DWALLET_SANITIZE=thread) and runs every suite
#       that has more than one thread (all but the pure unit suites of ledger/, config/ and the
#       input code, and the fuzz replays), with scripts/tsan.supp for what libcaf_core does with
#       its own memory.
# Both then put a sanitized wallet-server under wallet-loadgen load and send it SIGTERM mid-load,
# three times: it must exit 0 and the ledger must reconcile.
#
# The suites start wallet-server, wallet-admin and wallet-loadgen from the same build, so they run
# sanitized too. Every sanitizer report, of any process, goes to a file of its own under
# var/sanitize/logs/<kind>/<suite>/ (log_path): a suite with any such file fails, whatever its
# tests said. Private PostgreSQL and Redis under var/sanitize (ports 55483 and 56420, or
# WALLET_SANITIZE_PG_PORT / WALLET_SANITIZE_REDIS_PORT). Exits non-zero on any finding; the
# summary (pass/fail, reports and wall time of each build and run) is also written to
# var/sanitize/summary.txt. WALLET_SANITIZE_JOBS sets the build's parallelism (default 2);
# WALLET_SANITIZE_ASAN_SUITES / WALLET_SANITIZE_TSAN_SUITES (space-separated) choose the suites.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

mode=${1:-all}
case $mode in
  asan | tsan | all) ;;
  *)
    echo "usage: scripts/sanitize.sh [asan|tsan|all]" >&2
    exit 2
    ;;
esac

jobs=${WALLET_SANITIZE_JOBS:-2}
var_dir=${WALLET_SANITIZE_VAR_DIR:-var/sanitize}
pg_port=${WALLET_SANITIZE_PG_PORT:-55483}
redis_port=${WALLET_SANITIZE_REDIS_PORT:-56420}

read -r -a asan_suites <<<"${WALLET_SANITIZE_ASAN_SUITES:-ledger_tests config_tests persistence_tests reconcile_tests \
actors_tests actors_deterministic_tests ratelimit_tests http_input_tests http_server_tests burst_tests ledger_e2e_tests \
hot_e2e_tests actor_e2e_tests reconcile_e2e_tests loadgen_tests chaos_tests fuzz_json_input_replay fuzz_amount_replay \
fuzz_url_replay fuzz_http_request_replay}"
read -r -a tsan_suites <<<"${WALLET_SANITIZE_TSAN_SUITES:-persistence_tests reconcile_tests actors_tests \
actors_deterministic_tests ratelimit_tests http_server_tests burst_tests ledger_e2e_tests hot_e2e_tests actor_e2e_tests \
reconcile_e2e_tests loadgen_tests chaos_tests}"
tools=(wallet-server wallet-admin wallet-loadgen)

summary=()
failed=0
ulimit -c 0  # a sanitizer's abort leaves its report in the log, not a core file

now() { date +%s.%N; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }
note() {
  summary+=("$1")
  echo "sanitize: $1"
}

sanitizer_env() {
  local kind=$1 logs=$2
  mkdir -p "$logs"
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:log_path=$logs/asan:strip_path_prefix=$root/"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$logs/ubsan:strip_path_prefix=$root/"
  export LSAN_OPTIONS="log_path=$logs/lsan:suppressions=$root/scripts/lsan.supp:print_suppressions=0"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=4:log_path=$logs/tsan:suppressions=$root/scripts/tsan.supp:strip_path_prefix=$root/"
  [[ $kind == tsan ]] || unset TSAN_OPTIONS
}

# Prints the sanitizer reports in a log directory to stderr and their count to stdout. A log
# file is a report when it holds an error, a warning or UBSan's "runtime error".
reports_in() {
  local logs=$1 count=0 f
  for f in "$logs"/asan.* "$logs"/ubsan.* "$logs"/lsan.* "$logs"/tsan.*; do
    [[ -s $f ]] || continue
    grep -qE 'ERROR: |WARNING: |runtime error' "$f" || continue
    count=$((count + 1))
    echo "----- sanitizer report $f" >&2
    cat "$f" >&2
  done
  echo "$count"
}

build() {
  local kind=$1 dir=$2 flag=$3
  shift 3
  local started
  started=$(now)
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g -DNDEBUG" -DWALLET_SANITIZE="$flag" >/dev/null
  if ! nice ninja -C "$dir" -j"$jobs" "$@"; then
    note "$kind build FAILED after $(seconds_since "$started") s"
    return 1
  fi
  note "$kind build ($dir) $(seconds_since "$started") s"
}

# The live processes of a process group (zombies, left for their parent to reap, are not).
group_members() { ps -eo pid=,pgid=,stat=,args= | awk -v g="$1" '$2 == g && $3 !~ /^Z/'; }

run_suite() {
  local kind=$1 dir=$2 suite=$3
  local logs="$root/$var_dir/logs/$kind/$suite" started result=pass reports=0 left=""
  rm -rf "$logs"
  sanitizer_env "$kind" "$logs"
  started=$(now)
  # In a process group of its own (set -m): whatever the suite leaves running (a wallet-server
  # whose test process a sanitizer stopped before it could stop its children) is found and ended,
  # instead of going on using the database under the next suites (it once swept a later test's
  # hot account).
  set -m
  ctest --test-dir "$dir" -R "^${suite}\$" --output-on-failure --no-tests=error &
  local group=$! leftovers
  set +m
  wait "$group" || result=FAIL
  leftovers=$(group_members "$group" | wc -l)
  if ((leftovers > 0)); then
    result=FAIL
    left=", left $leftovers processes running"
    echo "sanitize: $suite left $leftovers processes running; ending them:" >&2
    group_members "$group" >&2
    kill -TERM -- "-$group" 2>/dev/null || true
    sleep 2
    kill -KILL -- "-$group" 2>/dev/null || true
  fi
  reports=$(reports_in "$logs")
  if ((reports > 0)); then result=FAIL; fi
  [[ $result == pass ]] || failed=1
  note "$kind $suite: $result, $reports sanitizer reports$left, $(seconds_since "$started") s"
}

# How many requests the server said were in flight when SIGTERM arrived.
in_flight() { sed -n 's/.*waiting up to [0-9]* ms for \([0-9]*\) requests in flight.*/\1/p' "$1/server.log" | head -1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# A sanitized wallet-server under wallet-loadgen load gets SIGTERM once it has committed a few
# hundred payments, while requests (rate-limit checks among them) are still on their way: it must
# exit 0 with no sanitizer report, and the ledger must reconcile afterwards.
shutdown_under_load() {
  local kind=$1 dir=$2 round=$3
  local logs="$root/$var_dir/logs/$kind/shutdown_under_load_$round" started result=pass reports why=""
  rm -rf "$logs"
  sanitizer_env "$kind" "$logs"
  started=$(now)
  local port key server loadgen="" rc=0 postings=0
  port=$(free_port)
  key="sanitize-operator-key-$$"
  WALLET_HTTP_PORT=$port WALLET_AUTH_BOOTSTRAP_KEY=$key WALLET_LEDGER_RECONCILE_INTERVAL_S=0 \
    "$dir/tools/server/wallet-server" >"$logs/server.log" 2>&1 &
  server=$!
  for _ in $(seq 1 600); do
    if curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then break; fi
    kill -0 "$server" 2>/dev/null || break
    sleep 0.2
  done
  if ! curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then
    why="the server did not become ready"
  else
    timeout 300 "$dir/tools/loadgen/wallet-loadgen" --port "$port" --operator-key "$key" --workload mix \
      --accounts 200 --hot-shards 4 --rate 300 --duration 60 --read-fraction 0.2 --no-verify --quiet \
      --drain-timeout 5 --out-dir "$logs/loadgen" >"$logs/loadgen.log" 2>&1 &
    loadgen=$!
    # The setup deposits once into each account (about 200 postings); the rest is the load.
    for _ in $(seq 1 1200); do
      postings=$(curl -s "http://127.0.0.1:$port/metrics" | awk '$1 == "wallet_writer_postings_total" { print $2 }')
      if ((${postings:-0} >= 600)); then break; fi
      kill -0 "$loadgen" 2>/dev/null || break
      sleep 0.1
    done
    if ((${postings:-0} < 600)); then why="the load never reached the server (postings: ${postings:-none})"; fi
  fi
  kill -TERM "$server" 2>/dev/null || true
  wait "$server" || rc=$?
  if [[ -n $loadgen ]]; then
    kill -TERM "$loadgen" 2>/dev/null || true
    wait "$loadgen" || true
  fi
  if [[ -z $why && $rc -ne 0 ]]; then why="wallet-server exited $rc after SIGTERM under load"; fi
  if [[ -z $why ]] && ! "$dir/tools/admin/wallet-admin" reconcile >"$logs/reconcile.log" 2>&1; then
    why="the ledger does not reconcile after the shutdown"
  fi
  reports=$(reports_in "$logs")
  if [[ -n $why ]] || ((reports > 0)); then
    result=FAIL
    failed=1
    echo "sanitize: shutdown under load: ${why:-sanitizer reports}; server log tail:" >&2
    tail -20 "$logs/server.log" >&2
  fi
  note "$kind shutdown under load, round $round (SIGTERM at ${postings:-0} postings, $(in_flight "$logs") requests in flight): $result, exit $rc, $reports sanitizer reports, $(seconds_since "$started") s"
}

services_started=no
start_services() {
  [[ $services_started == yes ]] && return
  trap 'bash scripts/services.sh stop "$var_dir"' EXIT
  bash scripts/services.sh start "$var_dir" "$pg_port" "$redis_port" --fast
  services_started=yes
  set -a
  # shellcheck disable=SC1091
  source "$var_dir/services.env"
  set +a
}

run_kind() {
  local kind=$1 dir=$2 flag=$3
  shift 3
  local suites=("$@") targets=("${tools[@]}") suite
  # A suite's executable has its name, but for the fuzz corpus replays (fuzz_<name>_replay runs
  # <name>_replay).
  for suite in "${suites[@]}"; do
    if [[ $suite == fuzz_*_replay ]]; then targets+=("${suite#fuzz_}"); else targets+=("$suite"); fi
  done
  if ! build "$kind" "$dir" "$flag" "${targets[@]}"; then
    failed=1
    return
  fi
  start_services
  bash scripts/services.sh reset-db "$var_dir"
  sanitizer_env "$kind" "$root/$var_dir/logs/$kind/migrate"
  "$dir/tools/admin/wallet-admin" migrate >/dev/null
  for suite in "${suites[@]}"; do run_suite "$kind" "$dir" "$suite"; done
  for round in 1 2 3; do shutdown_under_load "$kind" "$dir" "$round"; done
}

bash scripts/install-deps.sh
mkdir -p "$var_dir"
if [[ $mode == asan || $mode == all ]]; then run_kind asan build-asan address "${asan_suites[@]}"; fi
if [[ $mode == tsan || $mode == all ]]; then run_kind tsan build-tsan thread "${tsan_suites[@]}"; fi

echo
echo "sanitize: summary"
printf '  %s\n' "${summary[@]}" | tee "$var_dir/summary.txt"
if ((failed)); then
  echo "sanitize: FAILED" >&2
  exit 1
fi
echo "sanitize: clean"
