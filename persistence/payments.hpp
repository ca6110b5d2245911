#pragma once

// Payments (TRANSFERs, and CAPTUREs of holds, which post the same legs) as their refunds see them
// (migration 007): who paid whom, how much, the fee, and what has been refunded of it. Read-only;
// the refunds themselves move money only through persistence/batch.hpp. Each function runs its own short read transaction.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ledger/money.hpp"
#include "ledger/types.hpp"
#include "persistence/pqxx_fwd.hpp"

namespace persistence {

// The refunds of a payment a transaction view lists, at most.
inline constexpr std::int64_t k_payment_refunds_listed_max = 1'000;

struct payment_refunds {
  ledger::amount_minor refunded = 0;
  std::vector<std::string> refund_ids;  // oldest first, at most k_payment_refunds_listed_max
};

struct payment_record {
  std::string transaction_id;
  ledger::account_id payer = 0;
  ledger::account_id payee = 0;  // the hot parent when the credit landed on a shard
  std::optional<ledger::principal_id> payee_owner;
  std::string currency;
  ledger::amount_minor amount = 0;  // what left the payer
  ledger::amount_minor fee = 0;     // what fee_revenue got
  ledger::amount_minor refunded = 0;
};

// The payment with this transaction id, read from its entries (a hot account's shards count as
// the account); nullopt when there is no such transaction or it is no TRANSFER or CAPTURE.
std::optional<payment_record> find_payment(pqxx::connection& conn, const std::string& transaction_id);

// What was refunded of a payment and its refunds (nothing for one never refunded).
payment_refunds find_payment_refunds(pqxx::connection& conn, const std::string& transaction_id);

// The payment a REFUND gave back (empty when `refund_transaction_id` is no refund of a payment).
std::string find_refunded_payment(pqxx::connection& conn, const std::string& refund_transaction_id);

}  // namespace persistence
