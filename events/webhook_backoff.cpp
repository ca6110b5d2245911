#include "events/webhook_backoff.hpp"

#include <algorithm>

#include "base/assert.hpp"

namespace events {

std::int64_t backoff_ceiling_ms(const backoff_policy& p, int failures) {
  WALLET_ASSERT(failures >= 1 && p.base_ms >= 1 && p.cap_ms >= 1, "a pause follows a failure");
  // Doubling stops once the cap is reached, so the product never overflows.
  std::int64_t d = std::min(p.base_ms, p.cap_ms);
  for (int i = 1; i < failures && d < p.cap_ms; ++i) d = std::min(d * 2, p.cap_ms);
  return d;
}

std::int64_t backoff_delay_ms(const backoff_policy& p, int failures, double unit) {
  WALLET_ASSERT(unit >= 0.0 && unit < 1.0, "the jitter's draw is in [0, 1)");
  const auto ceiling = backoff_ceiling_ms(p, failures);
  const auto half = ceiling / 2;
  const auto jitter = static_cast<std::int64_t>(unit * static_cast<double>(ceiling - half + 1));
  return std::max<std::int64_t>(1, std::min(ceiling, half + jitter));
}

std::optional<std::int64_t> next_retry_delay_ms(const backoff_policy& p, int failures, std::int64_t elapsed_ms,
                                                std::int64_t attempt_ms, double unit) {
  const auto delay = backoff_delay_ms(p, failures, unit);
  if (elapsed_ms + attempt_ms + delay > p.span_ms) return std::nullopt;
  return delay;
}

}  // namespace events
