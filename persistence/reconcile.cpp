#include "persistence/reconcile.hpp"

#include <pqxx/pqxx>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "base/assert.hpp"
#include "persistence/database.hpp"
#include "persistence/rows.hpp"

namespace persistence {
namespace {

// An arbitrary, fixed key for the session-level advisory lock that one run holds: "reconcile".
constexpr std::int64_t k_run_lock_key = 0x7265636f6e63696c;

// A claim that finds the lock taken looks this many times for the run that holds it (the holder
// records its run right after taking the lock), pausing between looks.
constexpr int k_claim_looks_max = 50;
constexpr std::chrono::milliseconds k_claim_pause{10};

// The wait for older writers polls with a pause that grows from the first to the last value.
constexpr std::chrono::milliseconds k_wait_poll_first{2};
constexpr std::chrono::milliseconds k_wait_poll_max{50};

// The session's scratch table: the run's entries aggregated per account and currency. One row per
// (account, currency) pair met, so a run's bookkeeping costs what it read, and every check after
// the first pass reads this instead of the entries again. Emptied at each commit or rollback.
constexpr const char* k_create_totals_sql =
    "CREATE TEMP TABLE IF NOT EXISTS reconcile_totals ("
    "  account_id BIGINT NOT NULL, currency TEXT NOT NULL,"
    "  entries_all BIGINT NOT NULL, amount_all NUMERIC NOT NULL,"          // every visible entry read
    "  entries_through BIGINT NOT NULL, amount_through NUMERIC NOT NULL,"  // those <= the watermark
    "  last_entry_id BIGINT NOT NULL"
    ") ON COMMIT DELETE ROWS";
// Statistics for the planner of the checks that follow (a temporary table has none by itself).
constexpr const char* k_analyze_totals_sql = "ANALYZE pg_temp.reconcile_totals";

// --- Claiming a run --------------------------------------------------------------------------

constexpr const char* k_try_lock = "reconcile_try_lock";
constexpr const char* k_try_lock_sql = "SELECT pg_try_advisory_lock($1)";

constexpr const char* k_lock = "reconcile_lock";
constexpr const char* k_lock_sql = "SELECT pg_advisory_lock($1)";

constexpr const char* k_unlock = "reconcile_unlock";
constexpr const char* k_unlock_sql = "SELECT pg_advisory_unlock($1)";

// Whoever holds the lock is the only one running: a 'running' row left by a process that died
// mid-run is closed as failed.
constexpr const char* k_abandon_runs = "reconcile_abandon_runs";
constexpr const char* k_abandon_runs_sql =
    "UPDATE reconciliation_run SET status = 'failed', phase = NULL, finished_at = clock_timestamp(),"
    "  error = 'abandoned: the process running it stopped before it finished'"
    " WHERE status = 'running'";

constexpr const char* k_insert_run = "reconcile_insert_run";
constexpr const char* k_insert_run_sql =
    "INSERT INTO reconciliation_run (kind, requested_by) VALUES ($1, $2) RETURNING id";

constexpr const char* k_running_run = "reconcile_running_run";
constexpr const char* k_running_run_sql =
    "SELECT id FROM reconciliation_run WHERE status = 'running' ORDER BY id DESC LIMIT 1";

// --- The watermark ---------------------------------------------------------------------------

// The sequence must hand out ids in allocation order across sessions (no per-session cache).
constexpr const char* k_sequence_cache = "reconcile_sequence_cache";
constexpr const char* k_sequence_cache_sql =
    "SELECT seqcache FROM pg_sequence WHERE seqrelid = pg_get_serial_sequence('ledger_entry', 'id')::regclass";

// The previous watermark: checkpoints stand at the latest finished run's through_entry_id. And
// whether that run found the ledger right.
constexpr const char* k_previous_watermark = "reconcile_previous_watermark";
constexpr const char* k_previous_watermark_sql =
    "SELECT through_entry_id, ok FROM reconciliation_run WHERE status = 'finished' ORDER BY id DESC LIMIT 1";

// In ONE statement, so that both read after the statement's snapshot was taken: the highest
// visible entry id M, and every transaction that holds a write lock on ledger_entry now. Any
// entry id <= M was handed out before M was, hence before this snapshot, by an INSERT whose
// transaction took RowExclusiveLock on ledger_entry before evaluating nextval and keeps it to its
// end: that transaction has either ended by now or is in this list (docs/reconciliation.md).
constexpr const char* k_lock_holders_where =
    "l.locktype = 'relation' AND l.granted"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND l.relation = 'ledger_entry'::regclass"
    " AND l.mode IN ('RowExclusiveLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')"
    " AND l.pid IS DISTINCT FROM pg_backend_pid()";

constexpr const char* k_watermark = "reconcile_watermark";
const std::string k_watermark_sql = std::string(
                                        "SELECT COALESCE((SELECT max(id) FROM ledger_entry), 0),"
                                        " ARRAY(SELECT DISTINCT l.virtualtransaction FROM pg_locks l WHERE ") +
                                    k_lock_holders_where + ")::text";

constexpr const char* k_writers_left = "reconcile_writers_left";
const std::string k_writers_left_sql = std::string("SELECT count(*) FROM pg_locks l WHERE ") + k_lock_holders_where +
                                       " AND l.virtualtransaction = ANY($1::text[])";

constexpr const char* k_set_phase = "reconcile_set_phase";
constexpr const char* k_set_phase_sql =
    "UPDATE reconciliation_run SET phase = $2, kind = $3, from_entry_id = $4, through_entry_id = $5"
    " WHERE id = $1 AND status = 'running'";

// --- First pass: the entries, aggregated into reconcile_totals ---------------------------------

// Incremental: every visible entry after the previous watermark $1 (the primary key's range), with
// those up to the new watermark $2 apart.
constexpr const char* k_fill_incremental = "reconcile_fill_incremental";
constexpr const char* k_fill_incremental_sql =
    "INSERT INTO reconcile_totals (account_id, currency, entries_all, amount_all, entries_through, amount_through,"
    "                              last_entry_id)"
    " SELECT account_id, currency, count(*), sum(amount), count(*) FILTER (WHERE id <= $2),"
    "        COALESCE(sum(amount) FILTER (WHERE id <= $2), 0), max(id)"
    "   FROM ledger_entry WHERE id > $1 GROUP BY account_id, currency";

// Full: every visible entry, with those up to the new watermark $1 apart (one pass over the table,
// no join: the checkpoints are verified afterwards through the indexes).
constexpr const char* k_fill_full = "reconcile_fill_full";
constexpr const char* k_fill_full_sql =
    "INSERT INTO reconcile_totals (account_id, currency, entries_all, amount_all, entries_through, amount_through,"
    "                              last_entry_id)"
    " SELECT account_id, currency, count(*), sum(amount), count(*) FILTER (WHERE id <= $1),"
    "        COALESCE(sum(amount) FILTER (WHERE id <= $1), 0), max(id)"
    "   FROM ledger_entry GROUP BY account_id, currency";

// The run's entries per account.
#define WALLET_RECONCILE_PER_ACCOUNT                                                      \
  "WITH t AS (SELECT account_id, sum(entries_all) AS entries, sum(amount_all) AS amount," \
  "                  max(last_entry_id) AS last_entry_id FROM reconcile_totals GROUP BY account_id) "

// --- The checks (each returns at most $1 rows) -------------------------------------------------

// Caches of the accounts the run's entries touch: checkpoint + entries read = cache.
constexpr const char* k_caches_incremental = "reconcile_caches_incremental";
constexpr const char* k_caches_incremental_sql = WALLET_RECONCILE_PER_ACCOUNT
    "SELECT a.id, a.balance, a.version, COALESCE(c.balance, 0) + t.amount, COALESCE(c.entry_count, 0) + t.entries"
    "  FROM t JOIN account a ON a.id = t.account_id"
    "  LEFT JOIN reconciliation_account_checkpoint c ON c.account_id = t.account_id"
    " WHERE a.balance <> COALESCE(c.balance, 0) + t.amount OR a.version <> COALESCE(c.entry_count, 0) + t.entries"
    " ORDER BY a.id LIMIT $1";

// Caches of every account: entries = cache (an account without entries holds 0, version 0).
constexpr const char* k_caches_full = "reconcile_caches_full";
constexpr const char* k_caches_full_sql = WALLET_RECONCILE_PER_ACCOUNT
    "SELECT a.id, a.balance, a.version, COALESCE(t.amount, 0), COALESCE(t.entries, 0)"
    "  FROM account a LEFT JOIN t ON t.account_id = a.id"
    " WHERE a.balance <> COALESCE(t.amount, 0) OR a.version <> COALESCE(t.entries, 0)"
    " ORDER BY a.id LIMIT $1";

// The last entry of each account read carries the balance its entries sum to.
constexpr const char* k_balance_after_incremental = "reconcile_balance_after_incremental";
constexpr const char* k_balance_after_incremental_sql = WALLET_RECONCILE_PER_ACCOUNT
    "SELECT t.account_id, e.id, e.balance_after, COALESCE(c.balance, 0) + t.amount"
    "  FROM t JOIN ledger_entry e ON e.id = t.last_entry_id"
    "  LEFT JOIN reconciliation_account_checkpoint c ON c.account_id = t.account_id"
    " WHERE e.balance_after <> COALESCE(c.balance, 0) + t.amount"
    " ORDER BY t.account_id LIMIT $1";

constexpr const char* k_balance_after_full = "reconcile_balance_after_full";
constexpr const char* k_balance_after_full_sql = WALLET_RECONCILE_PER_ACCOUNT
    "SELECT t.account_id, e.id, e.balance_after, t.amount"
    "  FROM t JOIN ledger_entry e ON e.id = t.last_entry_id"
    " WHERE e.balance_after <> t.amount"
    " ORDER BY t.account_id LIMIT $1";

constexpr const char* k_negatives_incremental = "reconcile_negatives_incremental";
constexpr const char* k_negatives_incremental_sql =
    "SELECT a.id, a.balance FROM account a"
    " WHERE a.id IN (SELECT account_id FROM reconcile_totals) AND a.balance < 0 AND NOT a.allow_negative"
    " ORDER BY a.id LIMIT $1";

constexpr const char* k_negatives_full = "reconcile_negatives_full";
constexpr const char* k_negatives_full_sql =
    "SELECT id, balance FROM account WHERE balance < 0 AND NOT allow_negative ORDER BY id LIMIT $1";

// Held money (migration 011): an account's `held` is the sum of its ACTIVE holds. Holds change
// without entries, so the incremental run checks the accounts its entries touch and every payer
// of an ACTIVE hold (the hold_payer_expiry index), each summed by key; a `held` left over on an account
// with no active hold and no new entry is the full run's to find. The full run checks every
// account against one aggregate of the active holds.
constexpr const char* k_held_incremental = "reconcile_held_incremental";
constexpr const char* k_held_incremental_sql =
    "WITH c AS (SELECT payer_id AS id FROM hold WHERE status = 'ACTIVE' UNION SELECT account_id FROM reconcile_totals)"
    " SELECT a.id, a.held, s.total FROM c JOIN account a ON a.id = c.id"
    "  CROSS JOIN LATERAL (SELECT COALESCE(sum(h.amount), 0)::bigint AS total FROM hold h"
    "                       WHERE h.payer_id = a.id AND h.status = 'ACTIVE') s"
    " WHERE a.held <> s.total ORDER BY a.id LIMIT $1";

constexpr const char* k_held_full = "reconcile_held_full";
constexpr const char* k_held_full_sql =
    "SELECT a.id, a.held, COALESCE(h.total, 0) FROM account a"
    "  LEFT JOIN (SELECT payer_id, sum(amount)::bigint AS total FROM hold WHERE status = 'ACTIVE'"
    "             GROUP BY payer_id) h ON h.payer_id = a.id"
    " WHERE a.held <> COALESCE(h.total, 0) ORDER BY a.id LIMIT $1";

// Entries whose account is missing or of another currency, among those read (id > $2): the pairs
// in reconcile_totals say which, the account index finds the entries themselves.
constexpr const char* k_entry_accounts = "reconcile_entry_accounts";
constexpr const char* k_entry_accounts_sql =
    "SELECT e.id, e.account_id, e.currency, a.currency"
    "  FROM (SELECT DISTINCT account_id, currency FROM reconcile_totals) g"
    "  LEFT JOIN account a ON a.id = g.account_id"
    "  CROSS JOIN LATERAL (SELECT x.id, x.account_id, x.currency FROM ledger_entry x"
    "                       WHERE x.account_id = g.account_id AND x.currency = g.currency AND x.id > $2"
    "                       ORDER BY x.id LIMIT $1) e"
    " WHERE a.id IS NULL OR a.currency <> g.currency"
    " ORDER BY e.id LIMIT $1";

// Per currency: checkpoint + entries read = 0. Every transaction the snapshot shows is complete,
// so the entries read complete every partial sum the checkpoint holds.
constexpr const char* k_currencies_incremental = "reconcile_currencies_incremental";
constexpr const char* k_currencies_incremental_sql =
    "SELECT t.currency, COALESCE(c.balance, 0) + t.amount"
    "  FROM (SELECT currency, sum(amount_all) AS amount FROM reconcile_totals GROUP BY currency) t"
    "  LEFT JOIN reconciliation_currency_checkpoint c ON c.currency = t.currency"
    " WHERE COALESCE(c.balance, 0) + t.amount <> 0 ORDER BY t.currency LIMIT $1";

constexpr const char* k_currencies_full = "reconcile_currencies_full";
constexpr const char* k_currencies_full_sql =
    "SELECT currency, sum(amount_all) FROM reconcile_totals GROUP BY currency HAVING sum(amount_all) <> 0"
    " ORDER BY currency LIMIT $1";

// Transactions: the (transaction, currency) sums checked, and the ids of those that are not zero.
// Incremental: every transaction with an entry after the previous watermark $2, all its entries,
// read through its journal row's range of entry ids (a lateral aggregate: never a scan of the
// table). An entry the range would miss is the next statement's finding.
constexpr const char* k_transactions_incremental = "reconcile_transactions_incremental";
const std::string k_transactions_incremental_sql =
    "SELECT count(*), (array_agg(DISTINCT t.id) FILTER (WHERE s.total <> 0))[1:$1]::text"
    "  FROM (SELECT DISTINCT transaction_id FROM ledger_entry WHERE id > $2) d"
    "  JOIN journal_transaction t ON t.id = d.transaction_id"
    "  CROSS JOIN LATERAL (SELECT sum(e.amount) AS total FROM ledger_entry e"
    "                       WHERE " +
    entries_of_sql("e", "t") + " GROUP BY e.currency) s";

// Entries that their transaction's journal row does not cover: no journal row, or an id outside
// the row's range (migration 024), so that reading the transaction through its range would miss
// them. Incremental: the entries after $2, one primary-key probe of the journal each. Full: the
// entries of the transactions $2 that the full aggregate named (rare: the table is read whole).
#define WALLET_RECONCILE_ENTRY_RANGES                                                                              \
  "SELECT e.id, e.transaction_id::text, e.account_id, e.currency, j.id IS NULL, j.first_entry_id, j.last_entry_id" \
  "  FROM ledger_entry e LEFT JOIN journal_transaction j ON j.id = e.transaction_id"                               \
  " WHERE (j.id IS NULL OR e.id NOT BETWEEN j.first_entry_id AND j.last_entry_id) AND "
constexpr const char* k_entry_ranges_incremental = "reconcile_entry_ranges_incremental";
constexpr const char* k_entry_ranges_incremental_sql = WALLET_RECONCILE_ENTRY_RANGES "e.id > $2 ORDER BY e.id LIMIT $1";
constexpr const char* k_entry_ranges_full = "reconcile_entry_ranges_full";
constexpr const char* k_entry_ranges_full_sql =
    WALLET_RECONCILE_ENTRY_RANGES "e.transaction_id = ANY($2::uuid[]) ORDER BY e.id LIMIT $1";

constexpr const char* k_transactions_full = "reconcile_transactions_full";
// Full: one aggregate of every entry per (transaction, currency), which also names the
// transactions whose entries reach outside their journal row's range, or that have none (the
// third column): the smallest and largest id per group against the row, one join of the groups
// instead of one of every entry.
constexpr const char* k_transactions_full_sql =
    "SELECT count(*), (array_agg(DISTINCT per.transaction_id) FILTER (WHERE per.total <> 0))[1:$1]::text,"
    "       (array_agg(DISTINCT per.transaction_id) FILTER (WHERE j.id IS NULL OR per.first_id < j.first_entry_id"
    "                                                      OR per.last_id > j.last_entry_id))[1:$1]::text"
    "  FROM (SELECT transaction_id, currency, sum(amount) AS total, min(id) AS first_id, max(id) AS last_id"
    "          FROM ledger_entry GROUP BY transaction_id, currency) per"
    "  LEFT JOIN journal_transaction j ON j.id = per.transaction_id";

// The unbalanced transactions named by the queries above, per currency (through their journal
// rows' ranges).
constexpr const char* k_transaction_sums = "reconcile_transaction_sums";
const std::string k_transaction_sums_sql =
    "SELECT e.transaction_id::text, e.currency, sum(e.amount) FROM " +
    entries_of_journal_sql("j.id = ANY($1::uuid[])") +
    " AS e GROUP BY e.transaction_id, e.currency HAVING sum(e.amount) <> 0 ORDER BY 1, 2";

// Full runs: each stored checkpoint against its entries as they are now. The entries up to a
// checkpoint are all of them (read by the full run) less those after it, which the indexes find:
// few, since a checkpoint stands where the latest run touching it left it.
constexpr const char* k_account_checkpoints = "reconcile_account_checkpoints";
constexpr const char* k_account_checkpoints_sql =
    "SELECT c.account_id, c.through_entry_id, c.balance, c.entry_count,"
    "       COALESCE(t.amount, 0) - COALESCE(l.amount, 0), COALESCE(t.entries, 0) - l.entries"
    "  FROM reconciliation_account_checkpoint c"
    "  LEFT JOIN (SELECT account_id, sum(amount_all) AS amount, sum(entries_all) AS entries"
    "               FROM reconcile_totals GROUP BY account_id) t ON t.account_id = c.account_id"
    "  CROSS JOIN LATERAL (SELECT sum(e.amount) AS amount, count(*) AS entries FROM ledger_entry e"
    "                       WHERE e.account_id = c.account_id AND e.id > c.through_entry_id) l"
    " WHERE c.balance <> COALESCE(t.amount, 0) - COALESCE(l.amount, 0)"
    "    OR c.entry_count <> COALESCE(t.entries, 0) - l.entries"
    " ORDER BY c.account_id LIMIT $1";

constexpr const char* k_currency_checkpoints = "reconcile_currency_checkpoints";
constexpr const char* k_currency_checkpoints_sql =
    "SELECT c.currency, c.through_entry_id, c.balance, c.entry_count,"
    "       COALESCE(t.amount, 0) - COALESCE(l.amount, 0), COALESCE(t.entries, 0) - l.entries"
    "  FROM reconciliation_currency_checkpoint c"
    "  LEFT JOIN (SELECT currency, sum(amount_all) AS amount, sum(entries_all) AS entries"
    "               FROM reconcile_totals GROUP BY currency) t ON t.currency = c.currency"
    "  CROSS JOIN LATERAL (SELECT sum(e.amount) AS amount, count(*) AS entries FROM ledger_entry e"
    "                       WHERE e.currency = c.currency AND e.id > c.through_entry_id) l"
    " WHERE c.balance <> COALESCE(t.amount, 0) - COALESCE(l.amount, 0)"
    "    OR c.entry_count <> COALESCE(t.entries, 0) - l.entries"
    " ORDER BY c.currency LIMIT $1";

// What the run read: accounts (a full run: every account) and entries.
constexpr const char* k_counts_incremental = "reconcile_counts_incremental";
constexpr const char* k_counts_incremental_sql =
    "SELECT count(DISTINCT account_id), COALESCE(sum(entries_all), 0) FROM reconcile_totals";

constexpr const char* k_counts_full = "reconcile_counts_full";
constexpr const char* k_counts_full_sql =
    "SELECT (SELECT count(*) FROM account), COALESCE(sum(entries_all), 0) FROM reconcile_totals";

// --- Moving the checkpoints to the new watermark $1 (run $2) -----------------------------------

// A full run rebuilds the checkpoints from nothing (one run at a time, and only runs read them).
constexpr const char* k_clear_checkpoints_sql =
    "TRUNCATE reconciliation_account_checkpoint, reconciliation_currency_checkpoint";

// Incremental: the run's sums up to the watermark are added to the checkpoints (the conflict
// arm finds each existing row by its key, so the cost is the accounts the run read).
constexpr const char* k_save_accounts_incremental = "reconcile_save_accounts_incremental";
constexpr const char* k_save_accounts_incremental_sql =
    "INSERT INTO reconciliation_account_checkpoint AS c (account_id, through_entry_id, balance, entry_count, run_id)"
    " SELECT account_id, $1, sum(amount_through), sum(entries_through), $2"
    "   FROM reconcile_totals GROUP BY account_id HAVING sum(entries_through) > 0"
    " ON CONFLICT (account_id) DO UPDATE SET through_entry_id = excluded.through_entry_id,"
    "   balance = c.balance + excluded.balance, entry_count = c.entry_count + excluded.entry_count,"
    "   run_id = excluded.run_id";

constexpr const char* k_save_accounts_full = "reconcile_save_accounts_full";
constexpr const char* k_save_accounts_full_sql =
    "INSERT INTO reconciliation_account_checkpoint (account_id, through_entry_id, balance, entry_count, run_id)"
    " SELECT account_id, $1, sum(amount_through), sum(entries_through), $2"
    "   FROM reconcile_totals GROUP BY account_id HAVING sum(entries_through) > 0";

constexpr const char* k_save_currencies_incremental = "reconcile_save_currencies_incremental";
constexpr const char* k_save_currencies_incremental_sql =
    "INSERT INTO reconciliation_currency_checkpoint AS c (currency, through_entry_id, balance, entry_count, run_id)"
    " SELECT currency, $1, sum(amount_through), sum(entries_through), $2"
    "   FROM reconcile_totals GROUP BY currency HAVING sum(entries_through) > 0"
    " ON CONFLICT (currency) DO UPDATE SET through_entry_id = excluded.through_entry_id,"
    "   balance = c.balance + excluded.balance, entry_count = c.entry_count + excluded.entry_count,"
    "   run_id = excluded.run_id";

constexpr const char* k_save_currencies_full = "reconcile_save_currencies_full";
constexpr const char* k_save_currencies_full_sql =
    "INSERT INTO reconciliation_currency_checkpoint (currency, through_entry_id, balance, entry_count, run_id)"
    " SELECT currency, $1, sum(amount_through), sum(entries_through), $2"
    "   FROM reconcile_totals GROUP BY currency HAVING sum(entries_through) > 0";

// --- Recording the outcome -------------------------------------------------------------------

constexpr const char* k_insert_findings = "reconcile_insert_findings";
constexpr const char* k_insert_findings_sql =
    "INSERT INTO reconciliation_finding (run_id, seq, check_name, account_id, transaction_id, currency, entry_id,"
    "                                    detail)"
    " SELECT $1, f.seq, f.check_name, f.account_id, NULLIF(f.transaction_id, '')::uuid, NULLIF(f.currency, ''),"
    "        f.entry_id, f.detail"
    "   FROM unnest($2::text[], $3::bigint[], $4::text[], $5::text[], $6::bigint[], $7::text[]) WITH ORDINALITY"
    "        AS f(check_name, account_id, transaction_id, currency, entry_id, detail, seq)";

constexpr const char* k_finish_run = "reconcile_finish_run";
constexpr const char* k_finish_run_sql =
    "UPDATE reconciliation_run SET status = 'finished', phase = NULL, kind = $2, ok = $3, from_entry_id = $4,"
    "       through_entry_id = $5, accounts_checked = $6, entries_checked = $7, transactions_checked = $8,"
    "       duration_ms = $9, finished_at = clock_timestamp()"
    " WHERE id = $1 AND status = 'running'";

constexpr const char* k_fail_run = "reconcile_fail_run";
constexpr const char* k_fail_run_sql =
    "UPDATE reconciliation_run SET status = 'failed', phase = NULL, error = $2, duration_ms = $3,"
    "       finished_at = clock_timestamp()"
    " WHERE id = $1 AND status = 'running'";

// --- Reading runs ----------------------------------------------------------------------------

#define WALLET_RECONCILE_RUN_COLUMNS                                                                   \
  "SELECT id, kind, status, COALESCE(phase, ''), requested_by,"                                        \
  " to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'),"                      \
  " COALESCE(to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), ''),"       \
  " from_entry_id, through_entry_id, ok, COALESCE(accounts_checked, 0), COALESCE(entries_checked, 0)," \
  " COALESCE(transactions_checked, 0), COALESCE(duration_ms, 0), COALESCE(error, '')"                  \
  " FROM reconciliation_run "

constexpr const char* k_find_run = "reconcile_find_run";
constexpr const char* k_find_run_sql = WALLET_RECONCILE_RUN_COLUMNS "WHERE id = $1";

constexpr const char* k_latest_finished = "reconcile_latest_finished";
constexpr const char* k_latest_finished_sql =
    WALLET_RECONCILE_RUN_COLUMNS "WHERE status = 'finished' ORDER BY id DESC LIMIT 1";

constexpr const char* k_find_findings = "reconcile_find_findings";
constexpr const char* k_find_findings_sql =
    "SELECT check_name, account_id, COALESCE(transaction_id::text, ''), COALESCE(currency, ''), entry_id, detail"
    "  FROM reconciliation_finding WHERE run_id = $1 ORDER BY seq";

constexpr const char* k_full_run_age = "reconcile_full_run_age";
constexpr const char* k_full_run_age_sql =
    "SELECT extract(epoch FROM clock_timestamp() - max(finished_at))::float8 FROM reconciliation_run"
    " WHERE kind = 'full' AND status = 'finished'";

#undef WALLET_RECONCILE_PER_ACCOUNT
#undef WALLET_RECONCILE_RUN_COLUMNS

// A reason the run cannot finish that is not a database error: it is recorded as the run's error.
struct run_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename T>
std::optional<T> optional_of(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<T>();
}

reconcile_run read_run(const pqxx::row& row) {
  reconcile_run r;
  r.id = row[0].as<std::int64_t>();
  r.kind = row[1].as<std::string>() == "full" ? reconcile_kind::full : reconcile_kind::incremental;
  r.status = row[2].as<std::string>();
  r.phase = row[3].as<std::string>();
  r.requested_by = row[4].as<std::string>();
  r.started_at = row[5].as<std::string>();
  r.finished_at = row[6].as<std::string>();
  r.from_entry_id = optional_of<std::int64_t>(row[7]);
  r.through_entry_id = optional_of<std::int64_t>(row[8]);
  r.ok = optional_of<bool>(row[9]);
  r.accounts_checked = row[10].as<std::int64_t>();
  r.entries_checked = row[11].as<std::int64_t>();
  r.transactions_checked = row[12].as<std::int64_t>();
  r.duration_ms = row[13].as<double>();
  r.error = row[14].as<std::string>();
  return r;
}

std::optional<reconcile_run> load_run(pqxx::transaction_base& txn, const pqxx::result& rows) {
  if (rows.empty()) return std::nullopt;
  auto run = read_run(rows[0]);
  for (const auto& f : txn.exec_prepared(k_find_findings, run.id)) {
    reconcile_finding finding;
    const auto check = parse_reconcile_check(f[0].as<std::string>());
    WALLET_ASSERT(check.has_value(), "a stored finding names a known check (a CHECK constraint)");
    finding.check = *check;
    finding.account_id = optional_of<std::int64_t>(f[1]);
    finding.transaction_id = f[2].as<std::string>();
    finding.currency = f[3].as<std::string>();
    finding.entry_id = optional_of<std::int64_t>(f[4]);
    finding.detail = f[5].as<std::string>();
    run.findings.push_back(std::move(finding));
  }
  return run;
}

std::string text(const pqxx::field& f) { return f.is_null() ? std::string("NULL") : f.as<std::string>(); }

double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

// What one run has learnt so far.
struct run_state {
  reconcile_kind kind = reconcile_kind::incremental;
  std::int64_t from_entry_id = 0;     // exclusive
  std::int64_t through_entry_id = 0;  // the new watermark
  std::vector<reconcile_finding> findings;
  std::int64_t accounts_checked = 0;
  std::int64_t entries_checked = 0;
  std::int64_t transactions_checked = 0;

