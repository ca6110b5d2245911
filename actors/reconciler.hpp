#pragma once

// The reconciler: runs reconciliation (persistence/reconcile.hpp) on a thread and a database
// connection of its own, so that a run of minutes never takes a reader from the requests.
//
// Runs start on request (an operator's POST) or on its timer: every `incremental_interval_s` a
// run of what changed since the last one, which is a full run instead when the latest full run
// (by any process) is older than `full_interval_s`. One run at a time: a request while a run is
// in progress, here or in another process, is answered with that run's id.
//
//   idle ──request or timer──► claiming ──lock taken──► running ──end──► idle
//                                  │ another process holds the lock: its run's id
//                                  ▼
//                                 idle

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ledger/errors.hpp"
#include "persistence/database.hpp"
#include "persistence/reconcile.hpp"

namespace actors {

struct reconciler_config {
  // The runs' connection; its statement_timeout_ms is the runs' own (ledger.reconcile_statement_timeout_ms).
  persistence::connection_options database;
  std::int64_t incremental_interval_s = 300;  // 0: no timer-driven incremental runs
  std::int64_t full_interval_s = 86'400;      // 0: no timer-driven full runs
  std::int64_t reconnect_backoff_ms = 500;
  std::int64_t work_mem_mb = 64;  // ledger.reconcile_work_mem_mb
};

struct reconciler_stats {
  std::uint64_t runs = 0;      // runs this process took to a verdict
  std::uint64_t failures = 0;  // of those, runs that found a broken invariant
  std::uint64_t errors = 0;    // runs that ended without a verdict (timeout, database error)
  bool last_ok = true;
  double last_ms = 0;
  std::int64_t watermark = 0;  // the entry id this process's latest verdict covers
};

class reconciler {
 public:
  // ok with the claim, or why no run could be started or named.
  using claim_callback = std::function<void(ledger::error_code, std::string detail, persistence::run_claim)>;

  explicit reconciler(reconciler_config config);
  ~reconciler();
  reconciler(const reconciler&) = delete;
  reconciler& operator=(const reconciler&) = delete;

  void start();
  // Stops the timer and cancels a run in progress (it is recorded as failed: stopped).
  void stop();

  // Starts a run, or names the one in progress. Never blocks on a run: `done` runs on the
  // reconciler's thread once the run is claimed, or at once when one is in progress here.
  void request(bool full, std::string requested_by, claim_callback done);

  reconciler_stats stats() const;

 private:
  struct waiter {
    bool full = false;
    std::string requested_by;
    claim_callback done;
  };
  void run_thread();
  // A live connection with the statements prepared, or false (at most one attempt per backoff).
  bool ensure_connection();
  void run_once(persistence::reconcile_kind kind, const std::string& requested_by);
  void answer_waiters(ledger::error_code code, const std::string& detail, persistence::run_claim claim);

  reconciler_config config_;
  std::thread thread_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  bool stopping_ = false;
  bool thread_done_ = false;
  std::vector<waiter> waiters_;
  persistence::run_claim running_;  // run_id 0 when no run of this process is in progress

  // Owned by the thread; the mutex guards replacing it, so that stop() may cancel its query.
  std::mutex conn_mutex_;
  std::unique_ptr<pqxx::connection> conn_;
  std::chrono::steady_clock::time_point last_connect_attempt_{};

  std::atomic<std::uint64_t> runs_{0};
  std::atomic<std::uint64_t> failures_{0};
  std::atomic<std::uint64_t> errors_{0};
  std::atomic<bool> last_ok_{true};
  std::atomic<double> last_ms_{0};
  std::atomic<std::int64_t> watermark_{0};
};

}  // namespace actors
