#!/usr/bin/env bash
# Starts and stops the private PostgreSQL and Redis that the run and test commands use.
#
#   scripts/services.sh start VAR_DIR PG_PORT REDIS_PORT [--fast] [--huge-pages]
#   scripts/services.sh stop  VAR_DIR
#   scripts/services.sh env   VAR_DIR        # prints the WALLET_* URLs for these services
#
# Everything lives under VAR_DIR, so several sets (run, test) coexist. PostgreSQL refuses to
# run as root, so it runs as the `postgres` system user. Starting twice, or after a killed run
# (stale pid files and sockets), is safe. `--fast` turns off fsync: for tests only.
# `--huge-pages` (benchmarks; root only) reserves 2 MiB pages for PostgreSQL's shared memory, as
# a production host should (README, "Configuration"): without them every backend takes a page fault
# the first time it touches each 4 KiB page of the shared buffers. What was reserved is released
# by `stop`. Without root, or when the kernel cannot reserve them, PostgreSQL uses normal pages.
set -euo pipefail

pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
command=${1:?usage: services.sh start|stop|env VAR_DIR ...}
var_dir=$(mkdir -p "${2:?VAR_DIR missing}" && cd "$2" && pwd)

as_postgres() {
  if [[ $(id -un) == postgres ]]; then "$@"; else runuser -u postgres -- "$@"; fi
}

# The PostgreSQL data directory must be reachable by the postgres user; a checkout under a
# private home directory is not, so the data then lives under /var/lib/wallet-dev, linked in.
pg_root() {
  local root="$var_dir/postgres"
  if [[ -L $root ]]; then readlink -f "$root"; return; fi
  if [[ $(id -u) -eq 0 ]] && ! runuser -u postgres -- test -x "$var_dir"; then
    local outside
    outside="/var/lib/wallet-dev/$(echo -n "$var_dir" | sha256sum | cut -c1-16)"
    mkdir -p "$outside"
    ln -sfn "$outside" "$root"
    echo "$outside"
    return
  fi
  mkdir -p "$root"
  echo "$root"
}

write_env() {
  local pg_port=$1 redis_port=$2
  cat > "$var_dir/services.env" <<ENV
WALLET_DATABASE_URL=postgresql://wallet_app@127.0.0.1:${pg_port}/wallet
WALLET_DATABASE_OWNER_URL=postgresql://wallet_owner@127.0.0.1:${pg_port}/wallet
WALLET_SCRATCH_DATABASE_URL=postgresql://wallet_app@127.0.0.1:${pg_port}/wallet_scratch
WALLET_SCRATCH_DATABASE_OWNER_URL=postgresql://wallet_owner@127.0.0.1:${pg_port}/wallet_scratch
WALLET_REDIS_URL=redis://127.0.0.1:${redis_port}
WALLET_SERVICES_PG_PORT=${pg_port}
WALLET_SERVICES_REDIS_PORT=${redis_port}
ENV
}

# Huge pages for shared_buffers (512 MB) and PostgreSQL's other shared memory (about 30 MB here).
k_huge_pages_needed=288

# Reserves the huge pages PostgreSQL needs beyond those free, recording how many in ROOT so that
# release_huge_pages gives them back; prints "on" when enough are free, "try" otherwise.
#   reserve_huge_pages ROOT
reserve_huge_pages() {
  local root=$1 free total want
  free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)
  total=$(cat /proc/sys/vm/nr_hugepages 2>/dev/null || echo 0)
  if ((free < k_huge_pages_needed)) && [[ -w /proc/sys/vm/nr_hugepages ]]; then
    want=$((total + k_huge_pages_needed - free))
    echo "$want" > /proc/sys/vm/nr_hugepages 2>/dev/null || true
    echo $(($(cat /proc/sys/vm/nr_hugepages) - total)) > "$root/huge-pages-reserved"
    free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)
  fi
  if ((free >= k_huge_pages_needed)); then echo on; else echo try; fi
}

# Gives back the huge pages reserve_huge_pages took for the instance under ROOT.
#   release_huge_pages ROOT
release_huge_pages() {
  local root=$1 reserved
  [[ -f $root/huge-pages-reserved ]] || return 0
  reserved=$(cat "$root/huge-pages-reserved")
  rm -f "$root/huge-pages-reserved"
  if ((reserved > 0)); then
    echo $(($(cat /proc/sys/vm/nr_hugepages) - reserved)) > /proc/sys/vm/nr_hugepages 2>/dev/null || true
  fi
}

