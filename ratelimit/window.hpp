#pragma once

// The window arithmetic shared by the Redis scripts and the in-process fallback: plain functions,
// no I/O, so both paths give the same answers and the edge cases are easy to test.
//
// How `burst` and `rate` become a window: a principal may make `burst` requests per window of
// `burst / rate` seconds (kept in whole milliseconds, rounded up, which can only make the limit
// stricter by less than a millisecond per window). A full burst is therefore allowed at once, and
// the long-run average is `rate` per second. Defaults: writes 200 per 2 s, reads 1000 per 2 s.

#include <cstdint>
#include <string>

#include "config/settings.hpp"
#include "ratelimit/limiter.hpp"

namespace ratelimit {

enum class algorithm { sliding, fixed };

// Throws std::invalid_argument for a name other than "sliding" or "fixed".
algorithm parse_algorithm(const std::string& name);

struct window_policy {
  std::int64_t limit = 0;      // requests allowed per window (the burst)
  std::int64_t window_ms = 0;  // ceil(burst * 1000 / rate)
};

window_policy policy_for(const config::ratelimit_settings& settings, route_class cls);

// How many tokens one lease of this class takes from Redis (ratelimit/README.md, "Leased
// allowances"): `lease_tokens`, but never so many that the leases one process can let expire in a
// window (one per `lease_ms`, and one more cut at the window's end) could strand more than half of
// the limit. A limit too small for that is not leased: every check asks Redis.
std::int64_t lease_size(const window_policy& policy, std::int64_t lease_tokens, std::int64_t lease_ms);

// The most requests per principal and class one process may admit without asking Redis.
inline constexpr std::int64_t local_tokens_max = 8;

// The local allowance of one class (ratelimit/README.md, "Local allowance"): each process admits at
// most `tokens` requests of a principal in any interval one window long without asking Redis, and
// the limit Redis enforces is lowered by `reserved`, what every process's local admissions can add
// to one window's count: `tokens` per process for the fixed window, twice that for the sliding one
// (its estimate weighs the previous window too), times the processes counted (ratelimit/roster.hpp),
// at most `processes_max`. Never more than half of the limit is kept back: `tokens` is cut to fit
// `processes_max` processes, and a limit too small for one token has none.
struct local_share {
  std::int64_t tokens = 0;
  std::int64_t reserved = 0;     // kept back for `processes_max` processes: the most
  std::int64_t per_process = 0;  // kept back for each process counted
  std::int64_t reserved_for(std::int64_t processes) const { return per_process * processes; }
};
local_share local_share_for(const window_policy& policy, algorithm algo, std::int64_t local_tokens,
                            std::int64_t processes_max);

// One answer in milliseconds; converted to whole seconds only at the edge (`to_decision`).
struct outcome {
  bool allowed = false;
  std::int64_t remaining = 0;
  std::int64_t reset_ms = 0;
  std::int64_t retry_after_ms = 0;
};

// Sliding-window counter: the estimate is `current + previous * (time left in the current fixed
// window / window)`. A request passes when the estimate plus itself stays within the limit; only
// passing requests are counted (the caller increments `current`), so a client hammering while
// denied does not push its own recovery further away. Denied: the wait until the estimate has
// decayed enough, assuming no other request passes meanwhile. `elapsed_ms` is the time since the
// current fixed window began, in [0, window_ms). The Lua script in limiter.cpp mirrors this
// expression for expression, so Redis and the fallback round identically.
outcome evaluate_sliding(std::int64_t current, std::int64_t previous, std::int64_t elapsed_ms,
                         const window_policy& policy);

// Fixed window: `count` is this window's count including the request being decided. Denied
// requests wait for the window to end, when the count starts again from zero.
outcome evaluate_fixed(std::int64_t count, std::int64_t elapsed_ms, const window_policy& policy);

// The RateLimit-Policy value, `limit;w=seconds`. The header field only has whole seconds, so a
// window under a second is announced as one second: a client pacing itself by it stays within the
// limit.
std::string policy_header(const window_policy& policy);

// Whole seconds, rounded up: a client that waits `retry_after_s` is never too early.
std::int64_t ceil_seconds(std::int64_t ms);

decision to_decision(const window_policy& policy, const outcome& result, bool fallback);

// The answer when rate limiting is turned off: allowed, with the headers of an untouched window.
decision unlimited_decision(const window_policy& policy);

}  // namespace ratelimit
