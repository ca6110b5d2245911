#pragma once

// The account registry and the account actors.
//
// account_registry (one of several shards; an account id belongs to shard id % shards):
//   (debit_atom, debit_request, reply_sink) -> void     forwarded to the account's actor,
//                                                      spawned on first use
//   (notice_atom, balance_notice)      -> void          passed to live account actors
//   (idle_atom, account_id, uint64)    -> void          an idle actor asks to passivate
//
// account_actor (one per active account; it owns the account's balance in memory):
//
//   loading ──loaded──► serving ──(commit outcome unknown, or an uncertain notice)──► reloading
//                                                                       ──loaded──► serving
//      │                   │
//      └──not found──► missing      serving ──(idle, nothing in flight)──► passivated
//
//   (debit_atom, debit_request, reply_sink) -> void: checks ownership, status and available
//                                    funds (committed balance minus its own debits in flight),
//                                    reserves, and hands the posting to its ledger writer; the
//                                    answer goes to the sink (once the writer has committed)
//   (notice_atom, balance_notice) -> void: committed (balance, version); the highest wins. An
//                                    uncertain notice (a batch of unknown outcome may have
//                                    credited the account) reloads it instead
//   (loaded_atom, account_loaded) -> void

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/ledger_writer.hpp"
#include "cluster/ownership.hpp"
#include "config/settings.hpp"
#include "ledger/types.hpp"

namespace actors {

class reader_pool;

struct account_runtime {
  std::vector<caf::actor> writers;
  std::vector<std::shared_ptr<actors::writer_gauges>> writer_gauges;
  // How an account actor asks for its committed state: the answer must reach `actor` as
  // (loaded_atom, account_loaded). The server reads it through the reader pool
  // (load_from_database); the deterministic tests answer it themselves. `after_writers`: a
  // reload, after a commit of unknown outcome (or another node's lease): read once no writer
  // holds the rows, so that a COMMIT still under way is read as it ends, not as before it.
  std::function<void(ledger::account_id id, caf::actor actor, bool after_writers)> load;
  // Defaults are the settings' (config/settings.hpp): one source for every bound.
  std::int64_t writer_queue_max = config::writer_settings{}.queue_postings_max;
  std::int64_t writer_run_queue_max = config::writer_settings{}.queue_run_postings_max;
  std::int64_t inflight_max = config::actor_settings{}.account_inflight_max;
  std::int64_t idle_ms = config::actor_settings{}.account_idle_ms;
  std::size_t live_max_per_shard =
      static_cast<std::size_t>(config::actor_settings{}.accounts_live_max / config::actor_settings{}.registry_shards);
  std::atomic<std::int64_t> live_actors{0};
  // Cluster mode (docs/scaling.md): the partitions this node leases. Null: the only node.
  std::shared_ptr<const cluster::ownership> ownership;
};

caf::actor spawn_account_registry(caf::actor_system& system, std::shared_ptr<account_runtime> runtime);

// The server's account loader: one read of the account and its shards on the reader pool.
std::function<void(ledger::account_id, caf::actor, bool)> load_from_database(std::shared_ptr<reader_pool> readers);

// The writer that commits every debit of an account: debits of one account always go to the
// same writer, so they commit in the order its actor decided them.
inline std::size_t writer_for(std::int64_t account_id, std::size_t writers) {
  return static_cast<std::size_t>(account_id) % writers;
}

}  // namespace actors
