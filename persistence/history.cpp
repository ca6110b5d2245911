#include "persistence/history.hpp"

#include <pqxx/pqxx>

#include "persistence/rows.hpp"

namespace persistence {
namespace {

const std::string k_entry_columns =
    std::string("id, transaction_id::text, account_id, currency, amount, balance_after, ") + k_created_at_utc_sql;

entry_record read_entry(const pqxx::row& row) {
  entry_record e;
  e.id = row[0].as<std::int64_t>();
  e.transaction_id = row[1].as<std::string>();
  e.account_id = row[2].as<std::int64_t>();
  e.currency = row[3].as<std::string>();
  e.amount = row[4].as<std::int64_t>();
  e.balance_after = row[5].as<std::int64_t>();
  e.created_at = row[6].as<std::string>();
  return e;
}

}  // namespace

entries_page list_entries(pqxx::connection& conn, ledger::account_id id, std::int64_t after, int limit) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params("SELECT " + k_entry_columns +
                                  " FROM ledger_entry"
                                  " WHERE account_id IN (SELECT $1::bigint UNION ALL SELECT id FROM account WHERE parent_id = $1)"
                                  "   AND id > $2 ORDER BY id LIMIT $3",
                              id, after, limit + 1);
  entries_page page;
  for (const auto& row : rows) {
    if (static_cast<int>(page.entries.size()) == limit) {
      page.next_after = page.entries.back().id;
      break;
    }
    page.entries.push_back(read_entry(row));
  }
  return page;
}

std::optional<transaction_record> find_transaction(pqxx::connection& conn, const std::string& transaction_id) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params(std::string("SELECT id::text, principal_id, type, status, COALESCE(metadata::text, '{}'), ") +
                                  k_created_at_utc_sql + " FROM journal_transaction WHERE id = $1::uuid",
                              transaction_id);
  if (rows.empty()) return std::nullopt;
  transaction_record t;
  t.id = rows[0][0].as<std::string>();
  if (!rows[0][1].is_null()) t.principal_id = rows[0][1].as<std::int64_t>();
  t.type = rows[0][2].as<std::string>();
  t.status = rows[0][3].as<std::string>();
  t.metadata_json = rows[0][4].as<std::string>();
  t.created_at = rows[0][5].as<std::string>();
  auto entries = txn.exec_params("SELECT " + k_entry_columns +
                                     ", (SELECT a.owner_id FROM account a WHERE a.id = ledger_entry.account_id)"
                                     " FROM ledger_entry WHERE transaction_id = $1::uuid ORDER BY id",
                                 transaction_id);
  for (const auto& row : entries) {
    auto e = read_entry(row);
    if (!row[7].is_null()) e.account_owner = row[7].as<std::int64_t>();
    t.entries.push_back(std::move(e));
  }
  return t;
}

std::optional<stored_response> find_committed(pqxx::connection& conn, ledger::principal_id principal,
                                              const std::string& idempotency_key) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params(
      "SELECT id::text, request_hash, response_status, response_body FROM journal_transaction"
      " WHERE principal_id = $1 AND idempotency_key = $2",
      principal, idempotency_key);
  if (rows.empty()) return std::nullopt;
  return stored_response{rows[0][0].as<std::string>(), rows[0][1].as<std::string>(), rows[0][2].as<int>(),
                         rows[0][3].as<std::string>()};
}

}  // namespace persistence