  void add(reconcile_check check, std::optional<std::int64_t> account, std::string transaction, std::string currency,
           std::optional<std::int64_t> entry, std::string detail) {
    findings.push_back({check, account, std::move(transaction), std::move(currency), entry, std::move(detail)});
  }
};

// Reads the watermark into `state` and waits, bounded, until every transaction that could still
// add an entry id at or below it has ended.
void settle_watermark(pqxx::connection& conn, std::int64_t run_id, run_state& state, const run_options& options) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.statement_timeout_ms);
  std::string writers;
  {
    pqxx::nontransaction txn(conn);
    const auto cache = txn.exec_prepared(k_sequence_cache);
    if (cache.empty() || cache[0][0].as<std::int64_t>() != 1) {
      throw run_failure("ledger_entry's id sequence hands out ids from a per-session cache (CACHE " +
                        (cache.empty() ? std::string("unknown") : text(cache[0][0])) +
                        "); a watermark needs CACHE 1, so that ids are handed out in order across sessions");
    }
    const auto row = txn.exec_prepared1(k_watermark);
    state.through_entry_id = row[0].as<std::int64_t>();
    writers = row[1].as<std::string>();
    // Entries are never removed, so the watermark never goes back; a full run reports what it finds.
    if (state.kind == reconcile_kind::incremental) {
      state.through_entry_id = std::max(state.through_entry_id, state.from_entry_id);
    }
    txn.exec_prepared(k_set_phase, run_id, "waiting", std::string(to_string(state.kind)), state.from_entry_id,
                      state.through_entry_id);
  }
  auto pause = k_wait_poll_first;
  for (;;) {
    if (writers == "{}") break;
    {
      pqxx::nontransaction txn(conn);
      if (txn.exec_prepared1(k_writers_left, writers)[0].as<std::int64_t>() == 0) break;
    }
    if (options.stopping && options.stopping()) throw run_failure("stopped: the process is shutting down");
    if (std::chrono::steady_clock::now() >= deadline) {
      throw run_failure("transactions writing ledger entries since before the run did not end within " +
                        std::to_string(options.statement_timeout_ms) +
                        " ms (ledger.reconcile_statement_timeout_ms); no checkpoint could be moved");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, k_wait_poll_max);
  }
  pqxx::nontransaction txn(conn);
  txn.exec_prepared(k_set_phase, run_id, "checking", std::string(to_string(state.kind)), state.from_entry_id,
                    state.through_entry_id);
}

