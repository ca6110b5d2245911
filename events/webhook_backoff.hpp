#pragma once

// When a failed webhook delivery is tried again (docs/events.md, "Retry schedule"): exponential
// backoff with jitter, within a retry span. Pure, so that the schedule is tested on its own.
//
// After the n-th failed attempt of a span (n >= 1) the pause is drawn from [d/2, d], where
// d = min(cap, base * 2^(n-1)): the doubling spreads retries out, the jitter keeps endpoints that
// failed together (an outage of the receiver) from being retried in lockstep. A retry that would
// start later than `span` after the span's first attempt is not made: the delivery is FAILED.

#include <cstdint>
#include <optional>

namespace events {

struct backoff_policy {
  std::int64_t base_ms = 1'000;
  std::int64_t cap_ms = 3'600'000;
  std::int64_t span_ms = 86'400'000;
};

// The un-jittered pause after `failures` (>= 1) failed attempts: min(cap, base * 2^(failures-1)).
std::int64_t backoff_ceiling_ms(const backoff_policy& p, int failures);

// The pause after `failures` failed attempts, with `unit` in [0, 1) choosing where in
// [ceiling/2, ceiling] it falls (at least 1 ms).
std::int64_t backoff_delay_ms(const backoff_policy& p, int failures, double unit);

// The pause before the next attempt, or nullopt when the delivery is given up: the next attempt
// would start more than `span_ms` after the span's first attempt (`elapsed_ms` ago when the
// failed attempt started; the attempt itself took `attempt_ms`).
std::optional<std::int64_t> next_retry_delay_ms(const backoff_policy& p, int failures, std::int64_t elapsed_ms,
                                                std::int64_t attempt_ms, double unit);

}  // namespace events
