#include "actors/outcomes.hpp"

#include "actors/messages.hpp"

namespace actors {

money_result unavailable(ledger::error_code code, std::string detail, std::int64_t retry_after_s) {
  money_result r;
  r.outcome = code;
  r.detail = std::move(detail);
  r.retry_after_s = retry_after_s;
  return r;
}

money_result refusal(ledger::error_code code, std::string detail) {
  money_result r;
  r.outcome = code;
  r.detail = std::move(detail);
  return r;
}

std::string inactive_detail(ledger::account_id id) {
  return "account " + std::to_string(id) + " is frozen or closed: it cannot pay or be paid";
}

money_result to_money_result(const persistence::posting_outcome& o) {
  using ledger::error_code;
  if (o.outcome == error_code::ok) {
    money_result r;
    r.replayed = o.replayed;
    r.status = o.response_status;
    r.body = o.response_body;
    return r;
  }
  switch (o.outcome) {
    case error_code::insufficient_funds:
      return refusal(o.outcome, "the debited account holds too little for this amount");
    case error_code::currency_mismatch: return refusal(o.outcome, "both accounts must hold the same currency");
    case error_code::account_inactive:
      if (o.inactive_account == 0) return refusal(o.outcome, "one of the accounts is frozen or closed");
      return refusal(o.outcome, inactive_detail(o.inactive_account));
    case error_code::same_account: return refusal(o.outcome, "an account cannot pay itself");
    case error_code::not_found: return refusal(o.outcome, "the credited account does not exist");
    case error_code::idempotency_key_reused:
      return refusal(o.outcome, "this Idempotency-Key was already used for a different request");
    case error_code::already_settled: return refusal(o.outcome, "the withdrawal was already settled");
    case error_code::already_charged_back: return refusal(o.outcome, "the deposit was already charged back");
    case error_code::refund_exceeds_payment:
      return refusal(o.outcome, "refunds and chargebacks of the deposit would exceed it");
    case error_code::unknown_payment:
      return refusal(o.outcome,
                     "the payment this refers to is not known to this ledger, or not as a payment of "
                     "this account");
    case error_code::unknown_withdrawal: return refusal(o.outcome, "the withdrawal is not known to this ledger");
    case error_code::conflict: return refusal(o.outcome, "this provider payment was already deposited");
    // Corrections and currencies (docs/corrections.md).
    case error_code::already_reversed: return refusal(o.outcome, "the transaction was reversed already");
    case error_code::already_refunded:
      return refusal(o.outcome, "the transaction was refunded or charged back in part; it is not reversed");
    case error_code::already_decided: return refusal(o.outcome, "the adjustment was decided already");
    case error_code::same_approver:
      return refusal(o.outcome, "the operator who requested the adjustment cannot approve it");
    case error_code::quote_expired: return refusal(o.outcome, "the quote expired; ask for a new one");
    // Holds (migration 011).
    case error_code::hold_exceeds_available:
      return refusal(o.outcome, "the account's available money is less than this hold");
    case error_code::already_captured: return refusal(o.outcome, "the hold was captured already");
    case error_code::hold_voided: return refusal(o.outcome, "the hold was voided");
    case error_code::hold_expired: return refusal(o.outcome, "the hold expired");
    case error_code::fees_changed:
      return unavailable(o.outcome,
                         "the payee's fees changed while this payment was prepared; retry with the same "
                         "Idempotency-Key");
    case error_code::outcome_unknown:
      return unavailable(o.outcome, "the outcome of this request is unknown; retry with the same Idempotency-Key");
    case error_code::database_unavailable:
      return unavailable(o.outcome, "the database is unavailable; retry with the same Idempotency-Key");
    // The writer's lease fence (cluster mode): the payer's partition changed hands after its actor
    // decided; nothing was posted, and the node that holds it now decides the retry.
    case error_code::not_partition_owner:
      return unavailable(o.outcome,
                         "the debited account is debited by another node now; retry with the same Idempotency-Key");
    // The writer's own checks of amounts, most of which the request's path made already: a balance
    // taken beyond 64 bits, a capture or release that no longer fits its hold.
    case error_code::invalid_request:
      return refusal(o.outcome,
                     "the ledger cannot apply these amounts (a balance would go beyond its limit, or the amount no "
                     "longer fits its hold); nothing was posted");
    default: return refusal(error_code::internal, "the ledger could not apply this request");
  }
}

money_result reply_sink::state::unanswered() {
  return unavailable(ledger::error_code::outcome_unknown,
                     "the server stopped before this request finished; retry with the same Idempotency-Key");
}

}  // namespace actors
