#!/usr/bin/env bash
# Proves that three wallet-server nodes behind HAProxy (scripts/cluster.sh, deploy/haproxy.cfg)
# keep the ledger exact under wallet-loadgen: each workload verifies PASS (every 201 exactly
# once, money conserved, reconciliation clean); a node killed with SIGKILL mid-run has its
# partitions taken over and the run still verifies PASS; and a rolling restart of all three
# nodes under load gives no server error but 503 with Retry-After, and verifies PASS.
#
#   tests/deploy/cluster_load.sh SOURCE_DIR BUILD_DIR
#
# It runs on the test services of the environment (WALLET_DATABASE_URL, WALLET_DATABASE_OWNER_URL,
# WALLET_REDIS_URL, as scripts/test.sh or scripts/services.sh env set them). Every wait is on a
# condition, with a generous bound; no assertion is on speed.
set -euo pipefail
src=$(cd "${1:?usage: cluster_load.sh SOURCE_DIR BUILD_DIR}" && pwd)
build=$(cd "${2:?BUILD_DIR missing}" && pwd)
: "${WALLET_DATABASE_URL:?the test services are not in the environment (scripts/services.sh env)}"
: "${WALLET_DATABASE_OWNER_URL:?WALLET_DATABASE_OWNER_URL missing}"
: "${WALLET_REDIS_URL:?WALLET_REDIS_URL missing}"
loadgen=$build/tools/loadgen/wallet-loadgen
for bin in "$build/tools/server/wallet-server" "$build/tools/admin/wallet-admin" "$loadgen"; do
  [[ -x $bin ]] || { echo "FAIL: $bin is not built" >&2; exit 1; }
done

