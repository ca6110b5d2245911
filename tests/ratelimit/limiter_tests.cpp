// The limiter against real Redis servers: the shared test Redis (WALLET_REDIS_URL) for the
// counting tests, and private redis-server processes for the tests that kill or pause one.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "ratelimit/limiter.hpp"
#include "tests/ratelimit/redis_client.hpp"
#include "tests/support/net.hpp"
#include "tests/support/services.hpp"
#include "tests/support/support.hpp"

namespace ratelimit {
namespace {

using namespace std::chrono_literals;
using ratelimit_test::unique_principal;
using test_support::redis_process;

// Ten writes per two-second window: small enough to exhaust quickly, long enough that a burst
// fired at once lands in one window.
constexpr std::int64_t burst = 10;
constexpr std::int64_t window_ms = 2000;

// Redis command timeouts: tests against the shared Redis expect every decision to be Redis's, so a
// loaded machine's stall must not turn one into a fallback; tests that kill or pause a Redis of
// their own want the limiter to give up on it quickly.
constexpr std::int64_t k_patient_ms = 5'000;
constexpr std::int64_t k_fault_ms = 50;

config::redis_settings redis_at(const std::string& url, std::int64_t command_timeout_ms = k_patient_ms) {
  config::redis_settings s;
  s.url = url;
  s.command_timeout_ms = command_timeout_ms;
  s.connections = 2;
  s.retry_interval_ms = 100;
  return s;
}

config::ratelimit_settings small_limits(const std::string& algo = "sliding") {
  config::ratelimit_settings s;
  s.algorithm = algo;
  s.burst = burst;
  s.rate_per_second = burst * 1000 / window_ms;
  s.read_burst = 50;
  s.read_rate_per_second = 25;
  // Every check asks Redis (no leased or local allowance), so these tests count Redis decisions
  // exactly.
  s.lease_tokens = 1;
  s.local_tokens = 0;
  return s;
}

// `burst` writes per 10 s window with leases of `lease_tokens`: a window long enough that a test
// waiting for room in it runs inside one window, so the counts are exact.
config::ratelimit_settings leasing_limits(std::int64_t burst_size, std::int64_t lease_tokens, std::int64_t lease_ms,
                                          const std::string& algo = "sliding") {
  config::ratelimit_settings s;
  s.algorithm = algo;
  s.burst = burst_size;
  s.rate_per_second = burst_size / 10;
  s.read_burst = burst_size;
  s.read_rate_per_second = burst_size / 10;
  s.lease_tokens = lease_tokens;
  s.lease_ms = lease_ms;
  s.local_tokens = 0;
  return s;
}
constexpr std::int64_t leasing_window_ms = 10'000;

// Collects decisions from many callbacks and waits, bounded, until all have arrived.
class collector {
 public:
  std::function<void(decision)> callback(std::int64_t principal) {
    return [this, principal](decision d) {
      std::lock_guard lock(mutex_);
      results_.emplace_back(principal, std::move(d));
      cv_.notify_all();
    };
  }
  std::vector<std::pair<std::int64_t, decision>> wait_for(std::size_t count) {
    std::unique_lock lock(mutex_);
    const bool all = cv_.wait_for(lock, 10s, [&] { return results_.size() >= count; });
    EXPECT_TRUE(all) << "only " << results_.size() << " of " << count << " callbacks ran";
    return results_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::pair<std::int64_t, decision>> results_;
};

decision check_now(limiter& l, std::int64_t principal, route_class cls = route_class::write) {
  std::promise<decision> promise;
  auto future = promise.get_future();
  l.check(principal, cls, [&promise](decision d) { promise.set_value(std::move(d)); });
  if (future.wait_for(5s) != std::future_status::ready) {
    ADD_FAILURE() << "check did not complete within 5 s";
    return decision{};
  }
  return future.get();
}

std::pair<bool, std::string> ping_now(limiter& l) {
  std::promise<std::pair<bool, std::string>> promise;
  auto future = promise.get_future();
  l.ping([&promise](bool ok, std::string detail) { promise.set_value({ok, std::move(detail)}); });
  if (future.wait_for(5s) != std::future_status::ready) {
    ADD_FAILURE() << "ping did not complete within 5 s";
    return {false, "no answer"};
  }
  return future.get();
}

// Each of `threads` threads fires, all at once, `count` checks for each (principal, count) pair,
// spreading the threads over `limiters`. Returns every decision once all callbacks have run.
std::vector<std::pair<std::int64_t, decision>> fire(const std::vector<limiter*>& limiters,
                                                    const std::vector<std::pair<std::int64_t, int>>& per_thread,
                                                    int threads) {
  collector results;
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  std::size_t total = 0;
  for (const auto& [principal, count] : per_thread) {
    total += static_cast<std::size_t>(count) * static_cast<std::size_t>(threads);
  }
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      limiter& l = *limiters[static_cast<std::size_t>(t) % limiters.size()];
      for (const auto& [principal, count] : per_thread) {
        for (int i = 0; i < count; ++i) {
          l.check(principal, route_class::write, results.callback(principal));
        }
      }
    });
  }
  go = true;
  for (auto& thread : pool) thread.join();
  return results.wait_for(total);
}

