#include "ratelimit/limiter.hpp"

#include <pthread.h>
#include <unistd.h>
#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "base/assert.hpp"
#include "ratelimit/allowance.hpp"
#include "ratelimit/local_limiter.hpp"
#include "ratelimit/redis_url.hpp"
#include "ratelimit/window.hpp"
#include "ratelimit/redis_handles.hpp"

namespace ratelimit {
namespace {

using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Both scripts read the clock with TIME inside Redis, so every server process sharing the Redis
// agrees on window boundaries whatever its own clock says. Redis 7 replicates script effects, so
// a non-deterministic TIME before a write is allowed. KEYS[1] is the counter prefix; the script
// appends `:<window index>`. The prefix carries the principal in a hash tag, so every key a script
// touches lives in one cluster slot.

// ARGV[3] is how many tokens to take at once (ratelimit.lease_tokens, or 1): a request that
// passes takes up to that many, never more than would pass one by one, and the first element of
// the answer is how many it took (0: denied). With 1 both scripts decide exactly as one check.

// Mirrors evaluate_sliding() in window.cpp expression for expression (same IEEE doubles, same
// order of operations), so Redis and the fallback round identically. Taking `granted` tokens at
// once passes exactly when `granted` checks one after the other would: each adds 1 to `current`.
// The counter's expiry, one window after its own window ends (plus a second of slack), is an
// instant fixed by the window, so it is set once, by the check that creates the key: a PEXPIRE on
// every check set the same instant again and cost the script an eighth of its time. It is set as
// that instant (PEXPIREAT), computed from the script's own TIME: a relative PEXPIRE counts from
// Redis's clock at the command, which can round to a later millisecond than the TIME read.
constexpr const char* sliding_script = R"lua(
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local index = math.floor(now / window)
local elapsed = now - index * window
local current_key = KEYS[1] .. ':' .. string.format('%d', index)
local previous_key = KEYS[1] .. ':' .. string.format('%d', index - 1)
local counts = redis.call('MGET', current_key, previous_key)
local current = tonumber(counts[1]) or 0
local previous = tonumber(counts[2]) or 0
local left = window - elapsed
local estimate = current + previous * left / window
if estimate + 1 <= limit then
  local granted = math.min(want, math.floor(limit - estimate))
  redis.call('INCRBY', current_key, granted)
  if current == 0 then redis.call('PEXPIREAT', current_key, (index + 2) * window + 1000) end
  return {granted, math.floor(limit - estimate - granted), left, 0}
end
local wait
if current + 1 <= limit then
  wait = math.ceil(left - (limit - 1 - current) * window / previous) + 1
else
  wait = left + math.ceil(window * (current - limit + 1) / current) + 1
end
if wait < 1 then wait = 1 end
return {0, 0, wait, wait}
)lua";

// Mirrors evaluate_fixed() in window.cpp. Denied requests are counted too (INCRBY first is the
// one atomic step that needs no read); the count only matters up to the limit, and the key
// expires with its window.
constexpr const char* fixed_script = R"lua(
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local index = math.floor(now / window)
local elapsed = now - index * window
local key = KEYS[1] .. ':' .. string.format('%d', index)
local count = redis.call('INCRBY', key, want)
local left = window - elapsed
if count == want then redis.call('PEXPIREAT', key, (index + 1) * window + 1000) end
local before = count - want
if before < limit then
  local granted = math.min(want, limit - before)
  return {granted, limit - before - granted, left, 0}
end
return {0, 0, left, left}
)lua";

// Renews this process's entry in the set of processes sharing the limit (ratelimit/roster.hpp):
// entries past their expiry by Redis's clock go, this one's expiry moves `ARGV[2]` ms ahead, and
// the set's key lives as long as its longest-lived entry. Answers how many entries are left.
constexpr const char* roster_script = R"lua(
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], tonumber(last[2]))
return redis.call('ZCARD', KEYS[1])
)lua";

// The allowance table's clock: leases are timed locally, on a clock no one can set back.
std::int64_t steady_now_ms() {
  return std::chrono::duration_cast<milliseconds>(steady::now().time_since_epoch()).count();
}

std::int64_t unix_now_ms() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::size_t class_index(route_class cls) { return cls == route_class::write ? 0 : 1; }
const char* class_name(route_class cls) { return cls == route_class::write ? "write" : "read"; }

using redis::context_error;
using redis::context_ptr;
using redis::reply_ptr;
using redis::to_timeval;

std::string reply_error(const redisReply& reply) { return std::string(reply.str, static_cast<std::size_t>(reply.len)); }

bool is_noscript(const redisReply& reply) {
  return reply.type == REDIS_REPLY_ERROR && reply_error(reply).rfind("NOSCRIPT", 0) == 0;
}