void check_transactions(pqxx::transaction_base& txn, run_state& state) {
  const bool full = state.kind == reconcile_kind::full;
  // The full statement groups every entry by transaction: one group per transaction, far more
  // than work_mem holds. Hashed, the groups spill in batches and the join with the journal spills
  // again (measured: 18.5 s at 10 million entries, work_mem 64MB); sorted, the groups stream into
  // a merge join with the journal's primary key (10.6 s). The planner's estimate of the groups
  // does not tell these apart reliably, so the full statement is told to sort.
  // The setting is put back for the statements after this one.
  std::string hashagg;
  if (full) {
    hashagg = txn.exec1("SELECT current_setting('enable_hashagg')")[0].as<std::string>();
    txn.exec("SET LOCAL enable_hashagg = off");
  }
  const auto row = full ? txn.exec_prepared1(k_transactions_full, k_findings_per_check_max)
                        : txn.exec_prepared1(k_transactions_incremental, k_findings_per_check_max, state.from_entry_id);
  if (full) txn.exec("SELECT set_config('enable_hashagg', " + txn.quote(hashagg) + ", true)");
  state.transactions_checked = row[0].as<std::int64_t>();
  if (!row[1].is_null()) {
    for (const auto& t : txn.exec_prepared(k_transaction_sums, row[1].as<std::string>())) {
      state.add(reconcile_check::transaction_zero_sum, std::nullopt, t[0].as<std::string>(), t[1].as<std::string>(),
                std::nullopt, "the entries sum to " + text(t[2]) + " in " + t[1].as<std::string>());
    }
  }
  if (full && row[2].is_null()) return;
  const auto outside =
      full ? txn.exec_prepared(k_entry_ranges_full, k_findings_per_check_max, row[2].as<std::string>())
           : txn.exec_prepared(k_entry_ranges_incremental, k_findings_per_check_max, state.from_entry_id);
  for (const auto& e : outside) {
    const auto entry = e[0].as<std::int64_t>();
    state.add(reconcile_check::transaction_zero_sum, e[2].as<std::int64_t>(), e[1].as<std::string>(),
              e[3].as<std::string>(), entry,
              e[4].as<bool>() ? "entry " + std::to_string(entry) + " names a transaction with no journal row"
                              : "entry " + std::to_string(entry) + " lies outside its journal row's entries (ids " +
                                    text(e[5]) + " to " + text(e[6]) + ")");
  }
}

