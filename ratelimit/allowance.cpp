#include "ratelimit/allowance.hpp"

#include <algorithm>
#include <iterator>
#include <limits>

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

std::array<std::int64_t, local_tokens_max> allowance_table::never() {
  // Far enough in the past that `now - never > window` holds for any window, without overflow.
  std::array<std::int64_t, local_tokens_max> at{};
  at.fill(std::numeric_limits<std::int64_t>::min() / 2);
  return at;
}

std::int64_t allowance_table::admit_local(entry& e, const local_rule& local, std::int64_t now_ms) {
  if (local.tokens <= 0) return 0;
  WALLET_ASSERT(local.tokens <= local_tokens_max, "local_tokens is validated");
  // The oldest of the last `tokens` admissions must lie more than a window back: then no interval
  // one window long, wherever Redis's window boundaries fall, holds more than `tokens` of them
  // (strictly more, so that whole milliseconds cannot hide a window's last fraction).
  std::int64_t& oldest = e.local_at[static_cast<std::size_t>(e.local_next)];
  if (now_ms - oldest <= local.window_ms) return 0;
  oldest = now_ms;
  e.local_next = (e.local_next + 1) % local.tokens;
  e.local_until_ms = now_ms + local.window_ms + 1;
  std::int64_t within = 0;
  for (std::int64_t i = 0; i < local.tokens; ++i) {
    if (now_ms - e.local_at[static_cast<std::size_t>(i)] <= local.window_ms) ++within;
  }
  return within;
}

bool allowance_table::idle(const entry& e, std::int64_t now_ms) {
  return e.tokens == 0 && !e.leasing && now_ms >= e.local_until_ms;
}

allowance_table::ticket allowance_table::take(std::int64_t principal_id, route_class cls, std::int64_t now_ms,
                                              bool may_lease, local_rule local, callback* done,
                                              std::int64_t waiters_max) {
  const table::key k{principal_id, cls};
  table::shard& s = table_.shard_for(k);
  std::lock_guard lock(s.mutex);
  ticket result;
  entry* e = nullptr;
  if (auto it = s.entries.find(k); it != s.entries.end()) {
    e = &it->second;
    expire(*e, now_ms);
    // Tokens already counted in Redis go first: spending the local allowance while they expire
    // would waste both.
    if (e->tokens > 0) {
      --e->tokens;
      result.kind = verdict::spent;
      result.tokens = spend{e->shared_remaining + e->tokens, std::max<std::int64_t>(0, e->reset_at_ms - now_ms)};
      return result;
    }
  } else {
    if (!may_lease && local.tokens <= 0) return result;
    // An entry with a lease in flight stays: its answer must find it (and there are at most as
    // many as checks queued for Redis). So does one whose local admissions still count.
    e = table_.insert(s, k, now_ms, [this](entry& old, std::int64_t now) {
      expire(old, now);
      return idle(old, now);
    });
    if (e == nullptr) return result;
  }
  if (const std::int64_t within = admit_local(*e, local, now_ms); within > 0) {
    result.kind = verdict::local;
    result.local_count = within;
    return result;
  }
  if (!may_lease) return result;
  if (e->leasing) {
    if (done != nullptr && static_cast<std::int64_t>(e->waiters.size()) < waiters_max) {
      e->waiters.push_back(std::move(*done));
      result.kind = verdict::waiting;
    }
    return result;
  }
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
    if (idle(e, now_ms)) s.entries.erase(it);
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
