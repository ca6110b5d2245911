#pragma once

// Corrections and currencies (migration 012, docs/corrections.md): what a reversal reads of the
// transaction it undoes, the links between the two, two-person adjustments, exchange rates and
// quotes. Money moves only through persistence/batch.hpp; these are reads and the administrative
// writes (a request, a rejection, a rate, a quote), each in its own short transaction with its
// audit row where an operator acts.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ledger/errors.hpp"
#include "ledger/money.hpp"
#include "ledger/types.hpp"
#include "persistence/audit.hpp"
#include "persistence/pqxx_fwd.hpp"

namespace persistence {

// An entry of a transaction with what a reversal needs of its account.
struct reversal_entry_record {
  ledger::account_id row = 0;
  ledger::account_id account = 0;  // the shard's parent, or the row
  ledger::amount_minor amount = 0;
  std::string currency;
  bool user_account = false;
  std::vector<ledger::account_id> shards;  // of `account`
  std::optional<ledger::principal_id> owner;
};

struct reversal_target {
  std::string id;
  std::string type;         // the journal row's type text
  std::string reversed_by;  // empty: not reversed
  std::vector<reversal_entry_record> entries;
  bool has_deposit_row = false;  // a DEPOSIT with its deposit_payment row
};

// nullopt: no such transaction.
std::optional<reversal_target> find_reversal_target(pqxx::connection& conn, const std::string& transaction_id);

// Both directions of a reversal link (empty strings: none).
struct reversal_links {
  std::string reversed_by;  // the reversal of this transaction
  std::string reverses;     // the transaction this reversal undoes
  std::string reason;       // the reversal's reason (of either side)
};
reversal_links find_reversal_links(pqxx::connection& conn, const std::string& transaction_id);

struct adjustment_record {
  std::string id;
  ledger::account_id account_id = 0;
  std::string currency;
  ledger::amount_minor amount = 0;
  std::string reason;
  ledger::principal_id requested_by = 0;
  std::string request_hash;
  std::string status;
  std::optional<ledger::principal_id> decided_by;
  std::string decided_at;      // empty: undecided
  std::string transaction_id;  // empty: not posted
  std::string created_at;
};

// Makes a PENDING_APPROVAL adjustment of a user account (its currency is the account's) with its
// audit row; a repeat of (requested_by, idempotency key) returns the adjustment it made
// (`created` false), whatever it asked. Otherwise `outcome` is not_found when the account is no
// user account, account_closed when it is closed (its approval could never post), and nothing is
// made.
struct adjustment_created {
  ledger::error_code outcome = ledger::error_code::ok;
  adjustment_record adjustment;
  bool created = false;
};
adjustment_created create_adjustment(pqxx::connection& conn, const adjustment_record& a, const std::string& key,
                                     const audit_entry& audit);
std::optional<adjustment_record> find_adjustment(pqxx::connection& conn, const std::string& id);

// Rejects a pending adjustment with its audit row. The answer says what stands after: the
// adjustment (nullopt when there is none), and whether this call decided it.
struct adjustment_decision {
  std::optional<adjustment_record> adjustment;
  bool decided = false;
};
adjustment_decision reject_adjustment(pqxx::connection& conn, const std::string& id, ledger::principal_id decider,
                                      const audit_entry& audit);

struct fx_rate_record {
  std::string base;
  std::string quote;
  std::string rate;  // canonical decimal text (ledger::fx::to_string)
  std::string source;
  std::string updated_at;
};
// Sets (or replaces) a rate, with its audit row.
fx_rate_record put_fx_rate(pqxx::connection& conn, const fx_rate_record& r, ledger::principal_id by,
                           const audit_entry& audit);
std::optional<fx_rate_record> find_fx_rate(pqxx::connection& conn, const std::string& base, const std::string& quote);

struct fx_quote_record {
  std::string id;
  ledger::principal_id principal = 0;
  ledger::account_id from_account = 0;
  ledger::account_id to_account = 0;
  std::string from_currency;
  std::string to_currency;
  std::string rate;
  std::string source;
  ledger::amount_minor from_amount = 0;
  ledger::amount_minor to_amount = 0;
  std::string expires_at;
  bool expired = false;        // by the database's clock, when read
  std::string transaction_id;  // empty: not used yet
};
// Stores a quote that expires `ttl_ms` after now (the database's clock); fills expires_at.
fx_quote_record create_fx_quote(pqxx::connection& conn, fx_quote_record q, std::int64_t ttl_ms);
std::optional<fx_quote_record> find_fx_quote(pqxx::connection& conn, const std::string& id);

// The stored answer of a committed transaction (status, body).
std::optional<std::pair<int, std::string>> find_receipt(pqxx::connection& conn, const std::string& transaction_id);

}  // namespace persistence
