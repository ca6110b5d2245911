#!/usr/bin/env bash
# The run command: installs what is missing, builds wallet-server (Release), starts a private
# PostgreSQL and Redis under var/run (unless WALLET_DATABASE_URL / WALLET_REDIS_URL point
# elsewhere), applies migrations, and serves in the foreground on port 8080 (WALLET_HTTP_PORT).
# Ctrl-C or SIGTERM stops the server and the private services; the data stays in var/run.
# Arguments are passed to wallet-server (e.g. --log-format json); every WALLET_* variable of
# the environment reaches it.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build-release wallet-server wallet-admin

var_dir=var/run
mkdir -p "$var_dir"
own_pg=${WALLET_DATABASE_URL:+no}
own_redis=${WALLET_REDIS_URL:+no}
if [[ ${own_pg:-yes} == yes || ${own_redis:-yes} == yes ]]; then
  WALLET_SERVICES_SKIP_PG=${WALLET_DATABASE_URL:-} WALLET_SERVICES_SKIP_REDIS=${WALLET_REDIS_URL:-} \
    bash scripts/services.sh start "$var_dir" "${WALLET_RUN_PG_PORT:-55432}" "${WALLET_RUN_REDIS_PORT:-56379}"
  # shellcheck disable=SC1091
  source "$var_dir/services.env"
  if [[ ${own_pg:-yes} == yes ]]; then
    export WALLET_DATABASE_URL WALLET_DATABASE_OWNER_URL
  fi
  if [[ ${own_redis:-yes} == yes ]]; then
    export WALLET_REDIS_URL
  fi
fi
stop_services() {
  if [[ ${own_pg:-yes} == yes || ${own_redis:-yes} == yes ]]; then
    bash scripts/services.sh stop "$var_dir" || true
  fi
}

# An operator key made once and kept under var/, unless one is configured.
if [[ -z ${WALLET_AUTH_BOOTSTRAP_KEY:-} ]]; then
  if [[ ! -s $var_dir/operator.key ]]; then
    echo "wk_op_$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" > "$var_dir/operator.key"
    chmod 600 "$var_dir/operator.key"
  fi
  WALLET_AUTH_BOOTSTRAP_KEY=$(cat "$var_dir/operator.key")
  export WALLET_AUTH_BOOTSTRAP_KEY
  port=${WALLET_HTTP_PORT:-8080}
  cat <<MSG

  Operator API key (kept in $var_dir/operator.key):
    $WALLET_AUTH_BOOTSTRAP_KEY

  Try it:
    curl -s -X POST http://127.0.0.1:$port/v1/principals \\
      -H "Authorization: Bearer $WALLET_AUTH_BOOTSTRAP_KEY" -H 'Content-Type: application/json' \\
      -d '{"name":"alice","role":"user"}'

  A first payment between two new users, from another terminal:
    WALLET_URL=http://127.0.0.1:$port OP=$WALLET_AUTH_BOOTSTRAP_KEY docs/quickstart.sh

MSG
fi

build-release/tools/server/wallet-server "$@" &
server_pid=$!
trap 'kill -TERM "$server_pid" 2>/dev/null || true' INT TERM
status=0
wait "$server_pid" || status=$?
# A trapped signal interrupts the first wait; the second one collects the server's exit.
if kill -0 "$server_pid" 2>/dev/null; then
  wait "$server_pid" || status=$?
fi
stop_services
exit "$status"
