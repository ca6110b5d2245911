#pragma once

// Corrections and currencies (docs/corrections.md): the commands the HTTP layer hands over and the
// views it answers with. Plain structs, free of CAF, like actors/commands.hpp.

#include <optional>
#include <string>

#include "ledger/types.hpp"

namespace actors {

// The reversal of a committed transaction, by an operator.
struct reversal_command {
  ledger::principal_id principal = 0;
  std::string transaction_id;
  std::string reason;
  std::string idempotency_key;
  std::string request_hash;
  std::string request_id;
};

// Operator A asks for an adjustment of a user account (`amount` signed, never 0).
struct adjustment_request_command {
  ledger::principal_id principal = 0;
  ledger::account_id account = 0;
  ledger::amount_minor amount = 0;
  std::string reason;
  std::string idempotency_key;
  std::string request_hash;
  std::string request_id;
};

// Operator B approves (posts) or rejects a pending adjustment.
struct adjustment_decision_command {
  ledger::principal_id principal = 0;
  std::string adjustment_id;
  std::string idempotency_key;  // approvals only
  std::string request_hash;
  std::string request_id;
};

struct adjustment_view {
  std::string id;
  ledger::account_id account_id = 0;
  std::string currency;
  ledger::amount_minor amount = 0;
  std::string reason;
  ledger::principal_id requested_by = 0;
  std::string status;  // PENDING_APPROVAL, APPROVED, REJECTED
  std::optional<ledger::principal_id> decided_by;
  std::string decided_at;      // empty: undecided
  std::string transaction_id;  // empty: not posted
  std::string created_at;
};

// An adjustment request's answer: the adjustment, and whether this request made it (false: a
// repeat of its Idempotency-Key).
struct adjustment_created_view {
  adjustment_view adjustment;
  bool created = false;
};

struct fx_rate_command {
  ledger::principal_id principal = 0;
  std::string base;
  std::string quote;
  std::string rate;  // canonical decimal text, already validated
  std::string source;
  std::string request_id;
};

struct fx_rate_view {
  std::string base;
  std::string quote;
  std::string rate;
  std::string source;
  std::string updated_at;
};

struct fx_quote_command {
  ledger::principal_id principal = 0;
  ledger::account_id from = 0;
  ledger::account_id to = 0;
  ledger::amount_minor amount = 0;
};

struct fx_quote_view {
  std::string id;
  ledger::account_id from_account = 0;
  ledger::account_id to_account = 0;
  std::string from_currency;
  std::string to_currency;
  std::string rate;
  std::string source;
  ledger::amount_minor from_amount = 0;
  ledger::amount_minor to_amount = 0;
  std::string expires_at;
};

// The exchange of a quote, by the owner of both its accounts.
struct exchange_command {
  ledger::principal_id principal = 0;
  std::string quote_id;
  std::string idempotency_key;
  std::string request_hash;
  std::string request_id;
};

}  // namespace actors
