#!/usr/bin/env bash
# Reconciliation against ledger size: builds a ledger of N entries in a scratch database (bulk
# SQL as the owner role, every invariant kept, the database's own triggers and constraints on)
# and times, with wallet-admin, a full run, an incremental run after 10,000 new transfers, and a
# full run again (now also re-verifying the checkpoints). Writes bench/RECONCILE.md.
#
#   bench/reconcile.sh                              # sizes 1,000,000 and 10,000,000
#   options: --sizes "1000000 10000000 50000000", --accounts N (default 100000),
#            --new-transfers N (default 10000), --pg-port P (default 55435),
#            --var-dir DIR (default var/bench-reconcile), --keep-services
#            --report-only (write bench/RECONCILE.md again from bench/out/reconcile/)
#   BENCH_ADMIN_BIN=PATH uses that wallet-admin instead of building one in build/.
#
# The ledger: one clearing account, A user accounts each funded once with B0, then transfers of
# 7 in a fixed cycle over the accounts (transfer i: slot i mod A pays slot (i+1) mod A; a slot's
# account id is spread by a multiplier coprime with A), so that every balance_after and every
# cache has a closed form and N entries are written in large statements. The runs themselves
# then confirm every invariant: a run that is not clean stops the benchmark.
#
# PostgreSQL runs with fsync off (--fast): what is timed reads, and the build only needs to be
# quick. The timings are warm: the ledger was just written and sits in the OS page cache.
set -euo pipefail
cd "$(dirname "$0")/.."

command=("$0" "$@")
sizes="1000000 10000000"
accounts=100000
new_transfers=10000
pg_port=55435
var_dir=var/bench-reconcile
keep_services=no
report_only=no
while (($#)); do
  case $1 in
    --sizes) sizes=$2; shift ;;
    --accounts) accounts=$2; shift ;;
    --new-transfers) new_transfers=$2; shift ;;
    --pg-port) pg_port=$2; shift ;;
    --var-dir) var_dir=$2; shift ;;
    --keep-services) keep_services=yes ;;
    --report-only) report_only=yes ;;
    *) echo "bench: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if ((accounts % 100 != 0 || accounts < 100)); then
  echo "bench: --accounts must be a multiple of 100" >&2
  exit 2
fi
multiplier=7919  # prime, and not a factor of any multiple of 100 but its own multiples
if ((accounts % multiplier == 0)); then
  echo "bench: --accounts must not be a multiple of $multiplier" >&2
  exit 2
fi

out=bench/out/reconcile
mkdir -p "$out"
results="$out/results.tsv"
meta="$out/meta.txt"

b0=1000000
amount=7

