// Holds: authorize now, capture later (docs/money-flows.md, "Holds").
//
// Placing a hold is a debit decision: it goes through the payer's actor, which counts it against
// what the payer may spend like a debit in flight, and is written by the payer's writer, which
// checks it again under the payer's row lock (balance − held ≥ amount) and raises the payer's
// held money. It makes no journal row; its Idempotency-Key and answer are kept with the hold.
// Its capture is a payment out of the held money (CAPTURE, with the payee's fee like a TRANSFER)
// that releases the whole hold in the same transaction; a void or the expiry (hold_expirer.cpp)
// only releases it. Each is decided under the hold's row lock, so a hold settles exactly once.

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

// A hold that is no longer active (or is due to expire) cannot be captured or voided: why not.
std::optional<money_result> settled(const persistence::hold_record& h) {
  const auto& id = h.facts.id;
  if (h.facts.status == "CAPTURED") {
    return decided_early(ledger::error_code::already_captured, "hold " + id + " was captured already");
  }
  if (h.facts.status == "VOIDED") return decided_early(ledger::error_code::hold_voided, "hold " + id + " was voided");
  if (h.facts.status == "EXPIRED" || h.due) {
    return decided_early(ledger::error_code::hold_expired, "hold " + id + " expired at " + h.facts.expires_at);
  }
  return std::nullopt;
}

money_result hold_not_found(const std::string& id) {
  return refusal(ledger::error_code::not_found, "hold " + id + " was not found");
}

// A posting that names the payer only: a hold's placement or void changes no other row.
persistence::posting_request hold_posting(ledger::account_id payer, ledger::amount_minor amount,
                                          const std::string& currency, persistence::flow_rows::hold_change change) {
  persistence::posting_request request;
  request.posting.type = ledger::transaction_type::capture;
  request.posting.debit_account = payer;
  request.posting.credit_account = payer;
  request.posting.amount = amount;
  request.posting.currency = currency;
  auto rows = std::make_shared<persistence::flow_rows>();
  rows->hold = std::move(change);
  request.rows = std::move(rows);
  return request;
}

// The answer a placement stored with its hold, given to a request under the same key: its receipt
// again, or a refusal when the key was used for a different request (`hash`).
money_result answer_stored_with_hold(const persistence::stored_hold_answer& stored, const std::string& hash) {
  if (stored.request_hash != hash) {
    return refusal(ledger::error_code::idempotency_key_reused,
                   "this Idempotency-Key was already used for a different request");
  }
  money_result replay;
  replay.replayed = true;
  replay.status = 201;
  replay.body = stored.body;
  return replay;
}

}  // namespace

void money_flows::place_hold(hold_command command, finish_fn done) {
  const auto principal = command.principal;
  const auto key = command.idempotency_key;
  const auto hash = command.request_hash;
  in_flight(principal, key, hash, std::move(done), [this, command = std::move(command)](finish_fn finish) mutable {
    // A placement has no journal row: its key's answer is stored with the hold.
    const auto principal = command.principal;
    const auto key = command.idempotency_key;
    const auto payee = command.to;
    core_.readers->read<persistence::placement_reading>(
        [principal, key, payee](pqxx::connection& conn) {
          return persistence::read_for_placement(conn, principal, key, payee);
        },
        [this, command = std::move(command), finish](query_result<persistence::placement_reading> r) mutable {
          if (r.outcome != ledger::error_code::ok) return finish(database_unavailable(r.outcome));
          if (r.value.stored) return finish(answer_stored_with_hold(*r.value.stored, command.request_hash));
          const auto from = command.from;
          accounts_.facts(from, [this, command = std::move(command), payee_status = r.value.payee_status, finish](
                                    ledger::error_code code, std::optional<account_facts> payer) mutable {
            if (code != ledger::error_code::ok) return finish(database_unavailable(code));
            if (!payer || payer->kind != ledger::account_kind::user || payer->owner_id != command.principal) {
              return finish(refusal(ledger::error_code::not_found,
                                    "account " + std::to_string(command.from) + " (fromAccountId) was not found"));
            }
            auto missing = refusal(ledger::error_code::not_found,
                                   "account " + std::to_string(command.to) + " (toAccountId) was not found");
            const auto to = command.to;
            user_account(to, std::move(missing), finish,
                         [this, command = std::move(command), payer = std::move(*payer), payee_status,
                          finish](account_facts payee) mutable {
                           hold_on(std::move(command), std::move(payer), std::move(payee), payee_status, finish);
                         });
          });
        });
  });
}

