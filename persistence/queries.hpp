#pragma once

// Everything the server reads, and the administrative writes that move no money (principals,
// keys, accounts, status changes). Money moves only through persistence/batch.hpp.
// Each function runs its own short transaction on the connection it is given.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ledger/errors.hpp"
#include "ledger/types.hpp"

#include "persistence/pqxx_fwd.hpp"

namespace persistence {

struct principal_record {
  ledger::principal_id id = 0;
  std::string name;
  ledger::role role = ledger::role::user;
};

struct shard_record {
  ledger::account_id id = 0;
  int shard_no = 0;
  ledger::amount_minor balance = 0;
  std::int64_t version = 0;
};

struct account_record {
  ledger::account_id id = 0;
  std::optional<ledger::principal_id> owner_id;
  std::string currency;
  ledger::account_kind kind = ledger::account_kind::user;
  ledger::account_status status = ledger::account_status::active;
  bool allow_negative = false;
  ledger::amount_minor balance = 0;  // the main row only
  std::int64_t version = 0;
  ledger::account_id parent_id = 0;
  std::vector<shard_record> shards;  // a hot account's credit shards, by shard number
  std::string created_at;

  bool hot() const { return !shards.empty(); }
  // Main row plus shards, with checked arithmetic (asserts on overflow: it cannot be stored).
  ledger::amount_minor total_balance() const;
};

struct entry_record {
  std::int64_t id = 0;
  std::string transaction_id;
  ledger::account_id account_id = 0;
  std::string currency;
  ledger::amount_minor amount = 0;
  ledger::amount_minor balance_after = 0;
  std::string created_at;
  std::optional<ledger::principal_id> account_owner;  // filled by find_transaction
};

struct entries_page {
  std::vector<entry_record> entries;
  std::optional<std::int64_t> next_after;  // pass as `after` for the next page
};

struct transaction_record {
  std::string id;
  std::optional<ledger::principal_id> principal_id;
  std::string type;
  std::string status;
  std::string metadata_json;
  std::string created_at;
  std::vector<entry_record> entries;
};

struct stored_response {
  std::string transaction_id;
  std::string request_hash;
  int status = 0;
  std::string body;
};

// The SHA-256 of an API key, as 64 lower-case hex digits.
std::optional<principal_record> find_principal_by_key(pqxx::connection& conn, const std::string& key_hash_hex);
std::optional<principal_record> find_principal(pqxx::connection& conn, ledger::principal_id id);
principal_record create_principal(pqxx::connection& conn, const std::string& name, ledger::role role,
                                  const std::string& key_hash_hex);
// Makes sure an operator with this key exists (the bootstrap key); returns it.
principal_record ensure_operator(pqxx::connection& conn, const std::string& name, const std::string& key_hash_hex);

// Creates an account (and, when shard_count > 0, its credit shards) in one transaction.
account_record create_account(pqxx::connection& conn, ledger::principal_id owner, const std::string& currency,
                              int shard_count);
std::optional<account_record> find_account(pqxx::connection& conn, ledger::account_id id);
// Adds credit shards to an existing account (numbers continue after the existing ones).
// Returns nullopt if the account does not exist or is itself a shard.
std::optional<account_record> make_hot(pqxx::connection& conn, ledger::account_id id, int shard_count);
// Sets the status of an account and of its shards.
std::optional<account_record> set_status(pqxx::connection& conn, ledger::account_id id, ledger::account_status status);

// The clearing account of a currency (system, may go negative), made on first use.
ledger::account_id ensure_clearing_account(pqxx::connection& conn, const std::string& currency);

// Entries of an account and its shards, in entry order, after the entry id `after`.
entries_page list_entries(pqxx::connection& conn, ledger::account_id id, std::int64_t after, int limit);

std::optional<transaction_record> find_transaction(pqxx::connection& conn, const std::string& transaction_id);

std::optional<stored_response> find_committed(pqxx::connection& conn, ledger::principal_id principal,
                                              const std::string& idempotency_key);

// What a server preloads when it starts, so that the first request of each client after a
// restart needs no database read: API keys with their principals, and the unchanging facts of
// accounts (shards by number). Newest first, at most `limit` of each.
struct key_record {
  std::string key_hash_hex;
  principal_record principal;
};
std::vector<key_record> recent_keys(pqxx::connection& conn, std::int64_t limit);

struct account_summary {
  ledger::account_id id = 0;
  std::optional<ledger::principal_id> owner_id;
  std::string currency;
  ledger::account_kind kind = ledger::account_kind::user;
  std::vector<ledger::account_id> shards;
};
std::vector<account_summary> recent_accounts(pqxx::connection& conn, std::int64_t limit);

// Hot accounts and their shards with a positive balance: what the sweeper has to move.
struct sweep_candidate {
  ledger::account_id account = 0;
  std::string currency;
  std::vector<ledger::account_id> shards;
};
std::vector<sweep_candidate> sweep_candidates(pqxx::connection& conn, int limit);

// True when the database answers a trivial query.
bool ping(pqxx::connection& conn);

}  // namespace persistence
