#include "actors/ledger_writer.hpp"

#include <pthread.h>
#include <caf/all.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>
#include <unordered_set>

#include "actors/messages.hpp"
#include "actors/runs.hpp"
#include "base/assert.hpp"

namespace actors {
namespace {

struct pending_posting {
  persistence::posting_request request;
  caf::typed_response_promise<persistence::posting_outcome> promise;
};

class pg_backend final : public writer_backend {
 public:
  explicit pg_backend(writer_config config) : config_(std::move(config)) {}

  bool connect() override {
    if (conn_ && conn_->is_open()) return true;
    conn_.reset();
    const auto now = std::chrono::steady_clock::now();
    if (now - last_attempt_ < std::chrono::milliseconds(config_.reconnect_backoff_ms)) return false;
    last_attempt_ = now;
    try {
      conn_ = persistence::connect(config_.database);
      persistence::prepare_posting_statements(*conn_);
      spdlog::info("ledger writer {} connected", config_.index);
      return true;
    } catch (const std::exception& e) {
      conn_.reset();
      spdlog::warn("ledger writer {} cannot connect: {}", config_.index, e.what());
      return false;
    }
  }

  persistence::batch_result commit(const std::vector<persistence::posting_request>& requests) override {
    return persistence::commit_batch(*conn_, requests);
  }
  persistence::batch_result commit_atomic(const std::vector<persistence::posting_request>& requests) override {
    return persistence::commit_atomic(*conn_, requests);
  }

  void disconnect() override { conn_.reset(); }
  bool usable() const override { return conn_ && conn_->is_open(); }