// Every check, in the run's REPEATABLE READ snapshot. The scratch table is filled first.
void run_checks(pqxx::transaction_base& txn, run_state& state) {
  const bool full = state.kind == reconcile_kind::full;
  const int limit = k_findings_per_check_max;
  if (full) {
    txn.exec_prepared(k_fill_full, state.through_entry_id);
  } else {
    txn.exec_prepared(k_fill_incremental, state.from_entry_id, state.through_entry_id);
  }
  txn.exec(k_analyze_totals_sql);

  for (const auto& r :
       full ? txn.exec_prepared(k_currencies_full, limit) : txn.exec_prepared(k_currencies_incremental, limit)) {
    state.add(reconcile_check::currency_zero_sum, std::nullopt, {}, r[0].as<std::string>(), std::nullopt,
              "the entries in " + r[0].as<std::string>() + " sum to " + text(r[1]));
  }
  check_transactions(txn, state);
  for (const auto& r :
       full ? txn.exec_prepared(k_caches_full, limit) : txn.exec_prepared(k_caches_incremental, limit)) {
    state.add(reconcile_check::account_cache, r[0].as<std::int64_t>(), {}, {}, std::nullopt,
              "cache: balance " + text(r[1]) + ", version " + text(r[2]) + "; entries: sum " + text(r[3]) + ", count " +
                  text(r[4]));
  }
  for (const auto& r :
       full ? txn.exec_prepared(k_balance_after_full, limit) : txn.exec_prepared(k_balance_after_incremental, limit)) {
    state.add(
        reconcile_check::balance_after, r[0].as<std::int64_t>(), {}, {}, r[1].as<std::int64_t>(),
        "the last entry " + text(r[1]) + " has balance_after " + text(r[2]) + "; the entries sum to " + text(r[3]));
  }
  for (const auto& r :
       full ? txn.exec_prepared(k_negatives_full, limit) : txn.exec_prepared(k_negatives_incremental, limit)) {
    state.add(reconcile_check::negative_balance, r[0].as<std::int64_t>(), {}, {}, std::nullopt,
              "balance " + text(r[1]) + " on an account that may not go below zero");
  }
  for (const auto& r : txn.exec_prepared(k_entry_accounts, limit, full ? 0 : state.from_entry_id)) {
    state.add(
        reconcile_check::entry_account, r[1].as<std::int64_t>(), {}, r[2].as<std::string>(), r[0].as<std::int64_t>(),
        r[3].is_null()
            ? "entry " + text(r[0]) + " names account " + text(r[1]) + ", which does not exist"
            : "entry " + text(r[0]) + " is in " + text(r[2]) + " but account " + text(r[1]) + " is in " + text(r[3]));
  }
  for (const auto& r : full ? txn.exec_prepared(k_held_full, limit) : txn.exec_prepared(k_held_incremental, limit)) {
    state.add(reconcile_check::held_mismatch, r[0].as<std::int64_t>(), {}, {}, std::nullopt,
              "held " + text(r[1]) + "; its active holds sum to " + text(r[2]));
  }
  if (full) {
    for (const auto& r : txn.exec_prepared(k_account_checkpoints, limit)) {
      state.add(reconcile_check::checkpoint, r[0].as<std::int64_t>(), {}, {}, std::nullopt,
                "checkpoint through entry " + text(r[1]) + ": sum " + text(r[2]) + ", count " + text(r[3]) +
                    "; the entries up to it now: sum " + text(r[4]) + ", count " + text(r[5]));
    }
    for (const auto& r : txn.exec_prepared(k_currency_checkpoints, limit)) {
      state.add(reconcile_check::checkpoint, std::nullopt, {}, r[0].as<std::string>(), std::nullopt,
                "checkpoint through entry " + text(r[1]) + ": sum " + text(r[2]) + ", count " + text(r[3]) +
                    "; the entries up to it now: sum " + text(r[4]) + ", count " + text(r[5]));
    }
  }
  const auto counts = txn.exec_prepared1(full ? k_counts_full : k_counts_incremental);
  state.accounts_checked = counts[0].as<std::int64_t>();
  state.entries_checked = counts[1].as<std::int64_t>();
}

