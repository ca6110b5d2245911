#!/usr/bin/env bash
# Settlement reconciliation at the size of a busy provider's day: a 100,000-line report imported
# against a ledger that holds the deposits it names, once with wallet-admin and once over HTTP
# (POST /v1/admin/settlements), each against its own copy of the same ledger. Writes
# bench/SETTLEMENTS.md.
#
#   bench/settlements.sh
#   options: --lines N (default 100000, even), --background N (default 1000000: other
#            transactions in the ledger, transfers and another provider's deposits),
#            --pg-port P (default 55445), --redis-port P (default 56395),
#            --var-dir DIR (default var/bench-settlements), --keep-services
#   BENCH_BUILD_DIR=DIR uses the wallet-admin and wallet-server built there instead of building
#   them in build/.
#
# The ledger: one user account, the provider `bench` with its EUR clearing account, and
# N/2 + N/200 deposits from it (payment ids pay_0, pay_1, ...), one second apart; around them
# --background other transactions of the same period. The report: N/2 lines naming the first N/2
# deposits, each settled a little after it was posted (one in a hundred with another amount), and
# N/2 lines of payments the ledger never saw. So the import must find N/2 - N/200 matches,
# N/200 amount mismatches, N/2 settled but not posted, and the last N/200 deposits posted but not
# settled; the script fails unless it does, exactly. The ledger rows are written by bulk SQL as
# the owner role, every trigger and constraint on; PostgreSQL runs with fsync off (--fast).
set -euo pipefail
cd "$(dirname "$0")/.."

command=("$0" "$@")
lines=100000
background=1000000
pg_port=55445
redis_port=56395
var_dir=var/bench-settlements
keep_services=no
while (($#)); do
  case $1 in
    --lines) lines=$2; shift ;;
    --background) background=$2; shift ;;
    --pg-port) pg_port=$2; shift ;;
    --redis-port) redis_port=$2; shift ;;
    --var-dir) var_dir=$2; shift ;;
    --keep-services) keep_services=yes ;;
    *) echo "bench: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if ((lines < 200 || lines % 200 != 0)); then
  echo "bench: --lines must be a multiple of 200" >&2
  exit 2
fi
half=$((lines / 2))
hundredth=$((lines / 200))
deposits=$((half + hundredth))
# Each named deposit settles this long after it was posted: long enough that the report's period
# (its earliest to its latest settledAt) takes in the last deposits, which it does not name.
lag_s=$((hundredth + 600))

out=bench/out/settlements
mkdir -p "$out"
build_dir=${BENCH_BUILD_DIR:-}
if [[ -z $build_dir ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  nice ninja -C build wallet-admin wallet-server >/dev/null
  build_dir=build
fi
admin=$build_dir/tools/admin/wallet-admin
server=$build_dir/tools/server/wallet-server
script_started=$(date +%s)
load_start=$(cut -d' ' -f1 /proc/loadavg)
started_utc=$(date -u '+%Y-%m-%d %H:%M UTC')

bash scripts/services.sh start "$var_dir" "$pg_port" "$redis_port" --fast
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  if [[ $keep_services == no ]]; then bash scripts/services.sh stop "$var_dir"; fi
}
trap cleanup EXIT

psql_admin() { psql -X -q -h 127.0.0.1 -p "$pg_port" -U postgres -v ON_ERROR_STOP=1 "$@"; }
now() { date +%s.%N; }
seconds_since() { echo "$(now) - $1" | bc; }

# The ledger, in database $1. T0 is fixed, so every run builds the same ledger and report.
build_ledger() {
  local db=$1
  local owner_url="postgresql://wallet_owner@127.0.0.1:$pg_port/$db"
  psql_admin -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db OWNER wallet_owner"
  WALLET_DATABASE_URL="postgresql://wallet_app@127.0.0.1:$pg_port/$db" WALLET_DATABASE_OWNER_URL=$owner_url \
    "$admin" migrate >/dev/null
  psql -X -q -v ON_ERROR_STOP=1 "$owner_url" <<SQL
BEGIN;
WITH p AS (INSERT INTO principal (name, role) VALUES ('provider bench', 'provider') RETURNING id)
INSERT INTO provider (name, principal_id) SELECT 'bench', id FROM p;
INSERT INTO principal (name, role) VALUES ('bench user', 'user');
-- Accounts 1 (clearing:bench), 2 (the user's), 3 (clearing:other), 4 (a payee of transfers).
INSERT INTO account (id, currency, kind, allow_negative, system_role) VALUES
  (1, 'EUR', 'system', TRUE, 'clearing:bench'), (3, 'EUR', 'system', TRUE, 'clearing:other');
INSERT INTO account (id, owner_id, currency, kind)
  SELECT i, (SELECT id FROM principal WHERE name = 'bench user'), 'EUR', 'user' FROM (VALUES (2), (4)) AS a(i);
SELECT setval('account_id_seq', 4);
CREATE TEMP TABLE bench_tx AS
  SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(i), 12, '0'))::uuid AS id, i,
         CASE WHEN i < $deposits THEN 'DEPOSIT' WHEN i % 2 = 0 THEN 'DEPOSIT' ELSE 'TRANSFER' END AS type,
         CASE WHEN i < $deposits THEN 1 WHEN i % 2 = 0 THEN 3 ELSE 2 END AS debit,
         CASE WHEN i < $deposits THEN 2 WHEN i % 2 = 0 THEN 2 ELSE 4 END AS credit,
         CASE WHEN i < $deposits THEN jsonb_build_object('provider', 'bench', 'paymentId', 'pay_' || i)
              WHEN i % 2 = 0 THEN jsonb_build_object('provider', 'other', 'paymentId', 'oth_' || i) END AS metadata,
         1000 + i % 9000 AS amount,
         -- The provider's deposits one second apart from T0; the background spread over the same
         -- hours and the day around them.
         CASE WHEN i < $deposits THEN timestamptz '2026-11-01 00:00:00+00' + i * interval '1 second'
              ELSE timestamptz '2026-10-31 00:00:00+00' + ((i::bigint * 7919) % 259200) * interval '1 second' END AS created_at
    FROM generate_series(0, $deposits + $background - 1) AS i;
-- balance_after is not what this benchmark reads; the entries carry their amounts exactly.
INSERT INTO ledger_entry (transaction_id, account_id, currency, amount, balance_after, created_at)
  SELECT id, CASE leg WHEN 1 THEN debit ELSE credit END, 'EUR', CASE leg WHEN 1 THEN -amount ELSE amount END, 0,
         created_at
    FROM bench_tx, (VALUES (1), (2)) AS legs(leg)
   ORDER BY i, leg;
-- Each journal row with its entries' range of ids (migration 024).
INSERT INTO journal_transaction (id, principal_id, idempotency_key, request_hash, type, response_status, response_body,
                                 metadata, created_at, first_entry_id, last_entry_id)
  SELECT t.id, NULL, 'bench-' || t.i, 'bench', t.type, 201, '{}', t.metadata, t.created_at, r.first_id, r.last_id
    FROM bench_tx t
    JOIN (SELECT transaction_id, min(id) AS first_id, max(id) AS last_id FROM ledger_entry GROUP BY transaction_id) r
      ON r.transaction_id = t.id;
COMMIT;
VACUUM (ANALYZE) journal_transaction;
VACUUM (ANALYZE) ledger_entry;
SQL
}

