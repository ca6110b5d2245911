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
//
// One process per node id (migration 018): the keeper draws an instance id when it is made, and
// its rounds act only while that instance speaks for the node id. A process started with the id of
// a live one waits once for that one's heartbeat to lapse (it may have just died), then refuses to
// start (node_id_in_use). A process whose node id another took over while it was silent holds and
// takes nothing until that other one's heartbeat lapses.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "cluster/ownership.hpp"
#include "persistence/database.hpp"
#include "persistence/leases.hpp"

namespace cluster {

struct keeper_config {
  persistence::connection_options database;
  std::string address;  // where other nodes reach this one (host:port)
  std::chrono::milliseconds ttl{5'000};
  std::chrono::milliseconds renew_interval{1'000};
};

// Another live process speaks for this node's id: start() throws it.
class node_id_in_use : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct keeper_stats {
  std::uint64_t rounds = 0;
  std::uint64_t failures = 0;  // rounds the database did not answer
  std::uint64_t acquired = 0;
  std::uint64_t lost = 0;  // leases taken over by another node while this one held them
  std::uint64_t released = 0;
  int held = 0;
  int nodes = 0;
  bool in_use_elsewhere = false;  // another live process speaks for this node id
};

class lease_keeper {
 public:
  lease_keeper(keeper_config config, std::shared_ptr<ownership> owned);
  ~lease_keeper();
  lease_keeper(const lease_keeper&) = delete;
  lease_keeper& operator=(const lease_keeper&) = delete;

  // Runs the first round on the caller's thread (so the node starts with its share when the
  // database answers), then starts the timer thread. Throws node_id_in_use when another live
  // process speaks for the node id, after waiting once for its heartbeat to lapse.
  void start();
  // Stops the thread and hands every lease back.
  void stop();

  // Runs one round now (tests drive the keeper this way).
  void round();

  keeper_stats stats() const;

 private:
  void run_round();

  // Drops every lease held here: another process speaks for the node id.
  void stand_aside(const persistence::heartbeat_result& beat);
  // Where each partition's holder is reached, for the debits this node forwards.
  void read_holders(pqxx::connection& conn);

  keeper_config config_;
  std::shared_ptr<ownership> owned_;
  persistence::node_identity me_;
  std::unique_ptr<pqxx::connection> conn_;
  std::mutex round_mutex_;   // one round at a time: the timer's or a test's
  std::set<int> releasing_;  // no longer debited here; handed back at the next round
  // The last round found another live process speaking for the node id (its heartbeat).
  std::optional<persistence::heartbeat_result> in_use_;

  mutable std::mutex stats_mutex_;
  keeper_stats stats_;

  std::mutex timer_mutex_;
  std::condition_variable timer_wake_;
  bool stopping_ = false;
  std::thread timer_;
};

}  // namespace cluster
