#pragma once

// Which partitions this node holds, at which epoch (docs/scaling.md). The lease keeper writes it;
// every account actor reads it before it decides a debit. Lock-free: one atomic pair per partition.
//
// An account belongs to partition partition_of(id, P) for the deployment's fixed P. The mapping
// is part of the stored data's meaning (leases name partitions), so it never changes: a
// SplitMix64 finalizer spreads consecutive ids evenly, then mod P.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ledger/types.hpp"

namespace cluster {

constexpr int partition_of(ledger::account_id id, int partitions) {
  auto x = static_cast<std::uint64_t>(id);
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return static_cast<int>(x % static_cast<std::uint64_t>(partitions));
}

class ownership {
 public:
  using clock = std::chrono::steady_clock;

  struct held_lease {
    int partition = 0;
    std::int64_t epoch = 0;
  };

  ownership(std::string node_id, int partitions);

  const std::string& node_id() const { return node_id_; }
  int partitions() const { return partitions_; }
  int partition_of(ledger::account_id id) const { return cluster::partition_of(id, partitions_); }

  // The lease this node holds on `id`'s partition, if it holds one that has not run out by this
  // node's own clock. (Past that instant another node may take the partition over; this node's
  // writers would be fenced anyway, but it stops deciding debits first.)
  std::optional<held_lease> lease_for(ledger::account_id id) const;

  // The partition's lease is held at `epoch` until `valid_until` (epoch > 0).
  void hold(int partition, std::int64_t epoch, clock::time_point valid_until);
  // The partition's lease is no longer held.
  void drop(int partition);

  // Whether this node holds `partition` now (by its own clock, as lease_for()).
  bool holds(int partition) const;

  // The partitions held now, with their epochs, in partition order.
  std::vector<held_lease> held() const;

  // Where each partition's holder is reached ("": nobody holds it), as the keeper's last round
  // read the lease table: where a debit this node does not hold is forwarded.
  void set_holders(std::vector<std::string> addresses);
  std::string holder_address(int partition) const;

 private:
  struct slot {
    std::atomic<std::int64_t> epoch{0};  // 0: not held
    std::atomic<std::int64_t> valid_until_ns{0};
  };
  std::string node_id_;
  int partitions_;
  std::unique_ptr<slot[]> slots_;
  mutable std::mutex holders_mutex_;
  std::vector<std::string> holders_;
};

}  // namespace cluster
