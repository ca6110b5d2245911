#include "ratelimit/allowance.hpp"

#include <algorithm>
#include <iterator>

#include "base/assert.hpp"

namespace ratelimit {

allowance_table::allowance_table(std::int64_t entries_max) : table_(entries_max) {
  WALLET_ASSERT(entries_max >= 1, "lease_entries_max must be positive");
}

void allowance_table::expire(entry& e, std::int64_t now_ms) {
  if (e.tokens > 0 && now_ms >= e.expires_ms) {
    expired_tokens_.fetch_add(static_cast<std::uint64_t>(e.tokens), std::memory_order_relaxed);
    e.tokens = 0;
  }
}

allowance_table::ticket allowance_table::take(std::int64_t principal_id, route_class cls, std::int64_t now_ms,
                                              bool may_lease, callback* done, std::int64_t waiters_max) {
  const table::key k{principal_id, cls};
  table::shard& s = table_.shard_for(k);
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
  // An entry with a lease in flight stays: its answer must find it (and there are at most as many
  // as checks queued for Redis).
  entry* e = table_.insert(s, k, now_ms, [this](entry& old, std::int64_t now) {
    expire(old, now);
    return old.tokens == 0 && !old.leasing;
  });
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
  const table::key k{principal_id, cls};
  table::shard& s = table_.shard_for(k);
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

std::int64_t allowance_table::size() const { return table_.size(); }

}  // namespace ratelimit
