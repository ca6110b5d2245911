#pragma once

// Every outcome the ledger can report, as one enum. Each layer maps it exactly once:
// http/ turns it into a status and a problem `code` (see http/problem.hpp).

#include <cstdint>
#include <string_view>

namespace ledger {

// Retry-After, in seconds, of an answer that the client may retry when nothing better is known
// (a dependency failed, the server is shutting down); answers caused by a queue estimate their
// own from its drain rate.
constexpr std::int64_t k_retry_after_default_s = 1;

enum class error_code : std::uint8_t {
  ok = 0,
  // 400: the request itself is wrong.
  invalid_request,
  // 401 / 404: who is asking, and whether the thing exists for them.
  unauthorized,
  not_found,
  forbidden,
  // 422: business rules.
  insufficient_funds,
  account_inactive,
  currency_mismatch,
  same_account,
  idempotency_key_reused,
  refund_exceeds_payment,  // refunds and a chargeback of a deposit would exceed it
  unknown_account,         // a provider event names an account that does not exist
  unknown_withdrawal,      // ... a withdrawal that does not exist
  unknown_payment,         // ... a payment (deposit) that does not exist
  // 401: a provider event whose signature does not verify.
  bad_signature,
  // 409: a conflicting state change (e.g. an account that is already hot).
  conflict,
  already_settled,       // a withdrawal settles once
  already_charged_back,  // a deposit is charged back once
  // Corrections and currencies (docs/corrections.md).
  already_reversed,  // 409: a transaction is reversed once
  already_refunded,  // 409: a payment or deposit with refunds (or a chargeback) is not reversed
  not_reversible,    // 422: a type that is never reversed (a reversal, a sweep, ...)
  already_decided,   // 409: an adjustment is approved or rejected once
  same_approver,     // 403: the operator who requested an adjustment cannot decide it
  quote_expired,     // 422: an exchange's quote is past its expiry
  amount_too_small,  // 422: an exchange whose converted amount is 0 minor units
  rate_not_found,    // 422: no rate is set for a currency pair
  already_captured,  // a hold is captured once
  hold_voided,       // a voided hold cannot be captured
  // 422: a hold that expired cannot be captured or voided; a hold larger than what its payer may
  // spend is not placed.
  hold_expired,
  hold_exceeds_available,
  // 409: an account is closed once and for good, and only when it holds nothing and owes nothing
  // (docs/money-flows.md, "Closing an account").
  account_closed,
  account_not_empty,
  // 503: a payment was built from an outdated fee schedule of its payee (the writer refused it
  // under the row lock); its flow builds it again at once, so a client sees this rarely.
  fees_changed,
  // 503: saturation or a dependency; the client may retry with the same Idempotency-Key.
  server_busy,
  account_busy,
  writer_busy,
  not_partition_owner,  // cluster mode: another node debits this account (docs/scaling.md)
  database_unavailable,
  outcome_unknown,
  deadline_exceeded,
  // 500: a bug or an unexpected database answer.
  internal,
};

// The stable, machine-readable name of an outcome (the problem+json `code`).
constexpr std::string_view to_string(error_code code) {
  switch (code) {
    case error_code::ok: return "ok";
    case error_code::invalid_request: return "invalid_request";
    case error_code::unauthorized: return "unauthorized";
    case error_code::not_found: return "not_found";
    case error_code::forbidden: return "forbidden";
    case error_code::insufficient_funds: return "insufficient_funds";
    case error_code::account_inactive: return "account_inactive";
    case error_code::currency_mismatch: return "currency_mismatch";
    case error_code::same_account: return "same_account";
    case error_code::idempotency_key_reused: return "idempotency_key_reused";
    case error_code::refund_exceeds_payment: return "refund_exceeds_payment";
    case error_code::unknown_account: return "unknown_account";
    case error_code::unknown_withdrawal: return "unknown_withdrawal";
    case error_code::unknown_payment: return "unknown_payment";
    case error_code::bad_signature: return "bad_signature";
    case error_code::conflict: return "conflict";
    case error_code::already_settled: return "already_settled";
    case error_code::already_charged_back: return "already_charged_back";
    case error_code::already_reversed: return "already_reversed";
    case error_code::already_refunded: return "already_refunded";
    case error_code::not_reversible: return "not_reversible";
    case error_code::already_decided: return "already_decided";
    case error_code::same_approver: return "same_approver";
    case error_code::quote_expired: return "quote_expired";
    case error_code::amount_too_small: return "amount_too_small";
    case error_code::rate_not_found: return "rate_not_found";
    case error_code::already_captured: return "already_captured";
    case error_code::hold_voided: return "hold_voided";
    case error_code::hold_expired: return "hold_expired";
    case error_code::hold_exceeds_available: return "hold_exceeds_available";
    case error_code::account_closed: return "account_closed";
    case error_code::account_not_empty: return "account_not_empty";
    case error_code::fees_changed: return "fees_changed";
    case error_code::server_busy: return "server_busy";
    case error_code::account_busy: return "account_busy";
    case error_code::writer_busy: return "writer_busy";
    case error_code::not_partition_owner: return "not_partition_owner";
    case error_code::database_unavailable: return "database_unavailable";
    case error_code::outcome_unknown: return "outcome_unknown";
    case error_code::deadline_exceeded: return "deadline_exceeded";
    case error_code::internal: return "internal";
  }
  return "internal";
}

}  // namespace ledger
