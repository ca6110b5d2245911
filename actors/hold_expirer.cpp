#include "actors/hold_expirer.hpp"

#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "actors/service_core.hpp"
#include "persistence/holds.hpp"

namespace actors {

hold_expirer::hold_expirer(service_core& core) : core_(core) {}

hold_expirer::~hold_expirer() { stop(); }

void hold_expirer::start(std::chrono::milliseconds interval) {
  timer_.start("wallet-holds", interval, [this] { tick(); });
}

void hold_expirer::stop() { timer_.stop(); }

void hold_expirer::tick() {
  if (const auto& owned = core_.runtime->ownership; owned && !owned->holds(0)) return;
  if (core_.stopped.load() || running_.exchange(true)) return;
  // Payers whose holds could not expire are left out, but for one tick in k_refused_retry_ticks.
  const bool retry_refused = ++ticks_ % k_refused_retry_ticks == 0;
  const bool held_back_too = ticks_ % k_waiting_ticks == 0;
  std::vector<std::int64_t> excluded;
  if (!retry_refused) excluded.assign(refused_.begin(), refused_.end());
  auto committing = std::make_shared<std::vector<std::int64_t>>();
  core_.readers->read<persistence::expiry_result>(
      [committing, excluded](pqxx::connection& conn) {
        return persistence::expire_due_holds(conn, k_payers_per_tick_max, excluded, committing.get());
      },
      [this, committing, retry_refused, held_back_too, excluded](query_result<persistence::expiry_result> r) mutable {
        const bool ok = answered(r, *committing);
        if (!ok || !held_back_too || core_.stopped.load()) {
          // Before running_ is cleared: the next tick reads refused_, and its answer may come on
          // another thread.
          if (ok) note_refused(r.value.failed, retry_refused);
          running_ = false;
          return;
        }
        // Then the payers it skipped because their rows were locked, one at a time, waiting for
        // each row (not the refused ones: they were just tried).
        auto failed = std::make_shared<std::vector<std::int64_t>>(std::move(r.value.failed));
        excluded.insert(excluded.end(), failed->begin(), failed->end());
        auto held_back_committing = std::make_shared<std::vector<std::int64_t>>();
        core_.readers->read<persistence::expiry_result>(
            [held_back_committing, excluded = std::move(excluded), after = held_back_after_](pqxx::connection& conn) {
              return persistence::expire_held_back_payers(conn, k_held_back_payers_max, excluded, after,
                                                          k_locked_payer_wait, held_back_committing.get());
            },
            [this, held_back_committing, failed, retry_refused](query_result<persistence::expiry_result> held_back) {
              if (answered(held_back, *held_back_committing)) {
                failed->insert(failed->end(), held_back.value.failed.begin(), held_back.value.failed.end());
                held_back_after_ = held_back.value.last_taken_up;
              }
              note_refused(*failed, retry_refused);
              running_ = false;
            });
      });
}

bool hold_expirer::answered(query_result<persistence::expiry_result>& r, const std::vector<std::int64_t>& committing) {
  if (r.outcome != ledger::error_code::ok) {
    spdlog::warn("hold expiry failed ({}); retrying at the next tick", r.detail);
    // A COMMIT whose outcome is unknown may have expired these payers' holds: their live actors
    // read what their holds keep again.
    if (!committing.empty() && !core_.stopped.load()) notify_uncertain(committing);
    return false;
  }
  if (r.value.expired == 0) return true;
  expired_ += static_cast<std::uint64_t>(r.value.expired);
  if (core_.stopped.load()) return true;
  // The payers' live actors learn what their holds keep now (a newer held_version wins); an actor
  // that is not live reads it when it loads.
  std::map<std::size_t, balance_notice> by_shard;
  for (const auto& row : r.value.rows) {
    by_shard[static_cast<std::size_t>(row.id) % core_.registry.size()].rows.push_back(row);
  }
  for (auto& [shard, notice] : by_shard) caf::anon_send(core_.registry[shard], notice_atom::value, std::move(notice));
  return true;
}

void hold_expirer::note_refused(const std::vector<std::int64_t>& failed, bool retried) {
  // Said once for each payer newly refused, not at every tick it stays refused.
  std::size_t fresh = 0;
  std::int64_t first = 0;
  for (const auto payer : failed) {
    if (refused_.count(payer) != 0) continue;
    if (fresh++ == 0) first = payer;
  }
  if (retried) {
    // Every refused payer was tried again: those that expired now are refused no longer.
    refused_ = std::set<std::int64_t>(failed.begin(), failed.end());
  } else {
    refused_.insert(failed.begin(), failed.end());
  }
  if (fresh > 0) {
    spdlog::error(
        "the due holds of {} payer(s) could not expire (account {} first); the others' did, and these are "
        "tried again every {} ticks",
        fresh, first, k_refused_retry_ticks);
  }
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
