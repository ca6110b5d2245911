#include "cluster/lease_keeper.hpp"

#include <boost/uuid/random_generator.hpp>
#include <boost/uuid/uuid_io.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "persistence/leases.hpp"

namespace cluster {

namespace {

// A random (version 4) UUID in PostgreSQL's text form.
std::string random_instance_id() {
  boost::uuids::random_generator generate;
  return boost::uuids::to_string(generate());
}

}  // namespace

lease_keeper::lease_keeper(keeper_config config, std::shared_ptr<ownership> owned)
    : config_(std::move(config)), owned_(std::move(owned)), me_{owned_->node_id(), random_instance_id()} {}

lease_keeper::~lease_keeper() { stop(); }

void lease_keeper::start() {
  round();
  {
    std::unique_lock lock(round_mutex_);
    if (in_use_) {
      // The other process may have just died (a restart within the TTL): wait until its heartbeat
      // lapses, and look again. A live one has written a newer heartbeat by then.
      const auto wait = std::chrono::milliseconds(in_use_->lapses_in_ms) + std::chrono::milliseconds(50);
      spdlog::warn("node {}: another process at {} speaks for this node id; waiting {} ms for its heartbeat to lapse",
                   me_.node_id, in_use_->other_address, wait.count());
      lock.unlock();
      std::this_thread::sleep_for(wait);
      round();
      lock.lock();
      if (in_use_) {
        throw node_id_in_use("node id " + me_.node_id + " is in use by a running server at " + in_use_->other_address +
                             "; give this server another cluster.node_id");
      }
    }
  }
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
    persistence::leave_cluster(*conn_, me_);
    if (in_use_) {
      spdlog::info("node {} stopped; the process at {} speaks for its node id", me_.node_id, in_use_->other_address);
    } else {
      spdlog::info("node {} handed its leases back", me_.node_id);
    }
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

  const auto beat = persistence::heartbeat(conn, me_, config_.address, config_.ttl.count());
  if (beat.in_use) return stand_aside(beat);
  if (in_use_) spdlog::info("node {}: this process speaks for the node id again", me);
  in_use_.reset();
  if (beat.took_over) spdlog::warn("node {}: took the node id over from a silent process; its leases go anew", me);
  const int nodes = std::max(1, beat.live_nodes);

  // Renew: what is not renewed was taken over.
  auto sent = ownership::clock::now();
  const auto renewed = persistence::renew_leases(conn, me_, config_.ttl.count());
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
    persistence::release_leases(conn, me_, give);
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
    for (const auto& lease : persistence::acquire_leases(conn, me_, config_.ttl.count(), share - held)) {
      owned_->hold(lease.partition, lease.epoch, sent + config_.ttl - margin);
      ++acquired;
      taken += (taken.empty() ? "" : " ") + std::to_string(lease.partition) + "@" + std::to_string(lease.epoch);
    }
    if (acquired > 0) spdlog::info("node {} took {} partitions (partition@epoch): {}", me, acquired, taken);
  }

  // Who holds what now: where this node forwards the debits it does not hold.
  read_holders(conn);

  std::lock_guard stats_lock(stats_mutex_);
  ++stats_.rounds;
  stats_.in_use_elsewhere = false;
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

void lease_keeper::read_holders(pqxx::connection& conn) {
  const int partitions = owned_->partitions();
  std::vector<std::string> holders(static_cast<std::size_t>(partitions));
  for (const auto& owner : persistence::lease_owners(conn)) {
    if (owner.partition >= 0 && owner.partition < partitions) holders[owner.partition] = owner.address;
  }
  owned_->set_holders(std::move(holders));
}

void lease_keeper::stand_aside(const persistence::heartbeat_result& beat) {
  const auto held = owned_->held();
  for (const auto& lease : held) owned_->drop(lease.partition);
  releasing_.clear();
  if (!in_use_ || in_use_->other_address != beat.other_address) {
    spdlog::error(
        "node {}: another process at {} speaks for this node id; this one debits nothing ({} partitions "
        "dropped)",
        me_.node_id, beat.other_address, held.size());
  }
  in_use_ = beat;
  // Debits of every partition go to their holders, that other process included.
  read_holders(*conn_);
  std::lock_guard stats_lock(stats_mutex_);
  ++stats_.rounds;
  stats_.lost += held.size();
  stats_.held = 0;
  stats_.in_use_elsewhere = true;
}

}  // namespace cluster