 private:
  writer_config config_;
  std::unique_ptr<pqxx::connection> conn_;
  std::chrono::steady_clock::time_point last_attempt_{};
};

struct writer_state {
  std::shared_ptr<writer_backend> backend;
  std::vector<pending_posting> pending;
  bool flush_scheduled = false;
  std::vector<caf::actor> registry;
  static inline const char* name = "ledger_writer";
};

using writer_actor = caf::stateful_actor<writer_state>;

bool ensure_connected(writer_actor* self, writer_gauges& gauges) {
  gauges.connected = self->state.backend->connect();
  return gauges.connected.load();
}

// `requests` are the batch's requests, moved out of it in the same order.
void answer_all(std::vector<pending_posting>& batch, const std::vector<persistence::posting_request>& requests,
                writer_gauges& gauges, ledger::error_code code) {
  for (std::size_t i = 0; i < batch.size(); ++i) {
    persistence::posting_outcome out;
    out.outcome = code;
    out.transaction_id = requests[i].transaction_id;
    batch[i].promise.deliver(std::move(out));
    --gauges.queued;
  }
}

// Sends the committed row states to the registry shards that own them.
void publish(writer_actor* self, const std::vector<persistence::row_state>& rows) {
  auto& registry = self->state.registry;
  if (registry.empty() || rows.empty()) return;
  std::map<std::size_t, balance_notice> by_shard;
  for (const auto& row : rows) {
    const ledger::account_id owner = row.parent_id != 0 ? row.parent_id : row.id;
    by_shard[static_cast<std::size_t>(owner) % registry.size()].rows.push_back(row);
  }
  for (auto& [shard, notice] : by_shard) self->send(registry[shard], notice_atom::value, std::move(notice));
}

// Postings whose COMMIT may or may not have happened: each posting's debited account reloads when
// its answer says so, but the accounts it credits get no answer. Their actors are told to read
// them again, since a credit they missed would make them refuse debits the account can pay.
// With `outcomes`, only the postings answered outcome_unknown (a batch lost while its postings
// were isolated one by one: the others' fates are known).
void publish_uncertain(writer_actor* self, const std::vector<persistence::posting_request>& requests,
                       const std::vector<persistence::posting_outcome>* outcomes = nullptr) {
  WALLET_ASSERT(outcomes == nullptr || outcomes->size() == requests.size(), "one outcome per posting");
  auto& registry = self->state.registry;
  if (registry.empty()) return;
  std::map<std::size_t, balance_notice> by_shard;
  auto add = [&](ledger::account_id id, ledger::account_id parent) {
    if (id == 0) return;
    persistence::row_state row;
    row.id = id;
    row.parent_id = parent == id ? 0 : parent;
    row.version = -1;
    const ledger::account_id owner = row.parent_id != 0 ? row.parent_id : row.id;
    auto& notice = by_shard[static_cast<std::size_t>(owner) % registry.size()];
    notice.uncertain = true;
    notice.rows.push_back(row);
  };
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (outcomes != nullptr && (*outcomes)[i].outcome != ledger::error_code::outcome_unknown) continue;
    const auto& p = requests[i].posting;
    add(p.credit_account, p.credit_parent);
    for (const auto& leg : p.extra_credits) add(leg.account, 0);
    for (const auto& leg : p.legs) {
      if (leg.amount > 0) add(leg.account, leg.parent);
    }
  }
  for (auto& [shard, notice] : by_shard) self->send(registry[shard], notice_atom::value, std::move(notice));
}

void flush(writer_actor* self, const writer_config& config, writer_gauges& gauges) {
  auto& st = self->state;
  std::vector<pending_posting> batch;
  batch.swap(st.pending);
  if (batch.empty()) return;

  // Moved, not copied: from here on the batch holds the promises and `requests` the postings.
  std::vector<persistence::posting_request> requests;
  requests.reserve(batch.size());
  for (auto& p : batch) requests.push_back(std::move(p.request));

  if (!ensure_connected(self, gauges)) {
    answer_all(batch, requests, gauges, ledger::error_code::database_unavailable);
    return;
  }

  const auto started = std::chrono::steady_clock::now();
  persistence::batch_result result;
  try {
    result = st.backend->commit(requests);
  } catch (const persistence::database_timeout& e) {
    spdlog::warn("ledger writer {}: batch of {} timed out in the database: {}", config.index, batch.size(), e.what());
    ++gauges.failures;
    answer_all(batch, requests, gauges, ledger::error_code::database_unavailable);
    return;
  } catch (const pqxx::in_doubt_error& e) {
    spdlog::error("ledger writer {}: COMMIT outcome unknown for {} postings: {}", config.index, batch.size(), e.what());
    st.backend->disconnect();
    ++gauges.failures;
    answer_all(batch, requests, gauges, ledger::error_code::outcome_unknown);
    publish_uncertain(self, requests);
    return;
  } catch (const pqxx::broken_connection& e) {
    // The connection broke somewhere in the batch; whether COMMIT got through cannot be known
    // here, so every client is told to retry with the same Idempotency-Key.
    spdlog::error("ledger writer {}: connection lost during a batch of {}: {}", config.index, batch.size(), e.what());
    st.backend->disconnect();
    ++gauges.failures;
    answer_all(batch, requests, gauges, ledger::error_code::outcome_unknown);
    publish_uncertain(self, requests);
    return;
  } catch (const std::exception& e) {
    spdlog::error("ledger writer {}: batch of {} failed: {}", config.index, batch.size(), e.what());
    if (!st.backend->usable()) st.backend->disconnect();
    ++gauges.failures;
    answer_all(batch, requests, gauges, ledger::error_code::outcome_unknown);
    publish_uncertain(self, requests);
    return;
  }
  if (result.connection_lost) {
    // Lost while postings were isolated one by one: each is answered by what became of it below.
    st.backend->disconnect();
    ++gauges.failures;
    publish_uncertain(self, requests, &result.outcomes);
  }
  const auto elapsed = std::chrono::steady_clock::now() - started;
  gauges.last_batch_us = std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count();
  gauges.busy_us += static_cast<std::uint64_t>(gauges.last_batch_us.load());
  gauges.last_batch_postings = static_cast<std::int64_t>(batch.size());
  ++gauges.batches;
  gauges.postings += batch.size();
  gauges.fenced += static_cast<std::uint64_t>(result.fenced);
  gauges.relocked += static_cast<std::uint64_t>(result.relocked);

  WALLET_ASSERT(result.outcomes.size() == batch.size(), "one outcome per posting");
  std::unordered_map<ledger::account_id, const persistence::row_state*> rows;
  for (const auto& row : result.rows) rows.emplace(row.id, &row);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    auto& out = result.outcomes[i];
    if (out.transaction_id.empty()) out.transaction_id = requests[i].transaction_id;
    // The debited account's rows (main and shards), whether or not this posting was accepted:
    // its actor is not sent a notice for them (see below), so its answer must carry them.
    const auto& p = requests[i].posting;
    auto add = [&](ledger::account_id id) {
      if (auto it = rows.find(id); it != rows.end()) out.rows_after.push_back(*it->second);
    };
    add(p.debit_account);
    for (auto id : p.debit_shards) add(id);
    for (const auto& e : out.entries) {
      if (e.account != p.debit_account &&
          std::find(p.debit_shards.begin(), p.debit_shards.end(), e.account) == p.debit_shards.end()) {
        add(e.account);
      }
    }
    batch[i].promise.deliver(std::move(out));
    --gauges.queued;
  }
  // A debited account's actor learns its rows from its own answer (rows_after); only the other
  // rows (credits, sweeps, deposits) need a notice, which halves the messages of a busy batch.
  std::unordered_set<ledger::account_id> answered;
  for (const auto& r : requests) {
    if (r.posting.type != ledger::transaction_type::transfer) continue;
    answered.insert(r.posting.debit_account);
    answered.insert(r.posting.debit_shards.begin(), r.posting.debit_shards.end());
  }
  std::vector<persistence::row_state> others;
  for (const auto& row : result.rows) {
    if (answered.count(row.id) == 0) others.push_back(row);
  }
  publish(self, others);
}