# The report: N/2 lines for the first N/2 deposits (lag_s after each; every hundredth with one
# more minor unit), then N/2 lines of payments the ledger does not know, in the same hours.
report=$out/report.csv
awk -v half="$half" -v lag="$lag_s" 'BEGIN {
  print "provider,paymentId,type,amount,currency,settledAt"
  for (i = 0; i < half; i++) {
    t = 1793491200 + i + lag
    amount = 1000 + i % 9000 + (i % 100 == 99 ? 1 : 0)
    printf "bench,pay_%d,payment,%d,EUR,%s\n", i, amount, strftime("%Y-%m-%dT%H:%M:%SZ", t, 1)
  }
  for (i = 0; i < half; i++) {
    printf "bench,unknown_%d,payment,%d,EUR,%s\n", i, 500 + i % 100, strftime("%Y-%m-%dT%H:%M:%SZ", 1793491200 + i, 1)
  }
}' > "$report"
report_bytes=$(stat -c %s "$report")

expect() {
  local what=$1 got=$2 want=$3
  if [[ $got != "$want" ]]; then
    echo "bench: $what is $got, expected $want" >&2
    exit 1
  fi
}

# 1. wallet-admin settlements import, twice (the second finds the same and adds nothing).
echo "bench: building the ledger ($deposits deposits of the provider, $background other transactions)" >&2
built=$(now)
build_ledger wallet_bench_settlements_cli
build_s=$(seconds_since "$built")
cli_env=(WALLET_DATABASE_URL="postgresql://wallet_app@127.0.0.1:$pg_port/wallet_bench_settlements_cli")
set +e
env "${cli_env[@]}" "$admin" settlements import "$report" > "$out/cli-first.log"
cli_status=$?
env "${cli_env[@]}" "$admin" settlements import "$report" > "$out/cli-second.log"
set -e
cat "$out/cli-first.log" >&2
expect "wallet-admin's exit status (differences found)" "$cli_status" 1
field() { sed -n "s/^  $2: *\([0-9]*\).*/\1/p" "$1"; }
expect "matched lines" "$(field "$out/cli-first.log" "matched lines")" $((half - hundredth))
expect "amount mismatches" "$(field "$out/cli-first.log" "amount mismatch")" "$hundredth"
expect "settled not posted" "$(field "$out/cli-first.log" "settled not posted")" "$half"
expect "posted not settled" "$(field "$out/cli-first.log" "posted not settled")" "$hundredth"
expect "new exceptions" "$(field "$out/cli-first.log" "new exceptions")" $((half + 2 * hundredth))
expect "new exceptions of the second import" "$(field "$out/cli-second.log" "new exceptions")" 0
cli_first_ms=$(sed -n 's/^  took \([0-9.]*\) ms$/\1/p' "$out/cli-first.log")
cli_second_ms=$(sed -n 's/^  took \([0-9.]*\) ms$/\1/p' "$out/cli-second.log")