void money_flows::hold_on(hold_command command, account_facts payer, account_facts payee,
                          std::optional<ledger::account_status> payee_status, finish_fn finish) {
  if (payer.id == payee.id) return finish(refusal(ledger::error_code::same_account, "an account cannot pay itself"));
  if (payer.currency != payee.currency) {
    return finish(refusal(ledger::error_code::currency_mismatch, "both accounts must hold the same currency"));
  }
  const auto principal = command.principal;
  // A placement has no journal row, so the flow's own settling (which reads the journal) does not
  // apply: a refusal decided before the writer is checked against the holds instead. The key was
  // looked up before, but a placement whose COMMIT had an unknown outcome may have become visible
  // since, and the actor's refusal may come from the very hold it placed (its reload counts the
  // hold's amount as held).
  auto answer = [this, principal, key = command.idempotency_key, hash = command.request_hash, finish](money_result r) {
    if (!r.decided_before_writer) return finish(std::move(r));
    r.decided_before_writer = false;
    core_.readers->read<std::optional<persistence::stored_hold_answer>>(
        [principal, key](pqxx::connection& conn) { return persistence::find_hold_answer(conn, principal, key); },
        [refused = std::move(r), hash,
         finish](query_result<std::optional<persistence::stored_hold_answer>> found) mutable {
          if (found.outcome != ledger::error_code::ok) {
            return finish(unavailable(ledger::error_code::outcome_unknown,
                                      "the outcome of this request could not be confirmed; retry with the "
                                      "same Idempotency-Key",
                                      ledger::k_retry_after_default_s));
          }
          if (!found.value) return finish(std::move(refused));
          finish(answer_stored_with_hold(*found.value, hash));
        });
  };
  // The payer's writer reads no row of the payee: a hold for a payee that cannot be paid is refused
  // here, or only its capture would be. A payee frozen or closed after the status was read has its
  // capture refused, and the hold waits for its void or its expiry (docs/money-flows.md).
  if (payee_status && *payee_status != ledger::account_status::active) {
    // Frozen or closed, not which: a freeze is an operator's decision, not told to a payer.
    auto refused = refusal(ledger::error_code::account_inactive,
                           "account " + std::to_string(payee.id) +
                               " (toAccountId) is frozen or closed: it cannot be paid, so no hold is placed for it");
    refused.decided_before_writer = true;
    return answer(std::move(refused));
  }
  persistence::flow_rows::hold_change change;
  change.what = persistence::flow_rows::hold_change::kind::place;
  change.hold_id = make_transaction_id();
  change.payee = payee.id;
  change.expires_in_seconds = command.expires_in_seconds;
  auto request = hold_posting(payer.id, command.amount, payer.currency, change);
  request.transaction_id = change.hold_id;
  request.principal = command.principal;
  request.idempotency_key = std::move(command.idempotency_key);
  request.request_hash = std::move(command.request_hash);
  debit(principal, std::move(request), std::move(payer), std::move(answer));
}

void money_flows::capture_hold(hold_capture_command command, finish_fn done) {
  const auto principal = command.principal;
  const auto key = command.idempotency_key;
  const auto hash = command.request_hash;
  in_flight(principal, key, hash, std::move(done), [this, command = std::move(command)](finish_fn finish) mutable {
    const auto id = command.hold_id;
    core_.readers->read<std::optional<persistence::hold_record>>(
        [id](pqxx::connection& conn) { return persistence::find_hold(conn, id); },
        [this, command = std::move(command), finish](query_result<std::optional<persistence::hold_record>> r) mutable {
          if (r.outcome != ledger::error_code::ok) return finish(database_unavailable(r.outcome));
          // The payee's owner or an operator captures; to anyone else the hold does not exist.
          if (!r.value || (!command.by_operator && r.value->payee_owner != command.principal)) {
            return finish(hold_not_found(command.hold_id));
          }
          // A retry of a capture that committed meets its hold CAPTURED: the flight then answers
          // with the stored receipt.
          if (auto why = settled(*r.value)) return finish(std::move(*why));
          const auto held = r.value->facts.amount;
          const auto amount = command.amount.value_or(held);
          if (amount <= 0 || amount > held) {
            return finish(refusal(ledger::error_code::invalid_request,
                                  "amount must be from 1 to the held amount (" + std::to_string(held) + ")"));
          }
          capture_from(std::move(command), std::move(*r.value), finish);
        });
  });
}