void save_checkpoints(pqxx::transaction_base& txn, std::int64_t run_id, const run_state& state) {
  if (state.kind == reconcile_kind::full) {
    txn.exec(k_clear_checkpoints_sql);
    txn.exec_prepared(k_save_accounts_full, state.through_entry_id, run_id);
    txn.exec_prepared(k_save_currencies_full, state.through_entry_id, run_id);
  } else {
    txn.exec_prepared(k_save_accounts_incremental, state.through_entry_id, run_id);
    txn.exec_prepared(k_save_currencies_incremental, state.through_entry_id, run_id);
  }
}

void save_findings(pqxx::transaction_base& txn, std::int64_t run_id, const std::vector<reconcile_finding>& findings) {
  if (findings.empty()) return;
  std::vector<std::string> checks, transactions, currencies, details;
  std::vector<std::optional<std::int64_t>> accounts, entries;
  for (const auto& f : findings) {
    checks.emplace_back(to_string(f.check));
    accounts.push_back(f.account_id);
    transactions.push_back(f.transaction_id);
    currencies.push_back(f.currency);
    entries.push_back(f.entry_id);
    details.push_back(f.detail);
  }
  txn.exec_prepared(k_insert_findings, run_id, pg_array(checks), pg_array(accounts), pg_array(transactions),
                    pg_array(currencies), pg_array(entries), pg_array(details));
}

