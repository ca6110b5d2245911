// Two-person adjustments (ADJUSTMENT). Operator A asks for one (PENDING_APPROVAL); operator B, never
// A, approves it, which posts it against the currency's `adjustment` system account (it may go
// negative), or rejects it. A positive adjustment credits the account (a shard of a hot one); a
// negative one debits it through its actor, like any payment of it (422 insufficient_funds). It is
// decided once: the writer checks the adjustment row under its lock before it posts an approval,
// and a rejection is one UPDATE of a row still pending, so an approval and a rejection racing each
// other find each other's decision (409 already_decided). The database refuses a decision by the
// requester itself (migration 012, CHECK adjustment_two_people), whoever writes it.

#include <random>

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

adjustment_view to_view(const persistence::adjustment_record& a) {
  return adjustment_view{a.id,     a.account_id, a.currency,   a.amount,         a.reason,    a.requested_by,
                         a.status, a.decided_by, a.decided_at, a.transaction_id, a.created_at};
}

std::string not_found_text(const std::string& id) { return "adjustment " + id + " was not found"; }

}  // namespace

void money_flows::request_adjustment(adjustment_request_command command, query_callback<adjustment_created_view> done) {
  persistence::adjustment_record a;
  a.id = make_transaction_id();
  a.account_id = command.account;
  a.amount = command.amount;
  a.reason = command.reason;
  a.requested_by = command.principal;
  a.request_hash = command.request_hash;
  auto audit = audit_entry_for({command.principal, command.request_id}, "adjustment.request", {},
                               json_members({{"accountId", std::to_string(command.account)},
                                             {"amount", std::to_string(command.amount)},
                                             {"reason", command.reason}}));
  const auto key = command.idempotency_key;
  const auto account = command.account;
  core_.readers->read<persistence::adjustment_created>(
      [a, key, audit](pqxx::connection& conn) { return persistence::create_adjustment(conn, a, key, audit); },
      [done, account, hash = a.request_hash](query_result<persistence::adjustment_created> r) {
        query_result<adjustment_created_view> out;
        out.outcome = r.outcome;
        out.detail = r.detail;
        if (r.outcome == ledger::error_code::ok) {
          if (r.value.outcome == ledger::error_code::not_found) {
            out.outcome = ledger::error_code::not_found;
            out.detail = "account " + std::to_string(account) + " (accountId) was not found";
          } else if (r.value.outcome == ledger::error_code::account_closed) {
            out.outcome = ledger::error_code::account_closed;
            out.detail = "account " + std::to_string(account) + " (accountId) is closed: no adjustment posts to it";
          } else if (!r.value.created && r.value.adjustment.request_hash != hash) {
            out.outcome = ledger::error_code::idempotency_key_reused;
            out.detail = "this Idempotency-Key was already used for a different adjustment";
          } else {
            out.value = adjustment_created_view{to_view(r.value.adjustment), r.value.created};
          }
        }
        done(std::move(out));
      });
}

void money_flows::find_adjustment(std::string id, query_callback<std::optional<adjustment_view>> done) {
  core_.readers->read<std::optional<adjustment_view>>(
      [id = std::move(id)](pqxx::connection& conn) -> std::optional<adjustment_view> {
        auto a = persistence::find_adjustment(conn, id);
        if (!a) return std::nullopt;
        return to_view(*a);
      },
      std::move(done));
}

void money_flows::reject_adjustment(adjustment_decision_command command,
                                    query_callback<std::optional<adjustment_view>> done) {
  struct rejected {
    std::optional<persistence::adjustment_record> adjustment;
    ledger::error_code outcome = ledger::error_code::ok;
  };
  auto audit = audit_entry_for({command.principal, command.request_id}, "adjustment.reject",
                               "adjustment:" + command.adjustment_id);
  const auto id = command.adjustment_id;
  const auto decider = command.principal;
  core_.readers->read<rejected>(
      [id, decider, audit](pqxx::connection& conn) {
        rejected out;
        out.adjustment = persistence::find_adjustment(conn, id);
        if (!out.adjustment) return out;
        if (out.adjustment->requested_by == decider) {
          out.outcome = ledger::error_code::same_approver;
          return out;
        }
        auto d = persistence::reject_adjustment(conn, id, decider, audit);
        out.adjustment = std::move(d.adjustment);
        if (!d.decided) out.outcome = ledger::error_code::already_decided;
        return out;
      },
      [done, id](query_result<rejected> r) {
        query_result<std::optional<adjustment_view>> out;
        out.outcome = r.outcome;
        out.detail = r.detail;
        if (r.outcome == ledger::error_code::ok) {
          out.outcome = r.value.outcome;
          if (r.value.adjustment) out.value = to_view(*r.value.adjustment);
          if (r.value.outcome == ledger::error_code::same_approver) {
            out.detail = "the operator who requested adjustment " + id + " cannot decide it";
          } else if (r.value.outcome == ledger::error_code::already_decided && r.value.adjustment) {
            out.detail = "adjustment " + id + " is already " + r.value.adjustment->status;
          } else if (!r.value.adjustment) {
            out.outcome = ledger::error_code::not_found;
            out.detail = not_found_text(id);
          }
        }
        done(std::move(out));
      });
}

