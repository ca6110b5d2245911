#pragma once

// The ledger's vocabulary: accounts, roles, transaction types, and their text forms.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ledger/money.hpp"

namespace ledger {

using account_id = std::int64_t;
using principal_id = std::int64_t;

// The transfers of a batch after its first are keyed "batch/<index>/<the batch's key>": a
// client's own Idempotency-Key may not begin so (400).
inline constexpr std::string_view k_batch_item_key_prefix = "batch/";

// A provider is a payment provider acting through its signed events (it has no API key).
enum class role : std::uint8_t { user, merchant, operator_role, provider };
enum class account_status : std::uint8_t { active, frozen, closed };
enum class account_kind : std::uint8_t { user, system, shard };
// docs/money-flows.md lists the entries each type makes.
enum class transaction_type : std::uint8_t {
  deposit,
  transfer,
  sweep,
  withdrawal,
  payout,
  payout_failed,
  deposit_refund,
  chargeback,
  refund,  // of a payment (a TRANSFER): the payee pays the payer back
  // Corrections and currencies (docs/corrections.md).
  reversal,    // the mirror of every entry of an earlier transaction
  adjustment,  // an operator's correction, approved by a second operator
  exchange,    // currency A → currency B at a quoted rate, through the fx accounts
  capture,     // of a hold: a payment whose money the hold kept (docs/money-flows.md, "Holds")
};

std::string_view to_string(role r);
std::string_view to_string(account_status s);
std::string_view to_string(account_kind k);
std::string_view to_string(transaction_type t);

std::optional<role> parse_role(std::string_view text);
std::optional<transaction_type> parse_transaction_type(std::string_view text);
std::optional<account_status> parse_account_status(std::string_view text);
std::optional<account_kind> parse_account_kind(std::string_view text);

// ISO 4217 style: exactly three upper-case ASCII letters.
bool is_valid_currency(std::string_view text);

// A payment provider's name: 1 to 40 of a-z, 0-9, '_' and '-', starting with a letter or digit.
bool is_valid_provider_name(std::string_view name);

// The committed state of one account row, as the ledger writer sees it under its row lock.
struct account_state {
  account_id id = 0;
  std::string currency;
  account_status status = account_status::active;
  bool allow_negative = false;
  amount_minor balance = 0;
  std::int64_t version = 0;
  account_id parent_id = 0;  // non-zero for a hot account's credit shard
  // What the account's active holds keep from its debits (migration 011; a main row only), and
  // how often it changed: debits may spend balance - held, holds may keep no more than that.
  amount_minor held = 0;
  std::int64_t held_version = 0;
};

}  // namespace ledger