void expect_header_matches(const decision& d) {
  EXPECT_EQ(d.header, "limit=" + std::to_string(d.limit) + ", remaining=" + std::to_string(d.remaining) +
                          ", reset=" + std::to_string(d.reset_s));
}

TEST(limiter_redis, concurrent_burst_allows_exactly_burst) {
  // Thirty checks for one principal fired from six threads at once pass exactly `burst` times in
  // Redis, the denied ones carry a Retry-After after which a request passes, and a second
  // principal checked in the same storm keeps its whole allowance.
  const std::string url = test_support::redis_url();
  limiter l(redis_at(url), small_limits());
  const std::int64_t busy = unique_principal();
  const std::int64_t quiet = unique_principal();
  ASSERT_FALSE(check_now(l, quiet).fallback) << "the shared test Redis must be running";

  const auto results = fire({&l}, {{busy, 5}, {quiet, 1}}, 6);
  std::set<std::int64_t> remaining_seen;
  std::int64_t busy_allowed = 0;
  std::int64_t quiet_allowed = 0;
  std::int64_t retry_after_max = 0;
  for (const auto& [principal, d] : results) {
    EXPECT_FALSE(d.fallback);
    EXPECT_EQ(d.limit, burst);
    EXPECT_EQ(d.policy, "10;w=2");
    expect_header_matches(d);
    if (principal == quiet) {
      EXPECT_TRUE(d.allowed);
      quiet_allowed += d.allowed;
      continue;
    }
    if (d.allowed) {
      ++busy_allowed;
      remaining_seen.insert(d.remaining);
      EXPECT_EQ(d.retry_after_s, 0);
      EXPECT_GE(d.reset_s, 1);
      EXPECT_LE(d.reset_s, 2);
    } else {
      EXPECT_GE(d.retry_after_s, 1);
      EXPECT_LE(d.retry_after_s, 3);
      EXPECT_EQ(d.remaining, 0);
      EXPECT_EQ(d.reset_s, d.retry_after_s);
      retry_after_max = std::max(retry_after_max, d.retry_after_s);
    }
  }
  EXPECT_EQ(busy_allowed, burst);
  EXPECT_EQ(quiet_allowed, 6);
  EXPECT_EQ(remaining_seen.size(), static_cast<std::size_t>(burst));

  const decision still_denied = check_now(l, busy);
  EXPECT_FALSE(still_denied.allowed);
  std::this_thread::sleep_for(std::chrono::seconds(still_denied.retry_after_s));
  EXPECT_TRUE(check_now(l, busy).allowed);
  EXPECT_TRUE(check_now(l, quiet).allowed);
  EXPECT_LE(retry_after_max, 3);
  EXPECT_EQ(l.snapshot().fallback_decisions, 0u);
}

TEST(limiter_redis, two_limiters_share_one_allowance) {
  // Two limiter instances (two server processes, as far as Redis can tell) hammering one
  // principal together get `burst` passes between them, not twice that.
  const std::string url = test_support::redis_url();
  limiter first(redis_at(url), small_limits());
  limiter second(redis_at(url), small_limits());
  const std::int64_t principal = unique_principal();
  const auto results = fire({&first, &second}, {{principal, 5}}, 6);
  std::int64_t allowed = 0;
  for (const auto& [p, d] : results) {
    EXPECT_FALSE(d.fallback);
    allowed += d.allowed;
  }
  EXPECT_EQ(allowed, burst);
  EXPECT_GT(first.snapshot().redis_decisions, 0u);
  EXPECT_GT(second.snapshot().redis_decisions, 0u);
}

TEST(limiter_redis, counters_expire_one_window_after_their_own_for_both_algorithms) {
  // Every counter a check writes carries an expiry, set when the key is created, no later than one
  // window after its own window ends (plus the scripts' second of slack; the fixed window needs no
  // window after its own); later checks leave it in place. Checked against Redis's clock: the
  // expiry read back as TIME + PTTL can only come out early, never late, so the bound holds
  // however slow the machine, and so does the rest if the checks straddle a window boundary.
  const std::string url = test_support::redis_url();
  // Every check must reach Redis, however busy the machine: a generous command timeout.
  config::redis_settings redis = redis_at(url);
  redis.command_timeout_ms = 5000;
  for (const std::string algo : {"sliding", "fixed"}) {
    limiter l(redis, small_limits(algo));
    const std::int64_t principal = unique_principal();
    const std::int64_t slack_ms = (algo == "sliding" ? window_ms : 0) + 1000;
    for (int check = 0; check < 3; ++check) {
      const decision d = check_now(l, principal);
      ASSERT_FALSE(d.fallback) << algo << ": the check must be decided in Redis";
      ASSERT_TRUE(d.allowed) << algo;
      const std::string keys =
          ratelimit_test::redis_command(url, "KEYS wallet:rl:{" + std::to_string(principal) + "}:*");
      ASSERT_FALSE(keys.empty()) << algo << ": the check left no counter";
      std::istringstream listed(keys);
      for (std::string key; listed >> key;) {
        const std::int64_t index = std::stoll(key.substr(key.rfind(':') + 1));
        const std::int64_t now_ms = ratelimit_test::redis_time_ms(url);
        const std::int64_t ttl_ms = std::stoll(ratelimit_test::redis_command(url, "PTTL " + key));
        if (ttl_ms == -2) continue;  // expired between KEYS and PTTL
        ASSERT_NE(ttl_ms, -1) << algo << ": " << key << " has no expiry";
        EXPECT_LE(now_ms + ttl_ms, (index + 1) * window_ms + slack_ms) << algo << " check " << check << ": " << key;
      }
    }
  }
}

