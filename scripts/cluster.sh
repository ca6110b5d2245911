#!/usr/bin/env bash
# Several wallet-server nodes on one ledger, with HAProxy in front, all on loopback
# (docs/scaling.md): for trying failover and for the multi-node tests and bench.
#
#   scripts/cluster.sh start N [--base-port P]   # HAProxy on P (default 8080), nodes on P+1..P+N
#   scripts/cluster.sh stop
#   scripts/cluster.sh status
#   scripts/cluster.sh stop-node I [SIGNAL]      # SIGTERM by default; waits for the exit
#   scripts/cluster.sh start-node I              # starts node I again, waits for /readyz and
#                                                # until the partitions are split anew
#
# Node I (1..N) is `nodeI`: HTTP on 127.0.0.1:(P+I), its cluster (CAF middleman) port on
# 127.0.0.1:(P+100+I). The nodes share the private PostgreSQL and Redis of scripts/services.sh
# under var/cluster (ports WALLET_CLUSTER_PG_PORT, default 55442, and WALLET_CLUSTER_REDIS_PORT,
# default 56389), unless WALLET_DATABASE_URL / WALLET_REDIS_URL point elsewhere. Every WALLET_*
# variable of the environment reaches every node (e.g. WALLET_CLUSTER_LEASE_TTL_MS). State,
# logs and pid files live in var/cluster (WALLET_CLUSTER_VAR to move it). The binaries come from
# build-release, built as scripts/run.sh does (WALLET_BUILD_DIR for another build directory,
# WALLET_CLUSTER_NO_BUILD=1 to use it as it is).
set -euo pipefail
cd "$(dirname "$0")/.."

command=${1:-}
var_dir=${WALLET_CLUSTER_VAR:-var/cluster}
build_dir=${WALLET_BUILD_DIR:-build-release}
mkdir -p "$var_dir"
var_dir=$(cd "$var_dir" && pwd)