// A script answer is {granted, remaining, reset_ms, retry_after_ms}; `granted` is the tokens taken
// (0: denied). Returns why it is not one.
std::string parse_outcome(const redisReply& reply, std::optional<outcome>& out, std::int64_t& granted) {
  if (reply.type == REDIS_REPLY_ERROR) return "script error: " + reply_error(reply);
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 4) return "unexpected script reply";
  std::array<long long, 4> values{};
  for (std::size_t i = 0; i < 4; ++i) {
    if (reply.element[i]->type != REDIS_REPLY_INTEGER) return "unexpected script reply";
    values[i] = reply.element[i]->integer;
  }
  if (values[0] < 0) return "unexpected script reply";
  out = outcome{values[0] >= 1, values[1], values[2], values[3]};
  granted = values[0];
  return {};
}

// One hiredis connection: connected, authenticated, database selected, script loaded. Owned by
// exactly one thread (hiredis contexts are not thread-safe). After any error hiredis leaves the
// context unusable, so every failure path closes it and the owner reconnects later.
class redis_session {
 public:
  bool is_open() const { return context_ != nullptr; }
  void close() { context_.reset(); }
  redisContext* get() const { return context_.get(); }
  const std::string& script_sha() const { return script_sha_; }
  void set_script_sha(std::string sha) { script_sha_ = std::move(sha); }

  // Opens the connection and, if `script` is given, loads it; everything before `deadline`.
  // Returns an empty string on success, or why it failed.
  std::string open(const redis_endpoint& endpoint, steady::time_point deadline, const char* script) {
    close();
    const auto budget = std::chrono::duration_cast<milliseconds>(deadline - steady::now());
    if (budget < milliseconds(1)) return "timed out before connecting";
    context_ptr context(redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port, to_timeval(budget)));
    if (!context) return "cannot allocate a hiredis context";
    if (context->err != 0) return "connect: " + context_error(*context);
    redisEnableKeepAlive(context.get());
    context_ = std::move(context);

    // Everything the session needs is pipelined: one round trip after the TCP handshake.
    std::size_t expected = 0;
    if (!endpoint.password.empty()) {
      if (endpoint.username.empty()) {
        redisAppendCommand(get(), "AUTH %s", endpoint.password.c_str());
      } else {
        redisAppendCommand(get(), "AUTH %s %s", endpoint.username.c_str(), endpoint.password.c_str());
      }
      ++expected;
    }
    if (endpoint.database != 0) {
      redisAppendCommand(get(), "SELECT %lld", static_cast<long long>(endpoint.database));
      ++expected;
    }
    if (script != nullptr) {
      redisAppendCommand(get(), "SCRIPT LOAD %s", script);
      ++expected;
    }
    for (std::size_t i = 0; i < expected; ++i) {
      reply_ptr reply;
      if (std::string failure = read_reply(deadline, reply); !failure.empty()) {
        close();
        return failure;
      }
      if (reply->type == REDIS_REPLY_ERROR) {
        const std::string failure = "setup refused: " + reply_error(*reply);
        close();
        return failure;
      }
      if (script != nullptr && i + 1 == expected) {
        if (reply->type != REDIS_REPLY_STRING) {
          close();
          return "SCRIPT LOAD gave no digest";
        }
        script_sha_ = std::string(reply->str, static_cast<std::size_t>(reply->len));
      }
    }
    return {};
  }

  // Reads the next reply, giving up at `deadline`. Most replies of a pipeline arrive together
  // with the first, so a reply already in hiredis' buffer is taken from there: no system call.
  // Only a read that may block sets the socket's timeout (hiredis knows no other) to what is left
  // of the budget: two setsockopt calls, which before were made for every reply.
  std::string read_reply(steady::time_point deadline, reply_ptr& out) {
    WALLET_ASSERT(is_open(), "read on a closed session");
    void* raw = nullptr;
    if (redisGetReplyFromReader(get(), &raw) != REDIS_OK) return context_error(*get());
    if (raw == nullptr) {
      const auto budget = std::chrono::duration_cast<milliseconds>(deadline - steady::now());
      if (budget < milliseconds(1)) return "timed out";
      if (redisSetTimeout(get(), to_timeval(budget)) != REDIS_OK) return context_error(*get());
      // Sends what is still buffered of the pipeline, then reads until a reply is whole.
      if (redisGetReply(get(), &raw) != REDIS_OK || raw == nullptr) return context_error(*get());
    }
    out.reset(static_cast<redisReply*>(raw));
    return {};
  }

  std::uint64_t epoch = 0;  // fallback epoch this connection was made in (see limiter::impl)

 private:
  context_ptr context_;
  std::string script_sha_;
};

struct pending_check {
  std::int64_t principal_id = 0;
  route_class cls = route_class::write;
  std::function<void(decision)> done;
  bool lease = false;  // asks for ratelimit.lease_tokens and settles the allowance table's lease
};

}  // namespace

