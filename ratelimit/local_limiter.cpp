#include "ratelimit/local_limiter.hpp"

#include <algorithm>

#include "base/assert.hpp"

namespace ratelimit {

local_limiter::local_limiter(algorithm algo, std::int64_t entries_max)
    : algorithm_(algo), entries_per_shard_max_(std::max<std::int64_t>(1, entries_max / std::int64_t{shard_count_})) {
  WALLET_ASSERT(entries_max >= 1, "fallback_entries_max must be positive");
}

std::size_t local_limiter::key_hash::operator()(const key& k) const noexcept {
  // splitmix64's finalizer: every input bit reaches every output bit, so shards (chosen from the
  // high bits) stay even for ids that share low bits. The class goes into the low bit first.
  std::uint64_t x = (static_cast<std::uint64_t>(k.principal_id) << 1) ^ static_cast<std::uint64_t>(k.cls);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return static_cast<std::size_t>(x ^ (x >> 31));
}

local_limiter::entry* local_limiter::find_or_insert(shard& s, const key& k, std::int64_t now_ms) {
  if (auto it = s.entries.find(k); it != s.entries.end()) return &it->second;
  if (static_cast<std::int64_t>(s.entries.size()) >= entries_per_shard_max_) {
    if (now_ms - s.last_prune_ms < prune_interval_ms_) return nullptr;
    s.last_prune_ms = now_ms;
    // A counter is dead once neither its window nor the one after it is current: it would read
    // as zero in both the current and previous position.
    std::erase_if(s.entries, [now_ms](const auto& item) {
      const entry& e = item.second;
      return now_ms / e.window_ms > e.window_index + 1;
    });
    if (static_cast<std::int64_t>(s.entries.size()) >= entries_per_shard_max_) return nullptr;
  }
  return &s.entries.emplace(k, entry{}).first->second;
}

outcome local_limiter::take(std::int64_t principal_id, route_class cls, const window_policy& policy,
                            std::int64_t now_ms) {
  WALLET_ASSERT(policy.window_ms >= 1 && policy.limit >= 1, "window policy not positive");
  const std::int64_t index = now_ms / policy.window_ms;
  const std::int64_t elapsed_ms = now_ms - index * policy.window_ms;
  const key k{principal_id, cls};
  shard& s = shards_[(key_hash{}(k) >> 56) % shard_count_];
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

std::int64_t local_limiter::size() const {
  std::int64_t total = 0;
  for (const shard& s : shards_) {
    std::lock_guard lock(s.mutex);
    total += static_cast<std::int64_t>(s.entries.size());
  }
  return total;
}

}  // namespace ratelimit
