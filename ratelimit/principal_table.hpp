#pragma once

// State the limiter keeps in process per (principal, route class): the fallback limiter's counters
// (local_limiter) and the leased allowances (allowance_table). Sixteen shards, each under its own
// mutex, and a bound on entries: a full shard drops its dead entries first, at most once per prune
// interval, so a flood of new principals against a full table costs one scan per interval, not one
// per request.

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <unordered_map>

#include "ratelimit/limiter.hpp"

namespace ratelimit {

template <class Entry>
class principal_table {
 public:
  struct key {
    std::int64_t principal_id;
    route_class cls;
    bool operator==(const key&) const = default;
  };
  struct key_hash {
    // splitmix64's finalizer: every input bit reaches every output bit, so shards (chosen from the
    // high bits) stay even for ids that share low bits. The class goes into the low bit first.
    std::size_t operator()(const key& k) const noexcept {
      std::uint64_t x = (static_cast<std::uint64_t>(k.principal_id) << 1) ^ static_cast<std::uint64_t>(k.cls);
      x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
      x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
      return static_cast<std::size_t>(x ^ (x >> 31));
    }
  };
  struct shard {
    mutable std::mutex mutex;
    std::unordered_map<key, Entry, key_hash> entries;
    std::int64_t last_prune_ms = 0;
  };

  explicit principal_table(std::int64_t entries_max)
      : entries_per_shard_max_(std::max<std::int64_t>(1, entries_max / std::int64_t{shard_count_})) {}

  shard& shard_for(const key& k) { return shards_[(key_hash{}(k) >> 56) % shard_count_]; }

  // A new entry for `k` in shard `s`, which the caller has locked and which holds no entry for `k`.
  // When the shard is full, the entries `dead(entry, now_ms)` calls dead are dropped first (it may
  // update an entry it keeps); nullptr when the shard is still full.
  template <class Dead>
  Entry* insert(shard& s, const key& k, std::int64_t now_ms, Dead dead) {
    if (static_cast<std::int64_t>(s.entries.size()) >= entries_per_shard_max_) {
      if (now_ms - s.last_prune_ms < prune_interval_ms_) return nullptr;
      s.last_prune_ms = now_ms;
      for (auto it = s.entries.begin(); it != s.entries.end();) {
        it = dead(it->second, now_ms) ? s.entries.erase(it) : std::next(it);
      }
      if (static_cast<std::int64_t>(s.entries.size()) >= entries_per_shard_max_) return nullptr;
    }
    return &s.entries.emplace(k, Entry{}).first->second;
  }

  std::int64_t size() const {
    std::int64_t total = 0;
    for (const shard& s : shards_) {
      std::lock_guard lock(s.mutex);
      total += static_cast<std::int64_t>(s.entries.size());
    }
    return total;
  }

 private:
  static constexpr std::size_t shard_count_ = 16;
  static constexpr std::int64_t prune_interval_ms_ = 100;

  std::int64_t entries_per_shard_max_;
  std::array<shard, shard_count_> shards_;
};

}  // namespace ratelimit
