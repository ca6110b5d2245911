#pragma once

// The handles every part of the ledger service shares: the actor system, the reader pool, the
// account runtime (writers and their gauges), the registry shards and the bridges. Owned by the
// facade (ledger_service.cpp); the money flows and the sweeper borrow it. Internal to actors/:
// it includes CAF, which http/ must not.

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include "actors/accounts.hpp"
#include "actors/messages.hpp"
#include "actors/reader_pool.hpp"

namespace actors {

struct posting_run;  // actors/runs.hpp
struct run_sink;

struct service_core {
  std::unique_ptr<caf::actor_system_config> caf_config;
  std::unique_ptr<caf::actor_system> system;
  std::shared_ptr<reader_pool> readers;
  std::shared_ptr<account_runtime> runtime;
  std::vector<caf::actor> registry;
  std::vector<caf::actor> bridges;
  std::atomic<std::uint64_t> next_bridge{0};
  // Set by stop(): from then on every call answers at once that the server is shutting down
  // (the registry and writers it would use are gone).
  std::atomic<bool> stopped{false};

  // Spawns `count` bridges; a display read of an actor's reserved amount waits `reserved_wait`.
  void spawn_bridges(std::size_t count, std::chrono::milliseconds reserved_wait);
  const caf::actor& any_bridge() { return bridges[next_bridge++ % bridges.size()]; }
  // The registry shard that owns the actor of an account.
  const caf::actor& registry_for(ledger::account_id id) const {
    return registry[static_cast<std::size_t>(id) % registry.size()];
  }
  // The writer that commits every posting debiting `id`.
  std::size_t writer_index(ledger::account_id id) const { return writer_for(id, runtime->writers.size()); }
  // Hands a posting to writer `writer` through a bridge; `sink` gets its outcome after COMMIT.
  void post(std::size_t writer, persistence::posting_request request, reply_sink sink);
  // Hands a batch's run of postings to writer `writer` (actors/runs.hpp); counted as one queued.
  // The caller has counted its postings in the writer's run_postings_queued already (the batch
  // flow claims them before it reserves); the writer, or the bridge if the writer never answers,
  // takes them off.
  void post_run(std::size_t writer, posting_run run, run_sink sink);
  // Asks the account's actor for its debits in flight; 0 when none is live or it answers late.
  void reserved(ledger::account_id id, std::function<void(ledger::amount_minor)> done);
};

// The answer to a request that arrives once the service is stopping.
money_result shutting_down();

}  // namespace actors
