#include "actors/reconciler.hpp"

#include <pthread.h>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace actors {
namespace {

// While stopping, a run's query is cancelled again at this pace until the thread has ended (a
// cancel that lands between two statements cancels nothing).
constexpr std::chrono::milliseconds k_stop_cancel_every{100};

std::string summary(const persistence::reconcile_run& run) {
  std::string text;
  for (auto check : persistence::k_reconcile_checks) {
    const auto n = std::count_if(run.findings.begin(), run.findings.end(),
                                 [&](const persistence::reconcile_finding& f) { return f.check == check; });
    if (n == 0) continue;
    if (!text.empty()) text += ", ";
    text += std::to_string(n) + " " + std::string(persistence::to_string(check));
  }
  return text;
}

}  // namespace

reconciler::reconciler(reconciler_config config) : config_(std::move(config)) {}

reconciler::~reconciler() { stop(); }

void reconciler::start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "wallet-reconcile");
    run_thread();
    std::lock_guard lock(mutex_);
    thread_done_ = true;
    done_.notify_all();
  });
}

void reconciler::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) {
    std::unique_lock lock(mutex_);
    while (!done_.wait_for(lock, k_stop_cancel_every, [this] { return thread_done_; })) {
      lock.unlock();
      {
        std::lock_guard conn_lock(conn_mutex_);
        if (conn_ && conn_->is_open()) {
          try {
            conn_->cancel_query();
          } catch (const std::exception& e) {
            spdlog::warn("reconciler: could not cancel the run in progress: {}", e.what());
          }
        }
      }
      lock.lock();
    }
    lock.unlock();
    thread_.join();
  }
  answer_waiters(ledger::error_code::server_busy, "the server is shutting down", {});
}

void reconciler::request(bool full, std::string requested_by, claim_callback done) {
  persistence::run_claim running;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) {
      running.run_id = -1;
    } else if (running_.run_id != 0) {
      running = running_;
      running.started = false;
    } else {
      waiters_.push_back({full, std::move(requested_by), std::move(done)});
      wake_.notify_one();
      return;
    }
  }
  if (running.run_id < 0) return done(ledger::error_code::server_busy, "the server is shutting down", {});
  done(ledger::error_code::ok, {}, running);
}

reconciler_stats reconciler::stats() const {
  reconciler_stats s;
  s.runs = runs_.load();
  s.failures = failures_.load();
  s.errors = errors_.load();
  s.last_ok = last_ok_.load();
  s.last_ms = last_ms_.load();
  s.watermark = watermark_.load();
  return s;
}

void reconciler::answer_waiters(ledger::error_code code, const std::string& detail, persistence::run_claim claim) {
  std::vector<waiter> waiters;
  {
    std::lock_guard lock(mutex_);
    waiters.swap(waiters_);
  }
  for (auto& w : waiters) w.done(code, detail, claim);
}

bool reconciler::ensure_connection() {
  if (conn_ && conn_->is_open()) return true;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_connect_attempt_ < std::chrono::milliseconds(config_.reconnect_backoff_ms)) return false;
  last_connect_attempt_ = now;
  try {
    auto conn = persistence::connect(config_.database);
    persistence::prepare_reconcile_statements(*conn);
    std::lock_guard lock(conn_mutex_);
    conn_ = std::move(conn);
    return true;
  } catch (const std::exception& e) {
    spdlog::warn("reconciler cannot connect: {}", e.what());
    std::lock_guard lock(conn_mutex_);
    conn_.reset();
    return false;
  }
}

