// A payment from a principal's account to another user account, through the payer's actor.

#include <random>

#include "actors/account_cache.hpp"
#include "actors/money_flows.hpp"
#include "actors/outcomes.hpp"
#include "actors/service_core.hpp"
#include "actors/uuid.hpp"
#include "ledger/flows.hpp"

namespace actors {

void money_flows::transfer(transfer_command command, finish_fn done) {
  const auto principal = command.principal;
  const auto key = command.idempotency_key;
  const auto hash = command.request_hash;
  in_flight(principal, key, hash, std::move(done), [this, command = std::move(command)](finish_fn finish) mutable {
    // Both accounts must exist before an actor is asked: an actor is only ever started for an
    // account that exists, so naming one that does not leaves nothing behind (an account created
    // later under that id works at once).
    const auto from = command.from;
    accounts_.facts(from, [this, command = std::move(command), finish](ledger::error_code code,
                                                                       std::optional<account_facts> payer) mutable {
      if (code != ledger::error_code::ok) return finish(database_unavailable(code));
      if (!payer || payer->kind != ledger::account_kind::user || payer->owner_id != command.principal) {
        return finish(refusal(ledger::error_code::not_found,
                              "account " + std::to_string(command.from) + " (fromAccountId) was not found"));
      }
      auto missing =
          refusal(ledger::error_code::not_found, "account " + std::to_string(command.to) + " (toAccountId) was not found");
      const auto to = command.to;
      user_account(to, std::move(missing), finish,
                   [this, command = std::move(command), payer = std::move(payer), finish](account_facts payee) mutable {
                     // Spread credits over the payee's shards of the payer's writer at random: payers
                     // paying once each must not all land on one shard.
                     thread_local std::mt19937_64 spread{std::random_device{}()};
                     const auto writers = core_.runtime->writers.size();
                     const auto credit_row =
                         account_directory::credit_row(payee, writer_for(command.from, writers), writers, spread());
                     persistence::posting_request posting;
                     posting.posting =
                         ledger::flows::transfer(command.from, credit_row, payee.id, command.amount, payer->currency);
                     posting.transaction_id = make_transaction_id();
                     posting.principal = command.principal;
                     posting.idempotency_key = std::move(command.idempotency_key);
                     posting.request_hash = std::move(command.request_hash);
                     debit(command.principal, std::move(posting), std::move(payer), finish);
                   });
    });
  });
}

}  // namespace actors
