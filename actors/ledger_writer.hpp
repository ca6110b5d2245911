#pragma once

// ledger_writer: a persistence actor. It owns one PostgreSQL connection and runs detached (on
// its own thread), so its blocking I/O never stalls the CAF scheduler.
//
// Group commit:
//
//   idle ──posting──► collecting ──(batch full | batch wait elapsed)──► committing ──► idle
//                        ▲                                                  │
//                        └──────── postings that arrived meanwhile ◄────────┘
//
// One database transaction per batch (persistence::commit_batch); every posting of the batch
// gets its answer only after COMMIT returned. The committed row states then go to the account
// registry, which passes them to the live account actors. When a batch's outcome is unknown, the
// accounts it may have credited go to the registry in an uncertain notice instead: their actors
// read them again.
//
// Interface:
//   (posting_atom, persistence::posting_request) -> persistence::posting_outcome
//   (registry_handles)                           -> void   (where balance notices go)
//   (run_atom, posting_run)                      -> posting_run_outcome   (actors/runs.hpp: the
//                                     postings of a batch of transfers, committed together after
//                                     the postings queued before them)

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "config/settings.hpp"
#include "persistence/batch.hpp"
#include "persistence/database.hpp"

namespace actors {

// Counters a writer shares with the code that admits postings to it.
struct writer_gauges {
  std::atomic<std::int64_t> queued{0};  // postings accepted and not yet answered (a batch's run: one)
  // The transfers of batch runs accepted and not yet answered, each counted: what bounds the
  // memory and the wait that batches queue at the writer (writer.queue_run_postings_max).
  std::atomic<std::int64_t> run_postings_queued{0};
  std::atomic<std::uint64_t> batches{0};
  std::atomic<std::uint64_t> postings{0};
  std::atomic<std::uint64_t> failures{0};
  // Debits refused by the lease fence: their node lost the partition (docs/scaling.md).
  std::atomic<std::uint64_t> fenced{0};
  // Batches first tried with their rows unlocked and redone with the locks (persistence/batch.hpp).
  std::atomic<std::uint64_t> relocked{0};
  std::atomic<std::int64_t> last_batch_us{0};
  // Time spent committing (batches and runs, the database's answer included): divided by the time
  // it was measured over, how busy the writer is, the queue one hot payer's debits wait in.
  std::atomic<std::uint64_t> busy_us{0};
  std::atomic<std::int64_t> last_batch_postings{0};
  std::atomic<bool> connected{false};

  // Seconds until `waiting` postings ahead of a new one would drain at the writer's last
  // measured rate: the Retry-After of a 503 caused by this writer's queue. At least 1, at most 30.
  std::int64_t drain_seconds(std::int64_t waiting) const {
    const auto us = last_batch_us.load();
    const auto n = last_batch_postings.load();
    if (us <= 0 || n <= 0) return 1;
    const double per_second = static_cast<double>(n) * 1e6 / static_cast<double>(us);
    const auto seconds = static_cast<std::int64_t>(static_cast<double>(waiting) / per_second) + 1;
    return seconds < 1 ? 1 : (seconds > 30 ? 30 : seconds);
  }
};

struct writer_config {
  persistence::connection_options database;
  std::size_t index = 0;
  // Defaults are the settings' (config/settings.hpp): one source for every bound.
  std::size_t batch_postings_max = static_cast<std::size_t>(config::writer_settings{}.batch_postings_max);
  std::int64_t batch_wait_us = config::writer_settings{}.batch_wait_us;
  std::int64_t reconnect_backoff_ms = config::database_settings{}.reconnect_backoff_ms;
};

struct registry_handles {
  std::vector<caf::actor> shards;
};

// What a writer commits batches with: PostgreSQL (database_backend) in the server; a script in
// the deterministic actor tests. Both answer exactly like persistence::commit_batch, exceptions
// included (connection loss, timeouts).
class writer_backend {
 public:
  virtual ~writer_backend() = default;
  // True when a connection is ready (connecting if needed, at most once per backoff interval).
  virtual bool connect() = 0;
  virtual persistence::batch_result commit(const std::vector<persistence::posting_request>& requests) = 0;
  // All or none of `requests` in one transaction (persistence::commit_atomic): an atomic batch of
  // transfers. A backend without it refuses such a run as a failure of the writer.
  virtual persistence::batch_result commit_atomic(const std::vector<persistence::posting_request>& requests) {
    (void)requests;
    throw std::logic_error("this ledger writer backend commits no atomic runs");
  }
  // Drops the connection after a failure; the next connect() makes a new one.
  virtual void disconnect() = 0;
  // Whether the connection still looks usable after a failed commit.
  virtual bool usable() const = 0;
};

// The server's backend: one PostgreSQL connection with the posting path's prepared statements.
std::unique_ptr<writer_backend> database_backend(writer_config config);

caf::actor spawn_ledger_writer(caf::actor_system& system, writer_config config, std::shared_ptr<writer_gauges> gauges);

// A writer over `backend`. Detached (its own thread, as in the server) or scheduled (so a test
// coordinator decides when it runs).
caf::actor spawn_ledger_writer(caf::actor_system& system, writer_config config, std::shared_ptr<writer_gauges> gauges,
                               std::shared_ptr<writer_backend> backend, bool detached);

}  // namespace actors

#include <caf/allowed_unsafe_message_type.hpp>
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actors::registry_handles)