void reconciler::run_thread() {
  // The timer ticks at the incremental interval (or the full one when incremental runs are off);
  // each tick asks the database how old the latest full run is, so that several processes share
  // one full-audit schedule.
  const std::int64_t tick_s =
      config_.incremental_interval_s > 0 ? config_.incremental_interval_s : config_.full_interval_s;
  // With both timers off the thread only answers requests; "never" is a far future that every
  // clock conversion still represents.
  const auto tick = tick_s > 0 ? std::chrono::seconds(tick_s) : std::chrono::seconds(std::int64_t{10} * 365 * 86'400);
  auto next_tick = std::chrono::steady_clock::now() + tick;
  for (;;) {
    bool requested = false;
    bool full = false;
    std::string requested_by = "timer";
    {
      std::unique_lock lock(mutex_);
      wake_.wait_until(lock, next_tick, [this] { return stopping_ || !waiters_.empty(); });
      if (stopping_) return;
      if (!waiters_.empty()) {
        requested = true;
        requested_by = waiters_.front().requested_by;
        for (const auto& w : waiters_) full = full || w.full;
      } else if (std::chrono::steady_clock::now() < next_tick) {
        continue;
      }
    }
    if (!requested) next_tick = std::chrono::steady_clock::now() + tick;
    if (!ensure_connection()) {
      answer_waiters(ledger::error_code::database_unavailable, "the database is unavailable", {});
      continue;
    }
    try {
      if (!requested) {
        const auto age = persistence::seconds_since_full_run(*conn_);
        full = config_.full_interval_s > 0 && (!age || *age >= static_cast<double>(config_.full_interval_s));
        if (!full && config_.incremental_interval_s == 0) continue;
      }
      run_once(full ? persistence::reconcile_kind::full : persistence::reconcile_kind::incremental, requested_by);
    } catch (const std::exception& e) {
      // The connection was lost (or a claim failed): the connection is opened anew, and a run in
      // progress stays 'running' until the next claim closes it.
      spdlog::warn("reconciler: database error, reconnecting: {}", e.what());
      ++errors_;
      {
        std::lock_guard lock(mutex_);
        running_ = {};
      }
      answer_waiters(ledger::error_code::database_unavailable, "the database is unavailable", {});
      std::lock_guard lock(conn_mutex_);
      conn_.reset();
    }
  }
}

void reconciler::run_once(persistence::reconcile_kind kind, const std::string& requested_by) {
  const auto claim = persistence::claim_run(*conn_, kind, requested_by);
  std::vector<waiter> waiters;
  {
    std::lock_guard lock(mutex_);
    waiters.swap(waiters_);
    if (claim.started) running_ = claim;
  }
  for (auto& w : waiters) {
    if (claim.run_id == 0) {
      w.done(ledger::error_code::server_busy, "another process is starting a reconciliation run; retry shortly", claim);
    } else {
      w.done(ledger::error_code::ok, {}, claim);
    }
  }
  if (!claim.started) return;

  persistence::run_options options;
  options.statement_timeout_ms = config_.database.statement_timeout_ms;
  options.work_mem_mb = config_.work_mem_mb;
  options.stopping = [this] {
    std::lock_guard lock(mutex_);
    return stopping_;
  };
  const auto run = persistence::execute_run(*conn_, claim.run_id, kind, options);
  {
    std::lock_guard lock(mutex_);
    running_ = {};
  }
  if (!run.finished()) {
    ++errors_;
    spdlog::error("reconciliation run {} ({}) ended without a verdict: {}", run.id, persistence::to_string(run.kind),
                  run.error);
    return;
  }
  ++runs_;
  last_ok_ = run.ok.value_or(false);
  last_ms_ = run.duration_ms;
  watermark_ = run.through_entry_id.value_or(0);
  if (run.ok.value_or(false)) {
    spdlog::info("reconciliation run {} ({}) ok: entries {} to {}, {} accounts, {} entries in {:.1f} ms", run.id,
                 persistence::to_string(run.kind), run.from_entry_id.value_or(0), run.through_entry_id.value_or(0),
                 run.accounts_checked, run.entries_checked, run.duration_ms);
  } else {
    ++failures_;
    spdlog::critical("reconciliation run {} ({}) FAILED: {}; GET /v1/admin/reconciliation/runs/{} lists them", run.id,
                     persistence::to_string(run.kind), summary(run), run.id);
  }
}

}  // namespace actors
