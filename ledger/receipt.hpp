#pragma once

// What a client is told when a money movement commits. The receipt is stored with the journal
// row in the same database transaction, so a replay of the same Idempotency-Key returns exactly
// the same bytes.

#include <string>
#include <string_view>

#include "ledger/money.hpp"
#include "ledger/types.hpp"

namespace ledger {

inline constexpr int receipt_status = 201;

// {"transactionId":"…","status":"COMPLETED"} plus "fromBalanceAfter" for transfers.
inline std::string receipt_json(transaction_type type, std::string_view transaction_id,
                                amount_minor debit_balance_after) {
  std::string body = "{\"transactionId\":\"";
  body += transaction_id;
  body += "\",\"status\":\"COMPLETED\"";
  if (type == transaction_type::transfer) {
    body += ",\"fromBalanceAfter\":\"" + std::to_string(debit_balance_after) + "\"";
  }
  body += "}";
  return body;
}

}  // namespace ledger
