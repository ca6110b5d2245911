// Withdrawals, in two steps. Requesting one moves the amount and the currency's fee out of the
// wallet at once (WITHDRAWAL: wallet → pending_withdrawal + fee_revenue), through the wallet's
// actor, so the money cannot be spent twice. It then settles exactly once: PAYOUT
// (pending_withdrawal → clearing:<provider>) when the provider paid it, PAYOUT_FAILED
// (pending_withdrawal → the wallet, the fee kept) when it did not. The writer checks the
// withdrawal's status under its row lock, and the database refuses a second settlement too.

#include "actors/account_cache.hpp"
#include "actors/keys_audit.hpp"
#include "actors/money_flows.hpp"
#include "actors/outcomes.hpp"
#include "actors/service_core.hpp"
#include "actors/uuid.hpp"
#include "ledger/flows.hpp"

namespace actors {

void money_flows::withdraw(withdrawal_command command, finish_fn done) {
  const auto principal = command.principal;
  const auto key = command.idempotency_key;
  const auto hash = command.request_hash;
  in_flight(principal, key, hash, std::move(done), [this, command = std::move(command)](finish_fn finish) mutable {
    const auto provider_name = command.provider;
    known_provider(
        provider_name, finish,
        [this, command = std::move(command), finish](std::optional<persistence::provider_record> p) mutable {
          auto missing = refusal(ledger::error_code::not_found,
                                 "account " + std::to_string(command.account) + " (accountId) was not found");
          const auto account = command.account;
          user_account(
              account, std::move(missing), finish,
              [this, command = std::move(command), p = std::move(*p), finish](account_facts wallet) mutable {
                if (wallet.owner_id != command.principal) {
                  return finish(refusal(ledger::error_code::not_found,
                                        "account " + std::to_string(command.account) + " (accountId) was not found"));
                }
                const auto fee = settings_.ledger.withdrawal_fee(wallet.currency);
                if (!ledger::checked_add(command.amount, fee)) {
                  return finish(refusal(ledger::error_code::invalid_request, "the amount is too large"));
                }
                const std::string currency = wallet.currency;
                system_accounts(currency, {{"pending_withdrawal", false}, {"fee_revenue", false}},
                                [this, command = std::move(command), p = std::move(p), wallet = std::move(wallet), fee,
                                 finish](ledger::error_code code, std::vector<ledger::account_id> ids) mutable {
                                  if (code != ledger::error_code::ok) return finish(database_unavailable(code));
                                  auto rows = std::make_shared<persistence::flow_rows>();
                                  persistence::flow_rows::withdrawal w;
                                  w.id = make_transaction_id();
                                  w.provider_id = p.id;
                                  w.principal = command.principal;
                                  w.amount = command.amount;
                                  w.fee = fee;
                                  w.destination = command.destination;
                                  persistence::posting_request request;
                                  // Checked above: amount + fee fits.
                                  request.posting = *ledger::flows::withdrawal(wallet.id, ids[0], ids[1],
                                                                               command.amount, fee, wallet.currency);
                                  request.transaction_id = make_transaction_id();
                                  request.principal = command.principal;
                                  request.idempotency_key = std::move(command.idempotency_key);
                                  request.request_hash = std::move(command.request_hash);
                                  request.metadata_json = json_members({{"withdrawalId", w.id}, {"provider", p.name}});
                                  request.receipt_fields = json_members({{"id", w.id},
                                                                         {"amount", std::to_string(command.amount)},
                                                                         {"fee", std::to_string(fee)},
                                                                         {"currency", wallet.currency}},
                                                                        true);
                                  rows->withdrawal_request = std::move(w);
                                  request.rows = std::move(rows);
                                  debit(command.principal, std::move(request), std::move(wallet), finish);
                                });
              });
        });
  });
}

void money_flows::settle_withdrawal(settle_command command, finish_fn done) {
  const auto principal = command.principal;
  const auto key = command.idempotency_key;
  const auto hash = command.request_hash;
  in_flight(principal, key, hash, std::move(done), [this, command = std::move(command)](finish_fn finish) mutable {
    const auto id = command.withdrawal_id;
    core_.readers->read<std::optional<persistence::withdrawal_record>>(
        [id](pqxx::connection& conn) { return persistence::find_withdrawal(conn, id); },
        [this, command = std::move(command),
         finish](query_result<std::optional<persistence::withdrawal_record>> r) mutable {
          if (r.outcome != ledger::error_code::ok) return finish(database_unavailable(r.outcome));
          if (!r.value) {
            return finish(
                refusal(ledger::error_code::not_found, "withdrawal " + command.withdrawal_id + " was not found"));
          }
          if (r.value->status != "PENDING") {
            return finish(decided_early(ledger::error_code::already_settled,
                                        "withdrawal " + command.withdrawal_id + " is already " + r.value->status));
          }
          auto rows = std::make_shared<persistence::flow_rows>();
          rows->settle = persistence::flow_rows::withdrawal_settle{command.withdrawal_id, command.paid,
                                                                   command.provider_payment_id};
          rows->audit = audit_entry_for({command.principal, command.request_id},
                                        command.paid ? "withdrawal.confirm" : "withdrawal.fail",
                                        "withdrawal:" + command.withdrawal_id,
                                        json_members({{"providerPaymentId", command.provider_payment_id}}));
          settle_to(std::move(command), std::move(*r.value), std::move(rows), finish);
        });
  });
}

void money_flows::settle_to(settle_command command, persistence::withdrawal_record withdrawal,
                            std::shared_ptr<persistence::flow_rows> rows, finish_fn finish) {
  // Named before the call: the callback below takes `withdrawal` by move.
  const std::string currency = withdrawal.currency;
  std::vector<std::pair<std::string, bool>> roles{{"pending_withdrawal", false},
                                                  {"clearing:" + withdrawal.provider, true}};
  system_accounts(
      currency, std::move(roles),
      [this, command = std::move(command), withdrawal = std::move(withdrawal), rows = std::move(rows), finish](
          ledger::error_code code, std::vector<ledger::account_id> ids) mutable {
        if (code != ledger::error_code::ok) return finish(database_unavailable(code));
        auto send = [this, command, withdrawal, rows, finish, pending = ids[0]](ledger::account_id credit,
                                                                                ledger::account_id parent) {
          persistence::posting_request request;
          request.posting =
              command.paid
                  ? ledger::flows::payout(pending, credit, withdrawal.amount, withdrawal.currency)
                  : ledger::flows::payout_failed(pending, credit, parent, withdrawal.amount, withdrawal.currency);
          request.transaction_id = make_transaction_id();
          request.principal = command.principal;
          request.idempotency_key = command.idempotency_key;
          request.request_hash = command.request_hash;
          request.metadata_json = json_members({{"withdrawalId", withdrawal.id},
                                                {"provider", withdrawal.provider},
                                                {"paymentId", command.provider_payment_id}});
          request.receipt_fields = json_members({{"id", withdrawal.id}}, true);
          request.rows = rows;
          post(std::move(request), finish);
        };
        if (command.paid) return send(ids[1], ids[1]);
        // A failed payout returns the amount to the wallet (to a shard of a hot one).
        // The posting is committed by the writer of pending_withdrawal: the credit lands on a shard of
        // that writer's.
        const auto w = core_.writer_index(ids[0]);
        accounts_.facts(withdrawal.account_id,
                        [this, send, finish, w](ledger::error_code code, std::optional<account_facts> wallet) {
                          if (code != ledger::error_code::ok) return finish(database_unavailable(code));
                          if (!wallet)
                            return finish(refusal(ledger::error_code::internal, "the withdrawal's account is gone"));
                          send(account_directory::credit_row(*wallet, w, core_.runtime->writers.size(), 0,
                                                             core_.runtime->ownership.get()),
                               wallet->id);
                        });
      });
}

}  // namespace actors
