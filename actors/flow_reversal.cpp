// Reversals (REVERSAL: the mirror of every entry of a committed transaction), by an operator, once
// per transaction. A credit is taken back from the account it credited, its main row and then its
// shards (a sweep may have moved it), and a debit is given back to the row it left. The one user
// account a reversal debits is debited through its actor, like any payment of it, so a reversal
// never spends money the account has promised elsewhere (422 insufficient_funds); a reversal that
// debits only system accounts goes to the writer of the account it debits. The writer checks the
// transaction_reversal row under the batch's locks and the database's primary key refuses a second
// one (409 already_reversed). A payment or deposit with refunds (or a chargeback) is not reversed
// (409 already_refunded), and a reversed one has nothing left to refund (docs/corrections.md).

#include "actors/account_cache.hpp"
#include "actors/keys_audit.hpp"
#include "actors/money_flows.hpp"
#include "actors/outcomes.hpp"
#include "actors/service_core.hpp"
#include "actors/uuid.hpp"
#include "ledger/flows.hpp"
#include "persistence/corrections.hpp"

namespace actors {
namespace {

// What a reversal reads before it posts: the transaction with its entries, and for a payment or a
// deposit what was refunded of it.
struct reversal_read {
  std::optional<persistence::reversal_target> target;
  std::optional<persistence::payment_record> payment;
  std::optional<persistence::deposit_record> deposit;
};

}  // namespace

void money_flows::reverse(reversal_command command, finish_fn done) {
  const auto principal = command.principal;
  const auto key = command.idempotency_key;
  const auto hash = command.request_hash;
  in_flight(principal, key, hash, std::move(done), [this, command = std::move(command)](finish_fn outer) mutable {
    const std::string serial = "reversal:" + command.transaction_id;
    one_at_a_time(serial, [this, command = std::move(command), outer](std::function<void()> next) mutable {
      // The next request for the same thing starts once this one is answered (after its COMMIT).
      finish_fn finish = [outer, next](money_result r) {
        outer(std::move(r));
        next();
      };
      const auto id = command.transaction_id;
      core_.readers->read<reversal_read>(
          [id](pqxx::connection& conn) {
            reversal_read r;
            r.target = persistence::find_reversal_target(conn, id);
            // A hold's capture is a payment too: its refunds and its reversal share one row.
            if (r.target && (r.target->type == ledger::to_string(ledger::transaction_type::transfer) ||
                             r.target->type == ledger::to_string(ledger::transaction_type::capture))) {
              r.payment = persistence::find_payment(conn, id);
            }
            if (r.target && r.target->has_deposit_row) r.deposit = persistence::find_deposit(conn, id);
            return r;
          },
          [this, command = std::move(command), finish](query_result<reversal_read> r) mutable {
            if (r.outcome != ledger::error_code::ok) return finish(database_unavailable(r.outcome));
            const auto& id = command.transaction_id;
            if (!r.value.target)
              return finish(refusal(ledger::error_code::not_found, "transaction " + id + " was not found"));
            const auto& t = *r.value.target;
            const auto type = ledger::parse_transaction_type(t.type);
            if (!type || !ledger::flows::is_reversible(*type)) {
              return finish(refusal(ledger::error_code::not_reversible,
                                    "a " + t.type +
                                        " transaction is not reversed; TRANSFER, CAPTURE, DEPOSIT and EXCHANGE are (an "
                                        "ADJUSTMENT is corrected by another adjustment)"));
            }
            if (!t.reversed_by.empty()) {
              return finish(decided_early(ledger::error_code::already_reversed,
                                          "transaction " + id + " was reversed already, by " + t.reversed_by));
            }
            const auto& payment = r.value.payment;
            const auto& deposit = r.value.deposit;
            if ((payment && payment->refunded > 0) ||
                (deposit && (deposit->refunded > 0 || deposit->charged_back > 0))) {
              return finish(decided_early(
                  ledger::error_code::already_refunded,
                  "transaction " + id + " was refunded or charged back in part; refund the rest instead"));
            }
            std::vector<ledger::flows::reversed_entry> entries;
            bool debits_user = false;
            for (const auto& e : t.entries) {
              entries.push_back({e.row, e.account, e.amount, e.currency, e.user_account, e.shards});
              if (e.amount > 0 && e.user_account) debits_user = true;
            }
            auto posting = ledger::flows::reversal(entries);
            if (!posting) {
              return finish(refusal(ledger::error_code::not_reversible,
                                    "transaction " + id + " cannot be mirrored as one reversal"));
            }
            auto rows = std::make_shared<persistence::flow_rows>();
            persistence::flow_rows::reversal v;
            v.original_id = id;
            v.principal = command.principal;
            v.reason = command.reason;
            if (payment) {
              v.payment = persistence::flow_rows::payment_refund{id, payment->payee, payment->payer, payment->amount};
            }
            v.deposit = deposit.has_value();
            rows->reversal_of = std::move(v);
            rows->audit = audit_entry_for({command.principal, command.request_id}, "transaction.reverse",
                                          "transaction:" + id, json_members({{"reason", command.reason}}));
            persistence::posting_request request;
            request.posting = std::move(*posting);
            request.transaction_id = make_transaction_id();
            request.principal = command.principal;
            request.idempotency_key = std::move(command.idempotency_key);
            request.request_hash = std::move(command.request_hash);
            // A deposit's reversal names its provider and payment as the deposit does, so that a
            // reader of the journal (GET /v1/transactions, an operator's query) sees which
            // provider's payment it took back. Settlement imports do not match reversals.
            request.metadata_json = json_members({{"reverses", id},
                                                  {"reason", command.reason},
                                                  {"provider", deposit ? deposit->provider : std::string()},
                                                  {"paymentId", deposit ? deposit->payment_id : std::string()}});
            request.receipt_fields = json_members({{"reverses", id}, {"type", t.type}}, true);
            request.rows = std::move(rows);
            // The user account it takes money back from decides it through its actor (owner 0: an
            // operator acts for anyone); otherwise only system accounts pay, and their writer decides.
            if (debits_user) return debit(0, std::move(request), std::nullopt, finish);
            post(std::move(request), finish);
          });
    });
  });
}

}  // namespace actors
