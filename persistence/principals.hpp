#pragma once

// Principals (who may call) and their API keys: lookups by key or id, and the administrative
// writes that create them. Each function runs its own short transaction on the connection it is
// given.

#include <optional>
#include <string>

#include "ledger/types.hpp"
#include "persistence/audit.hpp"

#include "persistence/pqxx_fwd.hpp"

namespace persistence {

struct principal_record {
  ledger::principal_id id = 0;
  std::string name;
  ledger::role role = ledger::role::user;
};

// The SHA-256 of an API key, as 64 lower-case hex digits. A revoked key finds nobody.
std::optional<principal_record> find_principal_by_key(pqxx::connection& conn, const std::string& key_hash_hex);
std::optional<principal_record> find_principal(pqxx::connection& conn, ledger::principal_id id);
// With its first API key: `key_hint` is the key's last four characters (empty: not kept), and
// `audit`, when given, is recorded in the same transaction with the new principal as its target
// (its creator is then the key's creator too). Made with a request's key (`caller_key_hash_hex`),
// it throws caller_key_revoked (persistence/api_keys.hpp) when that key was revoked meanwhile.
principal_record create_principal(pqxx::connection& conn, const std::string& name, ledger::role role,
                                  const std::string& key_hash_hex, const std::string& key_hint = {},
                                  const audit_entry* audit = nullptr, const std::string& caller_key_hash_hex = {});
// Makes sure an operator with this key exists (the bootstrap key); returns it. A revoked
// bootstrap key stays revoked: its operator is returned, and the key authenticates nobody.
principal_record ensure_operator(pqxx::connection& conn, const std::string& name, const std::string& key_hash_hex);

// Defines this file's prepared statements on a connection. connect() calls it for every
// connection it opens; libpqxx registers each statement with the server on its first use.
void prepare_principal_statements(pqxx::connection& conn);

}  // namespace persistence