// Threads and queues:
//
//   check() --(bounded queue_)--> worker x N --(hiredis pipeline)--> Redis
//      |                              |  (failure: decide in process)
//      +-- disabled / fallback / queue full / a leased token: decided on the caller's thread
//   ping() --(bounded pings_)--> pinger (own short-lived connection)
//   roster thread: renews this process's entry every beat (own connection; ratelimit/roster.hpp)
//
// Mode switches:
//
//   [redis] --any command or connect fails--> [fallback] --a worker reconnects--> [redis]
//
// Entering fallback bumps `epoch_`; every connection made in an older epoch is closed, because
// whatever broke one connection (a restart, a network cut) usually broke all of them. Workers
// without a connection try again at most every retry_interval_ms, in the background: no check
// waits for a reconnect.
class limiter::impl {
 public:
  impl(const config::redis_settings& redis, const config::ratelimit_settings& limits, const limiter_bounds& bounds)
      : endpoint_(parse_redis_url(redis.url)),
        timeout_(redis.command_timeout_ms),
        retry_interval_(redis.retry_interval_ms),
        gather_(redis.batch_wait_us),
        enabled_(limits.enabled),
        algorithm_(parse_algorithm(limits.algorithm)),
        policies_{policy_for(limits, route_class::write), policy_for(limits, route_class::read)},
        bounds_(bounds),
        lease_tokens_{lease_size(policies_[0], limits.lease_tokens, limits.lease_ms),
                      lease_size(policies_[1], limits.lease_tokens, limits.lease_ms)},
        lease_ms_(limits.lease_ms),
        local_shares_{local_share_for(policies_[0], algorithm_, limits.local_tokens, limits.processes_max),
                      local_share_for(policies_[1], algorithm_, limits.local_tokens, limits.processes_max)},
        roster_(bounds.roster_timing_override.value_or(
                    roster_timing_for(std::max(policies_[0].window_ms, policies_[1].window_ms))),
                limits.processes_max),
        roster_used_(enabled_ && (local_shares_[0].tokens > 0 || local_shares_[1].tokens > 0)),
        roster_member_(roster_member_name()),
        local_(algorithm_, bounds.fallback_entries_max),
        allowances_(bounds.lease_entries_max) {
    WALLET_ASSERT(lease_tokens_[0] >= 1 && lease_tokens_[1] >= 1 && lease_ms_ >= 1,
                  "lease settings are validated positive");
    WALLET_ASSERT(redis.connections >= 1, "redis.connections is validated to be positive");
    WALLET_ASSERT(redis.command_timeout_ms >= 1, "command timeout is validated positive");
    WALLET_ASSERT(bounds.queue_checks_max >= 1 && bounds.batch_checks_max >= 1 && bounds.pings_max >= 1,
                  "limiter bounds must be positive");
    try {
      pinger_ = std::thread([this] {
        pthread_setname_np(pthread_self(), "wallet-rl-ping");
        pinger_main();
      });
      if (roster_used_) {
        roster_thread_ = std::thread([this] {
          pthread_setname_np(pthread_self(), "wallet-rl-roster");
          roster_main();
        });
      }
      // With rate limiting off nothing is ever queued; the workers would only hold connections.
      const std::int64_t workers = enabled_ ? redis.connections : 0;
      for (std::int64_t i = 0; i < workers; ++i) {
        workers_.emplace_back([this] {
          pthread_setname_np(pthread_self(), "wallet-redis");
          worker_main();
        });
      }
    } catch (const std::exception&) {
      stop();
      throw;
    }
  }

  ~impl() { stop(); }