void money_flows::approve_adjustment(adjustment_decision_command command, finish_fn done) {
  const auto principal = command.principal;
  const auto key = command.idempotency_key;
  const auto hash = command.request_hash;
  in_flight(principal, key, hash, std::move(done), [this, command = std::move(command)](finish_fn outer) mutable {
    const std::string serial = "adjustment:" + command.adjustment_id;
    one_at_a_time(serial, [this, command = std::move(command), outer](std::function<void()> next) mutable {
      // The next request for the same thing starts once this one is answered (after its COMMIT).
      finish_fn finish = [outer, next](money_result r) {
        outer(std::move(r));
        next();
      };
      const auto id = command.adjustment_id;
      core_.readers->read<std::optional<persistence::adjustment_record>>(
          [id](pqxx::connection& conn) { return persistence::find_adjustment(conn, id); },
          [this, command = std::move(command),
           finish](query_result<std::optional<persistence::adjustment_record>> r) mutable {
            if (r.outcome != ledger::error_code::ok) return finish(database_unavailable(r.outcome));
            const auto& id = command.adjustment_id;
            if (!r.value) return finish(refusal(ledger::error_code::not_found, not_found_text(id)));
            if (r.value->requested_by == command.principal) {
              return finish(refusal(ledger::error_code::same_approver,
                                    "the operator who requested adjustment " + id + " cannot approve it"));
            }
            if (r.value->status != "PENDING_APPROVAL") {
              return finish(decided_early(ledger::error_code::already_decided,
                                          "adjustment " + id + " is already " + r.value->status));
            }
            const std::string currency = r.value->currency;
            system_accounts(
                currency, {{"adjustment", true}},
                [this, command = std::move(command), a = std::move(*r.value), finish](
                    ledger::error_code code, std::vector<ledger::account_id> ids) mutable {
                  if (code != ledger::error_code::ok) return finish(database_unavailable(code));
                  const auto account = a.account_id;
                  accounts_.facts(account, [this, command = std::move(command), a = std::move(a), finish,
                                            adjustment_account = ids[0]](ledger::error_code code,
                                                                         std::optional<account_facts> facts) mutable {
                    if (code != ledger::error_code::ok) return finish(database_unavailable(code));
                    if (!facts) return finish(refusal(ledger::error_code::internal, "the adjusted account is gone"));
                    auto rows = std::make_shared<persistence::flow_rows>();
                    rows->approval = persistence::flow_rows::adjustment_approval{a.id, command.principal};
                    rows->audit = audit_entry_for({command.principal, command.request_id}, "adjustment.approve",
                                                  "adjustment:" + a.id,
                                                  json_members({{"requestedBy", std::to_string(a.requested_by)},
                                                                {"reason", a.reason},
                                                                {"accountId", std::to_string(a.account_id)},
                                                                {"amount", std::to_string(a.amount)}}));
                    // A credit to a hot account lands on a shard of the adjustment account's writer,
                    // which commits it.
                    thread_local std::mt19937_64 spread{std::random_device{}()};
                    const auto credit_row =
                        a.amount > 0 ? account_directory::credit_row(*facts, core_.writer_index(adjustment_account),
                                                                     core_.runtime->writers.size(), spread(),
                                                                     core_.runtime->ownership.get())
                                     : adjustment_account;
                    persistence::posting_request request;
                    request.posting =
                        ledger::flows::adjustment(adjustment_account, a.account_id, credit_row, a.amount, a.currency);
                    request.transaction_id = make_transaction_id();
                    request.principal = command.principal;
                    request.idempotency_key = std::move(command.idempotency_key);
                    request.request_hash = std::move(command.request_hash);
                    request.metadata_json = json_members({{"adjustmentId", a.id},
                                                          {"requestedBy", std::to_string(a.requested_by)},
                                                          {"approvedBy", std::to_string(command.principal)},
                                                          {"reason", a.reason}});
                    request.receipt_fields = json_members(
                        {{"id", a.id}, {"adjustmentStatus", "APPROVED"}, {"amount", std::to_string(a.amount)}}, true);
                    request.rows = std::move(rows);
                    if (a.amount > 0) return post(std::move(request), finish);
                    debit(0, std::move(request), std::move(facts), finish);
                  });
                });
          });
    });
  });
}

}  // namespace actors
