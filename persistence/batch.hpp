#pragma once

// The one posting path: commit a batch of postings in ONE database transaction.
//
// In order: look up idempotency keys already committed; lock every account row of the batch in
// ascending id order (so two writers never deadlock); plan the postings against the locked rows
// (ledger::plan_postings); insert journal rows with their receipts, the entries with
// balance_after, the balance caches aggregated per row, and the outbox rows; COMMIT.
//
// A posting the database refuses (a constraint) is isolated: the batch is retried posting by
// posting, so only the offender fails. Connection failures propagate as pqxx exceptions; the
// caller decides between "not committed" and "outcome unknown".

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ledger/errors.hpp"
#include "ledger/posting.hpp"

#include "persistence/pqxx_fwd.hpp"

namespace persistence {

struct posting_request {
  ledger::posting posting;
  std::string transaction_id;  // a UUID made by the server
  std::optional<ledger::principal_id> principal;
  std::string idempotency_key;
  std::string request_hash;
  std::string metadata_json = "{}";
};

// The committed state of one account row after the batch.
struct row_state {
  ledger::account_id id = 0;
  ledger::amount_minor balance = 0;
  std::int64_t version = 0;
  ledger::account_id parent_id = 0;
};

struct posting_outcome {
  ledger::error_code outcome = ledger::error_code::ok;
  std::string transaction_id;
  ledger::amount_minor amount = 0;
  ledger::amount_minor debit_balance_after = 0;
  // Set when the idempotency key was already committed: the stored answer is returned as is.
  bool replayed = false;
  int response_status = 0;
  std::string response_body;
  std::vector<ledger::entry_line> entries;
  // Committed state, at the end of the batch, of every row this posting wrote.
  std::vector<row_state> rows_after;
};


struct batch_result {
  std::vector<posting_outcome> outcomes;  // one per request, in request order
  std::vector<row_state> rows;            // every row written, after COMMIT
  int attempts = 0;                       // database transactions used
  // The connection broke while postings were isolated one by one: `outcomes` says what became
  // of each (committed, not committed, or unknown), and the caller must reconnect.
  bool connection_lost = false;
};

// The batch hit lock_timeout or statement_timeout: it was rolled back, nothing of it committed.
struct database_timeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Prepares the statements of the posting path on a connection; call once per connection.
void prepare_posting_statements(pqxx::connection& conn);

// Commits the batch. While nothing of it can have committed, a connection loss throws
// pqxx::broken_connection or pqxx::in_doubt_error and a timeout throws database_timeout; once
// postings are isolated one by one, every posting is answered in `outcomes` instead.
batch_result commit_batch(pqxx::connection& conn, const std::vector<posting_request>& requests);

}  // namespace persistence
