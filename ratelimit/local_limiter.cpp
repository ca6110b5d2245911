#include "ratelimit/local_limiter.hpp"

#include <algorithm>

#include "base/assert.hpp"

namespace ratelimit {

local_limiter::local_limiter(algorithm algo, std::int64_t entries_max) : algorithm_(algo), table_(entries_max) {
  WALLET_ASSERT(entries_max >= 1, "fallback_entries_max must be positive");
}

local_limiter::entry* local_limiter::find_or_insert(table::shard& s, const table::key& k, std::int64_t now_ms) {
  if (auto it = s.entries.find(k); it != s.entries.end()) return &it->second;
  // A counter is dead once neither its window nor the one after it is current: it would read as
  // zero in both the current and previous position.
  return table_.insert(s, k, now_ms,
                       [](const entry& e, std::int64_t now) { return now / e.window_ms > e.window_index + 1; });
}

outcome local_limiter::take(std::int64_t principal_id, route_class cls, const window_policy& policy,
                            std::int64_t now_ms) {
  WALLET_ASSERT(policy.window_ms >= 1 && policy.limit >= 1, "window policy not positive");
  const std::int64_t index = now_ms / policy.window_ms;
  const std::int64_t elapsed_ms = now_ms - index * policy.window_ms;
  const table::key k{principal_id, cls};
  table::shard& s = table_.shard_for(k);
  std::lock_guard lock(s.mutex);
  entry* e = find_or_insert(s, k, now_ms);
  if (e == nullptr) {
    // Table full of live counters: fail open, uncounted (see the header).
    return algorithm_ == algorithm::sliding ? evaluate_sliding(0, 0, elapsed_ms, policy)
                                            : evaluate_fixed(1, elapsed_ms, policy);
  }
  if (e->window_ms != policy.window_ms || e->window_index < index - 1) {
    *e = entry{index, policy.window_ms, 0, 0};
  } else if (e->window_index == index - 1) {
    *e = entry{index, policy.window_ms, 0, e->current};
  }
  // Clocks can step backwards; a counter from a "future" window is still counted as current.
  if (algorithm_ == algorithm::sliding) {
    const outcome result = evaluate_sliding(e->current, e->previous, elapsed_ms, policy);
    if (result.allowed) ++e->current;
    return result;
  }
  const outcome result = evaluate_fixed(e->current + 1, elapsed_ms, policy);
  if (result.allowed) ++e->current;
  return result;
}

std::int64_t local_limiter::size() const { return table_.size(); }

}  // namespace ratelimit