  void check(std::int64_t principal_id, route_class cls, std::function<void(decision)> done) {
    const window_policy& policy = policies_[class_index(cls)];
    if (!enabled_) {
      invoke(done, unlimited_decision(policy));
      return;
    }
    bool lease = false;
    const std::int64_t lease_tokens = lease_tokens_[class_index(cls)];
    const local_share& share = local_shares_[class_index(cls)];
    if (lease_tokens > 1 || share.tokens > 0) {
      // A token leased earlier, or the local allowance, is spent here, on the caller's thread: no
      // queue, no round trip, no hand-off. Tokens leased before a switch to fallback were counted
      // in Redis, so they are spent in fallback too; the local allowance is not, since the
      // fallback counts for itself.
      // A check that finds a lease in flight waits for it instead of asking Redis itself.
      // The local allowance also waits until every count next to its admissions includes this
      // process (ratelimit/roster.hpp).
      const bool redis_usable = !using_fallback_.load(std::memory_order_acquire);
      const std::int64_t now = steady_now_ms();
      const bool local = redis_usable && share.tokens > 0 && roster_.may_admit_locally(now);
      const auto ticket = allowances_.take(principal_id, cls, now, redis_usable && lease_tokens > 1,
                                           {local ? share.tokens : 0, policy.window_ms}, &done, lease_tokens - 1);
      switch (ticket.kind) {
        case allowance_table::verdict::spent:
          local_spends_.fetch_add(1, std::memory_order_relaxed);
          invoke(done, spent_locally(policy, ticket.tokens));
          return;
        case allowance_table::verdict::local:
          local_admissions_.fetch_add(1, std::memory_order_relaxed);
          invoke(done, admitted_locally(policy, share, reserved(cls), ticket.local_count));
          return;
        case allowance_table::verdict::waiting: return;
        case allowance_table::verdict::lease: lease = true; break;
        case allowance_table::verdict::ask: break;
      }
    }
    if (!using_fallback_.load(std::memory_order_acquire)) {
      std::unique_lock lock(mutex_);
      if (!stopping_ && !using_fallback_.load(std::memory_order_relaxed) &&
          static_cast<std::int64_t>(queue_.size()) < bounds_.queue_checks_max) {
        queue_.push_back(pending_check{principal_id, cls, std::move(done), lease});
        lock.unlock();
        work_cv_.notify_one();
        return;
      }
    }
    if (lease) abandon_lease(principal_id, cls);
    // Fallback, a full queue (Redis too slow for the load) or shutdown: decided here and now, on
    // the caller's thread, like a leased token: a hand-off to one limiter thread would make that
    // thread every request's next step while Redis is down.
    invoke(done, decide_locally(principal_id, cls));
  }

  void ping(std::function<void(bool, std::string)> done) {
    std::string refusal;
    {
      std::lock_guard lock(ping_mutex_);
      if (ping_stopping_) {
        refusal = "rate limiter is stopping";
      } else if (static_cast<std::int64_t>(pings_.size()) >= bounds_.pings_max) {
        refusal = "too many readiness pings pending";
      } else {
        pings_.push_back(std::move(done));
        ping_cv_.notify_one();
        return;
      }
    }
    invoke_ping(done, false, std::move(refusal));
  }

  stats snapshot() const {
    return stats{redis_decisions_.load(std::memory_order_relaxed),
                 fallback_decisions_.load(std::memory_order_relaxed),
                 redis_failures_.load(std::memory_order_relaxed),
                 transitions_to_fallback_.load(std::memory_order_relaxed),
                 using_fallback_.load(std::memory_order_relaxed),
                 local_spends_.load(std::memory_order_relaxed),
                 leases_.load(std::memory_order_relaxed),
                 allowances_.expired_tokens(),
                 local_admissions_.load(std::memory_order_relaxed),
                 roster_used_ ? roster_.processes(steady_now_ms()) : 0,
                 roster_used_ && roster_.may_admit_locally(steady_now_ms())};
  }

 private:
  static void invoke(std::function<void(decision)>& done, decision d) {
    // A callback that throws is a bug in the caller; it must not kill a limiter thread and with
    // it every later check, so it is logged at the top of this callback boundary.
    try {
      done(std::move(d));
    } catch (const std::exception& e) {
      spdlog::error("ratelimit: a check callback threw: {}", e.what());
    }
  }

  static void invoke_ping(std::function<void(bool, std::string)>& done, bool ok, std::string detail) {
    try {
      done(ok, std::move(detail));
    } catch (const std::exception& e) {
      spdlog::error("ratelimit: a ping callback threw: {}", e.what());
    }
  }

  std::string key_prefix(std::int64_t principal_id, route_class cls) const {
    const window_policy& policy = policies_[class_index(cls)];
    // The algorithm and window length are part of the key, so a deployment that changes either
    // never reads counters written under the old meaning.
    return "wallet:rl:{" + std::to_string(principal_id) + "}:" + class_name(cls) + ":" +
           (algorithm_ == algorithm::sliding ? "s" : "f") + std::to_string(policy.window_ms);
  }

  decision spent_locally(const window_policy& policy, const allowance_table::spend& tokens) const {
    return to_decision(policy, outcome{true, tokens.remaining, tokens.reset_ms, 0}, false);
  }

  // Admitted from the local allowance, with `count` local admissions in the last window. What other
  // processes, or this one's leases, took from the shared limit in this window is not known here:
  // `remaining` is what this process alone would still admit had nothing been counted in Redis,
  // and `reset` the end of the current window by this server's clock.
  static decision admitted_locally(const window_policy& policy, const local_share& share, std::int64_t reserved,
                                   std::int64_t count) {
    const std::int64_t remaining = std::max<std::int64_t>(0, policy.limit - reserved + share.tokens - count);
    const std::int64_t reset_ms = policy.window_ms - unix_now_ms() % policy.window_ms;
    return to_decision(policy, outcome{true, remaining, reset_ms, 0}, false);
  }

  // What Redis's scripts keep back of this class's limit now: the local allowance of every process
  // counted.
  std::int64_t reserved(route_class cls) const {
    return local_shares_[class_index(cls)].reserved_for(roster_.processes(steady_now_ms()));
  }

