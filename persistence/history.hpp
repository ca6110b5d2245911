#pragma once

// What has happened: the entries of an account (keyset-paged), a transaction with its entries,
// and the stored answer of a committed idempotency key. Read-only; each function runs its own
// short read transaction on the connection it is given.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ledger/money.hpp"
#include "ledger/types.hpp"

#include "persistence/pqxx_fwd.hpp"

namespace persistence {

struct entry_record {
  std::int64_t id = 0;
  std::string transaction_id;
  ledger::account_id account_id = 0;
  std::string currency;
  ledger::amount_minor amount = 0;
  ledger::amount_minor balance_after = 0;
  std::string created_at;
  std::optional<ledger::principal_id> account_owner;  // filled by find_transaction
  std::string transaction_type;                       // filled by list_entries (DEPOSIT, TRANSFER, ...)
};

struct entries_page {
  std::vector<entry_record> entries;
  std::optional<std::int64_t> next_after;  // pass as `after` for the next page
};

struct transaction_record {
  std::string id;
  std::optional<ledger::principal_id> principal_id;
  std::string type;    // a ledger::transaction_type's text (DEPOSIT, TRANSFER, SWEEP)
  std::string status;  // COMPLETED, the only status a committed transaction has
  std::string metadata_json;
  std::string created_at;
  std::vector<entry_record> entries;
  // Filled by lookup_transactions only (the single read's caller reads them one query each): what
  // was refunded of a payment (nullopt: none) and its refunds, oldest first; the payment a refund
  // gave back; the reversal of this transaction, or the one it reverses (empty: none).
  std::optional<ledger::amount_minor> refunded;
  std::vector<std::string> refund_ids;
  std::string refunded_payment;
  std::string reversed_by;
  std::string reverses;
};

struct stored_response {
  std::string transaction_id;
  std::string request_hash;
  int status = 0;
  std::string body;
};

// Entries of an account and its shards, in entry order, after the entry id `after`; at most
// `limit` (> 0) of them. No entry committed later has a smaller id than the page's last: for a hot
// account the read first waits for the writers that hold its rows.
entries_page list_entries(pqxx::connection& conn, ledger::account_id id, std::int64_t after, int limit);

// A type or status the server does not know throws unknown_value.
std::optional<transaction_record> find_transaction(pqxx::connection& conn, const std::string& transaction_id);

// The transactions among `transaction_ids` (UUIDs in their text form) that exist, with their
// entries and links, in two statements whatever the number of ids: in no particular order, each
// once. A type or status the server does not know throws unknown_value.
std::vector<transaction_record> lookup_transactions(pqxx::connection& conn,
                                                    const std::vector<std::string>& transaction_ids);

// The balance of an account (with a hot account's shards) as of a time: the sum, over the
// account's rows, of each row's balance_after at its last entry created at or before that time
// (0 for a row without one). `as_of_us` is in microseconds since the Unix epoch; nullopt, or a
// time after the database's now, means now. Each row's last entry is found by walking the
// ledger_entry_account index back from the row's newest entry, so the cost grows with the entries
// made after `as_of_us`, and statement_timeout bounds it.
struct balance_as_of_record {
  ledger::amount_minor balance = 0;
  std::string as_of;  // the time used, UTC with microseconds
};
balance_as_of_record balance_as_of(pqxx::connection& conn, ledger::account_id id, std::optional<std::int64_t> as_of_us);

// What committed under (principal, Idempotency-Key): a stored batch's answer, a journal
// transaction's, or a hold's (its placement answered 201); nullopt: nothing. A refusal decided
// before the writer is checked against it (money_flows::settle).
std::optional<stored_response> find_committed(pqxx::connection& conn, ledger::principal_id principal,
                                              const std::string& idempotency_key);

// Defines this file's prepared statements on a connection. connect() calls it for every
// connection it opens; libpqxx registers each statement with the server on its first use.
void prepare_history_statements(pqxx::connection& conn);

}  // namespace persistence
