#include "actors/money_flows.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <caf/send.hpp>

#include <random>

#include "actors/account_cache.hpp"
#include "actors/outcomes.hpp"
#include "actors/service_core.hpp"
#include "base/assert.hpp"
#include "persistence/accounts.hpp"
#include "persistence/history.hpp"

namespace actors {
namespace {

std::string flight_key(ledger::principal_id principal, const std::string& idempotency_key) {
  return std::to_string(principal) + '\n' + idempotency_key;
}

}  // namespace

money_result database_unavailable(ledger::error_code code) {
  return unavailable(code, "the database is unavailable; retry with the same Idempotency-Key");
}

money_result decided_early(ledger::error_code code, std::string detail) {
  auto r = refusal(code, std::move(detail));
  r.decided_before_writer = true;
  return r;
}

std::string json_members(std::initializer_list<std::pair<const char*, std::string>> fields, bool members_only) {
  boost::json::object o;
  for (const auto& [name, text] : fields) {
    if (!text.empty()) o[name] = text;
  }
  auto out = boost::json::serialize(o);
  return members_only ? out.substr(1, out.size() - 2) : out;
}

money_flows::money_flows(const config::settings& settings, service_core& core, account_cache& accounts)
    : settings_(settings), core_(core), accounts_(accounts) {}

void money_flows::in_flight(ledger::principal_id principal, const std::string& key, const std::string& hash,
                            finish_fn done, std::function<void(finish_fn)> execute) {
  if (core_.stopped.load()) return done(shutting_down());
  auto fk = flight_key(principal, key);
  switch (flights_.join(fk, hash, done)) {
    case single_flight::join_result::leader: break;
    case single_flight::join_result::follower: return;
    case single_flight::join_result::conflict:
      return done(
          refusal(ledger::error_code::idempotency_key_reused, "this Idempotency-Key is in use by a different request"));
  }
  // The continuation is copied at every step of a flow (each callback keeps its own): its strings
  // are shared, so a copy costs a reference count, not three allocations.
  struct flight {
    std::string key;
    std::string idempotency_key;
    std::string request_hash;
  };
  auto f = std::make_shared<const flight>(flight{std::move(fk), key, hash});
  execute([this, f, principal](money_result result) {
    settle(principal, f->idempotency_key, f->request_hash, std::move(result),
           [this, f](money_result settled) { flights_.finish(f->key, std::move(settled)); });
  });
}

void money_flows::settle(ledger::principal_id principal, const std::string& key, const std::string& hash,
                         money_result result, finish_fn done) {
  if (!result.decided_before_writer) return done(std::move(result));
  core_.readers->read<std::optional<persistence::stored_response>>(
      [principal, key](pqxx::connection& conn) { return persistence::find_committed(conn, principal, key); },
      [result, hash, done](query_result<std::optional<persistence::stored_response>> r) mutable {
        if (r.outcome != ledger::error_code::ok) {
          // The refusal may hide a committed original: without the lookup it is not final.
          return done(unavailable(ledger::error_code::outcome_unknown,
                                  "the outcome of this request could not be confirmed; retry with the same "
                                  "Idempotency-Key",
                                  ledger::k_retry_after_default_s));
        }
        if (!r.value) return done(std::move(result));
        if (r.value->request_hash != hash) {
          return done(refusal(ledger::error_code::idempotency_key_reused,
                              "this Idempotency-Key was already used for a different request"));
        }
        money_result replay;
        replay.replayed = true;
        replay.status = r.value->status;
        replay.body = r.value->body;
        done(std::move(replay));
      });
}

void money_flows::debit(ledger::principal_id owner, persistence::posting_request posting,
                        std::optional<account_facts> payer, finish_fn finish) {
  if (core_.stopped.load()) return finish(shutting_down());
  const auto& shard = core_.registry_for(posting.posting.debit_account);
  // Straight to the registry shard, which forwards to the account's actor; the actor answers the
  // sink itself when the writer has committed (no response travels back through here).
  caf::anon_send(shard, debit_atom::value, debit_request{owner, std::move(posting), std::move(payer)},
                 reply_sink{std::move(finish)});
}

void money_flows::post(persistence::posting_request posting, finish_fn finish) {
  if (core_.stopped.load()) return finish(shutting_down());
  const auto w = core_.writer_index(posting.posting.debit_account);
  auto& gauges = *core_.runtime->writer_gauges[w];
  if (const auto queued = gauges.queued.load(); queued >= core_.runtime->writer_queue_max) {
    return finish(
        unavailable(ledger::error_code::writer_busy, "the ledger writer is saturated", gauges.drain_seconds(queued)));
  }
  core_.post(w, std::move(posting), reply_sink{std::move(finish)});
}

void money_flows::system_accounts(const std::string& currency, std::vector<std::pair<std::string, bool>> roles,
                                  std::function<void(ledger::error_code, std::vector<ledger::account_id>)> done) {
  resolve(std::make_shared<resolving>(resolving{currency, std::move(roles), {}, std::move(done)}));
}

void money_flows::resolve(std::shared_ptr<resolving> state) {
  // One at a time: each is a cache hit after its first use.
  if (state->ids.size() == state->roles.size()) return state->done(ledger::error_code::ok, std::move(state->ids));
  const auto& [role, allow_negative] = state->roles[state->ids.size()];
  accounts_.system_account(state->currency, role, allow_negative,
                           [this, state](ledger::error_code code, ledger::account_id id) {
                             if (code != ledger::error_code::ok) return state->done(code, {});
                             state->ids.push_back(id);
                             resolve(state);
                           });
}

void money_flows::fee_revenue_row(const std::string& currency, std::size_t writer,
                                  std::function<void(ledger::error_code, ledger::account_id)> done) {
  system_accounts(
      currency, {{"fee_revenue", false}},
      [this, writer, done](ledger::error_code code, std::vector<ledger::account_id> ids) {
        if (code != ledger::error_code::ok) return done(code, 0);
        const auto id = ids[0];
        const auto writers = core_.runtime->writers.size();
        auto pick = [this, writer, writers, done](const account_facts& facts) {
          thread_local std::mt19937_64 spread{std::random_device{}()};
          done(ledger::error_code::ok,
               account_directory::credit_row(facts, writer, writers, spread(), core_.runtime->ownership.get()));
        };
        accounts_.facts(
            id, [this, id, writers, pick, done](ledger::error_code code, std::optional<account_facts> facts) {
              if (code != ledger::error_code::ok || !facts)
                return done(code != ledger::error_code::ok ? code : ledger::error_code::internal, 0);
              if (facts->shards.size() >= writers) return pick(*facts);
              // Not hot yet (made before fee_revenue was, or just now): its shards are added once, under
              // its row lock, and the cached facts replaced.
              const int shards = static_cast<int>(writers);
              core_.readers->read<std::optional<persistence::account_record>>(
                  [id, shards](pqxx::connection& conn) { return persistence::make_system_hot(conn, id, shards); },
                  [this, id, pick, done](query_result<std::optional<persistence::account_record>> r) {
                    if (r.outcome != ledger::error_code::ok) return done(r.outcome, 0);
                    accounts_.refresh(id, [pick, done](ledger::error_code code, std::optional<account_facts> facts) {
                      if (code != ledger::error_code::ok || !facts)
                        return done(code != ledger::error_code::ok ? code : ledger::error_code::internal, 0);
                      pick(*facts);
                    });
                  });
            });
      });
}

void money_flows::user_account(ledger::account_id id, money_result missing, finish_fn finish,
                               std::function<void(account_facts)> next) {
  accounts_.facts(id, [missing = std::move(missing), finish = std::move(finish), next = std::move(next)](
                          ledger::error_code code, std::optional<account_facts> facts) mutable {
    if (code != ledger::error_code::ok) return finish(database_unavailable(code));
    if (!facts || facts->kind != ledger::account_kind::user) return finish(std::move(missing));
    next(std::move(*facts));
  });
}

void money_flows::provider(const std::string& name,
                           std::function<void(ledger::error_code, std::optional<persistence::provider_record>)> done) {
  // Answered outside the lock: the answer may start a flow that asks for a provider again.
  if (auto cached = cached_provider(name)) return done(ledger::error_code::ok, std::move(cached));
  core_.readers->read<std::optional<persistence::provider_record>>(
      [name](pqxx::connection& conn) { return persistence::find_provider(conn, name); },
      [this, done](query_result<std::optional<persistence::provider_record>> r) {
        if (r.outcome == ledger::error_code::ok && r.value) remember_provider(*r.value);
        done(r.outcome, std::move(r.value));
      });
}

void money_flows::known_provider(const std::string& name, finish_fn finish,
                                 std::function<void(std::optional<persistence::provider_record>)> next) {
  provider(name, [name, finish = std::move(finish), next = std::move(next)](
                     ledger::error_code code, std::optional<persistence::provider_record> p) {
    if (code != ledger::error_code::ok) return finish(database_unavailable(code));
    if (!p) {
      return finish(refusal(ledger::error_code::invalid_request,
                            "provider \"" + name + "\" is not known; create it with POST /v1/providers"));
    }
    next(std::move(p));
  });
}

void money_flows::one_at_a_time(const std::string& key, std::function<void(std::function<void()>)> run) {
  {
    std::lock_guard lock(serial_mutex_);
    auto [it, first] = serial_.try_emplace(key);
    if (!first) {
      it->second.push_back(std::move(run));
      return;
    }
  }
  launch_serial(key, std::move(run));
}

void money_flows::launch_serial(const std::string& key, std::function<void(std::function<void()>)> run) {
  // Called outside the lock: `run` may finish at once and start the next. The key stays in
  // serial_ while a run under it is in progress.
  run([this, key] {
    std::function<void(std::function<void()>)> next;
    {
      std::lock_guard lock(serial_mutex_);
      auto it = serial_.find(key);
      WALLET_ASSERT(it != serial_.end(), "a run in progress keeps its key");
      if (it->second.empty()) {
        serial_.erase(it);
        return;
      }
      next = std::move(it->second.front());
      it->second.pop_front();
    }
    launch_serial(key, std::move(next));
  });
}

std::optional<persistence::provider_record> money_flows::cached_provider(const std::string& name) {
  const auto trusted_since =
      std::chrono::steady_clock::now() - std::chrono::milliseconds(settings_.auth.key_cache_ttl_ms);
  std::lock_guard lock(providers_mutex_);
  if (auto it = providers_.find(name); it != providers_.end() && it->second.read_at >= trusted_since) {
    return it->second.record;
  }
  return std::nullopt;
}

void money_flows::remember_provider(const persistence::provider_record& p) {
  std::lock_guard lock(providers_mutex_);
  providers_[p.name] = {p, std::chrono::steady_clock::now()};
}

}  // namespace actors