  // A lease take() started that will never reach Redis (fallback, a full queue, shutdown, a
  // failed batch): the checks waiting for it are decided in process like the one that asked, on
  // the thread that gives the lease up.
  void abandon_lease(std::int64_t principal_id, route_class cls) {
    const std::int64_t now = steady_now_ms();
    for (auto& w : allowances_.settle(principal_id, cls, 0, 0, now, now, now)) {
      invoke(w.done, decide_locally(principal_id, cls));
    }
  }

  // A lease answered by Redis: the spare tokens go to the table, and the checks that waited for
  // it are served from them first. The table is settled before any callback runs (the asking
  // request's included), so a caller that checks again from its callback finds the tokens.
  std::vector<allowance_table::waiter> settle_lease(const pending_check& item, std::int64_t granted,
                                                    const outcome& result, std::int64_t sent_ms) {
    const std::int64_t spare = std::max<std::int64_t>(0, granted - 1);
    const std::int64_t expires = sent_ms + std::min(lease_ms_, result.reset_ms);
    auto waiters = allowances_.settle(item.principal_id, item.cls, spare, result.remaining, steady_now_ms(), expires,
                                      sent_ms + result.reset_ms);
    if (spare > 0) leases_.fetch_add(1, std::memory_order_relaxed);
    return waiters;
  }

  // Runs the callbacks of the checks that waited for a lease. If Redis refused the lease, they
  // are refused with it (they would have been refused a moment earlier); if it ran out before
  // every waiter had a token, the rest are checked again (they then lease or wait afresh).
  void answer_waiters(const pending_check& item, std::vector<allowance_table::waiter>& waiters, const outcome& result) {
    const window_policy& policy = policies_[class_index(item.cls)];
    for (auto& w : waiters) {
      if (w.tokens) {
        local_spends_.fetch_add(1, std::memory_order_relaxed);
        invoke(w.done, spent_locally(policy, *w.tokens));
      } else if (!result.allowed) {
        redis_decisions_.fetch_add(1, std::memory_order_relaxed);
        invoke(w.done, to_decision(policy, result, false));
      } else {
        check(item.principal_id, item.cls, std::move(w.done));
      }
    }
  }

  decision decide_locally(std::int64_t principal_id, route_class cls) {
    const window_policy& policy = policies_[class_index(cls)];
    const outcome result = local_.take(principal_id, cls, policy, unix_now_ms());
    fallback_decisions_.fetch_add(1, std::memory_order_relaxed);
    return to_decision(policy, result, true);
  }

  void enter_fallback(const std::string& reason) {
    redis_failures_.fetch_add(1, std::memory_order_relaxed);
    bool switched = false;
    {
      std::lock_guard lock(mutex_);
      if (!using_fallback_.load(std::memory_order_relaxed)) {
        using_fallback_.store(true, std::memory_order_release);
        epoch_.fetch_add(1, std::memory_order_relaxed);
        switched = true;
      }
    }
    if (!switched) {
      spdlog::debug("ratelimit: Redis still unusable: {}", reason);
      return;
    }
    transitions_to_fallback_.fetch_add(1, std::memory_order_relaxed);
    work_cv_.notify_all();
    idle_cv_.notify_all();
    spdlog::warn(
        "ratelimit: Redis at {}:{} unusable ({}); deciding in process until it answers again, "
        "retrying every {} ms",
        endpoint_.host, endpoint_.port, reason, retry_interval_.count());
  }

  // Records the connection's epoch and leaves fallback in one step, so a failure on another
  // connection cannot slip between the two and leave this one counted as current.
  void connected(redis_session& session) {
    bool switched = false;
    {
      std::lock_guard lock(mutex_);
      session.epoch = epoch_.load(std::memory_order_relaxed);
      if (using_fallback_.load(std::memory_order_relaxed)) {
        using_fallback_.store(false, std::memory_order_release);
        switched = true;
      }
    }
    if (switched) {
      work_cv_.notify_all();
      spdlog::info("ratelimit: Redis at {}:{} answers again; deciding in Redis", endpoint_.host, endpoint_.port);
    }
  }