// The statements that read runs, on any connection (the server's readers too). libpqxx defines a
// statement once per connection and prepares it on the server at its first use, so defining it
// again with the same text costs a map lookup.
void register_reads(pqxx::connection& conn) {
  conn.prepare(k_running_run, k_running_run_sql);
  conn.prepare(k_find_run, k_find_run_sql);
  conn.prepare(k_latest_finished, k_latest_finished_sql);
  conn.prepare(k_find_findings, k_find_findings_sql);
  conn.prepare(k_full_run_age, k_full_run_age_sql);
}

void unlock(pqxx::connection& conn) {
  pqxx::nontransaction txn(conn);
  txn.exec_prepared(k_unlock, k_run_lock_key);
}

// Takes the lock's run: closes abandoned runs and records this one.
std::int64_t record_run(pqxx::connection& conn, reconcile_kind kind, const std::string& requested_by) {
  pqxx::work txn(conn);
  txn.exec_prepared(k_abandon_runs);
  const auto id = txn.exec_prepared1(k_insert_run, std::string(to_string(kind)), requested_by)[0].as<std::int64_t>();
  txn.commit();
  return id;
}

}  // namespace

std::string_view to_string(reconcile_kind kind) { return kind == reconcile_kind::full ? "full" : "incremental"; }

