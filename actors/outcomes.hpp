#pragma once

// How a ledger writer's outcome becomes the answer to a money-moving command.

#include "actors/commands.hpp"
#include "persistence/batch.hpp"

namespace actors {

money_result to_money_result(const persistence::posting_outcome& outcome);

// A 503 answer: the client may retry after `retry_after_s` with the same Idempotency-Key.
money_result unavailable(ledger::error_code code, std::string detail,
                         std::int64_t retry_after_s = ledger::k_retry_after_default_s);

// A refusal that changes nothing (4xx).
money_result refusal(ledger::error_code code, std::string detail);

// The detail of an account_inactive refusal naming account `id`. It does not say whether the
// account is frozen or closed: a freeze is an operator's decision, which the account's
// counterparties are not told of.
std::string inactive_detail(ledger::account_id id);

}  // namespace actors