  void worker_main() {
    redis_session session;
    auto next_attempt = steady::now();
    std::vector<pending_check> batch;
    batch.reserve(static_cast<std::size_t>(bounds_.batch_checks_max));
    // Each pass handles one batch or waits at most one retry interval; it ends on stop.
    for (;;) {
      if (session.is_open() && session.epoch != epoch_.load(std::memory_order_acquire)) {
        session.close();
        next_attempt = steady::now() + retry_interval_;
      }
      if (!session.is_open() && !stopping_flag_.load(std::memory_order_acquire) && steady::now() >= next_attempt) {
        next_attempt = steady::now() + retry_interval_;
        const std::string failure = session.open(endpoint_, steady::now() + timeout_, script_text());
        if (failure.empty()) {
          connected(session);
        } else {
          enter_fallback(failure);
        }
      }

      bool stopping = false;
      batch.clear();
      {
        std::unique_lock lock(mutex_);
        const bool open = session.is_open();
        const auto ready = [&] {
          return stopping_ || (open && session.epoch != epoch_.load(std::memory_order_relaxed)) ||
                 (!queue_.empty() && (open || using_fallback_.load(std::memory_order_relaxed)));
        };
        // A connected worker waits on work_cv_, which check() notifies one at a time; a worker
        // without a connection waits on idle_cv_ so it never absorbs that notification.
        if (open) {
          work_cv_.wait_for(lock, retry_interval_, ready);
        } else {
          idle_cv_.wait_until(lock, next_attempt, ready);
        }
        // Gather: a connected worker that found fewer checks than a full batch sleeps a moment
        // so that more join this round trip. Meanwhile check() enqueues without waking anybody;
        // Redis and this thread then handle one batch per wake-up instead of one check.
        if (gather_.count() > 0 && !stopping_ && open && !queue_.empty() &&
            static_cast<std::int64_t>(queue_.size()) < bounds_.batch_checks_max) {
          lock.unlock();
          std::this_thread::sleep_for(gather_);
          lock.lock();
        }
        stopping = stopping_;
        // A connection from before the last switch to fallback takes nothing: it is closed at the
        // top of the next pass, and the checks are left to current connections.
        const bool current = session.is_open() && session.epoch == epoch_.load(std::memory_order_relaxed);
        if (stopping || current || using_fallback_.load(std::memory_order_relaxed)) {
          while (!queue_.empty() && static_cast<std::int64_t>(batch.size()) < bounds_.batch_checks_max) {
            batch.push_back(std::move(queue_.front()));
            queue_.pop_front();
          }
        }
        if (stopping && batch.empty()) return;
        if (!queue_.empty() && !batch.empty()) work_cv_.notify_one();
      }
      if (batch.empty()) continue;
      if (!stopping && session.is_open() && session.epoch == epoch_.load(std::memory_order_acquire)) {
        // A failed batch counts as this connection's attempt: the next waits a full interval.
        if (!run_batch(session, batch)) next_attempt = steady::now() + retry_interval_;
      } else {
        // Shutting down, or queued just before the switch to fallback: decide here.
        for (auto& item : batch) {
          if (item.lease) abandon_lease(item.principal_id, item.cls);
          invoke(item.done, decide_locally(item.principal_id, item.cls));
        }
      }
    }
  }

  const char* script_text() const { return algorithm_ == algorithm::sliding ? sliding_script : fixed_script; }

  void append_check(redis_session& session, const pending_check& item) {
    const window_policy& policy = policies_[class_index(item.cls)];
    const std::int64_t want = item.lease ? lease_tokens_[class_index(item.cls)] : 1;
    redisAppendCommand(session.get(), "EVALSHA %s 1 %s %lld %lld %lld", session.script_sha().c_str(),
                       key_prefix(item.principal_id, item.cls).c_str(),
                       static_cast<long long>(policy.limit - reserved(item.cls)),
                       static_cast<long long>(policy.window_ms), static_cast<long long>(want));
  }

  // Appends every check of the batch, then reads every reply: one round trip for the batch.
  // Every check's callback runs before it returns. Returns false if Redis failed (the session is
  // then closed and the limiter in fallback).
  bool run_batch(redis_session& session, std::vector<pending_check>& batch) {
    std::vector<std::optional<outcome>> results(batch.size());
    std::vector<std::int64_t> granted(batch.size(), 0);
    std::vector<std::size_t> reload;
    std::string failure;
    bool io_failed = false;

    // Leases are timed from before the request left: Redis counted them no earlier, so a lease
    // never outlives the window Redis counted it in (by the local clock's reckoning).
    const std::int64_t sent_ms = steady_now_ms();
    for (const auto& item : batch) append_check(session, item);
    const auto deadline = steady::now() + timeout_;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      reply_ptr reply;
      if (failure = session.read_reply(deadline, reply); !failure.empty()) {
        io_failed = true;
        break;
      }
      if (is_noscript(*reply)) {
        reload.push_back(i);
        continue;
      }
      // An error reply leaves the connection readable: keep collecting the other answers.
      if (std::string bad = parse_outcome(*reply, results[i], granted[i]); !bad.empty()) failure = bad;
    }

