#include "cluster/ownership.hpp"

#include "base/assert.hpp"

namespace cluster {

ownership::ownership(std::string node_id, int partitions)
    : node_id_(std::move(node_id)), partitions_(partitions), slots_(std::make_unique<slot[]>(partitions)) {
  WALLET_ASSERT(partitions > 0, "a deployment has at least one partition");
}

std::optional<ownership::held_lease> ownership::lease_for(ledger::account_id id) const {
  const int p = partition_of(id);
  const auto& s = slots_[p];
  // Read the deadline first: hold() writes the epoch before the deadline, drop() clears the epoch
  // first, so a reader never pairs a new deadline with an epoch that was dropped.
  const auto until = s.valid_until_ns.load(std::memory_order_acquire);
  const auto epoch = s.epoch.load(std::memory_order_acquire);
  if (epoch == 0 || clock::now().time_since_epoch().count() >= until) return std::nullopt;
  return held_lease{p, epoch};
}

void ownership::hold(int partition, std::int64_t epoch, clock::time_point valid_until) {
  WALLET_ASSERT(partition >= 0 && partition < partitions_ && epoch > 0, "a held lease names a partition and epoch");
  auto& s = slots_[partition];
  s.epoch.store(epoch, std::memory_order_release);
  s.valid_until_ns.store(valid_until.time_since_epoch().count(), std::memory_order_release);
}

void ownership::drop(int partition) {
  auto& s = slots_[partition];
  s.epoch.store(0, std::memory_order_release);
  s.valid_until_ns.store(0, std::memory_order_release);
}

bool ownership::holds(int partition) const {
  if (partition < 0 || partition >= partitions_) return false;
  const auto& s = slots_[partition];
  const auto until = s.valid_until_ns.load(std::memory_order_acquire);
  return s.epoch.load(std::memory_order_acquire) != 0 && clock::now().time_since_epoch().count() < until;
}

std::vector<ownership::held_lease> ownership::held() const {
  std::vector<held_lease> out;
  for (int p = 0; p < partitions_; ++p) {
    const auto epoch = slots_[p].epoch.load(std::memory_order_acquire);
    if (epoch != 0) out.push_back({p, epoch});
  }
  return out;
}

void ownership::set_holders(std::vector<std::string> addresses) {
  std::lock_guard lock(holders_mutex_);
  holders_ = std::move(addresses);
}

std::string ownership::holder_address(int partition) const {
  std::lock_guard lock(holders_mutex_);
  if (partition < 0 || static_cast<std::size_t>(partition) >= holders_.size()) return {};
  return holders_[static_cast<std::size_t>(partition)];
}

}  // namespace cluster
