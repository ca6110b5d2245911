#include "persistence/api_keys.hpp"

#include <pqxx/pqxx>

#include "base/assert.hpp"
#include "persistence/database.hpp"
#include "persistence/rows.hpp"

namespace persistence {
namespace {

// A transaction-scoped advisory lock per principal (the two-key form, whose first key names this
// use): the count of a principal's active keys and the change that depends on it happen under
// it, so two requests at once can neither both add a key past the bound nor both revoke one of
// the last two keys. Ids beyond 2^31 share a lock with others, which only serializes more.
constexpr int k_principal_keys_lock_class = 0x6b657973;  // "keys"
constexpr const char* k_lock = "api_key_lock_principal";
constexpr const char* k_lock_sql = "SELECT pg_advisory_xact_lock($1, ($2::bigint % 2147483647)::int)";

constexpr const char* k_principal = "api_key_principal";
constexpr const char* k_principal_sql = "SELECT id, name, role FROM principal WHERE id = $1";

constexpr const char* k_count_active = "api_key_count_active";
constexpr const char* k_count_active_sql =
    "SELECT count(*) FROM api_key WHERE principal_id = $1 AND revoked_at IS NULL";

// The columns read_key reads, in its order.
constexpr const char* k_key_columns_sql =
    "id, principal_id, hint,"
    " to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), created_by,"
    " to_char(revoked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), revoked_by";

constexpr const char* k_insert = "api_key_insert";
const std::string k_insert_sql = std::string(
                                     "INSERT INTO api_key (key_hash, principal_id, hint, created_by)"
                                     " VALUES (decode($1, 'hex'), $2, NULLIF($3, ''), $4) RETURNING ") +
                                 k_key_columns_sql;

constexpr const char* k_find_for_update = "api_key_find_for_update";
const std::string k_find_for_update_sql = std::string("SELECT ") + k_key_columns_sql +
                                          ", encode(key_hash, 'hex') FROM api_key"
                                          " WHERE id = $1 AND principal_id = $2 FOR UPDATE";

constexpr const char* k_caller_active = "api_key_caller_active";
// FOR SHARE: a revocation of the key (an UPDATE of its row) waits for the transaction that checked
// it, or is waited for and then seen; it never commits between the check and that commit.
constexpr const char* k_caller_active_sql =
    "SELECT 1 FROM api_key WHERE key_hash = decode($1, 'hex') AND revoked_at IS NULL FOR SHARE";

constexpr const char* k_revoke_all = "api_key_revoke_all";
constexpr const char* k_revoke_all_sql =
    "UPDATE api_key SET revoked_at = now(), revoked_by = $2 WHERE principal_id = $1 AND revoked_at IS NULL"
    " RETURNING encode(key_hash, 'hex')";

constexpr const char* k_revoke = "api_key_revoke";
const std::string k_revoke_sql =
    std::string("UPDATE api_key SET revoked_at = now(), revoked_by = $2 WHERE id = $1 RETURNING ") + k_key_columns_sql;

constexpr const char* k_list = "api_key_list";
const std::string k_list_sql = std::string("SELECT ") + k_key_columns_sql +
                               " FROM api_key WHERE principal_id = $1 AND id > $2 ORDER BY id LIMIT $3";

constexpr const char* k_principal_exists = "api_key_principal_exists";
constexpr const char* k_principal_exists_sql = "SELECT 1 FROM principal WHERE id = $1";

constexpr const char* k_recently_revoked = "api_key_recently_revoked";
constexpr const char* k_recently_revoked_sql =
    "SELECT encode(key_hash, 'hex') FROM api_key"
    " WHERE revoked_at > now() - $1 * interval '1 millisecond' LIMIT $2";

// One row more than a page holds is read: when it is there, the page has a successor.
constexpr int k_next_page_probe_rows = 1;

api_key_record read_key(const pqxx::row& row) {
  api_key_record k;
  k.id = row[0].as<std::int64_t>();
  k.principal_id = row[1].as<std::int64_t>();
  if (!row[2].is_null()) k.hint = row[2].as<std::string>();
  k.created_at = row[3].as<std::string>();
  if (!row[4].is_null()) k.created_by = row[4].as<std::int64_t>();
  if (!row[5].is_null()) k.revoked_at = row[5].as<std::string>();
  if (!row[6].is_null()) k.revoked_by = row[6].as<std::int64_t>();
  return k;
}

// {"principalId": N}: the detail every key's audit row carries besides the caller's.
std::string principal_detail(ledger::principal_id principal) {
  return "{\"principalId\":" + std::to_string(principal) + "}";
}

void lock_principal_keys(pqxx::work& txn, ledger::principal_id principal) {
  txn.exec_prepared(k_lock, k_principal_keys_lock_class, principal);
}

}  // namespace

void prepare_api_key_statements(pqxx::connection& conn) {
  conn.prepare(k_lock, k_lock_sql);
  conn.prepare(k_principal, k_principal_sql);
  conn.prepare(k_count_active, k_count_active_sql);
  conn.prepare(k_insert, k_insert_sql);
  conn.prepare(k_find_for_update, k_find_for_update_sql);
  conn.prepare(k_revoke, k_revoke_sql);
  conn.prepare(k_caller_active, k_caller_active_sql);
  conn.prepare(k_revoke_all, k_revoke_all_sql);
  conn.prepare(k_list, k_list_sql);
  conn.prepare(k_principal_exists, k_principal_exists_sql);
  conn.prepare(k_recently_revoked, k_recently_revoked_sql);
}

bool caller_key_active(pqxx::transaction_base& txn, const std::string& caller_key_hash_hex) {
  return caller_key_hash_hex.empty() || !txn.exec_prepared(k_caller_active, caller_key_hash_hex).empty();
}

void require_caller_key(pqxx::transaction_base& txn, const std::string& caller_key_hash_hex) {
  if (!caller_key_active(txn, caller_key_hash_hex)) throw caller_key_revoked();
}

// Takes the principal's key lock; then whether the key a request came with is still active.
bool locked_for_change(pqxx::work& txn, ledger::principal_id principal, const std::string& caller_key_hash_hex) {
  lock_principal_keys(txn, principal);
  return caller_key_active(txn, caller_key_hash_hex);
}

key_change_result create_key(pqxx::connection& conn, ledger::principal_id principal, const std::string& key_hash_hex,
                             const std::string& hint, std::int64_t active_max, const audit_entry& audit,
                             const std::string& caller_key_hash_hex) {
  WALLET_ASSERT(active_max > 0, "a principal may have one active key at least");
  key_change_result out;
  pqxx::work txn(conn);
  if (!locked_for_change(txn, principal, caller_key_hash_hex)) {
    out.outcome = key_change::caller_revoked;
    return out;
  }
  auto found = txn.exec_prepared(k_principal, principal);
  if (found.empty()) {
    out.outcome = key_change::no_principal;
    return out;
  }
  out.principal = read_principal(found[0]);
  if (out.principal->role == ledger::role::provider) {
    out.outcome = key_change::provider_principal;
    return out;
  }
  // A key of another operator would let its maker act in that operator's name: an adjustment it
  // requested would then be approved by "another" operator (docs/corrections.md).
  if (out.principal->role == ledger::role::operator_role && audit.principal != principal) {
    out.outcome = key_change::another_operator;
    return out;
  }
  if (txn.exec_prepared1(k_count_active, principal)[0].as<std::int64_t>() >= active_max) {
    out.outcome = key_change::too_many_keys;
    return out;
  }
  out.key = read_key(txn.exec_prepared1(k_insert, key_hash_hex, principal, hint, audit.principal));
  append_audit(txn, audit, "key:" + std::to_string(out.key.id), principal_detail(principal));
  txn.commit();
  out.changed = true;
  return out;
}

key_change_result revoke_key(pqxx::connection& conn, ledger::principal_id principal, std::int64_t key_id,
                             bool keep_last_active, const audit_entry& audit, const std::string& caller_key_hash_hex) {
  key_change_result out;
  pqxx::work txn(conn);
  if (!locked_for_change(txn, principal, caller_key_hash_hex)) {
    out.outcome = key_change::caller_revoked;
    return out;
  }
  auto found = txn.exec_prepared(k_find_for_update, key_id, principal);
  if (found.empty()) {
    out.outcome = key_change::no_key;
    return out;
  }
  out.key = read_key(found[0]);
  if (!out.key.revoked_at.empty()) return out;
  if (keep_last_active && txn.exec_prepared1(k_count_active, principal)[0].as<std::int64_t>() <= 1) {
    out.outcome = key_change::last_active_key;
    return out;
  }
  out.key = read_key(txn.exec_prepared1(k_revoke, key_id, audit.principal));
  append_audit(txn, audit, "key:" + std::to_string(key_id), principal_detail(principal));
  txn.commit();
  out.changed = true;
  out.key_hash_hex = found[0][7].as<std::string>();
  return out;
}

keys_revoked revoke_all_keys(pqxx::connection& conn, ledger::principal_id principal, const audit_entry& audit,
                             const std::string& caller_key_hash_hex) {
  keys_revoked out;
  pqxx::work txn(conn);
  if (!locked_for_change(txn, principal, caller_key_hash_hex)) {
    out.outcome = key_change::caller_revoked;
    return out;
  }
  if (txn.exec_prepared(k_principal_exists, principal).empty()) {
    out.outcome = key_change::no_principal;
    return out;
  }
  for (const auto& row : txn.exec_prepared(k_revoke_all, principal, audit.principal))
    out.key_hashes_hex.push_back(row[0].as<std::string>());
  append_audit(txn, audit, "principal:" + std::to_string(principal),
               "{\"revokedKeys\":" + std::to_string(out.key_hashes_hex.size()) + "}");
  txn.commit();
  return out;
}

std::optional<api_key_page> list_keys(pqxx::connection& conn, ledger::principal_id principal, std::int64_t after,
                                      int limit) {
  WALLET_ASSERT(limit > 0, "a page holds one key at least");
  pqxx::read_transaction txn(conn);
  if (txn.exec_prepared(k_principal_exists, principal).empty()) return std::nullopt;
  api_key_page page;
  for (const auto& row : txn.exec_prepared(k_list, principal, after, limit + k_next_page_probe_rows)) {
    if (static_cast<int>(page.keys.size()) == limit) {
      page.next_after = page.keys.back().id;
      break;
    }
    page.keys.push_back(read_key(row));
  }
  return page;
}

std::vector<std::string> recently_revoked_keys(pqxx::connection& conn, std::int64_t window_ms, int limit) {
  WALLET_ASSERT(window_ms > 0 && limit > 0, "a window and a bound");
  pqxx::read_transaction txn(conn);
  std::vector<std::string> out;
  for (const auto& row : txn.exec_prepared(k_recently_revoked, window_ms, limit))
    out.push_back(row[0].as<std::string>());
  return out;
}

}  // namespace persistence
