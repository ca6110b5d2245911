#include "persistence/principals.hpp"

#include <pqxx/pqxx>

#include "base/assert.hpp"
#include "persistence/api_keys.hpp"
#include "persistence/rows.hpp"

namespace persistence {
namespace {

// Every statement selects (id, name, role) first: read_principal reads those columns.
constexpr const char* k_find_by_key = "principal_find_by_key";
constexpr const char* k_find_by_key_sql =
    "SELECT p.id, p.name, p.role FROM api_key k JOIN principal p ON p.id = k.principal_id"
    " WHERE k.key_hash = decode($1, 'hex') AND k.revoked_at IS NULL";

// The principal of a key whether or not it was revoked (migration 009): the bootstrap operator's
// key, once revoked, stays revoked rather than being made again.
constexpr const char* k_find_by_any_key = "principal_find_by_any_key";
constexpr const char* k_find_by_any_key_sql =
    "SELECT p.id, p.name, p.role FROM api_key k JOIN principal p ON p.id = k.principal_id"
    " WHERE k.key_hash = decode($1, 'hex')";

constexpr const char* k_find = "principal_find";
constexpr const char* k_find_sql = "SELECT id, name, role FROM principal WHERE id = $1";

constexpr const char* k_insert = "principal_insert";
constexpr const char* k_insert_sql = "INSERT INTO principal (name, role) VALUES ($1, $2) RETURNING id, name, role";

constexpr const char* k_insert_key = "principal_insert_key";
constexpr const char* k_insert_key_sql =
    "INSERT INTO api_key (key_hash, principal_id, hint, created_by) VALUES (decode($1, 'hex'), $2, NULLIF($3, ''), $4)"
    " RETURNING id";

}  // namespace

void prepare_principal_statements(pqxx::connection& conn) {
  conn.prepare(k_find_by_key, k_find_by_key_sql);
  conn.prepare(k_find_by_any_key, k_find_by_any_key_sql);
  conn.prepare(k_find, k_find_sql);
  conn.prepare(k_insert, k_insert_sql);
  conn.prepare(k_insert_key, k_insert_key_sql);
}

std::optional<principal_record> find_principal_by_key(pqxx::connection& conn, const std::string& key_hash_hex) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_prepared(k_find_by_key, key_hash_hex);
  if (rows.empty()) return std::nullopt;
  return read_principal(rows[0]);
}

std::optional<principal_record> find_principal(pqxx::connection& conn, ledger::principal_id id) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_prepared(k_find, id);
  if (rows.empty()) return std::nullopt;
  return read_principal(rows[0]);
}

principal_record create_principal(pqxx::connection& conn, const std::string& name, ledger::role role,
                                  const std::string& key_hash_hex, const std::string& key_hint,
                                  const audit_entry* audit, const std::string& caller_key_hash_hex) {
  pqxx::work txn(conn);
  require_caller_key(txn, caller_key_hash_hex);
  auto principal = read_principal(txn.exec_prepared1(k_insert, name, std::string(ledger::to_string(role))));
  const std::optional<ledger::principal_id> created_by =
      audit != nullptr ? std::optional<ledger::principal_id>(audit->principal) : std::nullopt;
  const auto key_id =
      txn.exec_prepared1(k_insert_key, key_hash_hex, principal.id, key_hint, created_by)[0].as<std::int64_t>();
  if (audit != nullptr) {
    append_audit(txn, *audit, "principal:" + std::to_string(principal.id),
                 "{\"keyId\":" + std::to_string(key_id) + "}");
  }
  txn.commit();
  return principal;
}

principal_record ensure_operator(pqxx::connection& conn, const std::string& name, const std::string& key_hash_hex) {
  auto find_any = [&]() -> std::optional<principal_record> {
    pqxx::read_transaction txn(conn);
    auto rows = txn.exec_prepared(k_find_by_any_key, key_hash_hex);
    if (rows.empty()) return std::nullopt;
    return read_principal(rows[0]);
  };
  if (auto existing = find_any()) return *existing;
  try {
    return create_principal(conn, name, ledger::role::operator_role, key_hash_hex);
  } catch (const pqxx::unique_violation&) {
    // Another server made it first.
    auto existing = find_any();
    WALLET_ASSERT(existing.has_value(), "a key that violated uniqueness exists");
    return *existing;
  }
}

}  // namespace persistence
