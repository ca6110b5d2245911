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

}  // namespace actors