# 2. Over HTTP, against a fresh copy of the same ledger: the time curl sees, from the first byte
# sent to the last byte of the answer.
build_ledger wallet_bench_settlements_http
http_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
key=bench-settlements-operator-key
WALLET_DATABASE_URL="postgresql://wallet_app@127.0.0.1:$pg_port/wallet_bench_settlements_http" \
  WALLET_DATABASE_MIGRATE_ON_START=false WALLET_REDIS_URL="redis://127.0.0.1:$redis_port" \
  WALLET_HTTP_PORT=$http_port WALLET_AUTH_BOOTSTRAP_KEY=$key WALLET_LEDGER_RECONCILE_INTERVAL_S=0 \
  WALLET_LEDGER_RECONCILE_FULL_INTERVAL_S=0 \
  "$server" > "$out/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 300); do
  curl -sf "http://127.0.0.1:$http_port/healthz" >/dev/null && break
  sleep 0.1
done
post_report() {
  curl -s -o "$1" -w '%{http_code} %{time_total}\n' -X POST "http://127.0.0.1:$http_port/v1/admin/settlements" \
    -H "Authorization: Bearer $key" -H 'Content-Type: text/csv' --data-binary @"$report"
}
read -r http_status http_first_s < <(post_report "$out/http-first.json")
read -r http_status_second http_second_s < <(post_report "$out/http-second.json")
cat "$out/http-first.json" >&2
echo >&2
expect "the HTTP status" "$http_status" 200
expect "the second HTTP status" "$http_status_second" 200
json() { python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$1" "$2"; }
expect "matched lines (HTTP)" "$(json "$out/http-first.json" 'd["matched"]')" $((half - hundredth))
expect "new exceptions (HTTP)" "$(json "$out/http-first.json" 'd["newExceptions"]')" $((half + 2 * hundredth))
expect "new exceptions of the second import (HTTP)" "$(json "$out/http-second.json" 'd["newExceptions"]')" 0
kill "$server_pid"
wait "$server_pid" || true
server_pid=

commas() { echo "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }
{
  echo "# Settlement reconciliation: a $(commas "$lines")-line report"
  echo
  echo "Command: \`bench/settlements.sh ${command[*]:1}\` (started $started_utc, $(nproc) cores,"
  echo "$(awk '/MemTotal/ {printf "%.0f GB", $2 / 1048576}' /proc/meminfo) RAM; load average $load_start at the start and $(cut -d' ' -f1 /proc/loadavg) at the end,"
  echo "from other work on the machine; the whole script took $(($(date +%s) - script_started)) s)."
  echo
  echo "The ledger: $(commas "$deposits") deposits of the provider \`bench\` (one second apart) among"
  echo "$(commas "$background") other transactions of the same days (transfers, another provider's deposits),"
  echo "built by bulk SQL in $(printf '%.0f' "$build_s") s. The report ($(commas "$report_bytes") bytes): $(commas "$half") lines naming the"
  echo "first $(commas "$half") deposits, settled $lag_s s after each (one in a hundred with another amount),"
  echo "and $(commas "$half") lines of payments the ledger never saw. Every import found exactly"
  echo "$(commas $((half - hundredth))) matches, $(commas "$hundredth") amount mismatches, $(commas "$half") settled but not posted and"
  echo "$(commas "$hundredth") posted but not settled (the script checks each number)."
  echo
  echo "| import | first (adds $(commas $((half + 2 * hundredth))) exceptions) | again (adds none) |"
  echo "| --- | ---: | ---: |"
  printf '| `wallet-admin settlements import` (its own clock: parse, COPY, match, write, commit) | %.2f s | %.2f s |\n' \
    "$(echo "$cli_first_ms / 1000" | bc -l)" "$(echo "$cli_second_ms / 1000" | bc -l)"
  printf '| `POST /v1/admin/settlements` (curl: upload, import, answer) | %.2f s | %.2f s |\n' "$http_first_s" "$http_second_s"
  echo
  echo "PostgreSQL 15, shared_buffers 512MB, fsync off; the ledger was just written, so the page cache is"
  echo "warm. The server ran with its defaults (one import at a time, on a reader connection)."
  echo
  echo "Reading it: the report is parsed as it streams into COPY, so the import holds one line of it"
  echo "at a time (the server holds the body it received, up to \`http.settlement_body_bytes_max\`). The"
  echo "ledger side is one range of the partial index \`journal_transaction_provider_time\`: the"
  echo "import does not read the background transactions. Two earlier runs found two slow paths, since fixed:"
  echo "the second import took 845 s while the exceptions' index had no statistics yet (the planner"
  echo "chose a nested loop; the resolution of matched keys now hashes), and curl waited a second"
  echo "before every upload past 1 MiB for an answer to its \`Expect: 100-continue\` (the server now"
  echo "gives it as soon as the header passed)."
} > bench/SETTLEMENTS.md
cat bench/SETTLEMENTS.md
