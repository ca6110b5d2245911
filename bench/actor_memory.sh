#!/usr/bin/env bash
# Memory of a live account actor: the server's RSS with N live account actors against none,
# divided out. Accounts and API keys are inserted with SQL (fast); then one transfer per
# account, sent with wrk, wakes each account's actor (the transfer is refused for lack of
# funds, which still loads and keeps the actor). Prints the figures and appends them to
# bench/out/actor_memory.txt.
#
#   bench/actor_memory.sh [N]      (default 100000)
#
# Uses private services under var/bench-memory (PostgreSQL 55435, Redis 56382).
set -euo pipefail
cd "$(dirname "$0")/.."
accounts=${1:-100000}
var_dir=var/bench-memory
http_port=18481
mkdir -p bench/out

bash scripts/install-deps.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build-release wallet-server wallet-admin >/dev/null
bash scripts/services.sh start "$var_dir" 55435 56382
bash scripts/services.sh reset-db "$var_dir"
trap 'kill "${server_pid:-0}" 2>/dev/null || true; bash scripts/services.sh stop "$var_dir"' EXIT
set -a
# shellcheck disable=SC1091
source "$var_dir/services.env"
set +a
build-release/tools/admin/wallet-admin migrate >/dev/null

psql -X -q -h 127.0.0.1 -p 55435 -U wallet_owner -d wallet -v ON_ERROR_STOP=1 <<SQL
-- One principal owns every account, so the figure is the actors' memory, not the key cache's.
INSERT INTO principal (id, name, role) VALUES (1000000, 'bench', 'user');
INSERT INTO api_key (key_hash, principal_id) VALUES (sha256(convert_to('bench-key', 'UTF8')), 1000000);
INSERT INTO account (id, owner_id, currency, kind) SELECT g, 1000000, 'EUR', 'user' FROM generate_series(1000001, 1000000 + $accounts) g;
INSERT INTO account (id, owner_id, currency, kind) VALUES (999999, 1000000, 'EUR', 'user');
SQL

WALLET_HTTP_PORT=$http_port WALLET_ACTORS_ACCOUNTS_LIVE_MAX=$((accounts * 2)) WALLET_ACTORS_ACCOUNT_IDLE_MS=3600000 \
WALLET_RATELIMIT_ENABLED=false WALLET_LOG_LEVEL=warn WALLET_DATABASE_READERS=4 WALLET_DATABASE_READER_QUEUE_MAX=100000 \
WALLET_DATABASE_CONNECTION_WAIT_MS=60000 WALLET_HTTP_REQUEST_DEADLINE_MS=120000 \
  build-release/tools/server/wallet-server &
server_pid=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$http_port/healthz" >/dev/null && break; sleep 0.1; done

rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$server_pid/status"; }
live() { curl -s "http://127.0.0.1:$http_port/metrics" | awk '/^wallet_account_actors_live / {print $2}'; }

# Warm up every code path with a few actors, so the baseline holds the allocator's arenas.
script=$(mktemp --suffix .lua)
cat > "$script" <<LUA
-- Each wrk thread walks its own residue class, so together they touch every account once.
local first = 1000001
local count = tonumber(os.getenv("ACCOUNTS"))
local threads = tonumber(os.getenv("THREADS"))
local next_thread = 0
setup = function(thread)
  thread:set("tid", next_thread)
  next_thread = next_thread + 1
end
local counter = 0
wrk.method = "POST"
request = function()
  local id = first + ((counter * threads + tid) % count)
  counter = counter + 1
  local headers = {}
  headers["Authorization"] = "Bearer bench-key"
  headers["Content-Type"] = "application/json"
  headers["Idempotency-Key"] = "mem-" .. id
  return wrk.format(nil, "/v1/transfers", headers, '{"fromAccountId":' .. id .. ',"toAccountId":999999,"amount":1}')
end
LUA
ACCOUNTS=100 THREADS=1 wrk -t1 -c4 -d2s -s "$script" "http://127.0.0.1:$http_port" >/dev/null
sleep 1
before_kib=$(rss_kib)
before_live=$(live)

# Enough requests to touch every account at least once (wrk runs for a duration, not a count).
ACCOUNTS=$accounts THREADS=2 wrk -t2 -c64 -d"$((accounts / 2000 + 20))s" -s "$script" "http://127.0.0.1:$http_port" > bench/out/actor_memory_wrk.txt
sleep 2
after_kib=$(rss_kib)
after_live=$(live)
per_actor=$(( (after_kib - before_kib) * 1024 / (after_live - before_live) ))
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "live account actors: $before_live -> $after_live"
  echo "server RSS: ${before_kib} KiB -> ${after_kib} KiB"
  echo "bytes per live account actor: $per_actor"
} | tee -a bench/out/actor_memory.txt
