#pragma once

// The hold expirer: every `interval`, on a timer thread of its own, it releases the holds whose
// time has passed (persistence::expire_due_holds: in the database, under the payers' row locks
// and the holds', so a capture or a void racing the expiry has exactly one outcome) and tells the
// payers' live account actors what their holds keep now. A hold is released at most about one
// interval (plus one database round trip) after it expires. In cluster mode only the node that
// holds partition 0's lease runs it (docs/scaling.md): it runs on one node at a time, and moves
// with that lease.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace actors {

struct service_core;

class hold_expirer {
 public:
  // Payers whose due holds one tick releases at most; the rest wait for the next tick.
  static constexpr int k_payers_per_tick_max = 1'000;

  explicit hold_expirer(service_core& core);
  ~hold_expirer();
  hold_expirer(const hold_expirer&) = delete;
  hold_expirer& operator=(const hold_expirer&) = delete;

  void start(std::chrono::milliseconds interval);
  void stop();

  std::uint64_t expired() const { return expired_.load(); }

 private:
  void tick();
  // Tells the payers' live actors to read their rows again (a COMMIT of unknown outcome).
  void notify_uncertain(const std::vector<std::int64_t>& payers);

  service_core& core_;
  std::atomic<std::uint64_t> expired_{0};
  // At most one expiry in flight: a slow database is not asked twice at once.
  std::atomic<bool> running_{false};
  // The payers whose holds the last tick could not release (only its callback touches it).
  std::vector<std::int64_t> failed_;
  std::mutex timer_mutex_;
  std::condition_variable timer_wake_;
  bool stopping_ = false;
  std::thread timer_;
};

}  // namespace actors