TEST(limiter_redis, fixed_window_counts_exactly) {
  // With algorithm = fixed, a concurrent burst that fits in one fixed window (checked against
  // Redis's clock) passes exactly `burst` times, and the Retry-After of a denial reaches the next
  // window, where a request passes again.
  const std::string url = test_support::redis_url();
  limiter l(redis_at(url), small_limits("fixed"));
  const std::int64_t principal = unique_principal();
  ratelimit_test::wait_for_window_room(url, window_ms, 1000ms);
  const auto results = fire({&l}, {{principal, 5}}, 6);
  std::int64_t allowed = 0;
  std::set<std::int64_t> remaining_seen;
  for (const auto& [p, d] : results) {
    EXPECT_FALSE(d.fallback);
    EXPECT_EQ(d.policy, "10;w=2");
    expect_header_matches(d);
    if (d.allowed) {
      ++allowed;
      remaining_seen.insert(d.remaining);
    } else {
      EXPECT_GE(d.retry_after_s, 1);
      EXPECT_LE(d.retry_after_s, 2);
    }
  }
  EXPECT_EQ(allowed, burst);
  EXPECT_EQ(remaining_seen.size(), static_cast<std::size_t>(burst));
  const decision denied = check_now(l, principal);
  ASSERT_FALSE(denied.allowed);
  std::this_thread::sleep_for(std::chrono::seconds(denied.retry_after_s));
  const decision next_window = check_now(l, principal);
  EXPECT_TRUE(next_window.allowed);
  EXPECT_EQ(next_window.remaining, burst - 1);
}

TEST(limiter_redis, script_flush_is_survived) {
  // After SCRIPT FLUSH empties the server's script cache, checks (single and pipelined) still
  // come from Redis: the NOSCRIPT reply makes the worker load the script again and retry once.
  const std::string url = test_support::redis_url();
  limiter l(redis_at(url), small_limits());
  const std::int64_t principal = unique_principal();
  ASSERT_FALSE(check_now(l, principal).fallback);
  ratelimit_test::redis_command(url, "SCRIPT FLUSH");
  const decision after_flush = check_now(l, principal);
  EXPECT_FALSE(after_flush.fallback);
  EXPECT_TRUE(after_flush.allowed);
  EXPECT_EQ(after_flush.remaining, burst - 2);
  ratelimit_test::redis_command(url, "SCRIPT FLUSH");
  const auto results = fire({&l}, {{unique_principal(), 3}}, 4);
  for (const auto& [p, d] : results) EXPECT_FALSE(d.fallback);
  const limiter::stats stats = l.snapshot();
  EXPECT_EQ(stats.fallback_decisions, 0u);
  EXPECT_EQ(stats.redis_failures, 0u);
  EXPECT_EQ(stats.transitions_to_fallback, 0u);
  EXPECT_EQ(stats.redis_decisions, 14u);
}

