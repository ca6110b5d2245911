#pragma once

// The in-process limiter used while Redis is unusable: the same windows and the same arithmetic
// as the Redis scripts (ratelimit/window.hpp), kept per principal and route class in this process
// only. Memory is bounded: at most `entries_max` counters; counters whose windows have both passed
// are pruned when room is needed. If every counter is still live, an unknown principal is allowed
// without being counted: the fallback fails open rather than growing without bound.
//
// Thread-safe: the counters are split into shards, each behind its own mutex.

#include <cstdint>

#include "ratelimit/limiter.hpp"
#include "ratelimit/principal_table.hpp"
#include "ratelimit/window.hpp"

namespace ratelimit {

class local_limiter {
 public:
  local_limiter(algorithm algo, std::int64_t entries_max);

  // Decides one request at `now_ms` (milliseconds since the Unix epoch, so windows line up with
  // the ones Redis uses) and counts it if it passes.
  outcome take(std::int64_t principal_id, route_class cls, const window_policy& policy, std::int64_t now_ms);

  std::int64_t size() const;

 private:
  struct entry {
    std::int64_t window_index = 0;
    std::int64_t window_ms = 0;
    std::int64_t current = 0;
    std::int64_t previous = 0;
  };
  using table = principal_table<entry>;

  entry* find_or_insert(table::shard& s, const table::key& k, std::int64_t now_ms);

  algorithm algorithm_;
  table table_;
};

}  // namespace ratelimit