usage() {
  sed -n '5,10p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

die() { echo "cluster.sh: $*" >&2; exit 1; }

# Waits (up to a generous bound) until a command succeeds.
wait_for() {
  local what=$1 bound_s=$2
  shift 2
  local deadline=$((SECONDS + bound_s))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "$what did not happen within ${bound_s}s"
    sleep 0.2
  done
}

load_state() {
  [[ -s $var_dir/cluster.env ]] || die "no cluster under $var_dir (scripts/cluster.sh start N)"
  # shellcheck disable=SC1091
  source "$var_dir/cluster.env"
  set -a
  # shellcheck disable=SC1091
  source "$var_dir/services.env"
  set +a
  if [[ -n ${own_database_url:-} ]]; then
    export WALLET_DATABASE_URL=$own_database_url WALLET_DATABASE_OWNER_URL=$own_database_owner_url
  fi
  if [[ -n ${own_redis_url:-} ]]; then export WALLET_REDIS_URL=$own_redis_url; fi
  WALLET_AUTH_BOOTSTRAP_KEY=$(cat "$var_dir/operator.key")
  export WALLET_AUTH_BOOTSTRAP_KEY
}

pid_alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

node_ready() { curl -fsS -m 2 "http://127.0.0.1:$((base_port + $1))/readyz"; }

start_node() {
  local i=$1
  pid_alive "$var_dir/node$i.pid" && die "node$i is already running (pid $(cat "$var_dir/node$i.pid"))"
  WALLET_HTTP_HOST=127.0.0.1 WALLET_HTTP_PORT=$((base_port + i)) \
    WALLET_CLUSTER_ENABLED=true WALLET_CLUSTER_NODE_ID=node$i \
    WALLET_CLUSTER_ADVERTISE_ADDRESS=127.0.0.1:$((base_port + 100 + i)) \
    WALLET_HTTP_TRUSTED_PROXIES=${WALLET_HTTP_TRUSTED_PROXIES-127.0.0.1} \
    WALLET_HTTP_SHUTDOWN_DRAIN_MS=${WALLET_HTTP_SHUTDOWN_DRAIN_MS-30000} \
    WALLET_RATELIMIT_PROCESSES_MAX=${WALLET_RATELIMIT_PROCESSES_MAX-$((nodes > 4 ? nodes : 4))} \
    setsid "$build_dir/tools/server/wallet-server" >>"$var_dir/node$i.log" 2>&1 </dev/null &
  echo $! > "$var_dir/node$i.pid"
  wait_for "node$i /readyz" 120 node_ready "$i"
}

# What HAProxy last logged of node I: UP (also when it logged nothing yet) or DOWN.
haproxy_state() {
  local last
  last=$(grep -o "wallet_nodes/node$1 is \(UP\|DOWN\)" "$var_dir/haproxy.log" 2>/dev/null | tail -n 1 || true)
  [[ $last == *DOWN ]] && echo DOWN || echo UP
}

# SIGTERM starts the node's drain (http.shutdown_drain_ms): it still serves while /readyz answers
# 503, until HAProxy has taken it out of rotation; a second SIGTERM then ends the drain, so that
# no connection closes under a request HAProxy sends it. It is sent once the node's /readyz no
# longer answers 200 (two signals sent at once may arrive as one). Other signals are sent once.
stop_node() {
  local i=$1 signal=${2:-TERM} pid out_by
  pid_alive "$var_dir/node$i.pid" || { rm -f "$var_dir/node$i.pid"; return 0; }
  pid=$(cat "$var_dir/node$i.pid")
  kill -s "$signal" "$pid"
  if [[ $signal == TERM ]]; then
    out_by=$((SECONDS + 60))
    while kill -0 "$pid" 2>/dev/null && node_ready "$i" >/dev/null 2>&1 && ((SECONDS < out_by)); do
      sleep 0.05
    done
    if pid_alive "$var_dir/haproxy.pid"; then
      while kill -0 "$pid" 2>/dev/null && [[ $(haproxy_state "$i") == UP ]] && ((SECONDS < out_by)); do
        sleep 0.1
      done
    fi
    kill -TERM "$pid" 2>/dev/null || true
  fi
  local deadline=$((SECONDS + 60))
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      echo "cluster.sh: node$i (pid $pid) still runs 60s after SIG$signal; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    sleep 0.1
  done
  rm -f "$var_dir/node$i.pid"
}

haproxy_config() {
  # deploy/haproxy.cfg as written, with its server lines (the last section's) replaced by ours.
  grep -v '^ *server ' deploy/haproxy.cfg
  local i
  for ((i = 1; i <= nodes; i++)); do
    echo "  server node$i 127.0.0.1:$((base_port + i))"
  done
}

haproxy_ready() {
  pid_alive "$var_dir/haproxy.pid" || die "HAProxy exited: $(tail -n 5 "$var_dir/haproxy.log")"
  curl -fsS -m 2 "http://127.0.0.1:$base_port/readyz"
}

start_haproxy() {
  command -v haproxy >/dev/null || die "haproxy is not installed (scripts/install-deps.sh)"
  haproxy_config > "$var_dir/haproxy.cfg"
  # A new log: stop_node reads the nodes' states in it (an earlier run's would mislead it).
  if [[ -s $var_dir/haproxy.log ]]; then mv "$var_dir/haproxy.log" "$var_dir/haproxy.log.1"; fi
  HAPROXY_BIND=127.0.0.1:$base_port haproxy -c -q -f "$var_dir/haproxy.cfg"
  HAPROXY_BIND=127.0.0.1:$base_port setsid haproxy -db -f "$var_dir/haproxy.cfg" \
    >>"$var_dir/haproxy.log" 2>&1 </dev/null &
  echo $! > "$var_dir/haproxy.pid"
  wait_for "HAProxy on 127.0.0.1:$base_port" 60 haproxy_ready
}

leases() {
  psql -X -At "$WALLET_DATABASE_URL" -c "SELECT COALESCE(node_id, '(none)') || ' ' || count(*)
    FROM partition_lease WHERE expires_at > now() OR node_id IS NULL GROUP BY node_id ORDER BY 1" 2>/dev/null || true
}

# Every partition held by a live lease, and every running node holding its share at most
# (ceil(P / nodes)) and at least one: until then a node may still be handing partitions over,
# and debits of those are answered 503 not_partition_owner.
partitions_settled() {
  local running=0 i
  for ((i = 1; i <= nodes; i++)); do pid_alive "$var_dir/node$i.pid" && running=$((running + 1)); done
  ((running > 0)) || return 1
  psql -X -At -v ON_ERROR_STOP=1 "$WALLET_DATABASE_URL" -c "
    WITH held AS (SELECT node_id, count(*) AS n FROM partition_lease
                  WHERE node_id IS NOT NULL AND expires_at > now() GROUP BY node_id),
         total AS (SELECT count(*) AS p FROM partition_lease)
    SELECT (SELECT count(*) FROM held) = $running
       AND (SELECT sum(n) FROM held) = (SELECT p FROM total)
       AND (SELECT max(n) FROM held) <= ((SELECT p FROM total) + $running - 1) / $running" | grep -qx t
}

case $command in
  start)
    nodes=${2:-}
    [[ $nodes =~ ^[1-9][0-9]*$ ]] || usage
    base_port=8080
    if [[ ${3:-} == --base-port ]]; then
      base_port=${4:?--base-port needs a port}
    elif [[ -n ${3:-} ]]; then
      usage
    fi
    for f in "$var_dir"/node*.pid "$var_dir/haproxy.pid"; do
      pid_alive "$f" && die "a cluster is already running under $var_dir (scripts/cluster.sh stop)"
    done
    if [[ ${WALLET_CLUSTER_NO_BUILD:-0} != 1 ]]; then
      bash scripts/install-deps.sh
      cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
      ninja -C "$build_dir" wallet-server wallet-admin
    fi
    WALLET_SERVICES_SKIP_PG=${WALLET_DATABASE_URL:-} WALLET_SERVICES_SKIP_REDIS=${WALLET_REDIS_URL:-} \
      bash scripts/services.sh start "$var_dir" "${WALLET_CLUSTER_PG_PORT:-55442}" "${WALLET_CLUSTER_REDIS_PORT:-56389}"
    if [[ ! -s $var_dir/operator.key ]]; then
      echo "wk_op_$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" > "$var_dir/operator.key"
      chmod 600 "$var_dir/operator.key"
    fi
    cat > "$var_dir/cluster.env" <<ENV
