// A provider's event whose signature the HTTP layer verified. It is a journal transaction made by
// the provider's principal with the idempotency key "event:<event id>", so the same event
// delivered twice, or twenty times at once, posts once (the single flight joins concurrent
// deliveries; the stored receipt answers later ones). Its provider_event row is written in the
// posting's own transaction.
//
//   payment.succeeded   DEPOSIT          clearing:<provider> → the account
//   payment.refunded    DEPOSIT_REFUND   the deposit's wallet → clearing:<provider>
//   chargeback.created  CHARGEBACK       the deposit's wallet (+ chargeback_loss) → clearing:<provider>
//   payout.paid         PAYOUT           pending_withdrawal → clearing:<provider>
//   payout.failed       PAYOUT_FAILED    pending_withdrawal → the wallet
//
// An event naming an account, a payment or a withdrawal this ledger does not know is refused
// (422) without a trace, so the provider may deliver it again later. One that contradicts what it
// names (a payout of another amount than its withdrawal's, a refund naming another account than
// its deposit's, another currency) is refused the same way (400 or 422).

#include "actors/account_cache.hpp"
#include "actors/money_flows.hpp"
#include "actors/outcomes.hpp"
#include "actors/service_core.hpp"

namespace actors {
namespace {

money_result unknown(ledger::error_code code, const std::string& what) {
  return refusal(code, what + " is not known to this ledger; deliver the event again once it is");
}

}  // namespace

void money_flows::provider_event(provider_event_command command, finish_fn done) {
  const auto name = command.provider;
  provider(name, [this, command = std::move(command), done = std::move(done)](
                     ledger::error_code code, std::optional<persistence::provider_record> found) mutable {
    if (code != ledger::error_code::ok) return done(database_unavailable(code));
    if (!found) return done(refusal(ledger::error_code::bad_signature, "the signature does not verify"));
    auto p = std::move(*found);
    const auto key = "event:" + command.event_id;
    const auto hash = command.request_hash;
    in_flight(
        p.principal_id, key, hash, std::move(done),
        [this, command = std::move(command), p, key](finish_fn finish) mutable {
          auto rows = std::make_shared<persistence::flow_rows>();
          rows->event = persistence::flow_rows::provider_event{p.id, command.event_id, command.type, command.payment_id,
                                                               command.payload_json};
          if (command.type == "payment.succeeded") {
            if (!command.account) return finish(unknown(ledger::error_code::unknown_account, "the account"));
            const auto account = *command.account;
            auto missing = unknown(ledger::error_code::unknown_account, "account " + std::to_string(account));
            return user_account(
                account, std::move(missing), finish,
                [this, command = std::move(command), p, key, rows, finish](account_facts target) mutable {
                  if (target.currency != command.currency) {
                    return finish(refusal(ledger::error_code::currency_mismatch,
                                          "account " + std::to_string(target.id) + " holds " + target.currency +
                                              ", not " + command.currency));
                  }
                  rows->deposit_payment = persistence::flow_rows::deposit{p.id, command.payment_id};
                  deposit_command deposit;
                  deposit.principal = p.principal_id;
                  deposit.account = target.id;
                  deposit.amount = command.amount.value_or(0);
                  deposit.provider = p.name;
                  deposit.provider_payment_id = command.payment_id;
                  deposit.idempotency_key = key;
                  deposit.request_hash = command.request_hash;
                  deposit_to(std::move(deposit), p, std::move(target), rows, finish);
                });
          }
          if (command.type == "payment.refunded" || command.type == "chargeback.created") {
            const auto payment = command.payment_id;
            const auto provider_id = p.id;
            return core_.readers->read<std::optional<persistence::deposit_record>>(
                [provider_id, payment](pqxx::connection& conn) {
                  return persistence::find_deposit_by_payment(conn, provider_id, payment);
                },
                [this, command = std::move(command), p, key, rows,
                 finish](query_result<std::optional<persistence::deposit_record>> r) mutable {
                  if (r.outcome != ledger::error_code::ok) return finish(database_unavailable(r.outcome));
                  if (!r.value)
                    return finish(unknown(ledger::error_code::unknown_payment, "payment " + command.payment_id));
                  // The amount is taken in the deposit's currency: one named otherwise is not this
                  // payment's, and would move another sum.
                  if (!command.currency.empty() && command.currency != r.value->currency) {
                    return finish(refusal(ledger::error_code::currency_mismatch,
                                          "payment " + command.payment_id + " was deposited in " + r.value->currency +
                                              ", not " + command.currency));
                  }
                  if (command.account && *command.account != r.value->account_id) {
                    return finish(refusal(ledger::error_code::invalid_request,
                                          "payment " + command.payment_id + " was deposited into account " +
                                              std::to_string(r.value->account_id) + ", not account " +
                                              std::to_string(*command.account)));
                  }
                  deposit_claim_command claim_command;
                  claim_command.principal = p.principal_id;
                  claim_command.deposit_transaction_id = r.value->transaction_id;
                  claim_command.amount = command.amount;
                  claim_command.chargeback = command.type == "chargeback.created";
                  claim_command.reported_by_provider = true;
                  claim_command.idempotency_key = key;
                  claim_command.request_hash = command.request_hash;
                  rows->claim = persistence::flow_rows::deposit_claim{r.value->transaction_id, claim_command.chargeback,
                                                                      !claim_command.amount.has_value()};
                  claim(std::move(claim_command), std::move(*r.value), rows, finish);
                });
          }
          // payout.paid, payout.failed (the HTTP layer accepts no other type).
          const auto id = command.withdrawal_id;
          core_.readers->read<std::optional<persistence::withdrawal_record>>(
              [id](pqxx::connection& conn) { return persistence::find_withdrawal(conn, id); },
              [this, command = std::move(command), p, key, rows,
               finish](query_result<std::optional<persistence::withdrawal_record>> r) mutable {
                if (r.outcome != ledger::error_code::ok) return finish(database_unavailable(r.outcome));
                if (!r.value || r.value->provider_id != p.id) {
                  return finish(unknown(ledger::error_code::unknown_withdrawal, "withdrawal " + command.withdrawal_id));
                }
                if (!command.currency.empty() && command.currency != r.value->currency) {
                  return finish(refusal(ledger::error_code::currency_mismatch, "withdrawal " + command.withdrawal_id +
                                                                                   " is in " + r.value->currency +
                                                                                   ", not " + command.currency));
                }
                // A payout settles the whole withdrawal: an event naming another sum is not its.
                if (command.amount && *command.amount != r.value->amount) {
                  return finish(refusal(ledger::error_code::invalid_request,
                                        "withdrawal " + command.withdrawal_id + " is of " +
                                            std::to_string(r.value->amount) + " minor units, not " +
                                            std::to_string(*command.amount) + "; a payout settles all of it"));
                }
                if (r.value->status != "PENDING") {
                  return finish(
                      decided_early(ledger::error_code::already_settled,
                                    "withdrawal " + command.withdrawal_id + " is already " + r.value->status));
                }
                settle_command settle_command;
                settle_command.principal = p.principal_id;
                settle_command.withdrawal_id = command.withdrawal_id;
                settle_command.paid = command.type == "payout.paid";
                settle_command.provider_payment_id = command.payment_id;
                settle_command.idempotency_key = key;
                settle_command.request_hash = command.request_hash;
                rows->settle = persistence::flow_rows::withdrawal_settle{command.withdrawal_id, settle_command.paid,
                                                                         command.payment_id};
                settle_to(std::move(settle_command), std::move(*r.value), rows, finish);
              });
        });
  });
}

}  // namespace actors
