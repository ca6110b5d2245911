#include "ratelimit/window.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "base/assert.hpp"

namespace ratelimit {

algorithm parse_algorithm(const std::string& name) {
  if (name == "sliding") return algorithm::sliding;
  if (name == "fixed") return algorithm::fixed;
  throw std::invalid_argument("ratelimit.algorithm must be sliding or fixed, got '" + name + "'");
}

window_policy policy_for(const config::ratelimit_settings& settings, route_class cls) {
  const std::int64_t burst = cls == route_class::write ? settings.burst : settings.read_burst;
  const std::int64_t rate = cls == route_class::write ? settings.rate_per_second : settings.read_rate_per_second;
  WALLET_ASSERT(burst >= 1 && rate >= 1, "burst and rate are validated to be positive");
  // config bounds both at 10^7, so burst * 1000 cannot overflow.
  return window_policy{burst, (burst * 1000 + rate - 1) / rate};
}

std::int64_t lease_size(const window_policy& policy, std::int64_t lease_tokens, std::int64_t lease_ms) {
  WALLET_ASSERT(lease_tokens >= 1 && lease_ms >= 1, "lease settings are validated positive");
  // A lease strands at most its size - 1 when it expires.
  const std::int64_t expiring_per_window = policy.window_ms / lease_ms + 1;
  const std::int64_t stranded_max = policy.limit / (2 * expiring_per_window);
  return std::min(lease_tokens, 1 + stranded_max);
}

local_share local_share_for(const window_policy& policy, algorithm algo, std::int64_t local_tokens,
                            std::int64_t processes_max) {
  WALLET_ASSERT(local_tokens >= 0 && local_tokens <= local_tokens_max && processes_max >= 1,
                "local allowance settings are validated");
  const std::int64_t windows_counted = algo == algorithm::sliding ? 2 : 1;
  const std::int64_t per_token = windows_counted * processes_max;
  const std::int64_t tokens = std::min(local_tokens, policy.limit / (2 * per_token));
  return local_share{tokens, tokens * per_token, tokens * windows_counted};
}

outcome evaluate_sliding(std::int64_t current, std::int64_t previous, std::int64_t elapsed_ms,
                         const window_policy& policy) {
  WALLET_ASSERT(elapsed_ms >= 0 && elapsed_ms < policy.window_ms, "elapsed outside window");
  WALLET_ASSERT(current >= 0 && previous >= 0, "negative counter");
  const double limit = static_cast<double>(policy.limit);
  const double window = static_cast<double>(policy.window_ms);
  const double left = static_cast<double>(policy.window_ms - elapsed_ms);
  const double cur = static_cast<double>(current);
  const double prev = static_cast<double>(previous);
  const double estimate = cur + prev * left / window;
  if (estimate + 1 <= limit) {
    return outcome{true, static_cast<std::int64_t>(std::floor(limit - estimate - 1)), static_cast<std::int64_t>(left),
                   0};
  }
  double wait = 0;
  if (cur + 1 <= limit) {
    // Room is left in this window; the previous window's share has to decay. `previous` is
    // positive here, or the estimate would have passed.
    wait = std::ceil(left - (limit - 1 - cur) * window / prev) + 1;
  } else {
    // This window alone is full: wait into the next one until this window's share has decayed.
    wait = left + std::ceil(window * (cur - limit + 1) / cur) + 1;
  }
  // The extra millisecond above absorbs floating-point rounding at the exact boundary.
  const auto wait_ms = static_cast<std::int64_t>(wait < 1 ? 1 : wait);
  return outcome{false, 0, wait_ms, wait_ms};
}

outcome evaluate_fixed(std::int64_t count, std::int64_t elapsed_ms, const window_policy& policy) {
  WALLET_ASSERT(elapsed_ms >= 0 && elapsed_ms < policy.window_ms, "elapsed outside window");
  WALLET_ASSERT(count >= 1, "the count includes the request being decided");
  const std::int64_t left = policy.window_ms - elapsed_ms;
  if (count <= policy.limit) return outcome{true, policy.limit - count, left, 0};
  return outcome{false, 0, left, left};
}

std::string policy_header(const window_policy& policy) {
  return std::to_string(policy.limit) + ";w=" + std::to_string(ceil_seconds(policy.window_ms));
}

std::int64_t ceil_seconds(std::int64_t ms) {
  if (ms <= 0) return 0;
  return (ms + 999) / 1000;
}

decision to_decision(const window_policy& policy, const outcome& result, bool fallback) {
  decision d;
  d.allowed = result.allowed;
  d.limit = policy.limit;
  d.remaining = result.remaining < 0 ? 0 : result.remaining;
  d.reset_s = ceil_seconds(result.reset_ms);
  d.retry_after_s = 0;
  if (!result.allowed) {
    const std::int64_t retry_s = ceil_seconds(result.retry_after_ms);
    d.retry_after_s = retry_s < 1 ? 1 : retry_s;
    // When denied, the window frees capacity exactly when a retry would pass.
    d.reset_s = d.retry_after_s;
  }
  d.fallback = fallback;
  d.policy = policy_header(policy);
  d.header = "limit=" + std::to_string(d.limit) + ", remaining=" + std::to_string(d.remaining) +
             ", reset=" + std::to_string(d.reset_s);
  return d;
}

decision unlimited_decision(const window_policy& policy) {
  return to_decision(policy, outcome{true, policy.limit, policy.window_ms, 0}, false);
}

}  // namespace ratelimit
