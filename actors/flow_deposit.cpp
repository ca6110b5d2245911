// A deposit: the provider's clearing account pays the wallet (DEPOSIT). Made by an operator
// (POST /v1/deposits, provider `manual` unless named) or by a provider's payment.succeeded event.
// Its deposit_payment row remembers the provider payment, so that refunds and a chargeback of it
// can never exceed it.

#include "actors/account_cache.hpp"
#include "actors/keys_audit.hpp"
#include "actors/money_flows.hpp"
#include "actors/outcomes.hpp"
#include "actors/service_core.hpp"
#include "actors/uuid.hpp"
#include "ledger/flows.hpp"

namespace actors {

void money_flows::deposit(deposit_command command, finish_fn done) {
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
          user_account(account, std::move(missing), finish,
                       [this, command = std::move(command), p = std::move(*p), finish](account_facts target) mutable {
                         auto rows = std::make_shared<persistence::flow_rows>();
                         rows->deposit_payment = persistence::flow_rows::deposit{p.id, command.provider_payment_id};
                         rows->audit = audit_entry_for({command.principal, command.request_id}, "deposit.create",
                                                       "account:" + std::to_string(command.account),
                                                       json_members({{"provider", command.provider},
                                                                     {"providerPaymentId", command.provider_payment_id},
                                                                     {"externalRef", command.external_ref}}));
                         deposit_to(std::move(command), std::move(p), std::move(target), std::move(rows), finish);
                       });
        });
  });
}

void money_flows::deposit_to(deposit_command command, persistence::provider_record provider, account_facts target,
                             std::shared_ptr<persistence::flow_rows> rows, finish_fn finish) {
  // Named before the call: the callback below takes `provider` and `target` by move.
  const std::string currency = target.currency;
  std::vector<std::pair<std::string, bool>> roles{{"clearing:" + provider.name, true}};
  system_accounts(
      currency, std::move(roles),
      [this, command = std::move(command), provider = std::move(provider), target = std::move(target),
       rows = std::move(rows), finish](ledger::error_code code, std::vector<ledger::account_id> ids) mutable {
        if (code != ledger::error_code::ok) return finish(database_unavailable(code));
        const auto clearing = ids[0];
        const auto w = core_.writer_index(clearing);
        const auto credit_row = account_directory::credit_row(target, w, core_.runtime->writers.size(),
                                                              std::hash<std::string>{}(command.idempotency_key),
                                                              core_.runtime->ownership.get());
        persistence::posting_request request;
        request.posting = ledger::flows::deposit(clearing, credit_row, target.id, command.amount, target.currency);
        request.transaction_id = make_transaction_id();
        request.principal = command.principal;
        request.idempotency_key = std::move(command.idempotency_key);
        request.request_hash = std::move(command.request_hash);
        request.metadata_json = json_members({{"externalRef", command.external_ref},
                                              {"provider", provider.name},
                                              {"paymentId", command.provider_payment_id}});
        request.rows = std::move(rows);
        post(std::move(request), finish);
      });
}

}  // namespace actors
