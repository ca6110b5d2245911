#pragma once

// What a client is told when a money movement commits. The receipt is stored with the journal
// row in the same database transaction, so a replay of the same Idempotency-Key (or provider
// event id) returns exactly the same bytes.

#include <string>
#include <string_view>

#include "ledger/money.hpp"
#include "ledger/types.hpp"

namespace ledger {

inline constexpr int receipt_status = 201;

// The status a receipt of each type reports: a withdrawal is PENDING until it settles, as PAID
// (its payout) or FAILED; everything else is COMPLETED when it commits.
inline std::string_view receipt_state(transaction_type type) {
  switch (type) {
    case transaction_type::withdrawal: return "PENDING";
    case transaction_type::payout: return "PAID";
    case transaction_type::payout_failed: return "FAILED";
    default: return "COMPLETED";
  }
}

// {"transactionId":"…","status":"…"} plus "fromBalanceAfter" for transfers, then `fields`: JSON
// members the money flow knew before the posting (e.g. "id":"…","fee":"…", without braces).
inline std::string receipt_json(transaction_type type, std::string_view transaction_id,
                                amount_minor debit_balance_after, std::string_view fields = {}) {
  std::string body = "{\"transactionId\":\"";
  body += transaction_id;
  body += "\",\"status\":\"";
  body += receipt_state(type);
  body += '"';
  if (type == transaction_type::transfer) {
    body += ",\"fromBalanceAfter\":\"" + std::to_string(debit_balance_after) + "\"";
  }
  if (!fields.empty()) {
    body += ',';
    body += fields;
  }
  body += "}";
  return body;
}

// The members a payment's (TRANSFER's) receipt adds: the fee its payee paid and what the payee got.
inline std::string payment_receipt_fields(amount_minor fee, amount_minor net_amount) {
  return "\"fee\":\"" + std::to_string(fee) + "\",\"netAmount\":\"" + std::to_string(net_amount) + "\"";
}

}  // namespace ledger
