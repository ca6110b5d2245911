#pragma once

// The hold expirer: every `interval`, on a timer thread of its own, it releases the holds whose
// time has passed (persistence::expire_due_holds: in the database, under the payers' row locks
// and the holds', so a capture or a void racing the expiry has exactly one outcome) and tells the
// payers' live account actors what their holds keep now. A hold is released at most about one
// interval (plus one database round trip) after it expires; a hold whose payer's row a writer keeps
// locked at every tick, about k_waiting_ticks intervals after (when its row is free within
// k_locked_payer_wait then; each waiting tick takes up k_held_back_payers_max of them, in turn). In cluster mode only the node that
// holds partition 0's lease runs it (docs/scaling.md): it runs on one node at a time, and moves
// with that lease.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <set>
#include <vector>

#include "base/ticker.hpp"
#include "actors/query_result.hpp"

namespace persistence {
struct expiry_result;
}

namespace actors {

struct service_core;

class hold_expirer {
 public:
  // Payers whose due holds one tick releases at most; the rest wait for the next tick.
  static constexpr int k_payers_per_tick_max = 1'000;
  // A payer whose holds could not expire is tried again every this many ticks (5 s at 200 ms).
  static constexpr std::uint64_t k_refused_retry_ticks = 25;
  // A tick skips the payers whose rows are locked (a writer's batch); one tick in this many then
  // takes up to k_held_back_payers_max of them one at a time, in turn from where the last such
  // tick stopped, waiting for each row for at most k_locked_payer_wait: a hot payer's row may be
  // locked whenever a tick looks.
  static constexpr std::uint64_t k_waiting_ticks = 25;
  static constexpr int k_held_back_payers_max = 5;
  static constexpr std::chrono::milliseconds k_locked_payer_wait{200};

  explicit hold_expirer(service_core& core);
  ~hold_expirer();
  hold_expirer(const hold_expirer&) = delete;
  hold_expirer& operator=(const hold_expirer&) = delete;

  void start(std::chrono::milliseconds interval);
  void stop();

  std::uint64_t expired() const { return expired_.load(); }

 private:
  void tick();
  // Records the payers a tick could not release (`retried`: the tick tried every refused payer).
  void note_refused(const std::vector<std::int64_t>& failed, bool retried);
  // An expiry's answer: counted and told to the payers' live actors, or (false) logged, and when a
  // COMMIT's outcome is unknown, `committing` told to read their rows again.
  bool answered(query_result<persistence::expiry_result>& r, const std::vector<std::int64_t>& committing);
  // Tells the payers' live actors to read their rows again (a COMMIT of unknown outcome).
  void notify_uncertain(const std::vector<std::int64_t>& payers);

  service_core& core_;
  std::atomic<std::uint64_t> expired_{0};
  // At most one expiry in flight: a slow database is not asked twice at once.
  std::atomic<bool> running_{false};
  // Payers whose holds the database refused to release: left out of the ticks but for one in
  // k_refused_retry_ticks (written by a tick's answer, read by the next tick; running_ orders them).
  std::set<std::int64_t> refused_;
  // The last payer a waiting pass took up: the next pass starts after it (ordered as refused_).
  std::int64_t held_back_after_ = 0;
  std::uint64_t ticks_ = 0;  // the timer thread's only
  base::ticker timer_;       // last: stopped first
};

}  // namespace actors
