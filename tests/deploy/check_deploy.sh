#!/usr/bin/env bash
# Proves, without a Docker engine, that the deployment files hold together: docker-compose.yml
# passes `docker-compose config -q` and wires the services, health checks and WALLET_* settings
# as docs/design.md §6-7 require; the Dockerfile's build stage installs every -dev package of
# scripts/install-deps.sh and its runtime stage every library the built binaries link; and
# docker/initdb/01-roles.sql, run on a scratch PostgreSQL cluster, makes roles and a database on
# which the migrations apply as wallet_owner and wallet_app can log in with its password;
# deploy/haproxy.cfg passes HAProxy's own check.
#
#   tests/deploy/check_deploy.sh SOURCE_DIR [BUILD_DIR]
set -euo pipefail
src=$(cd "${1:?usage: check_deploy.sh SOURCE_DIR [BUILD_DIR]}" && pwd)
build=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
cd "$src"

work=$(mktemp -d /tmp/wallet-deploy-check.XXXXXX)
pg_ctl_stop=()
cleanup() {
  if ((${#pg_ctl_stop[@]} > 0)); then "${pg_ctl_stop[@]}" >/dev/null 2>&1 || echo "warning: scratch PostgreSQL did not stop" >&2; fi
  rm -rf "$work"
}
trap cleanup EXIT

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# docker-compose runs in a clean environment with an empty env file (never a developer's .env),
# so only what a check passes counts.
: > "$work/empty.env"
compose() {
  env -i PATH="$PATH" HOME="$work" "$@" docker-compose --env-file "$work/empty.env" -f "$src/docker-compose.yml" \
    --project-directory "$src" config
}

echo "== docker-compose config -q"
command -v docker-compose >/dev/null || { echo "FAIL: docker-compose is not installed (scripts/install-deps.sh)" >&2; exit 1; }
if ! env -i PATH="$PATH" HOME="$work" docker-compose --env-file "$work/empty.env" -f docker-compose.yml config -q; then
  fail "docker-compose -f docker-compose.yml config -q"
fi
compose > "$work/defaults.yml" || fail "docker-compose config with defaults"
compose WALLET_AUTH_BOOTSTRAP_KEY=key-from-the-environment WALLET_APP_PASSWORD=app-secret \
  WALLET_OWNER_PASSWORD=owner-secret > "$work/overridden.yml" || fail "docker-compose config with overrides"

echo "== compose, Dockerfile and .dockerignore semantics"
python3 "$here/check_deploy.py" --source "$src" --build "$build" \
  --compose-defaults "$work/defaults.yml" --compose-overridden "$work/overridden.yml" || fail "check_deploy.py"

echo "== deploy/haproxy.cfg"
# HAProxy's own parser, with the compose service names (unresolvable here) put on loopback.
if ! command -v haproxy >/dev/null; then
  fail "haproxy is not installed (scripts/install-deps.sh)"
else
  sed -E 's/^( *server [^ ]+ )wallet[0-9]+:/\1127.0.0.1:/' deploy/haproxy.cfg > "$work/haproxy.cfg"
  haproxy -c -q -f "$work/haproxy.cfg" || fail "haproxy -c rejects deploy/haproxy.cfg"
  for directive in "option httpchk GET /readyz" "option redispatch" "retry-on " "disable-l7-retry if !is_read !has_idempotency_key"; do
    grep -qF "$directive" deploy/haproxy.cfg || fail "deploy/haproxy.cfg lacks '$directive'"
  done
fi

echo "== docker/initdb/01-roles.sql on a scratch PostgreSQL cluster"
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [[ -z $pg_bin ]]; then
  fail "no PostgreSQL server binaries under /usr/lib/postgresql (scripts/install-deps.sh installs them)"
else
  as_postgres=()
  if [[ $(id -u) -eq 0 ]]; then
    as_postgres=(runuser -u postgres --)
    chown postgres "$work"
  fi
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  echo superuser-secret > "$work/superuser.pw"
  [[ $(id -u) -eq 0 ]] && chown postgres "$work/superuser.pw"
  "${as_postgres[@]}" "$pg_bin/initdb" -D "$work/pg" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
    --pwfile="$work/superuser.pw" >"$work/initdb.log" 2>&1 || { cat "$work/initdb.log" >&2; exit 1; }
  pg_ctl_stop=("${as_postgres[@]}" "$pg_bin/pg_ctl" -D "$work/pg" -m immediate -w stop)
  "${as_postgres[@]}" "$pg_bin/pg_ctl" -D "$work/pg" -l "$work/pg.log" -w -t 60 \
    -o "-p $port -k $work -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null \
    || { cat "$work/pg.log" >&2; exit 1; }
  # As the image's entrypoint does: psql as the superuser over the socket, the passwords in the
  # environment. A quote in a password must survive.
  if ! WALLET_OWNER_PASSWORD="own'er-secret" WALLET_APP_PASSWORD=app-secret \
      psql -X -q -v ON_ERROR_STOP=1 -h "$work" -p "$port" -U postgres -d postgres \
      -f docker/initdb/01-roles.sql >"$work/init.log" 2>&1; then
    cat "$work/init.log" >&2
    fail "01-roles.sql did not run cleanly"
  fi
  owner_url="postgresql://wallet_owner:own%27er-secret@127.0.0.1:$port/wallet"
  app_url="postgresql://wallet_app:app-secret@127.0.0.1:$port/wallet"
  owner_of=$(psql -X -At -h "$work" -p "$port" -U postgres -d postgres \
    -c "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'wallet'")
  [[ $owner_of == wallet_owner ]] || fail "database wallet is owned by '$owner_of', not wallet_owner"
  # The migrations, applied as the owner over TCP with its password, as wallet-server does at start.
  for f in persistence/migrations/*.sql; do
    psql -X -q -v ON_ERROR_STOP=1 "$owner_url" -f "$f" >"$work/migrate.log" 2>&1 \
      || { cat "$work/migrate.log" >&2; fail "migration $f as wallet_owner"; }
  done
  got=$(psql -X -At -v ON_ERROR_STOP=1 "$app_url" -c "INSERT INTO principal (name, role) VALUES ('deploy', 'user') RETURNING name" 2>&1) \
    || fail "wallet_app cannot log in and append: $got"
  [[ $got == deploy* ]] || fail "wallet_app insert answered '$got'"
  if psql -X -At "postgresql://wallet_app:wrong@127.0.0.1:$port/wallet" -c "SELECT 1" >/dev/null 2>&1; then
    fail "wallet_app logged in with a wrong password"
  fi
fi

if ((failures > 0)); then
  echo "deploy checks: $failures failure(s)" >&2
  exit 1
fi
echo "deploy checks: all passed"
