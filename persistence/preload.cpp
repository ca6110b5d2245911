#include "persistence/preload.hpp"

#include <pqxx/pqxx>

#include "base/assert.hpp"
#include "persistence/database.hpp"
#include "persistence/rows.hpp"

namespace persistence {
namespace {

// (id, name, role) first, for read_principal; then the key's hash.
constexpr const char* k_recent_keys = "preload_recent_keys";
constexpr const char* k_recent_keys_sql =
    "SELECT p.id, p.name, p.role, encode(k.key_hash, 'hex') FROM api_key k JOIN principal p ON p.id = k.principal_id"
    " WHERE k.revoked_at IS NULL ORDER BY k.created_at DESC LIMIT $1";

// Main rows only; each with its shards' ids by shard number.
constexpr const char* k_recent_accounts = "preload_recent_accounts";
constexpr const char* k_recent_accounts_sql =
    "SELECT a.id, a.owner_id, a.currency, a.kind,"
    "       COALESCE((SELECT array_agg(s.id ORDER BY s.shard_no) FROM account s WHERE s.parent_id = a.id), '{}')::text,"
    "       a.fee_bps, a.fee_fixed"
    "  FROM account a WHERE a.kind <> 'shard' ORDER BY a.id DESC LIMIT $1";

}  // namespace

void prepare_preload_statements(pqxx::connection& conn) {
  conn.prepare(k_recent_keys, k_recent_keys_sql);
  conn.prepare(k_recent_accounts, k_recent_accounts_sql);
}

std::vector<key_record> recent_keys(pqxx::connection& conn, std::int64_t limit) {
  WALLET_ASSERT(limit >= 0, "a preload limit is a count");
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_prepared(k_recent_keys, limit);
  std::vector<key_record> out;
  out.reserve(rows.size());
  for (const auto& row : rows) out.push_back({row[3].as<std::string>(), read_principal(row)});
  return out;
}

std::vector<account_summary> recent_accounts(pqxx::connection& conn, std::int64_t limit) {
  WALLET_ASSERT(limit >= 0, "a preload limit is a count");
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_prepared(k_recent_accounts, limit);
  std::vector<account_summary> out;
  out.reserve(rows.size());
  for (const auto& row : rows) {
    account_summary a;
    a.id = row[0].as<std::int64_t>();
    if (!row[1].is_null()) a.owner_id = row[1].as<std::int64_t>();
    a.currency = row[2].as<std::string>();
    a.kind = parse_column(ledger::parse_account_kind, row[3].as<std::string>(), "account.kind");
    a.shards = parse_id_array(row[4].c_str());
    if (!row[5].is_null()) a.fees = ledger::fee_schedule{row[5].as<std::int32_t>(), row[6].as<std::int64_t>()};
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace persistence
