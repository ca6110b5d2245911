#include "cluster/lease_keeper.hpp"

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "persistence/leases.hpp"

namespace cluster {

lease_keeper::lease_keeper(keeper_config config, std::shared_ptr<ownership> owned)
    : config_(std::move(config)), owned_(std::move(owned)) {}

lease_keeper::~lease_keeper() { stop(); }

void lease_keeper::start() {
  round();
  timer_ = std::thread([this] {
    std::unique_lock lock(timer_mutex_);
    while (!timer_wake_.wait_for(lock, config_.renew_interval, [this] { return stopping_; })) {
      lock.unlock();
      round();
      lock.lock();
    }
  });
}

void lease_keeper::stop() {
  {
    std::lock_guard lock(timer_mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  timer_wake_.notify_all();
  if (timer_.joinable()) timer_.join();
  std::lock_guard round_lock(round_mutex_);
  for (const auto& lease : owned_->held()) owned_->drop(lease.partition);
  try {
    if (!conn_) conn_ = persistence::connect(config_.database);
    persistence::leave_cluster(*conn_, owned_->node_id());
    spdlog::info("node {} handed its leases back", owned_->node_id());
  } catch (const std::exception& e) {
    // The leases then expire after their TTL and are taken over then.
    spdlog::warn("node {} could not hand its leases back: {}", owned_->node_id(), e.what());
  }
}

void lease_keeper::round() {
  std::lock_guard lock(round_mutex_);
  try {
    run_round();
  } catch (const std::exception& e) {
    // Leases this node holds stay trusted until their local deadline runs out, then lapse.
    conn_.reset();
    std::lock_guard stats_lock(stats_mutex_);
    ++stats_.failures;
    spdlog::warn("node {}: lease round failed: {}", owned_->node_id(), e.what());
  }
}

void lease_keeper::run_round() {
  if (!conn_) conn_ = persistence::connect(config_.database);
  auto& conn = *conn_;
  const std::string& me = owned_->node_id();
  // The margin covers the clock drift between this node's steady clock and the database's over
  // one TTL, and the time between now() in the database and the statement's return.
  const auto margin = std::max(config_.ttl / 10, std::chrono::milliseconds(50));

  const int nodes = std::max(1, persistence::heartbeat(conn, me, config_.address, config_.ttl.count()));

  // Renew: what is not renewed was taken over.
  auto sent = ownership::clock::now();
  const auto renewed = persistence::renew_leases(conn, me, config_.ttl.count());
  std::set<int> kept;
  for (const auto& lease : renewed) {
    if (releasing_.count(lease.partition) != 0) continue;
    owned_->hold(lease.partition, lease.epoch, sent + config_.ttl - margin);
    kept.insert(lease.partition);
  }
  // Partitions this node stopped debiting a round ago: their debits in flight have had a renewal
  // interval to commit, so handing them back now refuses none at the fence.
  std::uint64_t released = 0;
  if (!releasing_.empty()) {
    const std::vector<int> give(releasing_.begin(), releasing_.end());
    persistence::release_leases(conn, me, give);
    released = give.size();
    releasing_.clear();
    spdlog::info("node {} handed back {} partitions ({} nodes up)", me, give.size(), nodes);
  }
  std::uint64_t lost = 0;
  for (const auto& lease : owned_->held()) {
    if (kept.count(lease.partition) != 0) continue;
    owned_->drop(lease.partition);
    ++lost;
  }
  if (lost > 0) spdlog::warn("node {} lost {} partitions to another node", me, lost);

  // Fair share: P / nodes, rounded up.
  const int partitions = owned_->partitions();
  const int share = (partitions + nodes - 1) / nodes;
  const int held = static_cast<int>(kept.size());
  std::uint64_t acquired = 0;
  if (held > share) {
    // Stop debiting the highest partitions now, and hand them back next round. (The joining node
    // takes the lowest free ones, so shares settle instead of moving back and forth.)
    std::vector<int> give(kept.rbegin(), kept.rend());
    give.resize(static_cast<std::size_t>(held - share));
    for (int p : give) {
      owned_->drop(p);
      releasing_.insert(p);
    }
  } else if (held < share) {
    sent = ownership::clock::now();
    std::string taken;
    for (const auto& lease : persistence::acquire_leases(conn, me, config_.ttl.count(), share - held)) {
      owned_->hold(lease.partition, lease.epoch, sent + config_.ttl - margin);
      ++acquired;
      taken += (taken.empty() ? "" : " ") + std::to_string(lease.partition) + "@" + std::to_string(lease.epoch);
    }
    if (acquired > 0) spdlog::info("node {} took {} partitions (partition@epoch): {}", me, acquired, taken);
  }

  // Who holds what now: where this node forwards the debits it does not hold.
  std::vector<std::string> holders(static_cast<std::size_t>(partitions));
  for (const auto& owner : persistence::lease_owners(conn)) {
    if (owner.partition >= 0 && owner.partition < partitions) holders[owner.partition] = owner.address;
  }
  owned_->set_holders(std::move(holders));

  std::lock_guard stats_lock(stats_mutex_);
  ++stats_.rounds;
  stats_.lost += lost;
  stats_.released += released;
  stats_.acquired += acquired;
  stats_.held = static_cast<int>(owned_->held().size());
  stats_.nodes = nodes;
}

keeper_stats lease_keeper::stats() const {
  std::lock_guard lock(stats_mutex_);
  return stats_;
}

}  // namespace cluster
