#pragma once

// The replay pruner: every `interval`, on a timer thread of its own, it deletes the answers kept
// for management requests sent with an Idempotency-Key (persistence/replays.hpp) once they are
// older than `retention_hours`: a rotation's answer holds the secret it made, and an answer is
// needed only while its client may still retry. A round deletes up to k_rows_per_round rows, in
// statements of k_rows_per_statement, oldest first; a larger backlog takes more rounds. In cluster
// mode only the node that holds partition 0's lease runs it, as the hold expirer.

#include <atomic>
#include <chrono>
#include <cstdint>

#include "base/ticker.hpp"

namespace actors {

struct service_core;

class replay_pruner {
 public:
  static constexpr int k_rows_per_statement = 1'000;
  static constexpr int k_rows_per_round = 20'000;

  // `retention_hours` > 0.
  replay_pruner(service_core& core, std::int64_t retention_hours);
  ~replay_pruner();
  replay_pruner(const replay_pruner&) = delete;
  replay_pruner& operator=(const replay_pruner&) = delete;

  void start(std::chrono::milliseconds interval);
  void stop();

  // Kept answers deleted since the start.
  std::uint64_t pruned() const { return pruned_.load(); }

 private:
  void tick();

  service_core& core_;
  const std::int64_t retention_hours_;
  std::atomic<std::uint64_t> pruned_{0};
  // At most one round in flight: a slow database is not asked twice at once.
  std::atomic<bool> running_{false};
  base::ticker timer_;  // last: stopped first
};

}  // namespace actors
