#pragma once

// Reconciliation: the ledger's invariants checked against the database, incrementally.
//
// A run reads the entries added since the latest finished run (its watermark), checks them
// against per-account and per-currency checkpoints, and moves the checkpoints to a new watermark,
// all in one REPEATABLE READ transaction. A full run recomputes everything from all entries,
// verifies the stored checkpoints as well, and rebuilds them. docs/reconciliation.md explains why
// the watermark is safe although transactions commit out of entry-id order.
//
// One run at a time across every process: a run holds a session-level advisory lock on its
// connection from claim to end. Runs and their findings are rows (migration 004), so any process
// can answer for the latest finished run.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "persistence/pqxx_fwd.hpp"

namespace persistence {

enum class reconcile_kind : std::uint8_t { incremental, full };
std::string_view to_string(reconcile_kind kind);

// Each check names what it found broken (docs/reconciliation.md lists them).
enum class reconcile_check : std::uint8_t {
  currency_zero_sum,     // a currency's entries do not sum to zero
  transaction_zero_sum,  // a transaction's entries do not sum to zero in a currency
  account_cache,         // account.balance / version differ from the sum / count of its entries
  balance_after,         // an account's last entry's balance_after differs from the sum of its entries
  negative_balance,      // a balance below zero on an account that does not allow it
  entry_account,         // an entry names a missing account or one of another currency
  checkpoint,            // a stored checkpoint differs from its entries (full runs only)
  held_mismatch,         // account.held differs from the sum of the account's ACTIVE holds (migration 015)
};
inline constexpr reconcile_check k_reconcile_checks[] = {
    reconcile_check::currency_zero_sum, reconcile_check::transaction_zero_sum, reconcile_check::account_cache,
    reconcile_check::balance_after,     reconcile_check::negative_balance,     reconcile_check::entry_account,
    reconcile_check::checkpoint,        reconcile_check::held_mismatch};
std::string_view to_string(reconcile_check check);
std::optional<reconcile_check> parse_reconcile_check(std::string_view text);

struct reconcile_finding {
  reconcile_check check = reconcile_check::account_cache;
  std::optional<std::int64_t> account_id;
  std::string transaction_id;  // empty when none
  std::string currency;        // empty when none
  std::optional<std::int64_t> entry_id;
  std::string detail;
};

// A row of reconciliation_run and its findings.
struct reconcile_run {
  std::int64_t id = 0;
  reconcile_kind kind = reconcile_kind::incremental;
  std::string status;  // running, finished, failed
  std::string phase;   // while running: waiting, checking
  std::string requested_by;
  std::string started_at;
  std::string finished_at;
  std::optional<std::int64_t> from_entry_id;
  std::optional<std::int64_t> through_entry_id;
  std::optional<bool> ok;  // set when finished
  std::int64_t accounts_checked = 0;
  std::int64_t entries_checked = 0;
  std::int64_t transactions_checked = 0;
  double duration_ms = 0;
  std::string error;  // set when failed
  std::vector<reconcile_finding> findings;

  bool finished() const { return status == "finished"; }
  // True when the run made this check and found nothing; a full-only check on an incremental run
  // is nullopt (not made).
  std::optional<bool> passed(reconcile_check check) const;
};

// At most this many findings per check and run are listed (the run fails all the same).
inline constexpr int k_findings_per_check_max = 100;

// Prepares the statements of this file and the session's scratch table on a connection.
void prepare_reconcile_statements(pqxx::connection& conn);

struct run_claim {
  std::int64_t run_id = 0;  // 0: no run could be claimed or found
  bool started = false;     // true: this connection now owns the run; false: another one runs it
  reconcile_kind kind = reconcile_kind::incremental;
};

// Starts a run unless one is running anywhere: takes the advisory lock (without waiting),
// records the run and returns it with started = true. When another session holds the lock,
// returns that session's run (started = false). The claim looks a bounded number of times, since
// the other session may be between taking the lock and recording its run; run_id 0 means it found
// neither.
run_claim claim_run(pqxx::connection& conn, reconcile_kind kind, const std::string& requested_by);

// The same, but waits up to `wait_ms` for a run in progress to end instead of reporting it
// (wallet-admin). Throws a pqxx error when the wait runs out.
run_claim claim_run_waiting(pqxx::connection& conn, reconcile_kind kind, const std::string& requested_by,
                            std::int64_t wait_ms);

struct run_options {
  // Every statement of the run, and the wait for older writers, is bounded by this.
  std::int64_t statement_timeout_ms = 600'000;
  // work_mem of the run's transaction (the aggregates of a full run).
  std::int64_t work_mem_mb = 64;
  // Asked while waiting for older writers; true stops the run (it fails as "stopped").
  std::function<bool()> stopping;
};

// Executes a run claimed on this connection (started = true) to its end: records its outcome
// (finished with its findings, or failed with the reason), moves the checkpoints when it finished,
// and releases the advisory lock. An incremental run with no finished run before it is made a
// full one. Throws only when the connection is lost; the run then stays 'running' until the next
// claim marks it failed.
reconcile_run execute_run(pqxx::connection& conn, std::int64_t run_id, reconcile_kind kind, const run_options& options);

std::optional<reconcile_run> find_run(pqxx::connection& conn, std::int64_t run_id);
// The latest run with a verdict (status finished), with its findings.
std::optional<reconcile_run> latest_finished_run(pqxx::connection& conn);
// The run in progress, if any (as recorded: a run whose process died shows here until the next
// claim marks it failed).
std::optional<std::int64_t> running_run_id(pqxx::connection& conn);
// Seconds since the latest finished full run, if there is one.
std::optional<double> seconds_since_full_run(pqxx::connection& conn);

}  // namespace persistence
