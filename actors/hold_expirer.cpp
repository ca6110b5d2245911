#include "actors/hold_expirer.hpp"

#include <pthread.h>
#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <vector>

#include "actors/service_core.hpp"
#include "persistence/holds.hpp"

namespace actors {

hold_expirer::hold_expirer(service_core& core) : core_(core) {}

hold_expirer::~hold_expirer() { stop(); }

void hold_expirer::start(std::chrono::milliseconds interval) {
  timer_ = std::thread([this, interval] {
    pthread_setname_np(pthread_self(), "wallet-holds");
    std::unique_lock lock(timer_mutex_);
    while (!timer_wake_.wait_for(lock, interval, [this] { return stopping_; })) {
      lock.unlock();
      tick();
      lock.lock();
    }
  });
}

void hold_expirer::stop() {
  {
    std::lock_guard lock(timer_mutex_);
    stopping_ = true;
  }
  timer_wake_.notify_all();
  if (timer_.joinable()) timer_.join();
}

void hold_expirer::tick() {
  if (const auto& owned = core_.runtime->ownership; owned && !owned->holds(0)) return;
  if (core_.stopped.load() || running_.exchange(true)) return;
  auto committing = std::make_shared<std::vector<std::int64_t>>();
  core_.readers->read<persistence::expiry_result>(
      [committing](pqxx::connection& conn) {
        return persistence::expire_due_holds(conn, k_payers_per_tick_max, committing.get());
      },
      [this, committing](query_result<persistence::expiry_result> r) {
        // Said once for each new set of payers refused, not at every tick they stay refused
        // (before running_ is cleared: the next tick's answer may come on another thread).
        if (r.outcome == ledger::error_code::ok && r.value.failed != failed_) {
          failed_ = r.value.failed;
          if (!failed_.empty()) {
            spdlog::error("the due holds of {} payer(s) could not expire (account {} first); the others' did",
                          failed_.size(), failed_.front());
          }
        }
        running_ = false;
        if (r.outcome != ledger::error_code::ok) {
          spdlog::warn("hold expiry failed ({}); retrying at the next tick", r.detail);
          // A COMMIT whose outcome is unknown may have expired these payers' holds: their live
          // actors read what their holds keep again.
          if (!committing->empty() && !core_.stopped.load()) notify_uncertain(*committing);
          return;
        }
        if (r.value.expired == 0) return;
        expired_ += static_cast<std::uint64_t>(r.value.expired);
        if (core_.stopped.load()) return;
        // The payers' live actors learn what their holds keep now (a newer held_version wins);
        // an actor that is not live reads it when it loads.
        std::map<std::size_t, balance_notice> by_shard;
        for (const auto& row : r.value.rows) {
          by_shard[static_cast<std::size_t>(row.id) % core_.registry.size()].rows.push_back(row);
        }
        for (auto& [shard, notice] : by_shard)
          caf::anon_send(core_.registry[shard], notice_atom::value, std::move(notice));
      });
}

void hold_expirer::notify_uncertain(const std::vector<std::int64_t>& payers) {
  std::map<std::size_t, balance_notice> by_shard;
  for (const auto payer : payers) {
    persistence::row_state row;
    row.id = payer;
    row.version = -1;
    auto& notice = by_shard[static_cast<std::size_t>(payer) % core_.registry.size()];
    notice.uncertain = true;
    notice.rows.push_back(row);
  }
  for (auto& [shard, notice] : by_shard) caf::anon_send(core_.registry[shard], notice_atom::value, std::move(notice));
}

}  // namespace actors
