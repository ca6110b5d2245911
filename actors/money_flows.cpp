#include "actors/money_flows.hpp"

#include <caf/send.hpp>

#include "actors/account_cache.hpp"
#include "actors/outcomes.hpp"
#include "actors/service_core.hpp"
#include "actors/uuid.hpp"
#include "persistence/history.hpp"

namespace actors {
namespace {

money_result database_unavailable(ledger::error_code code) {
  return unavailable(code, "the database is unavailable; retry with the same Idempotency-Key");
}

std::string flight_key(ledger::principal_id principal, const std::string& idempotency_key) {
  return std::to_string(principal) + '\n' + idempotency_key;
}

}  // namespace

money_flows::money_flows(service_core& core, account_cache& accounts) : core_(core), accounts_(accounts) {}

bool money_flows::begin_flight(const std::string& key, const std::string& hash,
                               std::function<void(money_result)>& done) {
  switch (flights_.join(key, hash, done)) {
    case single_flight::join_result::leader: return true;
    case single_flight::join_result::follower: return false;
    case single_flight::join_result::conflict:
      done(refusal(ledger::error_code::idempotency_key_reused, "this Idempotency-Key is in use by a different request"));
      return false;
  }
  return false;
}

void money_flows::settle(ledger::principal_id principal, std::string key, std::string hash, money_result result,
                         std::function<void(money_result)> done) {
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

void money_flows::transfer(transfer_command command, std::function<void(money_result)> done) {
  if (core_.stopped.load()) return done(shutting_down());
  const auto key = flight_key(command.principal, command.idempotency_key);
  if (!begin_flight(key, command.request_hash, done)) return;
  auto finish = [this, key, principal = command.principal, idempotency_key = command.idempotency_key,
                 hash = command.request_hash](money_result result) {
    settle(principal, idempotency_key, hash, std::move(result),
           [this, key](money_result settled) { flights_.finish(key, settled); });
  };
  // Both accounts must exist before an actor is asked: an actor is only ever started for an
  // account that exists, so naming one that does not leaves nothing behind (an account created
  // later under that id works at once).
  accounts_.facts(command.from, [this, command = std::move(command), finish](
                                    ledger::error_code code, std::optional<account_facts> payer) mutable {
    if (code != ledger::error_code::ok) return finish(database_unavailable(code));
    if (!payer || payer->kind != ledger::account_kind::user || payer->owner_id != command.principal) {
      return finish(refusal(ledger::error_code::not_found,
                            "account " + std::to_string(command.from) + " (fromAccountId) was not found"));
    }
    const auto to = command.to;
    accounts_.facts(to, [this, command = std::move(command), payer = std::move(payer), finish](
                            ledger::error_code code, std::optional<account_facts> payee) mutable {
      if (code != ledger::error_code::ok) return finish(database_unavailable(code));
      if (!payee || payee->kind != ledger::account_kind::user) {
        return finish(refusal(ledger::error_code::not_found,
                              "account " + std::to_string(command.to) + " (toAccountId) was not found"));
      }
      if (core_.stopped.load()) return finish(shutting_down());
      const auto& shard = core_.registry_for(command.from);
      debit_request request{std::move(command), std::move(*payee), std::move(payer)};
      // Straight to the registry shard, which forwards to the account's actor; the actor answers
      // the sink itself when the writer has committed (no response travels back through here).
      caf::anon_send(shard, debit_atom::value, std::move(request), reply_sink{finish});
    });
  });
}

void money_flows::deposit(deposit_command command, std::function<void(money_result)> done) {
  if (core_.stopped.load()) return done(shutting_down());
  const auto key = flight_key(command.principal, command.idempotency_key);
  if (!begin_flight(key, command.request_hash, done)) return;
  auto finish = [this, key](money_result result) { flights_.finish(key, result); };
  accounts_.facts(command.account, [this, command = std::move(command), finish](
                                       ledger::error_code code, std::optional<account_facts> target) mutable {
    if (code != ledger::error_code::ok) return finish(database_unavailable(code));
    if (!target || target->kind != ledger::account_kind::user) {
      return finish(refusal(ledger::error_code::not_found,
                            "account " + std::to_string(command.account) + " (accountId) was not found"));
    }
    const std::string currency = target->currency;
    accounts_.clearing_account(currency, [this, command = std::move(command), target = std::move(*target), finish](
                                             ledger::error_code code, ledger::account_id clearing) mutable {
      if (code != ledger::error_code::ok) return finish(database_unavailable(code));
      if (core_.stopped.load()) return finish(shutting_down());
      const auto w = core_.writer_index(clearing);
      auto& gauges = *core_.runtime->writer_gauges[w];
      if (const auto queued = gauges.queued.load(); queued >= core_.runtime->writer_queue_max) {
        return finish(
            unavailable(ledger::error_code::writer_busy, "the ledger writer is saturated", gauges.drain_seconds(queued)));
      }
      persistence::posting_request request;
      request.posting.type = ledger::transaction_type::deposit;
      request.posting.debit_account = clearing;
      request.posting.credit_account = account_directory::credit_row(
          target, w, core_.runtime->writers.size(), std::hash<std::string>{}(command.idempotency_key));
      request.posting.credit_parent = target.id;
      request.posting.amount = command.amount;
      request.posting.currency = target.currency;
      request.transaction_id = make_transaction_id();
      request.principal = command.principal;
      request.idempotency_key = std::move(command.idempotency_key);
      request.request_hash = std::move(command.request_hash);
      request.metadata_json = std::move(command.metadata_json);
      core_.post(w, std::move(request), reply_sink{finish});
    });
  });
}

}  // namespace actors