// A batch of transfers (actors/runs.hpp), committed on its own after the postings queued before
// it: one or few transactions for all of it, the atomic one in exactly one. Failures are answered
// as a flush answers them; the debited accounts' rows go back with the outcome (their actors learn
// them from the run's release), the others as notices.
posting_run_outcome commit_run(writer_actor* self, const writer_config& config, writer_gauges& gauges,
                               const posting_run& run) {
  auto& st = self->state;
  posting_run_outcome out;
  auto fail_all = [&](ledger::error_code code) {
    out.outcomes.assign(run.postings.size(), persistence::posting_outcome{});
    for (auto& o : out.outcomes) o.outcome = code;
    return std::move(out);
  };
  if (!ensure_connected(self, gauges)) return fail_all(ledger::error_code::database_unavailable);
  const auto started = std::chrono::steady_clock::now();
  persistence::batch_result result;
  try {
    result = run.atomic ? st.backend->commit_atomic(run.postings) : st.backend->commit(run.postings);
  } catch (const persistence::database_timeout& e) {
    spdlog::warn("ledger writer {}: run of {} timed out in the database: {}", config.index, run.postings.size(),
                 e.what());
    ++gauges.failures;
    return fail_all(ledger::error_code::database_unavailable);
  } catch (const std::exception& e) {
    // Connection lost or COMMIT in doubt (or a backend that cannot commit the run): unknown.
    spdlog::error("ledger writer {}: run of {} failed: {}", config.index, run.postings.size(), e.what());
    if (!st.backend->usable()) st.backend->disconnect();
    ++gauges.failures;
    publish_uncertain(self, run.postings);
    return fail_all(ledger::error_code::outcome_unknown);
  }
  if (result.connection_lost) {
    st.backend->disconnect();
    ++gauges.failures;
    publish_uncertain(self, run.postings, &result.outcomes);
  }
  const auto elapsed = std::chrono::steady_clock::now() - started;
  gauges.last_batch_us = std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count();
  gauges.busy_us += static_cast<std::uint64_t>(gauges.last_batch_us.load());
  gauges.last_batch_postings = static_cast<std::int64_t>(run.postings.size());
  ++gauges.batches;
  gauges.postings += run.postings.size();
  WALLET_ASSERT(result.outcomes.size() == run.postings.size(), "one outcome per posting of a run");
  out.outcomes = std::move(result.outcomes);
  out.refused_at = result.refused_at;
  for (std::size_t i = 0; i < out.outcomes.size(); ++i) {
    if (out.outcomes[i].transaction_id.empty()) out.outcomes[i].transaction_id = run.postings[i].transaction_id;
  }
  std::unordered_set<ledger::account_id> debited;
  for (const auto& r : run.postings) {
    debited.insert(r.posting.debit_account);
    debited.insert(r.posting.debit_shards.begin(), r.posting.debit_shards.end());
  }
  std::vector<persistence::row_state> others;
  for (const auto& row : result.rows) {
    if (debited.count(row.id) == 0) others.push_back(row);
  }
  publish(self, others);
  out.rows = std::move(result.rows);
  return out;
}

