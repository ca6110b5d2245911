#pragma once

// Holds (migration 011; docs/money-flows.md, "Holds"): a hold as its parties read it, the stored
// answer of a placement's Idempotency-Key, and the expiry of due holds. Placing, capturing and
// voiding a hold happen on the one posting path (persistence/batch.hpp, flow_rows::hold_change).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ledger/holds.hpp"
#include "persistence/batch.hpp"
#include "persistence/pqxx_fwd.hpp"

namespace persistence {

struct hold_record {
  ledger::holds::hold_facts facts;
  std::optional<ledger::principal_id> payer_owner;
  std::optional<ledger::principal_id> payee_owner;
  // ACTIVE, but its expiry has passed (the expirer has not released it yet).
  bool due = false;
};

std::optional<hold_record> find_hold(pqxx::connection& conn, const std::string& id);

// The answer stored under (principal, Idempotency-Key): a hold's placed under it, or the request
// hash and answer of the journal transaction or stored batch that used it (another route's hash,
// so a placement under it is 422 idempotency_key_reused); nullopt: none.
struct stored_hold_answer {
  std::string request_hash;
  std::string body;
};
std::optional<stored_hold_answer> find_hold_answer(pqxx::connection& conn, ledger::principal_id principal,
                                                   const std::string& key);

// What a placement reads before its payer's actor decides: the answer stored under its key, if
// any, and its payee's status (nullopt: no such user account), in one read-only transaction.
struct placement_reading {
  std::optional<stored_hold_answer> stored;
  std::optional<ledger::account_status> payee_status;
};
placement_reading read_for_placement(pqxx::connection& conn, ledger::principal_id principal, const std::string& key,
                                     ledger::account_id payee);

// Expires at most `limit` payers' due holds, in one transaction: locks the payers' account rows in
// id order (as the ledger writer does, so neither waits on the other in a cycle), marks their due
// ACTIVE holds EXPIRED and gives their amounts back. A capture or a void of the same hold is
// decided under the same locks, so exactly one of them happens. `rows` are the payers' main rows
// after COMMIT (for their live actors).
//
// One payer never holds back the others: a payer whose row another transaction has locked (a
// writer's batch) is skipped until a later call, and a payer whose holds cannot expire (the
// database refuses the change, e.g. its `held` no longer covers them) is named in `failed` while
// the others' holds expire; the caller passes such payers back as `excluded` for a while, so that
// they do not send every call through one savepoint per payer. `committing`, when given, receives
// the payers locked just before the COMMIT is sent: if the COMMIT's outcome is unknown, those
// payers' holds may have expired.
struct expiry_result {
  int expired = 0;
  std::vector<row_state> rows;
  std::vector<std::int64_t> failed;
  // expire_held_back_payers: the last payer it took up (0 for none); the next call starts after it.
  std::int64_t last_taken_up = 0;
};
expiry_result expire_due_holds(pqxx::connection& conn, int limit, const std::vector<std::int64_t>& excluded = {},
                               std::vector<std::int64_t>* committing = nullptr);

// The payers that expire_due_holds skipped: a payer whose row is locked whenever a call looks (a
// hot payer's writer keeps it locked) would never have its holds expire. At most `limit` payers
// with due holds, not `excluded`, each in a transaction of its own that waits for its row for at
// most `wait` (still locked then: skipped again) and holds no other payer's row meanwhile. The
// payers are taken in turn: first those whose ids follow `after` (the previous call's
// last_taken_up), then from the lowest id again, so payers locked for good keep no other waiting.
// `committing` receives every payer committed so far and the one whose COMMIT is in flight.
expiry_result expire_held_back_payers(pqxx::connection& conn, int limit, const std::vector<std::int64_t>& excluded,
                                      std::int64_t after, std::chrono::milliseconds wait,
                                      std::vector<std::int64_t>* committing = nullptr);

}  // namespace persistence
