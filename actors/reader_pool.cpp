#include "actors/reader_pool.hpp"

#include <pthread.h>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "persistence/api_keys.hpp"

namespace actors {

reader_pool::reader_pool(persistence::connection_options options, int readers, std::int64_t queue_max,
                         std::int64_t wait_ms, std::int64_t reconnect_backoff_ms)
    : options_(std::move(options)), queue_max_(queue_max), wait_(wait_ms), reconnect_backoff_(reconnect_backoff_ms) {
  threads_.reserve(static_cast<std::size_t>(readers));
  for (int i = 0; i < readers; ++i)
    threads_.emplace_back([this] {
      pthread_setname_np(pthread_self(), "wallet-reader");
      run_thread();
    });
  expirer_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "wallet-expirer");
    run_expirer();
  });
}

void reader_pool::run_expirer() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    const auto now = std::chrono::steady_clock::now();
    std::vector<job> expired;
    // The queue is in arrival order: the expired jobs are at its front.
    while (!queue_.empty() && now - queue_.front().enqueued_at > wait_) {
      expired.push_back(std::move(queue_.front().j));
      queue_.pop_front();
    }
    if (!expired.empty()) {
      lock.unlock();
      for (auto& j : expired)
        j.fail(ledger::error_code::database_unavailable, "no database connection became free in time");
      lock.lock();
      continue;
    }
    const auto next = queue_.empty() ? now + wait_ : queue_.front().enqueued_at + wait_ + std::chrono::milliseconds(1);
    expirer_wake_.wait_until(lock, next);
  }
}

reader_pool::~reader_pool() { stop(); }

void reader_pool::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  ready_.notify_all();
  expirer_wake_.notify_all();
  for (auto& t : threads_) t.join();
  if (expirer_.joinable()) expirer_.join();
  // Jobs still queued are answered, never dropped.
  for (auto& q : queue_) q.j.fail(ledger::error_code::server_busy, "the server is shutting down");
  queue_.clear();
}

std::int64_t reader_pool::queued() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::int64_t>(queue_.size());
}

void reader_pool::submit(job j) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_ && static_cast<std::int64_t>(queue_.size()) < queue_max_) {
      queue_.push_back({std::move(j), std::chrono::steady_clock::now()});
      submitted_.fetch_add(1, std::memory_order_relaxed);
      ready_.notify_one();
      if (queue_.size() == 1) expirer_wake_.notify_one();
      return;
    }
  }
  j.fail(ledger::error_code::server_busy, "too many database reads are queued; retry shortly");
}

void reader_pool::run_thread() {
  std::unique_ptr<pqxx::connection> conn;
  auto last_attempt = std::chrono::steady_clock::time_point{};
  for (;;) {
    queued_job next;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - next.enqueued_at > wait_) {
      next.j.fail(ledger::error_code::database_unavailable, "no database connection became free in time");
      continue;
    }
    if (!conn || !conn->is_open()) {
      conn.reset();
      // While the database is down, one connection attempt per backoff interval; jobs in
      // between fail at once instead of each waiting for a connect timeout.
      if (now - last_attempt < reconnect_backoff_) {
        next.j.fail(ledger::error_code::database_unavailable, "the database is unavailable");
        continue;
      }
      last_attempt = now;
      try {
        conn = persistence::connect(options_);
      } catch (const std::exception& e) {
        spdlog::warn("database reader cannot connect: {}", e.what());
        next.j.fail(ledger::error_code::database_unavailable, "the database is unavailable");
        continue;
      }
    }
    std::function<void()> deliver;
    try {
      deliver = next.j.run(*conn);
    } catch (const pqxx::broken_connection& e) {
      spdlog::warn("database reader lost its connection: {}", e.what());
      conn.reset();
      next.j.fail(ledger::error_code::database_unavailable, "the database is unavailable");
    } catch (const pqxx::sql_error& e) {
      if (e.sqlstate() == "57014" || e.sqlstate() == "55P03") {
        next.j.fail(ledger::error_code::database_unavailable, "the database did not answer in time");
      } else {
        spdlog::error("database read failed: {} ({})", e.what(), e.sqlstate());
        next.j.fail(ledger::error_code::internal, "the database refused the query");
      }
    } catch (const pqxx::transaction_rollback& e) {
      // In libpqxx 6 not an sql_error. A deadlock or a serialization failure: PostgreSQL rolled
      // the job's transaction back to let another go on, worth a retry by the client (503).
      // A statement whose completion is unknown may have taken effect: the client must look.
      if (dynamic_cast<const pqxx::statement_completion_unknown*>(&e) != nullptr) {
        spdlog::error("database read ended in doubt: {}", e.what());
        next.j.fail(ledger::error_code::outcome_unknown, "the database could not tell whether the request took effect");
      } else {
        spdlog::warn("database read rolled back: {}", e.what());
        next.j.fail(ledger::error_code::database_unavailable,
                    "the database rolled the request back to resolve a lock conflict; retry");
      }
    } catch (const persistence::caller_key_revoked& e) {
      next.j.fail(ledger::error_code::unauthorized, e.what());
    } catch (const std::exception& e) {
      spdlog::error("database read failed: {}", e.what());
      if (conn && !conn->is_open()) conn.reset();
      next.j.fail(ledger::error_code::internal, "the database query failed");
    }
    if (!deliver) continue;
    try {
      deliver();
    } catch (const std::exception& e) {
      // The query's answer was delivered (at least in part); answering again would reach the
      // caller twice. A throwing callback is a bug in it: loud, but the reader keeps serving.
      spdlog::critical("a database read's callback threw: {}", e.what());
    }
  }
}

}  // namespace actors
