#pragma once

// Per-principal rate limiting backed by Redis, failing open to an in-process limiter.
//
// Every check is decided by a Lua script in Redis (so every server process sharing that Redis
// shares one allowance), on one of `redis.connections` worker threads that pipeline many checks
// per round trip, or spends a token this process leased from Redis earlier
// (ratelimit.lease_tokens; ratelimit/allowance.hpp), or admits from the few requests per window a
// process may admit alone (ratelimit.local_tokens, kept back from the shared limit). When Redis is down, slow or refuses a command, checks are decided in process
// with the same limits and the same algorithm until Redis answers again. See ratelimit/README.md
// for how `burst` and `rate_per_second` become a window.
//
// hiredis stays out of this header: only limiter.cpp sees it.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "config/settings.hpp"
#include "ratelimit/roster.hpp"

namespace ratelimit {

// Money-moving POSTs (`write`) and reads have separate allowances.
enum class route_class { write, read };

struct decision {
  bool allowed = true;
  std::int64_t limit = 0;          // requests allowed per window
  std::int64_t remaining = 0;      // left in the current window after this request
  std::int64_t reset_s = 0;        // seconds until the window frees capacity
  std::int64_t retry_after_s = 0;  // whole seconds until a request would pass (0 when allowed)
  bool fallback = false;           // decided by the in-process limiter because Redis was unusable
  std::string policy;              // RateLimit-Policy header value, e.g. `200;w=2`
  std::string header;              // RateLimit header value, e.g. `limit=200, remaining=17, reset=1`
};

// Internal bounds of the limiter. They belong with the other limits in config/; until they move
// there they are named here, in one place, and tests shrink them to reach the overflow paths.
struct limiter_bounds {
  std::int64_t queue_checks_max = 4'096;        // checks waiting for a Redis worker
  std::int64_t batch_checks_max = 64;           // checks one worker pipelines in one round trip
  std::int64_t pings_max = 256;                 // readiness pings waiting for one probe
  std::int64_t fallback_entries_max = 100'000;  // principal x class counters kept in process
  std::int64_t lease_entries_max = 100'000;     // principal x class leased allowances kept
  // The Redis sorted set that counts the processes sharing the limit (ratelimit/roster.hpp), and
  // its timing when not the one the windows call for: tests use their own set and a short span.
  std::string roster_key = "wallet:rl:processes";
  std::optional<roster_timing> roster_timing_override;
};

class limiter {
 public:
  // Starts `redis.connections` worker threads and one ping thread; connects
  // in the background, so construction never waits for Redis. Throws std::invalid_argument for a
  // Redis URL it cannot use.
  limiter(const config::redis_settings& redis, const config::ratelimit_settings& limits,
          const limiter_bounds& bounds = {});
  // Stops its threads cleanly; checks and pings still pending get their callbacks first.
  ~limiter();

  limiter(const limiter&) = delete;
  limiter& operator=(const limiter&) = delete;

  // Never blocks the caller: `done` runs exactly once, either later on a Redis worker thread or,
  // when the check is decided without Redis (a token leased earlier is spent, the local allowance
  // admits it, rate limiting is disabled, Redis is unusable or its queue is full, the limiter is
  // stopping), at once on the caller's thread before check() returns. `done` may also run on the caller's thread for other
  // checks that waited for a lease this one gives up. Either way it must be cheap (e.g. post to
  // a strand) and must not call check() of the same limiter while holding a lock check() needs.
  void check(std::int64_t principal_id, route_class cls, std::function<void(decision)> done);

  // Asynchronous PING for readiness: `done(ok, detail)` runs on a limiter thread within about the
  // command timeout, or at once on the caller's thread when the ping is refused (too many pending,
  // stopping). Uses its own short-lived connection, so it reports whether Redis answers now.
  void ping(std::function<void(bool ok, std::string detail)> done);

  // Every decided check is counted once: in Redis (its own answer, or the refusal of a lease it
  // waited for), from a leased allowance, from the local allowance, or in process.
  struct stats {
    std::uint64_t redis_decisions;
    std::uint64_t fallback_decisions;
    std::uint64_t redis_failures;
    std::uint64_t transitions_to_fallback;
    bool using_fallback;
    std::uint64_t local_spends;          // checks admitted from a leased allowance, no Redis call
    std::uint64_t leases;                // Redis answers that left spare tokens in the table
    std::uint64_t lease_tokens_expired;  // leased tokens that expired unspent
    std::uint64_t local_admissions;      // checks admitted from the local allowance, no Redis call
    std::int64_t processes_counted;      // processes whose local allowance the limit keeps back now
    bool local_ready;                    // this process may admit from its local allowance now
  };
  stats snapshot() const;  // for /metrics

 private:
  class impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace ratelimit