TEST(limiter_redis, killed_redis_fails_open_then_recovers) {
  // A private Redis is killed mid-run: every check still completes, from the in-process limiter
  // with the same limit, after exactly one logged transition; restarted on the same port, Redis
  // decides again within a few retry intervals.
  redis_process server(test_support::free_port());
  ASSERT_NO_THROW(server.start());
  limiter l(redis_at(server.url(), k_fault_ms), small_limits());
  ASSERT_FALSE(check_now(l, unique_principal()).fallback);

  server.kill();
  const std::int64_t principal = unique_principal();
  std::int64_t allowed = 0;
  for (int i = 0; i < 2 * burst; ++i) {
    const auto started = std::chrono::steady_clock::now();
    const decision d = check_now(l, principal);
    // Generous: a fallback decision takes at most the 50 ms command timeout.
    EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
    EXPECT_TRUE(d.fallback);
    allowed += d.allowed;
    if (!d.allowed) {
      EXPECT_GE(d.retry_after_s, 1);
    }
  }
  EXPECT_EQ(allowed, burst);
  limiter::stats down = l.snapshot();
  EXPECT_TRUE(down.using_fallback);
  EXPECT_EQ(down.transitions_to_fallback, 1u);
  EXPECT_GE(down.fallback_decisions, static_cast<std::uint64_t>(2 * burst));
  EXPECT_GE(down.redis_failures, 1u);
  // Reconnects happen in the background at most every retry interval; let a few fail.
  std::this_thread::sleep_for(350ms);
  EXPECT_EQ(l.snapshot().transitions_to_fallback, 1u);

  ASSERT_NO_THROW(server.start());
  bool from_redis = false;
  // Bounded: 100 checks 50 ms apart, i.e. up to 50 retry intervals.
  for (int i = 0; i < 100 && !from_redis; ++i) {
    from_redis = !check_now(l, unique_principal()).fallback;
    if (!from_redis) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(from_redis);
  const limiter::stats up = l.snapshot();
  EXPECT_FALSE(up.using_fallback);
  EXPECT_EQ(up.transitions_to_fallback, 1u);
  // The restarted server starts empty: the principal gets a fresh allowance from Redis.
  const decision fresh = check_now(l, principal);
  EXPECT_FALSE(fresh.fallback);
  EXPECT_TRUE(fresh.allowed);
}

TEST(limiter_redis, paused_redis_times_out_to_fallback) {
  // A private Redis stopped with SIGSTOP keeps its connections open but never answers: checks
  // fall back after the command timeout instead of hanging, ping reports it, and once it is
  // continued Redis decides again.
  redis_process server(test_support::free_port());
  ASSERT_NO_THROW(server.start());
  limiter l(redis_at(server.url(), k_fault_ms), small_limits());
  ASSERT_FALSE(check_now(l, unique_principal()).fallback);

  server.pause();
  for (int i = 0; i < 5; ++i) {
    const auto started = std::chrono::steady_clock::now();
    EXPECT_TRUE(check_now(l, unique_principal()).fallback);
    EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
  }
  EXPECT_EQ(l.snapshot().transitions_to_fallback, 1u);
  EXPECT_TRUE(l.snapshot().using_fallback);
  const auto [ok, detail] = ping_now(l);
  EXPECT_FALSE(ok);
  EXPECT_FALSE(detail.empty());

  server.resume();
  bool from_redis = false;
  for (int i = 0; i < 100 && !from_redis; ++i) {
    from_redis = !check_now(l, unique_principal()).fallback;
    if (!from_redis) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(from_redis);
  EXPECT_FALSE(l.snapshot().using_fallback);
}

TEST(limiter_redis, full_queue_decides_in_process_without_waiting) {
  // With room for one queued check and the only worker stuck on a paused Redis, a third check
  // cannot queue: it is decided in process at once, before the (long) command timeout has marked
  // Redis as failed, and every check still gets its callback.
  redis_process server(test_support::free_port());
  ASSERT_NO_THROW(server.start());
  config::redis_settings redis = redis_at(server.url(), k_fault_ms);
  redis.connections = 1;
  redis.command_timeout_ms = 3000;
  limiter_bounds bounds;
  bounds.queue_checks_max = 1;
  limiter l(redis, small_limits(), bounds);
  ASSERT_FALSE(check_now(l, unique_principal()).fallback);

  server.pause();
  collector results;
  const std::int64_t principal = unique_principal();
  for (int i = 0; i < 3; ++i) l.check(principal, route_class::write, results.callback(principal));
  const auto first = results.wait_for(1);
  ASSERT_FALSE(first.empty());
  EXPECT_TRUE(first.front().second.fallback);
  const limiter::stats during = l.snapshot();
  EXPECT_EQ(during.transitions_to_fallback, 0u);
  EXPECT_FALSE(during.using_fallback);
  server.resume();
  results.wait_for(3);
  EXPECT_EQ(l.snapshot().transitions_to_fallback, 0u);
}

TEST(limiter_redis, ping_reports_live_and_dead_redis) {
  // Ping says ok against the shared Redis and not ok, with a reason, against a port nobody
  // listens on, well within a second.
  limiter live(redis_at(test_support::redis_url()), small_limits());
  const auto [ok, detail] = ping_now(live);
  EXPECT_TRUE(ok) << detail;
  EXPECT_NE(detail.find("PONG"), std::string::npos);

  limiter dead(redis_at("redis://127.0.0.1:" + std::to_string(test_support::free_port())), small_limits());
  const auto started = std::chrono::steady_clock::now();
  const auto [dead_ok, dead_detail] = ping_now(dead);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
  EXPECT_FALSE(dead_ok);
  EXPECT_NE(dead_detail.find("127.0.0.1"), std::string::npos) << dead_detail;
  // Checks against the dead Redis are still answered, in process.
  EXPECT_TRUE(check_now(dead, unique_principal()).fallback);
}

TEST(limiter_redis, disabled_allows_everything_with_headers) {
  // With ratelimit.enabled = false every check passes, far beyond the burst, and still carries
  // the policy and an untouched window in its headers.
  config::ratelimit_settings limits = small_limits();
  limits.enabled = false;
  limiter l(redis_at(test_support::redis_url()), limits);
  const auto results = fire({&l}, {{unique_principal(), 10}}, 4);
  for (const auto& [p, d] : results) {
    EXPECT_TRUE(d.allowed);
    EXPECT_FALSE(d.fallback);
    EXPECT_EQ(d.policy, "10;w=2");
    EXPECT_EQ(d.header, "limit=10, remaining=10, reset=2");
  }
  EXPECT_EQ(results.size(), 40u);
}

// Runs one check and reports whether its callback ran on this thread before check() returned.
// The state is shared with the callback, so a callback that runs later elsewhere stays safe.
struct inline_outcome {
  bool on_caller = false;
  decision d;
};
inline_outcome check_inline(limiter& l, std::int64_t principal) {
  struct probe {
    std::atomic<bool> ran{false};
    std::thread::id thread;
    decision d;
  };
  auto shared = std::make_shared<probe>();
  l.check(principal, route_class::write, [shared](decision d) {
    shared->thread = std::this_thread::get_id();
    shared->d = std::move(d);
    shared->ran.store(true, std::memory_order_release);
  });
  if (!shared->ran.load(std::memory_order_acquire) || shared->thread != std::this_thread::get_id()) return {};
  return {true, shared->d};
}

TEST(limiter_redis, decisions_without_redis_run_on_the_callers_thread) {
  // Disabled, or with Redis unusable, nothing stands between a check and its answer: the callback
  // runs on the caller's thread before check() returns (no delivery thread every request would
  // queue behind), and the in-process limit still holds.
  config::ratelimit_settings off = small_limits();
  off.enabled = false;
  limiter disabled(redis_at(test_support::redis_url()), off);
  for (int i = 0; i < 3 * burst; ++i) {
    const inline_outcome r = check_inline(disabled, unique_principal());
    ASSERT_TRUE(r.on_caller) << "check " << i;
    EXPECT_TRUE(r.d.allowed);
  }

  limiter dead(redis_at("redis://127.0.0.1:" + std::to_string(test_support::free_port())), small_limits());
  // The first checks go to a worker, which finds nobody listening and switches to fallback.
  for (int i = 0; i < 100 && !dead.snapshot().using_fallback; ++i) check_now(dead, unique_principal());
  ASSERT_TRUE(dead.snapshot().using_fallback);
  const std::int64_t principal = unique_principal();
  std::int64_t allowed = 0;
  for (int i = 0; i < 2 * burst; ++i) {
    const inline_outcome r = check_inline(dead, principal);
    ASSERT_TRUE(r.on_caller) << "check " << i;
    EXPECT_TRUE(r.d.fallback);
    allowed += r.d.allowed;
  }
  EXPECT_EQ(allowed, burst);
}

TEST(limiter_redis, every_callback_runs_once_on_shutdown) {
  // A limiter destroyed while thousands of checks and some pings are in flight (against a live
  // and against a paused Redis, without and with leases, whose waiting checks must be answered
  // too) still runs each callback exactly once before its destructor ends.
  redis_process server(test_support::free_port());
  ASSERT_NO_THROW(server.start());
  for (const auto& [paused, lease] :
       std::vector<std::pair<bool, std::int64_t>>{{false, 1}, {true, 1}, {false, 8}, {true, 8}}) {
    constexpr int checks = 2000;
    constexpr int pings = 10;
    std::vector<std::atomic<int>> calls(checks);
    std::atomic<int> ping_calls{0};
    {
      config::ratelimit_settings limits = small_limits();
      limits.lease_tokens = lease;
      limiter l(redis_at(server.url(), k_fault_ms), limits);
      ASSERT_FALSE(check_now(l, unique_principal()).fallback);
      if (paused) server.pause();
      const std::int64_t principal = unique_principal();
      for (int i = 0; i < checks; ++i) {
        l.check(principal, route_class::read, [&calls, i](decision) { calls[i].fetch_add(1); });
      }
      for (int i = 0; i < pings; ++i) l.ping([&ping_calls](bool, std::string) { ++ping_calls; });
    }
    if (paused) server.resume();
    for (int i = 0; i < checks; ++i) ASSERT_EQ(calls[i].load(), 1) << "check " << i;
    EXPECT_EQ(ping_calls.load(), pings);
  }
}

TEST(limiter_leases, one_limiter_admits_exactly_the_allowance_then_refuses) {
  // With leases of 4, one limiter checking one principal in sequence admits exactly `burst`,
  // asking Redis once per lease (the last lease is cut to what is left), and the RateLimit header
  // counts down by one per request as if every request had asked Redis. Then a concurrent burst
  // from six threads through one connection admits exactly `burst` for a fresh principal.
  const std::string url = test_support::redis_url();
  for (const std::string algo : {"sliding", "fixed"}) {
    config::redis_settings redis = redis_at(url);
    redis.connections = 1;
    limiter l(redis, leasing_limits(10, 4, 60'000, algo));
    ratelimit_test::wait_for_window_room(url, leasing_window_ms, 5s);
    const std::int64_t principal = unique_principal();
    std::vector<std::int64_t> remaining;
    int allowed = 0;
    for (int i = 0; i < 15; ++i) {
      const decision d = check_now(l, principal);
      EXPECT_FALSE(d.fallback) << algo;
      expect_header_matches(d);
      if (d.allowed) {
        ++allowed;
        remaining.push_back(d.remaining);
      } else {
        EXPECT_GE(d.retry_after_s, 1) << algo;
      }
    }
    EXPECT_EQ(allowed, 10) << algo;
    EXPECT_EQ(remaining, (std::vector<std::int64_t>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0})) << algo;
    const limiter::stats stats = l.snapshot();
    // Leases of 4, 4 and 2 tokens, then five refusals, each from Redis.
    EXPECT_EQ(stats.leases, 3u) << algo;
    EXPECT_EQ(stats.local_spends, 7u) << algo;
    EXPECT_EQ(stats.redis_decisions, 8u) << algo;
    EXPECT_EQ(stats.lease_tokens_expired, 0u) << algo;

    const std::int64_t busy = unique_principal();
    const auto results = fire({&l}, {{busy, 5}}, 6);
    std::int64_t burst_allowed = 0;
    for (const auto& [p, d] : results) {
      EXPECT_FALSE(d.fallback) << algo;
      burst_allowed += d.allowed;
    }
    EXPECT_EQ(burst_allowed, 10) << algo;
  }
}

// Threads spread over `limiters` each check `principal` until they are refused; returns the total
// admitted. A thread stops only on its own refusal, so no lease is left unspent at the end.
std::int64_t hammer_until_refused(const std::vector<limiter*>& limiters, std::int64_t principal, int threads) {
  std::atomic<std::int64_t> allowed{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      limiter& l = *limiters[static_cast<std::size_t>(t) % limiters.size()];
      // Bounded: no thread can be admitted more often than the whole allowance.
      for (int i = 0; i < 10'000; ++i) {
        const decision d = check_now(l, principal);
        EXPECT_FALSE(d.fallback);
        if (!d.allowed) return;
        allowed.fetch_add(1);
      }
      ADD_FAILURE() << "a thread was never refused";
    });
  }
  go = true;
  for (auto& thread : pool) thread.join();
  return allowed.load();
}

TEST(limiter_leases, two_processes_never_exceed_the_shared_allowance) {
  // Two limiters (two server processes to Redis), four threads each, hammering one principal:
  // together they never admit more than the allowance of 200. Without leases they admit exactly
  // 200; with leases of 8, threads that stop only on their own refusal leave no lease unspent, so
  // they admit 200 too. A burst of a fixed size can strand what one limiter still holds: the
  // total is then short by at most (L - 1) per limiter, the bound in ratelimit/README.md.
  const std::string url = test_support::redis_url();
  constexpr std::int64_t allowance = 200;
  for (std::int64_t lease : {1, 8}) {
    limiter first(redis_at(url), leasing_limits(allowance, lease, 60'000));
    limiter second(redis_at(url), leasing_limits(allowance, lease, 60'000));
    ratelimit_test::wait_for_window_room(url, leasing_window_ms, 5s);
    EXPECT_EQ(hammer_until_refused({&first, &second}, unique_principal(), 8), allowance) << "lease " << lease;

    const auto results = fire({&first, &second}, {{unique_principal(), 40}}, 8);
    std::int64_t allowed = 0;
    for (const auto& [p, d] : results) {
      EXPECT_FALSE(d.fallback);
      allowed += d.allowed;
    }
    EXPECT_LE(allowed, allowance) << "lease " << lease;
    EXPECT_GE(allowed, allowance - 2 * (lease - 1)) << "lease " << lease;
    if (lease == 1) {
      EXPECT_EQ(allowed, allowance);
      EXPECT_EQ(first.snapshot().local_spends + second.snapshot().local_spends, 0u);
    } else {
      EXPECT_GT(first.snapshot().local_spends + second.snapshot().local_spends, 0u);
    }
  }
}

TEST(limiter_leases, leftovers_expire_and_the_next_check_asks_redis) {
  // A lease's spare tokens are spent locally while it lives; once lease_ms have passed the next
  // check asks Redis again, and the unspent tokens are counted as expired.
  const std::string url = test_support::redis_url();
  constexpr std::int64_t lease_ms = 3000;
  // 2,000 per 10 s: leases of 50 (lease_size) strand at most 11 x 49 of it.
  limiter l(redis_at(url), leasing_limits(2000, 50, lease_ms));
  ratelimit_test::wait_for_window_room(url, leasing_window_ms, 5s);
  const std::int64_t principal = unique_principal();
  const auto leased_at = std::chrono::steady_clock::now();
  const decision first = check_now(l, principal);
  // The lease lives from when its command was sent, which is before this.
  const auto first_answered = std::chrono::steady_clock::now();
  ASSERT_TRUE(first.allowed);
  EXPECT_EQ(first.remaining, 1999);
  const decision second = check_now(l, principal);
  const bool within_lease = std::chrono::steady_clock::now() - leased_at < std::chrono::milliseconds(lease_ms);
  EXPECT_TRUE(second.allowed);
  limiter::stats stats = l.snapshot();
  EXPECT_EQ(stats.redis_decisions, within_lease ? 1u : 2u);
  EXPECT_EQ(stats.local_spends, within_lease ? 1u : 0u);
  if (within_lease) {
    EXPECT_EQ(second.remaining, 1998);
  }
  ASSERT_TRUE(within_lease) << "the machine is too slow to observe a local spend within " << lease_ms << " ms";

  // Once the lease's time has certainly passed, the next check goes to Redis.
  std::this_thread::sleep_until(first_answered + std::chrono::milliseconds(lease_ms + 10));
  const decision after = check_now(l, principal);
  EXPECT_TRUE(after.allowed);
  stats = l.snapshot();
  EXPECT_EQ(stats.redis_decisions, 2u);
  EXPECT_EQ(stats.local_spends, 1u);
  EXPECT_EQ(stats.leases, 2u);
  EXPECT_EQ(stats.lease_tokens_expired, 48u);
  // The expired tokens stay counted in Redis: 50 + 50 taken, so the new lease is what is left.
  EXPECT_EQ(after.remaining, 1949);
}

// The local allowance (ratelimit/README.md): limiters standing for server processes, hammering one
// principal each until refused, with and without leases. Redis enforces the limit less what every
// process may admit alone, so the totals are exact: 200 per 10 s, local allowances of 2 for at most
// two processes, keep back 8 under the sliding window (2 x 2 x 2: its estimate weighs the previous
// window too) and 4 under the fixed one.
// Limiters that count one another in a roster of their own (no other test's processes), renewed
// every 10 ms. A count stays fresh for 30 s and a limiter admits locally from its first renewal:
// these tests register every limiter before their first check (wait_until_counted), so the span a
// server waits for does not apply.
limiter_bounds own_roster() {
  limiter_bounds bounds;
  bounds.roster_key = "wallet:rl:test-processes:" + std::to_string(unique_principal());
  roster_timing timing;
  timing.beat_ms = 10;
  timing.fresh_ms = 30'000;
  timing.span_ms = 0;
  timing.margin_ms = 0;
  timing.warmup_ms = 0;
  bounds.roster_timing_override = timing;
  return bounds;
}

// Waits, bounded, until the limiter's stats satisfy `done`.
template <typename Done>
bool wait_for_stats(limiter& l, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!done(l.snapshot())) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// Waits, bounded, until every limiter counts `processes` and may admit locally.
void wait_until_counted(const std::vector<limiter*>& limiters, std::int64_t processes) {
  for (limiter* l : limiters) {
    ASSERT_TRUE(wait_for_stats(
        *l, [processes](const limiter::stats& s) { return s.processes_counted == processes && s.local_ready; }))
        << "a limiter counts " << l->snapshot().processes_counted << " processes, ready " << l->snapshot().local_ready;
  }
}

TEST(limiter_local, processes_admit_their_share_alone_and_never_more_than_the_limit_together) {
  const std::string url = test_support::redis_url();
  constexpr std::int64_t allowance = 200;
  for (const std::string algo : {"sliding", "fixed"}) {
    const std::int64_t reserved = algo == "sliding" ? 8 : 4;
    for (std::int64_t lease : {1, 8}) {
      config::ratelimit_settings limits = leasing_limits(allowance, lease, 60'000, algo);
      limits.local_tokens = 2;
      limits.processes_max = 2;
      const limiter_bounds bounds = own_roster();
      limiter first(redis_at(url), limits, bounds);
      limiter second(redis_at(url), limits, bounds);
      limiter third(redis_at(url), limits, bounds);
      // Three processes registered, counted as processes_max = 2.
      wait_until_counted({&first, &second, &third}, 2);
      ratelimit_test::wait_for_window_room(url, leasing_window_ms, 5s);
      const std::string what = algo + ", lease " + std::to_string(lease);

      // Two processes, as many as configured: the shared part plus 2 each, never above the limit.
      EXPECT_EQ(hammer_until_refused({&first, &second}, unique_principal(), 8), allowance - reserved + 4) << what;
      EXPECT_EQ(first.snapshot().local_admissions, 2u) << what;
      EXPECT_EQ(second.snapshot().local_admissions, 2u) << what;

      // One process hammered alone is refused early by what the others could have admitted.
      const std::int64_t alone = unique_principal();
      EXPECT_EQ(hammer_until_refused({&first}, alone, 4), allowance - reserved + 2) << what;
      const decision refused = check_now(first, alone);
      EXPECT_FALSE(refused.allowed) << what;
      EXPECT_GE(refused.retry_after_s, 1) << what;
      expect_header_matches(refused);

      // A third process, one more than configured: past the limit by at most its own 2.
      const std::int64_t three = hammer_until_refused({&first, &second, &third}, unique_principal(), 9);
      EXPECT_EQ(three, allowance - reserved + 6) << what;
      EXPECT_LE(three, allowance + 2) << what;
    }
  }
}

TEST(limiter_local, a_process_counted_alone_keeps_back_its_own_allowance_only) {
  // The only process in its roster: Redis keeps back this process's local allowance, not that of
  // processes_max processes. Sliding: 200 - 2 x 2 + 2; fixed: 200 - 2 + 2.
  const std::string url = test_support::redis_url();
  for (const std::string algo : {"sliding", "fixed"}) {
    config::ratelimit_settings limits = leasing_limits(200, 1, 60'000, algo);
    limits.local_tokens = 2;
    limits.processes_max = 4;
    limiter l(redis_at(url), limits, own_roster());
    wait_until_counted({&l}, 1);
    ratelimit_test::wait_for_window_room(url, leasing_window_ms, 5s);
    EXPECT_EQ(hammer_until_refused({&l}, unique_principal(), 4), algo == "sliding" ? 198 : 200) << algo;
    EXPECT_EQ(l.snapshot().local_admissions, 2u) << algo;
  }
}

TEST(limiter_local, a_process_admits_nothing_locally_before_every_count_can_include_it) {
  // With the timing the windows call for, a new process waits two windows (and a fresh count) after
  // its entry appears before its first local admission: here, two minutes of a 60 s window.
  const std::string url = test_support::redis_url();
  config::ratelimit_settings limits = leasing_limits(600, 1, 60'000);
  limits.rate_per_second = 10;
  limits.local_tokens = 2;
  limiter_bounds bounds;
  bounds.roster_key = "wallet:rl:test-processes:" + std::to_string(unique_principal());
  limiter l(redis_at(url), limits, bounds);
  const std::int64_t principal = unique_principal();
  for (int i = 0; i < 3; ++i) {
    const decision d = check_now(l, principal);
    EXPECT_TRUE(d.allowed);
    EXPECT_FALSE(d.fallback);
  }
  const limiter::stats stats = l.snapshot();
  EXPECT_EQ(stats.local_admissions, 0u);
  EXPECT_EQ(stats.redis_decisions, 3u);
  EXPECT_FALSE(stats.local_ready);
  // Whether its first count has come in yet or not, the count the limit uses is within [1, processes_max].
  EXPECT_GE(stats.processes_counted, 1);
  EXPECT_LE(stats.processes_counted, limits.processes_max);
}

TEST(limiter_local, a_process_whose_renewals_stop_keeps_back_processes_max_and_admits_nothing_locally) {
  // Counts fresh for 300 ms: once Redis is gone the count goes stale, the scripts would keep back
  // processes_max again, and the local allowance stops before the entry could expire. Redis back,
  // the process is counted and admits locally again.
  redis_process server(test_support::free_port());
  ASSERT_NO_THROW(server.start());
  config::ratelimit_settings limits = leasing_limits(200, 1, 60'000);
  limits.local_tokens = 2;
  limits.processes_max = 3;
  limiter_bounds bounds = own_roster();
  bounds.roster_timing_override->fresh_ms = 300;
  limiter l(redis_at(server.url(), k_fault_ms), limits, bounds);
  const auto counted_alone = [](const limiter::stats& s) { return s.processes_counted == 1 && s.local_ready; };
  ASSERT_TRUE(wait_for_stats(l, counted_alone));

  server.kill();
  EXPECT_TRUE(wait_for_stats(l, [](const limiter::stats& s) { return s.processes_counted == 3 && !s.local_ready; }));
  // Without Redis no check is admitted locally: the fallback decides.
  const decision d = check_now(l, unique_principal());
  EXPECT_TRUE(d.fallback);
  EXPECT_EQ(l.snapshot().local_admissions, 0u);

  ASSERT_NO_THROW(server.start());
  EXPECT_TRUE(wait_for_stats(l, counted_alone));
}

TEST(limiter_local, a_local_admission_reports_the_limit_and_what_this_process_would_still_admit) {
  // A principal's first checks are admitted without Redis; their headers announce the configured
  // limit, and `remaining` counts down from what this process alone could still admit.
  const std::string url = test_support::redis_url();
  config::ratelimit_settings limits = leasing_limits(200, 1, 60'000);
  limits.local_tokens = 2;
  limits.processes_max = 2;
  limiter l(redis_at(url), limits, own_roster());
  wait_until_counted({&l}, 1);
  ratelimit_test::wait_for_window_room(url, leasing_window_ms, 5s);
  const std::int64_t principal = unique_principal();
  std::vector<std::int64_t> remaining;
  for (int i = 0; i < 3; ++i) {
    const decision d = check_now(l, principal);
    ASSERT_TRUE(d.allowed);
    EXPECT_FALSE(d.fallback);
    expect_header_matches(d);
    EXPECT_EQ(d.limit, 200);
    EXPECT_EQ(d.policy, "200;w=10");
    remaining.push_back(d.remaining);
  }
  // One process counted: 200 - 4 kept back + 2 local, 198 in all, so 197 and 196 after the local
  // two; the third asks Redis, which counts against its 196 only.
  EXPECT_EQ(remaining, (std::vector<std::int64_t>{197, 196, 195}));
  const limiter::stats stats = l.snapshot();
  EXPECT_EQ(stats.local_admissions, 2u);
  EXPECT_EQ(stats.redis_decisions, 1u);
}

}  // namespace
}  // namespace ratelimit
