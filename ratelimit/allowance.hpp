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
// The same entries keep each principal's local allowance (ratelimit/README.md, "Local allowance"):
// the instants of its last `tokens` admissions made without Redis, so that no interval one window
// long holds more than `tokens` of them. An entry that still holds one of those instants inside a
// window is not dropped, or a principal could be admitted locally again within the window.
//
// Time is passed in by the caller (milliseconds on a monotonic clock), so tests can move it.
// Thread-safe: the entries are split into shards, each behind its own mutex.

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "ratelimit/limiter.hpp"
#include "ratelimit/principal_table.hpp"
#include "ratelimit/window.hpp"

namespace ratelimit {

// A class's local allowance: at most `tokens` admissions without Redis in any `window_ms`.
struct local_rule {
  std::int64_t tokens = 0;  // 0: none
  std::int64_t window_ms = 1;
};

class allowance_table {
 public:
  explicit allowance_table(std::int64_t entries_max);

  // One token spent here: the values for the RateLimit header.
  struct spend {
    std::int64_t remaining = 0;  // shared remaining at lease time, minus the tokens spent since
    std::int64_t reset_ms = 0;   // until the window the lease was counted in ends
  };
  using local_rule = ratelimit::local_rule;
  enum class verdict {
    spent,    // a token was taken from a live lease: `tokens` is valid
    local,    // admitted from the local allowance: `local_count` is valid
    lease,    // nothing to spend: the caller asks Redis for a lease and must settle() it
    waiting,  // a lease is in flight: the callback was moved into the table and settle() returns it
    ask,      // nothing to spend and nothing to wait for: the caller asks Redis for one token
  };
  struct ticket {
    verdict kind = verdict::ask;
    spend tokens;
    std::int64_t local_count = 0;  // local admissions within the last window, this one included
  };
  using callback = std::function<void(decision)>;

  // Spends one leased token if a live lease has one; else admits from the local allowance if it has
  // room (and the table has room for the entry). Otherwise, when `may_lease`: if a lease for this
  // key is in flight and fewer than `waiters_max` checks wait for it, moves `done` into the table
  // to wait; if none is in flight (and the table has room), marks one in flight.
  ticket take(std::int64_t principal_id, route_class cls, std::int64_t now_ms, bool may_lease, local_rule local = {},
              callback* done = nullptr, std::int64_t waiters_max = 0);

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
    // The local allowance: the instants of the last admissions without Redis, oldest at
    // `local_next` once all are used; they matter until `local_until_ms`.
    std::array<std::int64_t, local_tokens_max> local_at = never();
    std::int64_t local_next = 0;
    std::int64_t local_until_ms = 0;
  };
  using table = principal_table<entry>;

  static std::array<std::int64_t, local_tokens_max> never();
  void expire(entry& e, std::int64_t now_ms);
  // Admits one request from the entry's local allowance if it has room: returns how many local
  // admissions then lie within the last window (0: no room).
  static std::int64_t admit_local(entry& e, const local_rule& local, std::int64_t now_ms);
  // Nothing left in the entry: no tokens, no lease in flight, no local admission that still counts.
  static bool idle(const entry& e, std::int64_t now_ms);

  table table_;
  std::atomic<std::uint64_t> expired_tokens_{0};
};

}  // namespace ratelimit
