#pragma once

// A fixed set of threads, each owning one PostgreSQL connection, that run read queries and the
// administrative writes that move no money. Blocking database I/O happens here, never on an
// HTTP or CAF scheduler thread.
//
// Bounds: at most `queue_max` jobs wait; a job that waited longer than `wait_ms` for a
// connection is answered "database unavailable" without touching the database.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actors/query_result.hpp"
#include "ledger/errors.hpp"
#include "persistence/database.hpp"

namespace actors {

class reader_pool {
 public:
  // `run` gets a live connection and returns what to deliver once the database work is done;
  // `fail` gets the reason the job could not run. Exactly one of `fail` and the delivery is
  // called: the delivery runs outside the database error handling, so a delivery that throws is
  // logged as the bug it is, never answered a second time through `fail`.
  struct job {
    std::function<std::function<void()>(pqxx::connection&)> run;
    std::function<void(ledger::error_code, std::string)> fail;
  };

  reader_pool(persistence::connection_options options, int readers, std::int64_t queue_max, std::int64_t wait_ms,
              std::int64_t reconnect_backoff_ms);
  ~reader_pool();
  reader_pool(const reader_pool&) = delete;
  reader_pool& operator=(const reader_pool&) = delete;

  // Never blocks; calls `fail` at once when the queue is full.
  void submit(job j);
  // A job whose answer is `run`'s value, or the reason it could not run, delivered to `done`.
  template <typename T>
  void read(std::function<T(pqxx::connection&)> run, query_callback<T> done) {
    submit({
        [run = std::move(run), done](pqxx::connection& conn) -> std::function<void()> {
          query_result<T> result;
          result.value = run(conn);
          return [done, result = std::move(result)]() mutable { done(std::move(result)); };
        },
        [done](ledger::error_code code, std::string detail) {
          query_result<T> result;
          result.outcome = code;
          result.detail = std::move(detail);
          done(std::move(result));
        },
    });
  }
  void stop();

  std::int64_t queued() const;
  // Jobs accepted since the start: every database read the server has asked for.
  std::uint64_t submitted() const { return submitted_.load(std::memory_order_relaxed); }

 private:
  struct queued_job {
    job j;
    std::chrono::steady_clock::time_point enqueued_at;
  };
  void run_thread();
  // Fails jobs that waited longer than `wait_` even while every reader is busy.
  void run_expirer();

  persistence::connection_options options_;
  std::int64_t queue_max_;
  std::chrono::milliseconds wait_;
  std::chrono::milliseconds reconnect_backoff_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<queued_job> queue_;
  std::atomic<std::uint64_t> submitted_{0};
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  std::thread expirer_;
  std::condition_variable expirer_wake_;
};

}  // namespace actors