commas() { echo "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }

# bench/RECONCILE.md from the results and the run's facts (command, time, load, duration).
write_report() {
  local command_line started_utc load_start load_end elapsed_s run_accounts run_new
  # shellcheck disable=SC1090
  source "$meta"
  {
    echo "# Reconciliation against ledger size"
    echo
    echo "Command: \`$command_line\` (started $started_utc, $(nproc) cores,"
    echo "$(awk '/MemTotal/ {printf "%.0f GB", $2 / 1048576}' /proc/meminfo) RAM; load average $load_start at the start and $load_end at the end, from"
    echo "other work on the machine; the whole script took $elapsed_s s)."
    echo
    echo "A ledger of N entries over $(commas "$run_accounts") accounts (one EUR deposit each, then transfers of $amount in"
    echo "a fixed cycle), built by bulk SQL as the owner role with every trigger and constraint on;"
    echo "the runs themselves then confirm every invariant (a run that is not clean stops the script)."
    echo "Each run is \`wallet-admin reconcile\`; the time is the run's own, as it records it (from"
    echo "the claim to the commit of its verdict). *Incremental* runs after $(commas "$run_new") new transfers"
    echo "($(commas $((2 * run_new))) entries) on top of the first full run's checkpoints; the second *full* run"
    echo "also re-verifies every checkpoint. PostgreSQL 15, shared_buffers 512MB, work_mem of the run"
    echo "64MB, fsync off; the ledger was just written, so the page cache is warm."
    echo
    echo "| entries | ledger_entry on disk | build | full run | incremental run (entries read) | full run with checkpoints |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
    while IFS=$'\t' read -r n size build full incr incr_entries full2 _; do
      printf '| %s | %s | %.0f s | %.1f s | %.3f s (%s) | %.1f s |\n' \
        "$(commas "$n")" "$size" "$build" "$full" "$incr" "$(commas "$incr_entries")" "$full2"
    done < "$results"
    echo
    echo "Reading it: the incremental run reads the new entries by the primary key's range and looks"
    echo "up the accounts, checkpoints and transactions they touch by key, so its cost follows what"
    echo "changed, not the ledger. The full run reads the whole table twice (one aggregate per account,"
    echo "one per transaction; the second is the larger part) and grows with the ledger: it runs on"
    echo "its own slow timer (\`ledger.reconcile_full_interval_s\`) and within"
    echo "\`ledger.reconcile_statement_timeout_ms\`. For comparison, the single request this replaces"
    echo "scanned the whole ledger every time (1.8 million entries: 3.7 s, inside one HTTP request)."
  } > bench/RECONCILE.md
  cat bench/RECONCILE.md
}

if [[ $report_only == yes ]]; then
  write_report
  exit 0
fi

admin=${BENCH_ADMIN_BIN:-}
if [[ -z $admin ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  nice ninja -C build wallet-admin >/dev/null
  admin=build/tools/admin/wallet-admin
fi
script_started=$(date +%s)
load_start=$(cut -d' ' -f1 /proc/loadavg)
started_utc=$(date -u '+%Y-%m-%d %H:%M UTC')

# PostgreSQL only: the runs need no Redis.
WALLET_SERVICES_SKIP_REDIS=1 bash scripts/services.sh start "$var_dir" "$pg_port" 0 --fast
if [[ $keep_services == no ]]; then
  trap 'bash scripts/services.sh stop "$var_dir"' EXIT
fi

db=wallet_bench_reconcile
app_url="postgresql://wallet_app@127.0.0.1:$pg_port/$db"
owner_url="postgresql://wallet_owner@127.0.0.1:$pg_port/$db"
psql_admin() { psql -X -q -h 127.0.0.1 -p "$pg_port" -U postgres -v ON_ERROR_STOP=1 "$@"; }
psql_owner() { psql -X -q -v ON_ERROR_STOP=1 "$owner_url" "$@"; }
wallet_admin() {
  WALLET_DATABASE_URL=$app_url WALLET_DATABASE_OWNER_URL=$owner_url \
    WALLET_LEDGER_RECONCILE_STATEMENT_TIMEOUT_MS=86400000 "$admin" "$@"
}
now() { date +%s.%N; }
seconds_since() { echo "$(now) - $1" | bc; }

# Transfers [from, to) of the cycle, as one INSERT of journal rows and one of entries. Entry ids
# are explicit (2A + 2i + 1 and + 2 after A deposits of two entries); the sequence is moved past
# them afterwards.
insert_transfers() {
  local from=$1 to=$2
  psql_owner <<SQL
BEGIN;
INSERT INTO journal_transaction (id, principal_id, idempotency_key, request_hash, type, response_status, response_body,
                                 first_entry_id, last_entry_id)
SELECT ('00000000-0000-4000-8000-' || lpad(to_hex($accounts + i), 12, '0'))::uuid, NULL,
       'bench-' || lpad(($accounts + i)::text, 12, '0'), 'bench', 'TRANSFER', 201, '{}',
       2 * $accounts + 2 * i + 1, 2 * $accounts + 2 * i + 2
  FROM generate_series($from::bigint, $to::bigint - 1) AS i;
INSERT INTO ledger_entry (id, transaction_id, account_id, currency, amount, balance_after)
SELECT 2 * $accounts + 2 * i + leg,
       ('00000000-0000-4000-8000-' || lpad(to_hex($accounts + i), 12, '0'))::uuid,
       2 + (((i + leg - 1) % $accounts) * $multiplier) % $accounts, 'EUR',
       CASE leg WHEN 1 THEN -$amount ELSE $amount END,
       CASE WHEN leg = 1 AND i % $accounts = 0 THEN $b0 - $amount
            WHEN leg = 1 THEN $b0
            WHEN (i + 1) % $accounts = 0 THEN $b0
            ELSE $b0 + $amount END
  FROM generate_series($from::bigint, $to::bigint - 1) AS i, (VALUES (1), (2)) AS legs(leg)
 ORDER BY 1;
COMMIT;
SQL
}

# The caches after T transfers, in closed form: slot k was debited D_k and credited C_k times.
set_caches() {
  local t=$1
  psql_owner <<SQL
UPDATE account a SET
  balance = $b0 + $amount * (c.credits - c.debits),
  version = 1 + c.credits + c.debits
  FROM (SELECT k, 2 + (k::bigint * $multiplier) % $accounts AS id,
               CASE WHEN $t > k THEN ($t - 1 - k) / $accounts + 1 ELSE 0 END AS debits,
               CASE WHEN k = 0 THEN $t / $accounts
                    WHEN $t >= k THEN ($t - k) / $accounts + 1 ELSE 0 END AS credits
          FROM generate_series(0, $accounts - 1) AS k) c
 WHERE a.id = c.id;
SELECT setval('ledger_entry_id_seq', (SELECT max(id) FROM ledger_entry));
SQL
} >/dev/null

# Runs wallet-admin reconcile; prints the run's own duration in seconds and checks it is clean.
time_run() {
  local label=$1 log=$2
  shift 2
  local started
  started=$(now)
  if ! wallet_admin reconcile "$@" > "$log"; then
    echo "bench: the $label run is not clean:" >&2
    cat "$log" >&2
    exit 1
  fi
  local wall
  wall=$(seconds_since "$started")
  local took
  took=$(sed -n 's/^  took \([0-9.e+]*\) ms$/\1/p' "$log")
  printf '%.2f %.2f\n' "$(echo "$took / 1000" | bc -l)" "$wall"
}

: > "$results"
for n in $sizes; do
  transfers=$(((n - 2 * accounts) / 2))
  if ((transfers < 0)); then
    echo "bench: $n entries is fewer than the $accounts accounts' deposits" >&2
    exit 2
  fi
  echo "bench: building a ledger of $n entries ($accounts accounts, $transfers transfers)" >&2
  psql_admin -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db OWNER wallet_owner"
  wallet_admin migrate >/dev/null
  built=$(now)
  psql_owner <<SQL
INSERT INTO principal (name, role) VALUES ('bench owner', 'user');
INSERT INTO account (id, currency, kind, allow_negative, system_role, balance, version)
  VALUES (1, 'EUR', 'system', TRUE, 'clearing', -$b0::bigint * $accounts, $accounts);
INSERT INTO account (id, owner_id, currency, kind) SELECT 1 + s, 1, 'EUR', 'user' FROM generate_series(1, $accounts) AS s;
SELECT setval('account_id_seq', $accounts + 1);
INSERT INTO journal_transaction (id, principal_id, idempotency_key, request_hash, type, response_status, response_body,
                                 first_entry_id, last_entry_id)
SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(k), 12, '0'))::uuid, NULL,
       'bench-' || lpad(k::text, 12, '0'), 'bench', 'DEPOSIT', 201, '{}', 2 * k + 1, 2 * k + 2
  FROM generate_series(0, $accounts - 1) AS k;
INSERT INTO ledger_entry (id, transaction_id, account_id, currency, amount, balance_after)
SELECT 2 * k + leg, ('00000000-0000-4000-8000-' || lpad(to_hex(k), 12, '0'))::uuid,
       CASE leg WHEN 1 THEN 1 ELSE 2 + (k::bigint * $multiplier) % $accounts END, 'EUR',
       CASE leg WHEN 1 THEN -$b0 ELSE $b0 END,
       CASE leg WHEN 1 THEN -$b0::bigint * (k + 1) ELSE $b0 END
  FROM generate_series(0, $accounts - 1) AS k, (VALUES (1), (2)) AS legs(leg)
 ORDER BY 1;
SQL
  # The (account, id) index takes its entries in random order: built once after the load, it
  # costs a fraction of maintaining it row by row. Every other index and trigger stays on.
  psql_owner -c "DROP INDEX ledger_entry_account"
  chunk=250000
  for ((from = 0; from < transfers; from += chunk)); do
    insert_transfers "$from" "$((from + chunk < transfers ? from + chunk : transfers))"
  done
  psql_owner -c "SET maintenance_work_mem = '1GB'" -c "CREATE INDEX ledger_entry_account ON ledger_entry (account_id, id)"
  set_caches "$transfers"
  psql_owner -c "VACUUM (ANALYZE) ledger_entry" -c "VACUUM (ANALYZE) account" -c "VACUUM (ANALYZE) journal_transaction"
  build_s=$(seconds_since "$built")
  size=$(psql_admin -d "$db" -At -c "SELECT pg_size_pretty(pg_total_relation_size('ledger_entry'))")

  read -r full_s full_wall < <(time_run "first full" "$out/full-first-$n.log")
  insert_transfers "$transfers" "$((transfers + new_transfers))"
  set_caches "$((transfers + new_transfers))"
  # set_caches rewrote every account row at once (the writer rewrites a few per batch, and
  # autovacuum keeps up): vacuum, as autovacuum would, before timing lookups by key.
  psql_owner -c "VACUUM (ANALYZE) account"
  read -r incr_s incr_wall < <(time_run "incremental" "$out/incremental-$n.log" --incremental)
  incr_entries=$(sed -n 's/^  entries checked: *\([0-9]*\)$/\1/p' "$out/incremental-$n.log")
  read -r full2_s full2_wall < <(time_run "second full" "$out/full-second-$n.log")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$size" "$build_s" "$full_s" "$incr_s" "$incr_entries" "$full2_s" \
    "$(nproc)" >> "$results"
  echo "bench: $n entries: full ${full_s} s, incremental ${incr_s} s ($incr_entries entries), full again ${full2_s} s" >&2
done

# The command as it would be typed again: an argument with spaces in quotes.
command_line=bench/reconcile.sh
for argument in "${command[@]:1}"; do
  [[ $argument == *' '* ]] && argument="\"$argument\""
  command_line+=" $argument"
done
cat > "$meta" <<META
command_line=$(printf '%q' "$command_line")
started_utc='$started_utc'
load_start='$load_start'
load_end='$(cut -d' ' -f1 /proc/loadavg)'
elapsed_s='$(($(date +%s) - script_started))'
run_accounts='$accounts'
run_new='$new_transfers'
META
write_report
