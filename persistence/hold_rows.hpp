#pragma once

// The hold rows of the posting path (persistence/batch.cpp): locked with the postings' accounts,
// checked before a capture is planned, and written in the batch's transaction. Internal to
// persistence/: it includes libpqxx.

#include <pqxx/pqxx>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ledger/holds.hpp"
#include "persistence/batch.hpp"

namespace persistence {

struct hold_row_state {
  ledger::holds::hold_facts facts;
  bool due = false;  // ACTIVE, but its expiry has passed at the time of the lock
};

struct hold_states {
  std::map<std::string, hold_row_state> holds;  // by id, locked
  // The stored answers of placements' keys: (principal, key) → (request hash, body).
  std::map<std::pair<std::int64_t, std::string>, std::pair<std::string, std::string>> keys;
};

void prepare_hold_statements(pqxx::connection& conn);

// Locks the holds that captures and voids of `indices` name (after their accounts: the order the
// expirer keeps too), and finds the placements' keys already used.
hold_states lock_hold_rows(pqxx::work& txn, const std::vector<posting_request>& requests,
                           const std::vector<std::size_t>& indices);

// Whether a capture may settle its hold: ok, or already_captured, hold_voided, hold_expired.
ledger::error_code check_capture(const posting_request& r, const hold_states& holds);

// A placement or a void: decided against the locked accounts and holds, applied to them, and its
// writes appended to `writes` (an operator's void's audit row to `audit_writes`, which go last).
// `out` gets the outcome and, when ok, the answer (201 the new hold, 200 the voided one). Returns
// whether it changed anything.
bool plan_hold_change(pqxx::work& txn, const posting_request& r, ledger::account_states& accounts, hold_states& holds,
                      posting_outcome& out, std::string& writes, std::string& audit_writes);

// A capture that was planned: its hold becomes CAPTURED with the amount and the transaction.
void apply_capture(pqxx::work& txn, const posting_request& r, ledger::amount_minor amount, hold_states& holds,
                   std::string& writes);

}  // namespace persistence