    if (!io_failed && !reload.empty()) {
      // The server's script cache was emptied (SCRIPT FLUSH, or a restart behind a proxy that kept
      // the connection): load the script again and retry those checks once, in one round trip.
      // A script's digest is fixed by its text, so the retried EVALSHAs can travel in the same
      // pipeline as the SCRIPT LOAD, before its reply arrives.
      redisAppendCommand(session.get(), "SCRIPT LOAD %s", script_text());
      for (std::size_t i : reload) append_check(session, batch[i]);
      const auto retry_deadline = steady::now() + timeout_;
      reply_ptr loaded;
      if (std::string bad = session.read_reply(retry_deadline, loaded); !bad.empty()) {
        failure = bad;
        io_failed = true;
      } else if (loaded->type != REDIS_REPLY_STRING) {
        failure = "SCRIPT LOAD gave no digest";
      } else {
        session.set_script_sha(std::string(loaded->str, static_cast<std::size_t>(loaded->len)));
      }
      for (std::size_t i : reload) {
        if (io_failed) break;
        reply_ptr reply;
        if (std::string bad = session.read_reply(retry_deadline, reply); !bad.empty()) {
          failure = bad;
          io_failed = true;
          break;
        }
        if (std::string bad = parse_outcome(*reply, results[i], granted[i]); !bad.empty()) failure = bad;
      }
    }