nodes=$nodes
base_port=$base_port
own_database_url=$(printf %q "${WALLET_DATABASE_URL:-}")
own_database_owner_url=$(printf %q "${WALLET_DATABASE_OWNER_URL:-${WALLET_DATABASE_URL:-}}")
own_redis_url=$(printf %q "${WALLET_REDIS_URL:-}")
ENV
    load_state
    # Migrations once, before any node starts, so that the nodes do not race to apply them.
    "$build_dir/tools/admin/wallet-admin" migrate >/dev/null
    for ((i = 1; i <= nodes; i++)); do start_node "$i"; done
    wait_for "the partitions' split among the nodes" 120 partitions_settled
    start_haproxy
    cat <<MSG

  $nodes nodes behind HAProxy: http://127.0.0.1:$base_port
  Nodes: http://127.0.0.1:$((base_port + 1)) .. http://127.0.0.1:$((base_port + nodes)) (logs in $var_dir)

  Operator API key (kept in $var_dir/operator.key):
    $WALLET_AUTH_BOOTSTRAP_KEY

  scripts/cluster.sh status | stop

MSG
    ;;
  stop)
    [[ -s $var_dir/cluster.env ]] || exit 0
    load_state
    if pid_alive "$var_dir/haproxy.pid"; then
      kill -TERM "$(cat "$var_dir/haproxy.pid")"
    fi
    rm -f "$var_dir/haproxy.pid"
    for ((i = 1; i <= nodes; i++)); do stop_node "$i" TERM; done
    if [[ -z ${own_database_url:-} || -z ${own_redis_url:-} ]]; then
      bash scripts/services.sh stop "$var_dir"
    fi
    rm -f "$var_dir/cluster.env"
    ;;
  status)
    load_state
    echo "HAProxy http://127.0.0.1:$base_port: $(pid_alive "$var_dir/haproxy.pid" && echo running || echo stopped)"
    for ((i = 1; i <= nodes; i++)); do
      state=stopped
      if pid_alive "$var_dir/node$i.pid"; then
        state="running, $(node_ready "$i" >/dev/null 2>&1 && echo ready || echo 'not ready')"
      fi
      echo "node$i http://127.0.0.1:$((base_port + i)): $state"
    done
    echo "partitions held (node count):"
    leases | sed 's/^/  /'
    ;;
  stop-node | start-node)
    i=${2:-}
    load_state
    [[ $i =~ ^[0-9]+$ ]] && ((i >= 1 && i <= nodes)) || die "node number must be 1..$nodes"
    if [[ $command == stop-node ]]; then
      stop_node "$i" "${3:-TERM}"
    else
      start_node "$i"
      wait_for "the partitions' split among the nodes" 120 partitions_settled
    fi
    ;;
  *) usage ;;
esac
