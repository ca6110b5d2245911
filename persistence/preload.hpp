#pragma once

// What a server preloads when it starts, so that the first request of each client after a
// restart needs no database read: API keys with their principals, and the unchanging facts of
// accounts (shards by number). Newest first, at most `limit` of each.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ledger/fees.hpp"
#include "ledger/types.hpp"

#include "persistence/pqxx_fwd.hpp"
#include "persistence/principals.hpp"

namespace persistence {

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
  std::optional<ledger::fee_schedule> fees;  // of the payments it receives (migration 007)
};
std::vector<account_summary> recent_accounts(pqxx::connection& conn, std::int64_t limit);

// Defines this file's prepared statements on a connection. connect() calls it for every
// connection it opens; libpqxx registers each statement with the server on its first use.
void prepare_preload_statements(pqxx::connection& conn);

}  // namespace persistence
