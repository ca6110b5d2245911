#include "events/relay.hpp"

#include <pthread.h>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <sstream>

#include "base/assert.hpp"
#include "events/stream_entry.hpp"
#include "events/stream_writer.hpp"
#include "persistence/outbox.hpp"
#include "ratelimit/redis_url.hpp"

namespace events {
namespace {

using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Pauses between attempts that keep failing: doubling from `first`, never above `max`.
class backoff {
 public:
  backoff(milliseconds first, milliseconds max) : first_(std::min(first, max)), max_(max), next_(first_) {}
  milliseconds next() {
    const auto pause = next_;
    next_ = std::min(next_ * 2, max_);
    return pause;
  }
  void reset() { next_ = first_; }

 private:
  milliseconds first_;
  milliseconds max_;
  milliseconds next_;
};

// Outbox rows one prune statement deletes at most (one transaction, under the relay lock), and
// statements one prune round runs at most, one after each relay round: a backlog is deleted over
// several rounds, and publishing is never held up for more than one statement.
constexpr int k_prune_batch = 1'000;
constexpr int k_prune_statements_max = 50;

}  // namespace

relay_config relay_config_from(const config::settings& s) {
  relay_config c;
  c.database.url = s.database.url;
  c.database.connect_timeout_ms = s.database.connect_timeout_ms;
  c.database.statement_timeout_ms = s.database.statement_timeout_ms;
  c.database.lock_timeout_ms = s.database.lock_timeout_ms;
  c.database.application_name = "wallet-relay";
  c.redis_url = s.events.redis_url.empty() ? s.redis.url : s.events.redis_url;
  c.batch_rows_max = s.events.batch_rows_max;
  c.stream_maxlen = s.events.stream_maxlen;
  c.poll_interval_ms = s.events.poll_interval_ms;
  c.redis_timeout_ms = s.events.redis_timeout_ms;
  c.backoff_ms_max = s.events.backoff_ms_max;
  c.feed_retention_days = s.events.feed_retention_days;
  c.prune_interval_ms = s.events.prune_interval_ms;
  return c;
}

struct outbox_relay::state {
  relay_config config;
  relay_hooks hooks;
  ratelimit::redis_endpoint endpoint;

  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;

  std::atomic<std::uint64_t> rounds{0};
  std::atomic<std::uint64_t> events_published{0};
  std::atomic<std::uint64_t> rows_published{0};
  std::atomic<std::uint64_t> rows_sequenced{0};
  std::atomic<std::uint64_t> rows_pruned{0};
  std::atomic<std::uint64_t> redis_errors{0};
  std::atomic<std::uint64_t> database_errors{0};
  std::atomic<bool> holds_lock{false};
  std::atomic<bool> redis_connected{false};
  // The lag as last measured, and when (steady clock): the page adds the time since, so a relay
  // that cannot reach the database shows its lag growing rather than frozen.
  std::atomic<double> lag_ms{0};
  std::atomic<std::int64_t> lag_measured_ns{0};

  bool stop_requested() {
    std::lock_guard lock(mutex);
    return stopping;
  }
};

// The relay thread's own things: its connections and when each may be tried again.
class outbox_relay::worker {
 public:
  explicit worker(state& s)
      : s_(s),
        redis_(s_.endpoint, k_stream_key, s_.config.stream_maxlen),
        poll_(s_.config.poll_interval_ms),
        redis_timeout_(s_.config.redis_timeout_ms),
        database_backoff_(poll_, milliseconds(s_.config.backoff_ms_max)),
        redis_backoff_(poll_, milliseconds(s_.config.backoff_ms_max)),
        database_retry_at_(steady::now()),
        redis_retry_at_(steady::now()) {}

  // One pass of the loop; returns how long to wait before the next (zero: at once).
  milliseconds pass() {
    connect_database();
    if (!database_) return until(database_retry_at_);
    connect_redis();
    milliseconds wait = poll_;
    try {
      if (round()) wait = milliseconds(0);
      prune_when_due();
      measure_lag();
      database_backoff_.reset();
      if (database_down_) spdlog::info("events: relay database work succeeds again");
      database_down_ = false;
    } catch (const round_aborted& e) {
      spdlog::info("events: relay round aborted ({}); its rows stay unpublished", e.what());
    } catch (const pqxx::broken_connection& e) {
      database_failed(e.what());
      database_.reset();
      wait = until(database_retry_at_);
    } catch (const std::exception& e) {
      // A statement that failed (a timeout, a COMMIT whose outcome is unknown, a row the server
      // cannot read): nothing of the round was marked, so its rows are published again later.
      database_failed(e.what());
      wait = until(database_retry_at_);
    }
    s_.redis_connected.store(redis_.is_open(), std::memory_order_relaxed);
    return wait;
  }

 private:
  static milliseconds until(steady::time_point at) {
    return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(at - steady::now()));
  }

  void connect_database() {
    if (database_ || steady::now() < database_retry_at_) return;
    try {
      database_ = persistence::connect(s_.config.database);
      // Every statement of the relay finds its rows by key (tests/persistence/posting_plan_tests.cpp).
      persistence::find_rows_by_key(*database_);
    } catch (const std::exception& e) {
      database_failed(e.what());
    }
  }