void money_flows::capture_from(hold_capture_command command, persistence::hold_record hold, finish_fn finish) {
  const auto payer_id = hold.facts.payer;
  accounts_.facts(payer_id, [this, command = std::move(command), hold = std::move(hold), finish](
                                ledger::error_code code, std::optional<account_facts> payer) mutable {
    if (code != ledger::error_code::ok) return finish(database_unavailable(code));
    if (!payer) return finish(refusal(ledger::error_code::internal, "the hold's payer account is gone"));
    const auto payee_id = hold.facts.payee;
    user_account(
        payee_id, refusal(ledger::error_code::internal, "the hold's payee account is gone"), finish,
        [this, command = std::move(command), hold = std::move(hold), payer = std::move(*payer),
         finish](account_facts payee) mutable {
          // Always with a fee leg: the writer prices it from the payee's schedule under its lock (a
          // zero fee makes no entry), so a capture never waits on a cached schedule.
          const std::string currency = hold.facts.currency;
          // The fee lands on the fee_revenue shard of the writer that commits the payer's debits.
          const auto writer = writer_for(payer.id, core_.runtime->writers.size());
          fee_revenue_row(
              currency, writer,
              [this, command = std::move(command), hold = std::move(hold), payer = std::move(payer),
               payee = std::move(payee), finish](ledger::error_code code, ledger::account_id fee_row) mutable {
                if (code != ledger::error_code::ok) return finish(database_unavailable(code));
                thread_local std::mt19937_64 spread{std::random_device{}()};
                const auto writers = core_.runtime->writers.size();
                const auto credit_row = account_directory::credit_row(payee, writer_for(payer.id, writers), writers,
                                                                      spread(), core_.runtime->ownership.get());
                const auto& f = hold.facts;
                const auto amount = command.amount.value_or(f.amount);
                persistence::posting_request request;
                request.posting = ledger::flows::capture(
                    payer.id, credit_row, payee.id, amount, f.currency, f.amount,
                    ledger::flows::payee_fee{fee_row, payee.fees.value_or(ledger::fee_schedule{})});
                request.transaction_id = make_transaction_id();
                request.principal = command.principal;
                request.idempotency_key = std::move(command.idempotency_key);
                request.request_hash = std::move(command.request_hash);
                request.metadata_json = json_members({{"holdId", f.id}, {"payeeId", std::to_string(payee.id)}});
                request.receipt_fields = json_members({{"holdId", f.id},
                                                       {"amount", std::to_string(amount)},
                                                       {"releasedAmount", std::to_string(f.amount - amount)}},
                                                      true);
                auto rows = std::make_shared<persistence::flow_rows>();
                rows->hold =
                    persistence::flow_rows::hold_change{persistence::flow_rows::hold_change::kind::capture, f.id, 0, 0};
                // An operator's capture is an operator action; the payee's own is its journal row's.
                if (command.by_operator) {
                  rows->audit =
                      audit_entry_for({command.principal, command.request_id}, "hold.capture", "hold:" + f.id);
                }
                request.rows = std::move(rows);
                // The payer's actor decides it (the payee acts on the payer's held money: no owner).
                debit(0, std::move(request), std::move(payer), [id = f.id, finish](money_result r) {
                  if (r.outcome == ledger::error_code::not_found) r.detail = "hold " + id + " was not found";
                  finish(std::move(r));
                });
              });
        });
  });
}

void money_flows::void_hold(hold_void_command command, finish_fn done) {
  if (core_.stopped.load()) return done(shutting_down());
  const auto id = command.hold_id;
  core_.readers->read<std::optional<persistence::hold_record>>(
      [id](pqxx::connection& conn) { return persistence::find_hold(conn, id); },
      [this, command = std::move(command), done](query_result<std::optional<persistence::hold_record>> r) mutable {
        if (r.outcome != ledger::error_code::ok) return done(database_unavailable(r.outcome));
        // Either party or an operator voids; to anyone else the hold does not exist.
        if (!r.value || (!command.by_operator && r.value->payer_owner != command.principal &&
                         r.value->payee_owner != command.principal)) {
          return done(hold_not_found(command.hold_id));
        }
        const auto& f = r.value->facts;
        if (f.status == "VOIDED") {
          money_result voided;
          voided.status = 200;
          voided.body = ledger::holds::hold_json(f);
          return done(std::move(voided));
        }
        if (auto why = settled(*r.value)) {
          why->decided_before_writer = false;
          return done(std::move(*why));
        }
        // A void needs no funds decision: it goes straight to the payer's writer, which decides it
        // under the payer's row lock and the hold's (a capture or the expiry may have come first).
        persistence::flow_rows::hold_change change;
        change.what = persistence::flow_rows::hold_change::kind::void_;
        change.hold_id = f.id;
        auto request = hold_posting(f.payer, 0, f.currency, change);
        // An operator's void is an operator action (a party's own leaves the hold's row as its record).
        if (command.by_operator) {
          auto rows = std::make_shared<persistence::flow_rows>(*request.rows);
          rows->audit = audit_entry_for({command.principal, command.request_id}, "hold.void", "hold:" + f.id);
          request.rows = std::move(rows);
        }
        request.transaction_id = make_transaction_id();
        request.idempotency_key = "void:" + request.transaction_id;
        request.request_hash = "void";
        post(std::move(request), [id = f.id, done](money_result result) {
          if (result.outcome == ledger::error_code::not_found) result.detail = "hold " + id + " was not found";
          done(std::move(result));
        });
      });
}

}  // namespace actors