    if (!failure.empty()) {
      session.close();
      enter_fallback(failure);
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
      pending_check& item = batch[i];
      const window_policy& policy = policies_[class_index(item.cls)];
      if (!results[i]) {
        if (item.lease) abandon_lease(item.principal_id, item.cls);
        invoke(item.done, decide_locally(item.principal_id, item.cls));
        continue;
      }
      redis_decisions_.fetch_add(1, std::memory_order_relaxed);
      const outcome& result = *results[i];
      if (item.lease) {
        // The request spends one token; the rest wait in the table until the window the lease was
        // counted in ends or lease_ms pass, whichever comes first. Remaining, as the request sees
        // it, counts the spare tokens as not yet spent. Its own answer goes before the waiters':
        // they arrived after it.
        auto waiters = settle_lease(item, granted[i], result, sent_ms);
        outcome answer = result;
        answer.remaining += std::max<std::int64_t>(0, granted[i] - 1);
        invoke(item.done, to_decision(policy, answer, false));
        answer_waiters(item, waiters, result);
        continue;
      }
      if (!result.allowed && lease_tokens_[class_index(item.cls)] > 1) {
        // A lease that arrived in this batch (or on another connection) for the same principal
        // would otherwise sit unspent while this request is refused.
        const auto ticket = allowances_.take(item.principal_id, item.cls, steady_now_ms(), false, {});
        if (ticket.kind == allowance_table::verdict::spent) {
          local_spends_.fetch_add(1, std::memory_order_relaxed);
          invoke(item.done, spent_locally(policy, ticket.tokens));
          continue;
        }
      }
      invoke(item.done, to_decision(policy, result, false));
    }
    return failure.empty();
  }

  // Keeps this process's entry in the roster and its count current, every beat, on a connection
  // of its own. A renewal that fails leaves the count to go stale (the scripts then keep back
  // processes_max) and this process's local allowance to stop; the next beat connects again.
  void roster_main() {
    redis_session session;
    const auto beat = milliseconds(roster_.timing().beat_ms);
    const std::string ttl = std::to_string(roster_.timing().ttl_ms());
    for (;;) {
      const auto started = steady::now();
      const auto deadline = started + timeout_;
      std::string failure;
      if (!session.is_open()) failure = session.open(endpoint_, deadline, roster_script);
      if (failure.empty()) {
        const std::int64_t sent = steady_now_ms();
        redisAppendCommand(session.get(), "EVALSHA %s 1 %s %s %s", session.script_sha().c_str(),
                           bounds_.roster_key.c_str(), roster_member_.c_str(), ttl.c_str());
        reply_ptr reply;
        failure = session.read_reply(deadline, reply);
        if (failure.empty() && reply->type == REDIS_REPLY_INTEGER) {
          roster_.renewed(sent, steady_now_ms(), reply->integer);
        } else if (failure.empty()) {
          failure = reply->type == REDIS_REPLY_ERROR ? reply_error(*reply) : "unexpected roster reply";
        }
      }
      // After a failure the next attempt waits as long as the workers' reconnects do, at least.
      auto next = started + beat;
      if (!failure.empty()) {
        session.close();
        spdlog::debug("ratelimit: renewing this process's roster entry failed: {}", failure);
        next = started + std::max<steady::duration>(beat, retry_interval_);
      }
      std::unique_lock lock(roster_mutex_);
      if (roster_cv_.wait_until(lock, next, [this] { return roster_stopping_; })) return;
    }
  }

  // A name no other process sharing the Redis uses: the host's, the process id and random bits.
  static std::string roster_member_name() {
    std::array<char, 256> host{};
    if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
    std::random_device random;
    const auto bits = (static_cast<std::uint64_t>(random()) << 32) | random();
    return std::string(host.data()) + ":" + std::to_string(getpid()) + ":" + std::to_string(bits);
  }

  void pinger_main() {
    std::vector<std::function<void(bool, std::string)>> waiting;
    for (;;) {
      {
        std::unique_lock lock(ping_mutex_);
        ping_cv_.wait(lock, [this] { return ping_stopping_ || !pings_.empty(); });
        waiting.swap(pings_);
        if (ping_stopping_) {
          lock.unlock();
          for (auto& done : waiting) invoke_ping(done, false, "rate limiter is stopping");
          return;
        }
      }
      // One probe answers every ping that arrived while the previous one ran.
      auto [ok, detail] = probe();
      for (auto& done : waiting) invoke_ping(done, ok, detail);
      waiting.clear();
    }
  }

  std::pair<bool, std::string> probe() {
    const std::string where = "redis " + endpoint_.host + ":" + std::to_string(endpoint_.port) + ": ";
    const auto deadline = steady::now() + timeout_;
    redis_session session;
    if (std::string failure = session.open(endpoint_, deadline, nullptr); !failure.empty()) {
      return {false, where + failure};
    }
    redisAppendCommand(session.get(), "PING");
    reply_ptr reply;
    if (std::string failure = session.read_reply(deadline, reply); !failure.empty()) {
      return {false, where + failure};
    }
    if (reply->type == REDIS_REPLY_ERROR) return {false, where + reply_error(*reply)};
    if (reply->type != REDIS_REPLY_STATUS) return {false, where + "unexpected PING reply"};
    return {true, where + reply_error(*reply)};
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      stopping_flag_.store(true, std::memory_order_release);
    }
    work_cv_.notify_all();
    idle_cv_.notify_all();
    {
      std::lock_guard lock(ping_mutex_);
      ping_stopping_ = true;
    }
    ping_cv_.notify_all();
    {
      std::lock_guard lock(roster_mutex_);
      roster_stopping_ = true;
    }
    roster_cv_.notify_all();
    if (roster_thread_.joinable()) roster_thread_.join();
    for (auto& worker : workers_) {
      if (worker.joinable()) worker.join();
    }
    if (pinger_.joinable()) pinger_.join();
  }

  const redis_endpoint endpoint_;
  const milliseconds timeout_;
  const milliseconds retry_interval_;
  const std::chrono::microseconds gather_;
  const bool enabled_;
  const algorithm algorithm_;
  const std::array<window_policy, 2> policies_;  // indexed by class_index()
  const limiter_bounds bounds_;
  // Tokens per lease, by class_index() (lease_size): 1, no leases, every check asks Redis.
  const std::array<std::int64_t, 2> lease_tokens_;
  const std::int64_t lease_ms_;
  // The local allowance by class_index(): admitted without Redis, kept back from Redis's limit.
  const std::array<local_share, 2> local_shares_;
  // The processes sharing the limit; renewed on its own thread only when a local allowance exists.
  roster roster_;
  const bool roster_used_;
  const std::string roster_member_;
  local_limiter local_;
  allowance_table allowances_;

  // Checks waiting for a worker, and the mode. `using_fallback_` and `epoch_` change only under
  // `mutex_` (so waiting workers never miss the change) but are read without it on hot paths.
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  std::deque<pending_check> queue_;
  bool stopping_ = false;
  std::atomic<bool> stopping_flag_{false};
  std::atomic<bool> using_fallback_{false};
  std::atomic<std::uint64_t> epoch_{0};

  std::mutex ping_mutex_;
  std::condition_variable ping_cv_;
  std::vector<std::function<void(bool, std::string)>> pings_;
  bool ping_stopping_ = false;

  std::atomic<std::uint64_t> redis_decisions_{0};
  std::atomic<std::uint64_t> fallback_decisions_{0};
  std::atomic<std::uint64_t> redis_failures_{0};
  std::atomic<std::uint64_t> transitions_to_fallback_{0};
  std::atomic<std::uint64_t> local_spends_{0};
  std::atomic<std::uint64_t> leases_{0};
  std::atomic<std::uint64_t> local_admissions_{0};

  std::mutex roster_mutex_;
  std::condition_variable roster_cv_;
  bool roster_stopping_ = false;

  std::vector<std::thread> workers_;
  std::thread pinger_;
  std::thread roster_thread_;
};

limiter::limiter(const config::redis_settings& redis, const config::ratelimit_settings& limits,
                 const limiter_bounds& bounds)
    : impl_(std::make_unique<impl>(redis, limits, bounds)) {}

limiter::~limiter() = default;

void limiter::check(std::int64_t principal_id, route_class cls, std::function<void(decision)> done) {
  impl_->check(principal_id, cls, std::move(done));
}

void limiter::ping(std::function<void(bool ok, std::string detail)> done) { impl_->ping(std::move(done)); }

limiter::stats limiter::snapshot() const { return impl_->snapshot(); }

}  // namespace ratelimit
