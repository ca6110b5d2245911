#include "ratelimit/allowance.hpp"

#include <algorithm>
#include <iterator>

#include "base/assert.hpp"

namespace ratelimit {

allowance_table::allowance_table(std::int64_t entries_max)
    : entries_per_shard_max_(std::max<std::int64_t>(1, entries_max / std::int64_t{shard_count_})) {
  WALLET_ASSERT(entries_max >= 1, "lease_entries_max must be positive");
}

std::size_t allowance_table::key_hash::operator()(const key& k) const noexcept {
  // splitmix64's finalizer, as in local_limiter: shards stay even for ids sharing low bits.
  std::uint64_t x = (static_cast<std::uint64_t>(k.principal_id) << 1) ^ static_cast<std::uint64_t>(k.cls);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return static_cast<std::size_t>(x ^ (x >> 31));
}

allowance_table::shard& allowance_table::shard_for(const key& k) {
  return shards_[(key_hash{}(k) >> 56) % shard_count_];
}

void allowance_table::expire(entry& e, std::int64_t now_ms) {
  if (e.tokens > 0 && now_ms >= e.expires_ms) {
    expired_tokens_.fetch_add(static_cast<std::uint64_t>(e.tokens), std::memory_order_relaxed);
    e.tokens = 0;
  }
}

allowance_table::entry* allowance_table::insert(shard& s, const key& k, std::int64_t now_ms) {
  if (static_cast<std::int64_t>(s.entries.size()) >= entries_per_shard_max_) {
    if (now_ms - s.last_prune_ms < prune_interval_ms_) return nullptr;
    s.last_prune_ms = now_ms;
    // An entry with a lease in flight stays: its answer must find it (and there are at most as
    // many as checks queued for Redis).
    for (auto it = s.entries.begin(); it != s.entries.end();) {
      expire(it->second, now_ms);
      it = it->second.tokens == 0 && !it->second.leasing ? s.entries.erase(it) : std::next(it);
    }
    if (static_cast<std::int64_t>(s.entries.size()) >= entries_per_shard_max_) return nullptr;
  }
  return &s.entries.emplace(k, entry{}).first->second;
}

allowance_table::ticket allowance_table::take(std::int64_t principal_id, route_class cls, std::int64_t now_ms,
                                              bool may_lease, callback* done, std::int64_t waiters_max) {
  const key k{principal_id, cls};
  shard& s = shard_for(k);
  std::lock_guard lock(s.mutex);
  ticket result;
  auto it = s.entries.find(k);
  if (it != s.entries.end()) {
    entry& e = it->second;
    expire(e, now_ms);
    if (e.tokens > 0) {
      --e.tokens;
      result.kind = verdict::spent;
      result.tokens = spend{e.shared_remaining + e.tokens, std::max<std::int64_t>(0, e.reset_at_ms - now_ms)};
      return result;
    }
    if (!may_lease) return result;
    if (e.leasing) {
      if (done != nullptr && static_cast<std::int64_t>(e.waiters.size()) < waiters_max) {
        e.waiters.push_back(std::move(*done));
        result.kind = verdict::waiting;
      }
      return result;
    }
    e.leasing = true;
    result.kind = verdict::lease;
    return result;
  }
  if (!may_lease) return result;
  entry* e = insert(s, k, now_ms);
  if (e == nullptr) return result;
  e->leasing = true;
  result.kind = verdict::lease;
  return result;
}

std::vector<allowance_table::waiter> allowance_table::settle(std::int64_t principal_id, route_class cls,
                                                             std::int64_t spare, std::int64_t shared_remaining,
                                                             std::int64_t now_ms, std::int64_t expires_ms,
                                                             std::int64_t reset_at_ms) {
  WALLET_ASSERT(spare >= 0, "a lease cannot have negative spare tokens");
  const key k{principal_id, cls};
  shard& s = shard_for(k);
  std::lock_guard lock(s.mutex);
  auto it = s.entries.find(k);
  WALLET_ASSERT(it != s.entries.end() && it->second.leasing, "a lease is settled only after take() started it");
  entry& e = it->second;
  e.leasing = false;
  expire(e, now_ms);
  // take() starts a lease only when the entry is empty, and nothing else adds tokens, so the
  // entry still holds none: the lease replaces it whole.
  WALLET_ASSERT(e.tokens == 0, "a lease lands on an empty entry");
  std::vector<waiter> served;
  served.reserve(e.waiters.size());
  const bool live = now_ms < expires_ms;
  std::int64_t tokens = live ? spare : 0;
  for (callback& done : e.waiters) {
    waiter w{std::move(done), std::nullopt};
    if (tokens > 0) {
      --tokens;
      w.tokens = spend{shared_remaining + tokens, std::max<std::int64_t>(0, reset_at_ms - now_ms)};
    }
    served.push_back(std::move(w));
  }
  e.waiters.clear();
  if (!live) expired_tokens_.fetch_add(static_cast<std::uint64_t>(spare), std::memory_order_relaxed);
  if (tokens == 0) {
    s.entries.erase(it);
    return served;
  }
  e.tokens = tokens;
  e.shared_remaining = shared_remaining;
  e.expires_ms = expires_ms;
  e.reset_at_ms = reset_at_ms;
  return served;
}

std::int64_t allowance_table::size() const {
  std::int64_t total = 0;
  for (const shard& s : shards_) {
    std::lock_guard lock(s.mutex);
    total += static_cast<std::int64_t>(s.entries.size());
  }
  return total;
}

}  // namespace ratelimit