  void database_failed(const std::string& why) {
    s_.database_errors.fetch_add(1, std::memory_order_relaxed);
    s_.holds_lock.store(false, std::memory_order_relaxed);
    const auto pause = database_backoff_.next();
    database_retry_at_ = steady::now() + pause;
    if (!database_down_) {
      spdlog::warn("events: relay database work failed ({}); retrying within {} ms", why, pause.count());
    } else {
      spdlog::debug("events: relay database work failed again ({})", why);
    }
    database_down_ = true;
  }

  void connect_redis() {
    if (redis_.is_open() || steady::now() < redis_retry_at_) return;
    const std::string failure = redis_.open(steady::now() + redis_timeout_);
    if (failure.empty()) {
      redis_backoff_.reset();
      if (redis_down_)
        spdlog::info("events: Redis at {}:{} answers again; publishing", s_.endpoint.host, s_.endpoint.port);
      redis_down_ = false;
      return;
    }
    redis_failed(failure);
  }

  void redis_failed(const std::string& why) {
    s_.redis_errors.fetch_add(1, std::memory_order_relaxed);
    redis_.close();
    const auto pause = redis_backoff_.next();
    redis_retry_at_ = steady::now() + pause;
    if (!redis_down_) {
      spdlog::warn("events: Redis at {}:{} unusable ({}); events wait in the outbox, retrying within {} ms",
                   s_.endpoint.host, s_.endpoint.port, why, pause.count());
    } else {
      spdlog::debug("events: Redis still unusable ({})", why);
    }
    redis_down_ = true;
  }

  // One round (see relay.hpp); true when it found a full batch, so the next should come at once.
  // The positions are committed before anything is sent: a stream entry names a position the feed
  // keeps whatever becomes of the sending (a Redis error, a crash before the mark), and the feed
  // advances while Redis cannot be written.
  bool round() {
    s_.rounds.fetch_add(1, std::memory_order_relaxed);
    const auto rows_max = s_.config.batch_rows_max;
    std::int64_t sequenced = 0;
    {
      pqxx::work txn(*database_);
      if (!persistence::try_relay_lock(txn)) {
        txn.abort();
        s_.holds_lock.store(false, std::memory_order_relaxed);
        return false;
      }
      s_.holds_lock.store(true, std::memory_order_relaxed);
      sequenced = persistence::sequence_outbox(txn, rows_max);
      txn.commit();
    }
    s_.rows_sequenced.fetch_add(static_cast<std::uint64_t>(sequenced), std::memory_order_relaxed);
    std::vector<std::int64_t> rows;
    if (redis_.is_open()) {
      pqxx::work txn(*database_);
      // Another relay may have taken the lock in between: it publishes.
      if (!persistence::try_relay_lock(txn)) {
        txn.abort();
        s_.holds_lock.store(false, std::memory_order_relaxed);
        return false;
      }
      rows = persistence::claim_outbox(txn, rows_max);
      const auto events = persistence::outbox_events(txn, rows, labels_);
      if (!events.empty()) {
        const std::string failure = redis_.append(events, steady::now() + redis_timeout_);
        if (!failure.empty()) {
          txn.abort();
          redis_failed(failure);
          return false;
        }
        s_.events_published.fetch_add(events.size(), std::memory_order_relaxed);
        if (s_.hooks.after_stream_write) s_.hooks.after_stream_write(rows);
      }
      persistence::mark_published(txn, rows);
      txn.commit();
    }
    s_.rows_published.fetch_add(rows.size(), std::memory_order_relaxed);
    return sequenced == rows_max || static_cast<std::int64_t>(rows.size()) == rows_max;
  }

  // One prune statement when a prune round is due (every prune_interval_ms, the first at once) or
  // under way; the round ends when a statement deletes less than a batch, when its statements are
  // spent, or when another relay holds the lock.
  void prune_when_due() {
    if (s_.config.feed_retention_days == 0) return;
    if (prune_statements_left_ == 0) {
      const auto now = steady::now();
      if (pruned_at_ && now - *pruned_at_ < milliseconds(s_.config.prune_interval_ms)) return;
      pruned_at_ = now;
      prune_statements_left_ = k_prune_statements_max;
      pruned_in_round_ = 0;
    }
    --prune_statements_left_;
    const auto pruned = persistence::prune_outbox(*database_, s_.config.feed_retention_days, k_prune_batch);
    if (pruned) {
      pruned_in_round_ += pruned->rows;
      pruned_through_ = pruned->through_cursor;
      s_.rows_pruned.fetch_add(static_cast<std::uint64_t>(pruned->rows), std::memory_order_relaxed);
    }
    if (!pruned || pruned->rows < k_prune_batch) prune_statements_left_ = 0;
    if (prune_statements_left_ == 0 && pruned_in_round_ > 0) {
      spdlog::info(
          "events: deleted {} outbox rows past events.feed_retention_days ({}); the feed now starts after "
          "cursor {}",
          pruned_in_round_, s_.config.feed_retention_days, pruned_through_);
    }
  }

