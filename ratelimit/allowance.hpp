#pragma once

// Leased allowances: tokens this process took from the shared Redis counter ahead of need, spent
// here without a round trip. A lease of L tokens is taken when a check finds nothing left; the
// request that asked spends one, the rest wait here until they are spent or the lease expires
// (unspent tokens are never returned; they count against the principal in Redis regardless). Since
// every token is counted in Redis before it is spent, no process ever admits more than the shared
// limit; the only error is early refusal (ratelimit/README.md, "Leased allowances").
//
// At most one lease per principal and class is in flight from this process at a time, and a new
// one is asked for only once the previous one is spent or expired, so an entry never holds more
// than L - 1 tokens. Checks that find a lease in flight wait for it (up to L - 1 of them, as many
// as it can serve); more than that ask Redis for one token each, as without leases.
//
// Memory is bounded: at most `entries_max` entries; an entry whose lease expired and that has no
// lease in flight is dropped when room is needed. With the table full of live entries, a check
// simply goes to Redis for its one token, as without leases.
//
// Time is passed in by the caller (milliseconds on a monotonic clock), so tests can move it.
// Thread-safe: the entries are split into shards, each behind its own mutex.

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "ratelimit/limiter.hpp"
#include "ratelimit/principal_table.hpp"

namespace ratelimit {

class allowance_table {
 public:
  explicit allowance_table(std::int64_t entries_max);

  // One token spent here: the values for the RateLimit header.
  struct spend {
    std::int64_t remaining = 0;  // shared remaining at lease time, minus the tokens spent since
    std::int64_t reset_ms = 0;   // until the window the lease was counted in ends
  };
  enum class verdict {
    spent,    // a token was taken from a live lease: `tokens` is valid
    lease,    // nothing to spend: the caller asks Redis for a lease and must settle() it
    waiting,  // a lease is in flight: the callback was moved into the table and settle() returns it
    ask,      // nothing to spend and nothing to wait for: the caller asks Redis for one token
  };
  struct ticket {
    verdict kind = verdict::ask;
    spend tokens;
  };
  using callback = std::function<void(decision)>;

  // Spends one leased token if a live lease has one. Otherwise, when `may_lease`: if a lease for
  // this key is in flight and fewer than `waiters_max` checks wait for it, moves `done` into the
  // table to wait; if none is in flight (and the table has room), marks one in flight.
  ticket take(std::int64_t principal_id, route_class cls, std::int64_t now_ms, bool may_lease, callback* done = nullptr,
              std::int64_t waiters_max = 0);

  // A check that waited for a lease: served with a token of it, or not (the lease was refused,
  // failed, or ran out first); the caller decides the unserved ones.
  struct waiter {
    callback done;
    std::optional<spend> tokens;
  };

  // The answer to a lease asked for by take(): `spare` tokens (0 when Redis refused or failed)
  // beyond the one the asking request spent, `shared_remaining` the counter's remaining after the
  // whole lease was taken, valid until `expires_ms`; the window ends at `reset_at_ms`. The checks
  // that waited for it are served from the spare tokens first, in arrival order, and returned for
  // the caller to run (never under the table's lock).
  std::vector<waiter> settle(std::int64_t principal_id, route_class cls, std::int64_t spare,
                             std::int64_t shared_remaining, std::int64_t now_ms, std::int64_t expires_ms,
                             std::int64_t reset_at_ms);

  std::int64_t size() const;
  // Leased tokens that expired unspent (taken from the shared limit for nothing).
  std::uint64_t expired_tokens() const { return expired_tokens_.load(std::memory_order_relaxed); }

 private:
  struct entry {
    std::int64_t tokens = 0;
    std::int64_t shared_remaining = 0;
    std::int64_t expires_ms = 0;
    std::int64_t reset_at_ms = 0;
    bool leasing = false;
    std::vector<callback> waiters;  // only while `leasing`
  };
  using table = principal_table<entry>;

  void expire(entry& e, std::int64_t now_ms);

  table table_;
  std::atomic<std::uint64_t> expired_tokens_{0};
};

}  // namespace ratelimit