caf::behavior ledger_writer(writer_actor* self, writer_config config, std::shared_ptr<writer_gauges> gauges,
                            std::shared_ptr<writer_backend> backend, bool detached) {
  // Detached: this runs on the writer's own thread, which keeps the name for its whole life.
  if (detached) pthread_setname_np(pthread_self(), "wallet-writer");
  self->state.backend = std::move(backend);
  ensure_connected(self, *gauges);
  return {
      [=](registry_handles& handles) { self->state.registry = std::move(handles.shards); },
      [=](posting_atom, persistence::posting_request& request) -> caf::result<persistence::posting_outcome> {
        auto& st = self->state;
        auto promise = self->make_response_promise<persistence::posting_outcome>();
        st.pending.push_back({std::move(request), promise});
        if (st.pending.size() >= config.batch_postings_max) {
          flush(self, config, *gauges);
        } else if (!st.flush_scheduled) {
          st.flush_scheduled = true;
          // Gather: this thread is the writer's own, so it may simply sleep while the postings of
          // the next batch pile up in its mailbox. Senders then enqueue without waking anybody
          // (one wake-up per batch instead of one per posting), and the flush message queues
          // behind every posting that arrived meanwhile.
          if (config.batch_wait_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(config.batch_wait_us));
          self->send(self, flush_atom::value);
        }
        return promise;
      },
      [=](run_atom, posting_run& run) -> posting_run_outcome {
        // The postings queued before the run commit first: the run's payers decided them first.
        self->state.flush_scheduled = false;
        flush(self, config, *gauges);
        auto out = commit_run(self, config, *gauges, run);
        --gauges->queued;
        gauges->run_postings_queued -= static_cast<std::int64_t>(run.postings.size());
        return out;
      },
      [=](flush_atom) {
        self->state.flush_scheduled = false;
        flush(self, config, *gauges);
      },
  };
}

}  // namespace

std::unique_ptr<writer_backend> database_backend(writer_config config) {
  return std::make_unique<pg_backend>(std::move(config));
}

caf::actor spawn_ledger_writer(caf::actor_system& system, writer_config config, std::shared_ptr<writer_gauges> gauges) {
  std::shared_ptr<writer_backend> backend = database_backend(config);
  return spawn_ledger_writer(system, std::move(config), std::move(gauges), std::move(backend), true);
}

caf::actor spawn_ledger_writer(caf::actor_system& system, writer_config config, std::shared_ptr<writer_gauges> gauges,
                               std::shared_ptr<writer_backend> backend, bool detached) {
  if (detached) {
    return system.spawn<caf::detached>(ledger_writer, std::move(config), std::move(gauges), std::move(backend), true);
  }
  return system.spawn(ledger_writer, std::move(config), std::move(gauges), std::move(backend), false);
}

}  // namespace actors
