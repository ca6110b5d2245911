#pragma once

// The rules of holds (authorize now, capture later; docs/money-flows.md, "Holds"). A hold keeps
// part of its payer's money from every other debit without moving it: `account_state::held` is
// the sum of the payer's active holds, on its main row, and what the payer may spend or hold is
// its balance (main row plus shards) less that. Placing, voiding and expiring a hold change only
// `held`; its capture is a posting (ledger::flows::capture) that releases the hold as it pays.

#include <string>
#include <vector>

#include "ledger/errors.hpp"
#include "ledger/posting.hpp"

namespace ledger::holds {

// What an account may still spend or hold: main row plus shards, less what its holds keep.
// nullopt when a row is missing or the sum does not fit in int64.
std::optional<amount_minor> available(const account_states& accounts, account_id account,
                                      const std::vector<account_id>& shards);

// Places a hold of `amount` in `currency` on `payer` (with its hot shards): the payer must be an
// active account of that currency whose available money covers the amount
// (hold_exceeds_available otherwise). On ok, the payer's held grows by the amount.
error_code place(account_states& accounts, account_id payer, const std::vector<account_id>& shards, amount_minor amount,
                 const std::string& currency);

// Gives a voided or expired hold's `amount` back to what `payer` may spend. A payer that holds
// less than that is a broken invariant (internal), never a silent clamp.
error_code release(account_states& accounts, account_id payer, amount_minor amount);

// A hold as the API shows it (POST /v1/holds, its void, GET /v1/holds/{id}).
struct hold_facts {
  std::string id;      // a UUID
  std::string status;  // ACTIVE, CAPTURED, VOIDED or EXPIRED
  account_id payer = 0;
  account_id payee = 0;
  std::string currency;
  amount_minor amount = 0;
  amount_minor captured = 0;
  std::string expires_at;  // RFC 3339, UTC
  std::string created_at;
  std::string capture_transaction_id;  // empty unless CAPTURED
};

// {"id","status","fromAccountId","toAccountId","currency","amount","capturedAmount","expiresAt",
// "createdAt"[,"captureTransactionId"]}: the one text of a hold, stored as a placement's answer.
std::string hold_json(const hold_facts& h);

}  // namespace ledger::holds