start_postgres() {
  local port=$1 fast=$2 huge=$3 root data huge_pages=try
  root=$(pg_root)
  data="$root/data"
  chown postgres:postgres "$root" 2>/dev/null || true
  if [[ ! -s $data/PG_VERSION ]]; then
    rm -rf "$data"
    as_postgres "$pg_bin/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 \
      --locale=C.UTF-8 >"$root/initdb.log" 2>&1 || { cat "$root/initdb.log" >&2; exit 1; }
  fi
  mkdir -p "$root/run"
  chown postgres:postgres "$root/run"
  if [[ $huge == yes ]] && ! as_postgres "$pg_bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then
    huge_pages=$(reserve_huge_pages "$root")
  fi
  local fsync=on
  [[ $fast == yes ]] && fsync=off
  cat > "$data/wallet.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$root/run'
max_connections = 200
shared_buffers = 512MB
fsync = $fsync
synchronous_commit = on
full_page_writes = $fsync
# A ledger writes WAL steadily: fewer, spread-out checkpoints instead of bursts of flushes.
max_wal_size = 4GB
checkpoint_timeout = 15min
wal_buffers = 16MB
log_min_messages = warning
huge_pages = $huge_pages
CONF
  grep -q "include_if_exists = 'wallet.conf'" "$data/postgresql.conf" ||
    echo "include_if_exists = 'wallet.conf'" >> "$data/postgresql.conf"
  chown postgres:postgres "$data/wallet.conf"

  if ! as_postgres "$pg_bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then
    # A killed run leaves postmaster.pid behind; PostgreSQL itself checks whether that pid
    # still belongs to a postmaster, so only a pid file naming a dead process is removed.
    if [[ -f $data/postmaster.pid ]]; then
      local pid
      pid=$(head -1 "$data/postmaster.pid")
      if ! kill -0 "$pid" 2>/dev/null; then rm -f "$data/postmaster.pid"; fi
    fi
    as_postgres "$pg_bin/pg_ctl" -D "$data" -l "$root/postgres.log" -w -t 60 start >/dev/null \
      || { tail -20 "$root/postgres.log" >&2; exit 1; }
  fi

  as_postgres psql -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 <<'SQL' >/dev/null
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'wallet_owner') THEN
    CREATE ROLE wallet_owner LOGIN;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'wallet_app') THEN
    CREATE ROLE wallet_app LOGIN;
  END IF;
END $$;
SELECT 'CREATE DATABASE wallet OWNER wallet_owner'
 WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'wallet') \gexec
SQL
}

start_redis() {
  local port=$1 dir="$var_dir/redis"
  mkdir -p "$dir"
  if redis-cli -p "$port" ping >/dev/null 2>&1; then return; fi
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --pidfile "$dir/redis.pid" \
    --logfile "$dir/redis.log" --daemonize yes --save "" --appendonly no >/dev/null
  for _ in $(seq 1 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && return
    sleep 0.05
  done
  echo "services: redis did not start on port $port" >&2
  exit 1
}

case $command in
  start)
    pg_port=${3:?PG_PORT missing}
    redis_port=${4:?REDIS_PORT missing}
    fast=no huge=no
    for option in "${@:5}"; do
      case $option in
        --fast) fast=yes ;;
        --huge-pages) huge=yes ;;
        *) echo "services: unknown option $option" >&2; exit 2 ;;
      esac
    done
    # WALLET_SERVICES_SKIP_PG / WALLET_SERVICES_SKIP_REDIS: that service is provided elsewhere.
    [[ -n ${WALLET_SERVICES_SKIP_PG:-} ]] || start_postgres "$pg_port" "$fast" "$huge"
    [[ -n ${WALLET_SERVICES_SKIP_REDIS:-} ]] || start_redis "$redis_port"
    write_env "$pg_port" "$redis_port"
    ;;
  stop)
    if [[ -f $var_dir/services.env ]]; then
      # shellcheck disable=SC1091
      source "$var_dir/services.env"
      redis-cli -p "$WALLET_SERVICES_REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
    fi
    if [[ -e $var_dir/postgres ]]; then
      data="$(readlink -f "$var_dir/postgres")/data"
      if [[ -f $data/postmaster.pid ]]; then
        as_postgres "$pg_bin/pg_ctl" -D "$data" -m fast -w -t 60 stop >/dev/null 2>&1 || true
      fi
      release_huge_pages "$(readlink -f "$var_dir/postgres")"
    fi
    ;;
  env)
    cat "$var_dir/services.env"
    ;;
  reset-db)
    # Drops and recreates the wallet database: the test command starts every run from empty.
    # Also an empty wallet_scratch database with the same owner, for the tests that break a
    # ledger on purpose (they migrate and empty it themselves; the shared one stays whole).
    # shellcheck disable=SC1091
    source "$var_dir/services.env"
    as_postgres psql -q -h 127.0.0.1 -p "$WALLET_SERVICES_PG_PORT" -U postgres -d postgres \
      -v ON_ERROR_STOP=1 -c "DROP DATABASE IF EXISTS wallet WITH (FORCE)" \
      -c "CREATE DATABASE wallet OWNER wallet_owner" \
      -c "DROP DATABASE IF EXISTS wallet_scratch WITH (FORCE)" \
      -c "CREATE DATABASE wallet_scratch OWNER wallet_owner" >/dev/null
    ;;
  *)
    echo "usage: services.sh start|stop|env|reset-db VAR_DIR ..." >&2
    exit 2
    ;;
esac