work=$(mktemp -d /tmp/wallet-cluster-load.XXXXXX)
export WALLET_CLUSTER_VAR=$work/cluster WALLET_BUILD_DIR=$build WALLET_CLUSTER_NO_BUILD=1
cluster() { bash "$src/scripts/cluster.sh" "$@"; }
loadgen_pids=()
cleanup() {
  local status=$?
  for pid in "${loadgen_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  pkill -KILL -f -- "--out-dir $work/" 2>/dev/null || true
  cluster stop >/dev/null 2>&1 || echo "warning: the cluster did not stop cleanly" >&2
  if ((status != 0)); then
    echo "---- logs kept in $work" >&2
    tail -n 30 "$work"/cluster/node*.log >&2 2>/dev/null || true
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

# The partition count and lease timing of the cluster suites of this build (tests/cluster):
# a dead node's partitions are taken over within TTL + renew interval = 1.8 s.
partitions=16 ttl_ms=1500 renew_ms=300
export WALLET_CLUSTER_PARTITIONS=$partitions WALLET_CLUSTER_LEASE_TTL_MS=$ttl_ms WALLET_CLUSTER_LEASE_RENEW_MS=$renew_ms
# As every suite's server: rate limits out of the way of the load generator.
export WALLET_RATELIMIT_RATE_PER_SECOND=1000000 WALLET_RATELIMIT_BURST=1000000 \
  WALLET_RATELIMIT_READ_RATE_PER_SECOND=1000000 WALLET_RATELIMIT_READ_BURST=1000000 \
  WALLET_AUTH_UNAUTHENTICATED_PER_SECOND=1000000 WALLET_AUTH_UNAUTHENTICATED_BURST=1000000 \
  WALLET_AUTH_UNKNOWN_ACCOUNTS_PER_SECOND=1000000 WALLET_AUTH_UNKNOWN_ACCOUNTS_BURST=1000000
export WALLET_LOG_LEVEL=${WALLET_LOG_LEVEL:-warn}

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
sql() { psql -X -At -v ON_ERROR_STOP=1 "$WALLET_DATABASE_OWNER_URL" -c "$1"; }

# Waits until a command succeeds, polling; false after the bound.
eventually() {
  local bound_s=$1
  shift
  local deadline=$((SECONDS + bound_s))
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

# Nobody holds anything: leases a killed node of another suite left are cleared first.
sql "UPDATE partition_lease SET node_id = NULL, expires_at = '-infinity'; DELETE FROM cluster_node" >/dev/null

base_port=$(python3 -c '
import socket
# A run of 200 free ports for HAProxy, the nodes and their cluster ports.
for base in range(20000, 60000, 211):
    try:
        socks = []
        for p in (base, base + 1, base + 2, base + 3, base + 101, base + 102, base + 103):
            s = socket.socket(); s.bind(("127.0.0.1", p)); socks.append(s)
        print(base); break
    except OSError:
        pass
')
url_port=$base_port

# Every partition held by a live lease, and each of the given nodes holding its share at most
# (ceil(P / nodes)) and at least one.
settled() {
  local nodes=("$@") share
  share=$(((partitions + ${#nodes[@]} - 1) / ${#nodes[@]}))
  local rows
  rows=$(sql "SELECT node_id, count(*) FROM partition_lease WHERE node_id IS NOT NULL AND expires_at > now()
              GROUP BY node_id ORDER BY node_id") || return 1
  local total=0 seen=0 node count
  while IFS='|' read -r node count; do
    [[ -z $node ]] && continue
    local known=0
    for n in "${nodes[@]}"; do [[ $n == "$node" ]] && known=1; done
    ((known == 1 && count <= share)) || return 1
    total=$((total + count)) seen=$((seen + 1))
  done <<< "$rows"
  ((total == partitions && seen == ${#nodes[@]}))
}

# wallet-loadgen through HAProxy; its summary is in $work/NAME/summary.json.
run_loadgen() {
  local name=$1 workload=$2 seconds=$3 rate=$4
  "$loadgen" --host 127.0.0.1 --port "$url_port" --operator-key "$WALLET_AUTH_BOOTSTRAP_KEY" \
    --workload "$workload" --accounts 200 --hot-shards 4 --rate "$rate" --duration "$seconds" \
    --retries --retries-max 20 --retry-after-max 2 --connections 64 --timeout-ms 15000 --drain-timeout 120 \
    --database-url "$WALLET_DATABASE_URL" --out-dir "$work/$name" --quiet --seed 17 \
    >"$work/$name.out" 2>"$work/$name.err"
}

# PASS, and no answer of the server or of HAProxy, first or retried, was a 5xx other than 503
# with Retry-After (a refused or reset connection is an unknown outcome, replayed by loadgen).
check_run() {
  local name=$1 status=$2 allow_errors=$3
  if ((status != 0)); then
    fail "$name: wallet-loadgen exited $status"
    tail -n 40 "$work/$name.out" >&2 || true
    tail -n 20 "$work/$name.err" >&2 || true
    return
  fi
  python3 - "$work/$name/summary.json" "$name" "$allow_errors" <<'PY' || fail "$name: summary checks"
import json, sys
summary = json.load(open(sys.argv[1]))
name, allow_errors = sys.argv[2], sys.argv[3] == "yes"
ok = True
def bad(msg):
    global ok
    ok = False
    print(f"FAIL: {name}: {msg}", file=sys.stderr)
if not summary.get("verify", {}).get("pass"):
    bad(f"verification did not pass: {summary.get('verify')}")
attempts = summary.get("every_attempt", {})
if attempts.get("201", 0) == 0:
    bad(f"no transfer was accepted: {attempts}")
for cls, count in attempts.items():
    if cls.startswith("5") and cls != "503":
        bad(f"{count} answers {cls!r} (only 503 with Retry-After is allowed)")
    if cls.startswith("error") and not allow_errors:
        bad(f"{count} transport errors {cls!r} with no node down")
print(f"{name}: PASS; answers {attempts}; unknown outcomes {summary.get('unknown_outcomes')}")
if not ok:
    sys.exit(1)
PY
}

echo "== three nodes behind HAProxy"
cluster start 3 --base-port "$base_port" > "$work/start.out"
WALLET_AUTH_BOOTSTRAP_KEY=$(cat "$WALLET_CLUSTER_VAR/operator.key")
export WALLET_AUTH_BOOTSTRAP_KEY
eventually 60 settled node1 node2 node3 || fail "three nodes did not split the partitions: $(sql 'SELECT node_id, count(*) FROM partition_lease GROUP BY 1')"
grep -q "http://127.0.0.1:$base_port" "$work/start.out" || fail "cluster.sh start did not print the HAProxy URL"
grep -q "$WALLET_AUTH_BOOTSTRAP_KEY" "$work/start.out" || fail "cluster.sh start did not print the operator key"

echo "== each workload through HAProxy"
for workload in hot-merchant payday p2p; do
  status=0
  run_loadgen "$workload" "$workload" 6 150 || status=$?
  check_run "$workload" "$status" no
done

# Round-robin sent two debits in three to a node that does not hold the payer: the forwarding
# path carried them.
forwarded=0
for i in 1 2 3; do
  n=$(curl -fsS -m 5 "http://127.0.0.1:$((base_port + i))/metrics" |
    awk '$1 ~ /^wallet_cluster_forwarded_requests_total/ { s += $2 } END { printf "%d", s }')
  forwarded=$((forwarded + n))
done
echo "requests forwarded between nodes so far: $forwarded"
((forwarded > 0)) || fail "no request was forwarded between the nodes"

echo "== SIGKILL of one node mid-run"
status_file=$work/kill.status
(
  s=0
  run_loadgen kill p2p 20 150 || s=$?
  echo "$s" > "$status_file"
) &
loadgen_pids+=($!)
# Mid-run: once the run has committed transfers of its own (its setup has ended).
before=$(sql "SELECT count(*) FROM journal_transaction")
eventually 120 bash -c "(( \$(psql -X -At '$WALLET_DATABASE_OWNER_URL' -c 'SELECT count(*) FROM journal_transaction') > $before + 1000 ))" \
  || fail "the kill run did not get going"
held_by_2=$(sql "SELECT count(*) FROM partition_lease WHERE node_id = 'node2'")
epochs_of_2=$(sql "SELECT partition || '|' || epoch FROM partition_lease WHERE node_id = 'node2'")
killed_at=$(date +%s.%N)
cluster stop-node 2 KILL
if eventually 120 settled node1 node3; then
  took=$(python3 -c "import time; print(f'{time.time() - $killed_at:.2f}')")
  echo "node2's $held_by_2 partitions taken over ${took}s after SIGKILL (design bound: TTL + renew = $(((ttl_ms + renew_ms)))ms, plus one round)"
  # Each was taken over at a higher epoch, so the fence refuses anything decided under node2's.
  while IFS='|' read -r partition epoch; do
    now_epoch=$(sql "SELECT epoch FROM partition_lease WHERE partition = $partition")
    ((now_epoch > epoch)) || fail "partition $partition was taken over at epoch $now_epoch, not above $epoch"
  done <<< "$epochs_of_2"
else
  fail "node2's partitions were not taken over by node1 and node3"
fi
eventually 300 test -s "$status_file" || fail "the kill run did not end"
check_run kill "$(cat "$status_file")" yes
cluster start-node 2
eventually 60 settled node1 node2 node3 || fail "node2 did not get its share back"

echo "== rolling restart under load"
status_file=$work/rolling.status
(
  s=0
  # Long enough for any machine's three restarts: the run is ended early below (SIGINT).
  run_loadgen rolling hot-merchant 600 150 || s=$?
  echo "$s" > "$status_file"
) &
loadgen_pids+=($!)
before=$(sql "SELECT count(*) FROM journal_transaction")
eventually 120 bash -c "(( \$(psql -X -At '$WALLET_DATABASE_OWNER_URL' -c 'SELECT count(*) FROM journal_transaction') > $before + 500 ))" \
  || fail "the rolling run did not get going"
for i in 1 2 3; do
  [[ -s $status_file ]] && { fail "the load ended before node$i was restarted"; break; }
  cluster stop-node "$i" TERM
  cluster start-node "$i"
  eventually 60 settled node1 node2 node3 || fail "partitions did not settle after restarting node$i"
  echo "node$i restarted, partitions settled"
done
# More load on the three restarted nodes, then the load ends early: what was sent is resolved
# and verified as at the end of its schedule.
before=$(sql "SELECT count(*) FROM journal_transaction")
eventually 120 bash -c "(( \$(psql -X -At '$WALLET_DATABASE_OWNER_URL' -c 'SELECT count(*) FROM journal_transaction') > $before + 500 ))" \
  || fail "the rolling run did not go on after the restarts"
pkill -INT -f -- "--out-dir $work/rolling " || fail "the rolling run's wallet-loadgen was not found"
eventually 300 test -s "$status_file" || fail "the rolling run did not end"
grep -q "ended early by a signal" "$work/rolling.out" || fail "the rolling run did not end on its SIGINT"
check_run rolling "$(cat "$status_file")" no

if ((failures > 0)); then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "cluster load: PASS"
