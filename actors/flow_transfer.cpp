// A payment from a principal's account to another user account, through the payer's actor. A
// payee with a fee schedule pays its fee to fee_revenue out of the payment (TRANSFER: payer −
// amount, payee + (amount − fee), fee_revenue + fee).
//
// The payee's schedule is known from its cached facts when the posting is built, but only as a
// hint of whether the payment names fee_revenue: the ledger writer prices the fee from the
// schedule it reads with the credit row under its lock (persistence/batch.cpp). A payment built
// without a fee leg for a payee that charges one (its cached facts predate the schedule) is
// refused by the writer with fees_changed before anything is written; it is then built once more,
// from freshly read facts and with a fee leg, which the writer always prices.

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
    accounts_.facts(from, [this, command = std::move(command), finish = std::move(finish)](
                              ledger::error_code code, std::optional<account_facts> payer) mutable {
      if (code != ledger::error_code::ok) return finish(database_unavailable(code));
      if (!payer || payer->kind != ledger::account_kind::user || payer->owner_id != command.principal) {
        return finish(refusal(ledger::error_code::not_found,
                              "account " + std::to_string(command.from) + " (fromAccountId) was not found"));
      }
      auto missing = refusal(ledger::error_code::not_found,
                             "account " + std::to_string(command.to) + " (toAccountId) was not found");
      const auto to = command.to;
      auto on_missing = finish;
      user_account(to, std::move(missing), std::move(on_missing),
                   [this, command = std::move(command), payer = std::move(*payer),
                    finish = std::move(finish)](account_facts payee) mutable {
                     const bool charges =
                         payee.fees && command.amount > 0 && ledger::payment_fee(*payee.fees, command.amount) > 0;
                     pay(std::move(command), std::move(payer), std::move(payee), charges, false, std::move(finish));
                   });
    });
  });
}

void money_flows::pay(transfer_command command, account_facts payer, account_facts payee, bool with_fee, bool rebuilt,
                      finish_fn finish) {
  if (with_fee) {
    const std::string currency = payer.currency;
    // fee_revenue is hot: the fee lands on its shard of the payer's writer.
    const auto writer = writer_for(command.from, core_.runtime->writers.size());
    return fee_revenue_row(
        currency, writer,
        [this, command = std::move(command), payer = std::move(payer), payee = std::move(payee), rebuilt,
         finish = std::move(finish)](ledger::error_code code, ledger::account_id fee_row) mutable {
          if (code != ledger::error_code::ok) return finish(database_unavailable(code));
          send_payment(std::move(command), std::move(payer), std::move(payee), fee_row, rebuilt, std::move(finish));
        });
  }
  send_payment(std::move(command), std::move(payer), std::move(payee), 0, rebuilt, std::move(finish));
}

void money_flows::send_payment(transfer_command command, account_facts payer, account_facts payee,
                               ledger::account_id fee_revenue, bool rebuilt, finish_fn finish) {
  // Spread credits over the payee's shards of the payer's writer at random: payers paying once
  // each must not all land on one shard.
  thread_local std::mt19937_64 spread{std::random_device{}()};
  const auto writers = core_.runtime->writers.size();
  const auto credit_row = account_directory::credit_row(payee, writer_for(command.from, writers), writers, spread(),
                                                        core_.runtime->ownership.get());
  std::optional<ledger::flows::payee_fee> fee;
  // The schedule here only sets the fee a first time; the writer prices it again under its lock.
  if (fee_revenue != 0) fee = ledger::flows::payee_fee{fee_revenue, payee.fees.value_or(ledger::fee_schedule{})};
  persistence::posting_request posting;
  posting.posting = ledger::flows::transfer(command.from, credit_row, payee.id, command.amount, payer.currency, fee);
  posting.transaction_id = make_transaction_id();
  posting.principal = command.principal;
  posting.idempotency_key = command.idempotency_key;
  posting.request_hash = command.request_hash;
  // A fee may take all of a payment, and then the payee has no entry to be found by: its refunds
  // find it here (persistence/payments.cpp).
  if (fee) posting.metadata_json = json_members({{"payeeId", std::to_string(payee.id)}});
  const auto principal = command.principal;
  if (rebuilt) return debit(principal, std::move(posting), std::move(payer), std::move(finish));
  // Kept for the rare rebuild below; the posting already has its own copies of the command's strings.
  auto retry = [this, command = std::move(command), payer, payee_id = payee.id,
                finish = std::move(finish)](money_result r) mutable {
    if (r.outcome != ledger::error_code::fees_changed) return finish(std::move(r));
    // The payee's schedule changed since its facts were cached: read them again, and build the
    // payment with a fee leg this time, whatever they say (the writer prices it).
    accounts_.refresh(payee_id,
                      [this, command = std::move(command), payer = std::move(payer), finish = std::move(finish)](
                          ledger::error_code code, std::optional<account_facts> payee) mutable {
                        if (code != ledger::error_code::ok) return finish(database_unavailable(code));
                        if (!payee)
                          return finish(refusal(ledger::error_code::not_found, "the payee's account is gone"));
                        pay(std::move(command), std::move(payer), std::move(*payee), true, true, std::move(finish));
                      });
  };
  debit(principal, std::move(posting), std::move(payer), std::move(retry));
}

}  // namespace actors
