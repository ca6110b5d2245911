// Refunds of a payment (REFUND: payee − amount, payer + amount), partial or full, by the owner of
// the payee or an operator. The fee the payee paid stays with fee_revenue. A refund is a debit of
// the payee, so it goes through the payee's actor like the payee's own payments: it never spends
// money the payee does not hold (for a hot payee, main row and shards together). Refunds together
// never exceed the payment: the writer checks the payment's payment_refund_total row under its lock
// (the first refund makes it), and the database's CHECK refuses it too (migration 007).

#include <random>

#include "actors/account_cache.hpp"
#include "actors/keys_audit.hpp"
#include "actors/money_flows.hpp"
#include "actors/outcomes.hpp"
#include "actors/service_core.hpp"
#include "actors/uuid.hpp"
#include "ledger/flows.hpp"

namespace actors {
namespace {

money_result exceeds(const std::string& transfer_id, ledger::amount_minor left, ledger::amount_minor amount) {
  auto r = refusal(ledger::error_code::refund_exceeds_payment, "transfer " + transfer_id + " has " +
                                                                   std::to_string(left) + " left to refund; " +
                                                                   std::to_string(amount) + " is more");
  // A retry of a refund that committed finds less left: its stored receipt is the answer.
  r.decided_before_writer = true;
  return r;
}

}  // namespace

void money_flows::refund_payment(payment_refund_command command, finish_fn done) {
  const auto principal = command.principal;
  const auto key = command.idempotency_key;
  const auto hash = command.request_hash;
  in_flight(principal, key, hash, std::move(done), [this, command = std::move(command)](finish_fn finish) mutable {
    const auto id = command.transfer_id;
    core_.readers->read<std::optional<persistence::payment_record>>(
        [id](pqxx::connection& conn) { return persistence::find_payment(conn, id); },
        [this, command = std::move(command),
         finish](query_result<std::optional<persistence::payment_record>> r) mutable {
          if (r.outcome != ledger::error_code::ok) return finish(database_unavailable(r.outcome));
          // Another principal's payment answers as if it did not exist.
          if (!r.value || (!command.by_operator && r.value->payee_owner != command.principal)) {
            return finish(refusal(ledger::error_code::not_found, "transfer " + command.transfer_id + " was not found"));
          }
          const auto left = r.value->amount - r.value->refunded;
          const auto amount = command.amount.value_or(left);
          if (amount <= 0 || amount > left) return finish(exceeds(command.transfer_id, left, amount));
          const auto payer_id = r.value->payer;
          accounts_.facts(payer_id, [this, command = std::move(command), payment = std::move(*r.value), finish](
                                        ledger::error_code code, std::optional<account_facts> payer) mutable {
            if (code != ledger::error_code::ok) return finish(database_unavailable(code));
            if (!payer) return finish(refusal(ledger::error_code::internal, "the payment's payer account is gone"));
            refund_to(std::move(command), std::move(payment), std::move(*payer), finish);
          });
        });
  });
}

void money_flows::refund_to(payment_refund_command command, persistence::payment_record payment, account_facts payer,
                            finish_fn finish) {
  const auto amount = command.amount.value_or(payment.amount - payment.refunded);
  // The refund is committed by the payee's writer: a hot payer is credited on a shard of that
  // writer's, chosen at random.
  thread_local std::mt19937_64 spread{std::random_device{}()};
  const auto writers = core_.runtime->writers.size();
  const auto credit_row = account_directory::credit_row(payer, core_.writer_index(payment.payee), writers, spread(),
                                                        core_.runtime->ownership.get());
  auto rows = std::make_shared<persistence::flow_rows>();
  // Without an amount the refund is of all that is left when the writer locks the payment's total.
  rows->refund = persistence::flow_rows::payment_refund{payment.transaction_id, payment.payee, payment.payer,
                                                        payment.amount, !command.amount.has_value()};
  // An operator's refund is an operator action; the payee's own is recorded by its journal row.
  if (command.by_operator) {
    rows->audit = audit_entry_for({command.principal, command.request_id}, "payment.refund",
                                  "transfer:" + payment.transaction_id);
  }
  persistence::posting_request request;
  request.posting = ledger::flows::refund(payment.payee, credit_row, payment.payer, amount, payment.currency);
  request.transaction_id = make_transaction_id();
  request.principal = command.principal;
  request.idempotency_key = std::move(command.idempotency_key);
  request.request_hash = std::move(command.request_hash);
  request.metadata_json = json_members({{"transferId", payment.transaction_id}});
  // The writer adds the amount of a refund of the rest (what it took under the lock).
  request.receipt_fields =
      command.amount ? json_members({{"transferId", payment.transaction_id}, {"amount", std::to_string(amount)}}, true)
                     : json_members({{"transferId", payment.transaction_id}}, true);
  request.rows = std::move(rows);
  // The payee's actor checks that the caller owns the payee (an operator acts for anyone).
  const auto owner = command.by_operator ? 0 : command.principal;
  debit(owner, std::move(request), std::nullopt, [id = payment.transaction_id, finish](money_result r) {
    // The writer's refusal names deposits; say it of this payment.
    if (r.outcome == ledger::error_code::refund_exceeds_payment) {
      r.detail = "refunds of transfer " + id + " would exceed it";
    }
    finish(std::move(r));
  });
}

}  // namespace actors
