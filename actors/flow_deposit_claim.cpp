// Refunds and the chargeback of a deposit: the wallet pays the provider's clearing account back
// (DEPOSIT_REFUND, CHARGEBACK), through the wallet's actor. A chargeback takes what the wallet
// holds, up to its amount, and books the rest to chargeback_loss, so the wallet never goes
// negative. A refund the provider reports (payment.refunded) is done already on the provider's
// side: it too takes what the wallet holds, frozen or not, and books the rest to
// refund_shortfall, which the operator then recovers; an operator's refund is refused instead. Refunds and the chargeback together never exceed the deposit: the writer checks the
// deposit's row under its lock, and the database's CHECK refuses it too.

#include "actors/account_cache.hpp"
#include "actors/keys_audit.hpp"
#include "actors/money_flows.hpp"
#include "actors/outcomes.hpp"
#include "actors/service_core.hpp"
#include "actors/uuid.hpp"
#include "ledger/flows.hpp"

namespace actors {

void money_flows::claim_deposit(deposit_claim_command command, finish_fn done) {
  const auto principal = command.principal;
  const auto key = command.idempotency_key;
  const auto hash = command.request_hash;
  in_flight(principal, key, hash, std::move(done), [this, command = std::move(command)](finish_fn finish) mutable {
    const auto id = command.deposit_transaction_id;
    core_.readers->read<std::optional<persistence::deposit_record>>(
        [id](pqxx::connection& conn) { return persistence::find_deposit(conn, id); },
        [this, command = std::move(command),
         finish](query_result<std::optional<persistence::deposit_record>> r) mutable {
          if (r.outcome != ledger::error_code::ok) return finish(database_unavailable(r.outcome));
          if (!r.value) {
            return finish(
                refusal(ledger::error_code::not_found, "deposit " + command.deposit_transaction_id + " was not found"));
          }
          auto rows = std::make_shared<persistence::flow_rows>();
          rows->claim = persistence::flow_rows::deposit_claim{command.deposit_transaction_id, command.chargeback,
                                                              !command.amount.has_value()};
          rows->audit = audit_entry_for(
              {command.principal, command.request_id}, command.chargeback ? "deposit.chargeback" : "deposit.refund",
              "deposit:" + command.deposit_transaction_id, json_members({{"reason", command.reason}}));
          claim(std::move(command), std::move(*r.value), std::move(rows), finish);
        });
  });
}

void money_flows::claim(deposit_claim_command command, persistence::deposit_record deposit,
                        std::shared_ptr<persistence::flow_rows> rows, finish_fn finish) {
  const auto left = deposit.amount - deposit.refunded - deposit.charged_back;
  if (command.chargeback && deposit.charged_back > 0) {
    return finish(decided_early(ledger::error_code::already_charged_back,
                                "deposit " + deposit.transaction_id + " was already charged back"));
  }
  if (left <= 0) {
    return finish(decided_early(ledger::error_code::refund_exceeds_payment,
                                "deposit " + deposit.transaction_id + " has nothing left to refund or charge back"));
  }
  // Without an amount, what is left as read now: only an upper bound, since a refund in flight may
  // commit first; the writer takes what is left under the deposit's lock (flow_rows::deposit_claim).
  const auto amount = command.amount.value_or(left);
  if (amount <= 0 || amount > left) {
    return finish(decided_early(ledger::error_code::refund_exceeds_payment,
                                "deposit " + deposit.transaction_id + " has " + std::to_string(left) +
                                    " left to refund or charge back; " + std::to_string(amount) + " is more"));
  }
  std::vector<std::pair<std::string, bool>> roles{{"clearing:" + deposit.provider, true}};
  if (command.chargeback) {
    roles.emplace_back("chargeback_loss", true);
  } else if (command.reported_by_provider) {
    roles.emplace_back("refund_shortfall", true);
  }
  const std::string currency = deposit.currency;
  system_accounts(
      currency, std::move(roles),
      [this, command = std::move(command), deposit = std::move(deposit), rows = std::move(rows), amount, finish](
          ledger::error_code code, std::vector<ledger::account_id> ids) mutable {
        if (code != ledger::error_code::ok) return finish(database_unavailable(code));
        persistence::posting_request request;
        request.posting = command.chargeback
                              ? ledger::flows::chargeback(deposit.account_id, ids[0], ids[1], amount, deposit.currency)
                              : ledger::flows::deposit_refund(deposit.account_id, ids[0], amount, deposit.currency);
        if (command.reported_by_provider && !command.chargeback) {
          request.posting.shortfall_account = ids[1];
        }
        request.transaction_id = make_transaction_id();
        request.principal = command.principal;
        request.idempotency_key = std::move(command.idempotency_key);
        request.request_hash = std::move(command.request_hash);
        request.metadata_json = json_members({{"depositId", deposit.transaction_id},
                                              {"provider", deposit.provider},
                                              {"paymentId", deposit.payment_id},
                                              {"reason", command.reason}});
        // The amount of a claim of the rest is the writer's to add.
        request.receipt_fields =
            command.amount
                ? json_members({{"depositId", deposit.transaction_id}, {"amount", std::to_string(amount)}}, true)
                : json_members({{"depositId", deposit.transaction_id}}, true);
        request.rows = std::move(rows);
        debit(0, std::move(request), std::nullopt, finish);
      });
}

}  // namespace actors
