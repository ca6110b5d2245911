#include "persistence/principals.hpp"

#include <pqxx/pqxx>

#include "base/assert.hpp"
#include "persistence/rows.hpp"

namespace persistence {

std::optional<principal_record> find_principal_by_key(pqxx::connection& conn, const std::string& key_hash_hex) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params(
      "SELECT p.id, p.name, p.role FROM api_key k JOIN principal p ON p.id = k.principal_id"
      " WHERE k.key_hash = decode($1, 'hex')",
      key_hash_hex);
  if (rows.empty()) return std::nullopt;
  return read_principal(rows[0]);
}

std::optional<principal_record> find_principal(pqxx::connection& conn, ledger::principal_id id) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params("SELECT id, name, role FROM principal WHERE id = $1", id);
  if (rows.empty()) return std::nullopt;
  return read_principal(rows[0]);
}

principal_record create_principal(pqxx::connection& conn, const std::string& name, ledger::role role,
                                  const std::string& key_hash_hex) {
  pqxx::work txn(conn);
  auto row = txn.exec_params1("INSERT INTO principal (name, role) VALUES ($1, $2) RETURNING id, name, role", name,
                              std::string(ledger::to_string(role)));
  auto principal = read_principal(row);
  txn.exec_params("INSERT INTO api_key (key_hash, principal_id) VALUES (decode($1, 'hex'), $2)", key_hash_hex,
                  principal.id);
  txn.commit();
  return principal;
}

principal_record ensure_operator(pqxx::connection& conn, const std::string& name, const std::string& key_hash_hex) {
  if (auto existing = find_principal_by_key(conn, key_hash_hex)) return *existing;
  try {
    return create_principal(conn, name, ledger::role::operator_role, key_hash_hex);
  } catch (const pqxx::unique_violation&) {
    // Another server made it first.
    auto existing = find_principal_by_key(conn, key_hash_hex);
    WALLET_ASSERT(existing.has_value(), "a key that violated uniqueness exists");
    return *existing;
  }
}

}  // namespace persistence