std::string_view to_string(reconcile_check check) {
  switch (check) {
    case reconcile_check::currency_zero_sum: return "currency_zero_sum";
    case reconcile_check::transaction_zero_sum: return "transaction_zero_sum";
    case reconcile_check::account_cache: return "account_cache";
    case reconcile_check::balance_after: return "balance_after";
    case reconcile_check::negative_balance: return "negative_balance";
    case reconcile_check::entry_account: return "entry_account";
    case reconcile_check::checkpoint: return "checkpoint";
    case reconcile_check::held_mismatch: return "held_mismatch";
  }
  return "unknown";
}

std::optional<reconcile_check> parse_reconcile_check(std::string_view text) {
  for (auto check : k_reconcile_checks) {
    if (to_string(check) == text) return check;
  }
  return std::nullopt;
}

std::optional<bool> reconcile_run::passed(reconcile_check check) const {
  if (!finished()) return std::nullopt;
  if (check == reconcile_check::checkpoint && kind != reconcile_kind::full) return std::nullopt;
  return std::none_of(findings.begin(), findings.end(), [&](const reconcile_finding& f) { return f.check == check; });
}

void prepare_reconcile_statements(pqxx::connection& conn) {
  register_reads(conn);
  const std::pair<const char*, std::string> statements[] = {
      {k_try_lock, k_try_lock_sql},
      {k_lock, k_lock_sql},
      {k_unlock, k_unlock_sql},
      {k_abandon_runs, k_abandon_runs_sql},
      {k_insert_run, k_insert_run_sql},
      {k_running_run, k_running_run_sql},
      {k_sequence_cache, k_sequence_cache_sql},
      {k_previous_watermark, k_previous_watermark_sql},
      {k_watermark, k_watermark_sql},
      {k_writers_left, k_writers_left_sql},
      {k_set_phase, k_set_phase_sql},
      {k_fill_incremental, k_fill_incremental_sql},
      {k_fill_full, k_fill_full_sql},
      {k_caches_incremental, k_caches_incremental_sql},
      {k_caches_full, k_caches_full_sql},
      {k_balance_after_incremental, k_balance_after_incremental_sql},
      {k_balance_after_full, k_balance_after_full_sql},
      {k_negatives_incremental, k_negatives_incremental_sql},
      {k_negatives_full, k_negatives_full_sql},
      {k_entry_accounts, k_entry_accounts_sql},
      {k_held_incremental, k_held_incremental_sql},
      {k_held_full, k_held_full_sql},
      {k_currencies_incremental, k_currencies_incremental_sql},
      {k_currencies_full, k_currencies_full_sql},
      {k_transactions_incremental, k_transactions_incremental_sql},
      {k_transactions_full, k_transactions_full_sql},
      {k_transaction_sums, k_transaction_sums_sql},
      {k_entry_ranges_incremental, k_entry_ranges_incremental_sql},
      {k_entry_ranges_full, k_entry_ranges_full_sql},
      {k_account_checkpoints, k_account_checkpoints_sql},
      {k_currency_checkpoints, k_currency_checkpoints_sql},
      {k_counts_incremental, k_counts_incremental_sql},
      {k_counts_full, k_counts_full_sql},
      {k_save_accounts_incremental, k_save_accounts_incremental_sql},
      {k_save_accounts_full, k_save_accounts_full_sql},
      {k_save_currencies_incremental, k_save_currencies_incremental_sql},
      {k_save_currencies_full, k_save_currencies_full_sql},
      {k_insert_findings, k_insert_findings_sql},
      {k_finish_run, k_finish_run_sql},
      {k_fail_run, k_fail_run_sql},
  };
  for (const auto& [name, sql] : statements) conn.prepare(name, sql);
}

