#pragma once

// The lease keeper: this node's side of the partition leases (docs/scaling.md). On a thread of its
// own, with a PostgreSQL connection of its own, every `renew_interval` it
//   1. records the node's heartbeat (and address) and counts the nodes that are up;
//   2. renews the leases it holds; one it no longer holds (taken over after this node stalled
//      past the TTL) is dropped from `ownership` at once;
//   3. stops debiting the leases above its fair share, ceil(P / nodes up), and hands them back one
//      round later (its debits in flight have committed by then), so a node that joins gets work;
//   4. takes partitions that nobody holds, or whose lease expired, up to its fair share.
// A lease is trusted locally until the instant the renewal was sent plus the TTL, minus a margin,
// so this node stops deciding debits before another node can take the partition over. stop()
// hands every lease back at once.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "cluster/ownership.hpp"
#include "persistence/database.hpp"

namespace cluster {

struct keeper_config {
  persistence::connection_options database;
  std::string address;  // where other nodes reach this one (host:port)
  std::chrono::milliseconds ttl{5'000};
  std::chrono::milliseconds renew_interval{1'000};
};

struct keeper_stats {
  std::uint64_t rounds = 0;
  std::uint64_t failures = 0;  // rounds the database did not answer
  std::uint64_t acquired = 0;
  std::uint64_t lost = 0;  // leases taken over by another node while this one held them
  std::uint64_t released = 0;
  int held = 0;
  int nodes = 0;
};

class lease_keeper {
 public:
  lease_keeper(keeper_config config, std::shared_ptr<ownership> owned);
  ~lease_keeper();
  lease_keeper(const lease_keeper&) = delete;
  lease_keeper& operator=(const lease_keeper&) = delete;

  // Runs the first round on the caller's thread (so the node starts with its share when the
  // database answers), then starts the timer thread.
  void start();
  // Stops the thread and hands every lease back.
  void stop();

  // Runs one round now (tests drive the keeper this way).
  void round();

  keeper_stats stats() const;

 private:
  void run_round();

  keeper_config config_;
  std::shared_ptr<ownership> owned_;
  std::unique_ptr<pqxx::connection> conn_;
  std::mutex round_mutex_;   // one round at a time: the timer's or a test's
  std::set<int> releasing_;  // no longer debited here; handed back at the next round

  mutable std::mutex stats_mutex_;
  keeper_stats stats_;

  std::mutex timer_mutex_;
  std::condition_variable timer_wake_;
  bool stopping_ = false;
  std::thread timer_;
};

}  // namespace cluster