  void measure_lag() {
    s_.lag_ms.store(persistence::outbox_lag_ms(*database_), std::memory_order_relaxed);
    s_.lag_measured_ns.store(steady::now().time_since_epoch().count(), std::memory_order_relaxed);
  }

  state& s_;
  std::unique_ptr<pqxx::connection> database_;
  persistence::account_labels labels_;
  stream_writer redis_;
  milliseconds poll_;
  milliseconds redis_timeout_;
  backoff database_backoff_;
  backoff redis_backoff_;
  steady::time_point database_retry_at_;
  steady::time_point redis_retry_at_;
  bool database_down_ = false;
  bool redis_down_ = false;
  std::optional<steady::time_point> pruned_at_;  // when the last prune round started
  int prune_statements_left_ = 0;                // of the prune round under way (0: none)
  std::int64_t pruned_in_round_ = 0;
  std::int64_t pruned_through_ = 0;  // the cursor of the last event deleted, as last recorded
};

outbox_relay::outbox_relay(relay_config config, relay_hooks hooks) : state_(std::make_unique<state>()) {
  WALLET_ASSERT(config.batch_rows_max > 0 && config.poll_interval_ms > 0 && config.redis_timeout_ms > 0 &&
                    config.backoff_ms_max > 0,
                "the relay's bounds are validated positive");
  state_->endpoint = ratelimit::parse_redis_url(config.redis_url);
  state_->config = std::move(config);
  state_->hooks = std::move(hooks);
}

outbox_relay::~outbox_relay() { stop(); }

void outbox_relay::start() {
  WALLET_ASSERT(!thread_.joinable(), "the relay starts once");
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "wallet-relay");
    run();
  });
  spdlog::info("events: outbox relay started (stream {} at {}:{}, {} rows a round at most)", k_stream_key,
               state_->endpoint.host, state_->endpoint.port, state_->config.batch_rows_max);
}

void outbox_relay::stop() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  if (thread_.joinable()) thread_.join();
}

void outbox_relay::run() {
  auto& s = *state_;
  worker w(s);
  while (!s.stop_requested()) {
    const auto wait = w.pass();
    std::unique_lock lock(s.mutex);
    s.wake.wait_for(lock, std::max(wait, milliseconds(0)), [&] { return s.stopping; });
  }
}

relay_stats outbox_relay::stats() const {
  const auto& s = *state_;
  relay_stats out;
  out.rounds = s.rounds.load(std::memory_order_relaxed);
  out.events_published = s.events_published.load(std::memory_order_relaxed);
  out.rows_published = s.rows_published.load(std::memory_order_relaxed);
  out.rows_sequenced = s.rows_sequenced.load(std::memory_order_relaxed);
  out.rows_pruned = s.rows_pruned.load(std::memory_order_relaxed);
  out.redis_errors = s.redis_errors.load(std::memory_order_relaxed);
  out.database_errors = s.database_errors.load(std::memory_order_relaxed);
  out.holds_lock = s.holds_lock.load(std::memory_order_relaxed);
  out.redis_connected = s.redis_connected.load(std::memory_order_relaxed);
  const double lag = s.lag_ms.load(std::memory_order_relaxed);
  if (lag > 0) {
    const steady::time_point measured{steady::duration(s.lag_measured_ns.load(std::memory_order_relaxed))};
    out.lag_ms = lag + std::chrono::duration<double, std::milli>(steady::now() - measured).count();
  }
  return out;
}

std::string outbox_relay::render_metrics() const {
  const auto st = stats();
  std::ostringstream out;
  auto series = [&](const char* name, const char* help, const char* type, auto value) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n'
        << name << ' ' << value << '\n';
  };
  series("wallet_events_relay_lag_seconds", "Age of the oldest outbox row not yet published (0: none).", "gauge",
         st.lag_ms / 1000.0);
  series("wallet_events_published_total", "Stream entries Redis acknowledged (an event published again counts again).",
         "counter", st.events_published);
  series("wallet_events_outbox_rows_published_total", "Outbox rows marked published.", "counter", st.rows_published);
  series("wallet_events_outbox_rows_sequenced_total", "Outbox rows given their feed position.", "counter",
         st.rows_sequenced);
  series("wallet_events_outbox_rows_pruned_total",
         "Outbox rows this relay deleted past events.feed_retention_days (the feed's oldest events).", "counter",
         st.rows_pruned);
  out << "# HELP wallet_events_relay_errors_total Relay failures, by what failed.\n"
      << "# TYPE wallet_events_relay_errors_total counter\n"
      << "wallet_events_relay_errors_total{kind=\"redis\"} " << st.redis_errors << '\n'
      << "wallet_events_relay_errors_total{kind=\"database\"} " << st.database_errors << '\n';
  series("wallet_events_relay_rounds_total", "Relay rounds.", "counter", st.rounds);
  series("wallet_events_relay_active", "1 when this relay held the relay lock in its last round (others stand by).",
         "gauge", st.holds_lock ? 1 : 0);
  series("wallet_events_relay_redis_connected", "1 while the relay has a Redis connection.", "gauge",
         st.redis_connected ? 1 : 0);
  return out.str();
}

}  // namespace events