run_claim claim_run(pqxx::connection& conn, reconcile_kind kind, const std::string& requested_by) {
  for (int look = 0; look < k_claim_looks_max; ++look) {
    bool locked = false;
    std::optional<std::int64_t> running;
    {
      pqxx::nontransaction txn(conn);
      locked = txn.exec_prepared1(k_try_lock, k_run_lock_key)[0].as<bool>();
      if (!locked) {
        const auto rows = txn.exec_prepared(k_running_run);
        if (!rows.empty()) running = rows[0][0].as<std::int64_t>();
      }
    }
    if (locked) return {record_run(conn, kind, requested_by), true, kind};
    if (running) return {*running, false, kind};
    std::this_thread::sleep_for(k_claim_pause);
  }
  return {0, false, kind};
}

run_claim claim_run_waiting(pqxx::connection& conn, reconcile_kind kind, const std::string& requested_by,
                            std::int64_t wait_ms) {
  {
    pqxx::work txn(conn);
    // lock_timeout bounds the wait for the lock; SET LOCAL keeps the connection's own setting.
    txn.exec("SET LOCAL lock_timeout = " + std::to_string(std::max<std::int64_t>(1, wait_ms)));
    txn.exec_prepared(k_lock, k_run_lock_key);
    txn.commit();
  }
  return {record_run(conn, kind, requested_by), true, kind};
}

reconcile_run execute_run(pqxx::connection& conn, std::int64_t run_id, reconcile_kind kind,
                          const run_options& options) {
  const auto started = std::chrono::steady_clock::now();
  run_state state;
  state.kind = kind;
  try {
    {
      pqxx::nontransaction txn(conn);
      // Made here rather than when the statements are defined: a session libpqxx reopened after
      // a lost connection has no temporary table until a run makes it again.
      txn.exec(k_create_totals_sql);
      const auto previous = txn.exec_prepared(k_previous_watermark);
      // With no checkpoint yet, "what changed since the last run" is everything: a full run. So
      // it is after a run that found problems: an incremental run reads only what changed since,
      // and would call the ledger right while what that run found still stands.
      if (previous.empty() || !previous[0][1].as<bool>(false)) {
        state.kind = reconcile_kind::full;
      } else if (state.kind == reconcile_kind::incremental) {
        state.from_entry_id = previous[0][0].as<std::int64_t>();
      }
    }
    settle_watermark(conn, run_id, state, options);

    // One snapshot for every check: caches and entries agree in it, because the writer changes
    // both in one transaction. It writes only the reconciler's own tables (checkpoints, findings,
    // the run's row), so that the run's verdict and its checkpoints commit together.
    pqxx::transaction<pqxx::isolation_level::repeatable_read> txn(conn);
    txn.exec("SET LOCAL statement_timeout = " + std::to_string(options.statement_timeout_ms));
    // Each statement runs once per run, with a watermark that moves: plan it for its values, so
    // that "entries after the watermark" is always the primary key's range it is.
    txn.exec("SET LOCAL plan_cache_mode = force_custom_plan");
    // The aggregates of a full run hold one group per account (and per transaction): memory of
    // their own instead of the server's few MB, which spill to disk (measured: the per-account
    // pass over 10 million entries spilled 200 MB at 4 MB). No JIT: compiling these few big
    // statements took seconds of the little CPU a two-core machine has, for no faster run.
    txn.exec("SET LOCAL work_mem = '" + std::to_string(options.work_mem_mb) + "MB'");
    txn.exec("SET LOCAL jit = off");
    if (state.kind == reconcile_kind::incremental) {
      // Every statement of an incremental run starts from the run's own entries and looks up
      // accounts, checkpoints and entries by key: its cost is what changed. A hash or merge
      // join reads a whole table instead, and the planner picked one whenever a run touched a
      // tenth of the accounts (measured: 530 ms against 100 ms by key, 100,000 accounts).
      txn.exec("SET LOCAL enable_hashjoin = off");
      txn.exec("SET LOCAL enable_mergejoin = off");
    }
    run_checks(txn, state);
    save_checkpoints(txn, run_id, state);
    save_findings(txn, run_id, state.findings);
    txn.exec_prepared(k_finish_run, run_id, std::string(to_string(state.kind)), state.findings.empty(),
                      state.from_entry_id, state.through_entry_id, state.accounts_checked, state.entries_checked,
                      state.transactions_checked, elapsed_ms(started));
    txn.commit();
  } catch (const pqxx::broken_connection&) {
    throw;
  } catch (const pqxx::in_doubt_error&) {
    throw;
  } catch (const std::exception& e) {
    std::string reason = e.what();
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == ' ')) reason.pop_back();
    const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e);
    if (sql != nullptr && is_timeout_sqlstate(sql->sqlstate())) {
      reason = (options.stopping && options.stopping()
                    ? "stopped: the process is shutting down ("
                    : "a statement ran longer than ledger.reconcile_statement_timeout_ms = " +
                          std::to_string(options.statement_timeout_ms) + " ms (") +
               reason + ")";
    }
    pqxx::nontransaction txn(conn);
    txn.exec_prepared(k_fail_run, run_id, reason, elapsed_ms(started));
  }
  unlock(conn);
  auto run = find_run(conn, run_id);
  WALLET_ASSERT(run.has_value(), "a run this connection recorded can be read back");
  return std::move(*run);
}

std::optional<reconcile_run> find_run(pqxx::connection& conn, std::int64_t run_id) {
  register_reads(conn);
  pqxx::read_transaction txn(conn);
  return load_run(txn, txn.exec_prepared(k_find_run, run_id));
}

std::optional<reconcile_run> latest_finished_run(pqxx::connection& conn) {
  register_reads(conn);
  pqxx::read_transaction txn(conn);
  return load_run(txn, txn.exec_prepared(k_latest_finished));
}

std::optional<std::int64_t> running_run_id(pqxx::connection& conn) {
  register_reads(conn);
  pqxx::read_transaction txn(conn);
  const auto rows = txn.exec_prepared(k_running_run);
  if (rows.empty()) return std::nullopt;
  return rows[0][0].as<std::int64_t>();
}

std::optional<double> seconds_since_full_run(pqxx::connection& conn) {
  register_reads(conn);
  pqxx::read_transaction txn(conn);
  return optional_of<double>(txn.exec_prepared1(k_full_run_age)[0]);
}

}  // namespace persistence
