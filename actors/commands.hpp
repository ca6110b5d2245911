#pragma once

// The commands the HTTP layer hands to the actor system, and their results. Plain structs,
// free of CAF, so that http/ compiles without the actor headers.

#include <cstdint>
#include <string>

#include "ledger/errors.hpp"
#include "ledger/types.hpp"

namespace actors {

struct transfer_command {
  ledger::principal_id principal = 0;
  ledger::account_id from = 0;
  ledger::account_id to = 0;
  ledger::amount_minor amount = 0;
  std::string idempotency_key;
  std::string request_hash;
  std::string request_id;
};

struct deposit_command {
  ledger::principal_id principal = 0;
  ledger::account_id account = 0;
  ledger::amount_minor amount = 0;
  std::string idempotency_key;
  std::string request_hash;
  std::string metadata_json = "{}";
  std::string request_id;
};

// The answer to a money-moving command. On success (or a replay) `status` and `body` are the
// receipt exactly as stored with the journal row.
struct money_result {
  ledger::error_code outcome = ledger::error_code::ok;
  bool replayed = false;
  int status = 0;
  std::string body;
  std::string detail;              // a sentence for the problem body when outcome != ok
  std::int64_t retry_after_s = 0;  // for 503 answers
  // Refused by the account actor before any database work; a replay of an already committed
  // Idempotency-Key must still get its stored answer, so the caller checks for one.
  bool decided_before_writer = false;
};

}  // namespace actors
