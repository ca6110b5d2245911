#include "actors/replay_pruner.hpp"

#include <spdlog/spdlog.h>

#include "actors/service_core.hpp"
#include "persistence/replays.hpp"

namespace actors {

replay_pruner::replay_pruner(service_core& core, std::int64_t retention_hours)
    : core_(core), retention_hours_(retention_hours) {}

replay_pruner::~replay_pruner() { stop(); }

void replay_pruner::start(std::chrono::milliseconds interval) {
  timer_.start("wallet-replays", interval, [this] { tick(); });
}

void replay_pruner::stop() { timer_.stop(); }

void replay_pruner::tick() {
  if (const auto& owned = core_.runtime->ownership; owned && !owned->holds(0)) return;
  if (core_.stopped.load() || running_.exchange(true)) return;
  core_.readers->read<std::int64_t>(
      [this](pqxx::connection& conn) {
        std::int64_t deleted = 0;
        for (;;) {
          const auto n = persistence::prune_replays(conn, retention_hours_, k_rows_per_statement);
          deleted += n;
          pruned_.fetch_add(static_cast<std::uint64_t>(n));
          if (n < k_rows_per_statement || deleted >= k_rows_per_round) return deleted;
        }
      },
      [this](query_result<std::int64_t> r) {
        if (r.outcome != ledger::error_code::ok) spdlog::warn("pruning kept answers failed ({}); retrying", r.detail);
        running_ = false;
      });
}

}  // namespace actors
