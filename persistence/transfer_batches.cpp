#include "persistence/transfer_batches.hpp"

#include <pqxx/pqxx>

#include <map>
#include <utility>

#include "persistence/database.hpp"

namespace persistence {
namespace {

constexpr const char* k_find_batch = "transfer_batch_find";
constexpr const char* k_find_batch_sql =
    "SELECT request_hash, response_status, response_body FROM transfer_batch"
    " WHERE principal_id = $1 AND idempotency_key = $2";

constexpr const char* k_find_items = "transfer_batch_find_items";
constexpr const char* k_find_items_sql =
    "SELECT k.ord, j.id::text, j.request_hash, j.response_status, j.response_body"
    "  FROM unnest($2::text[]) WITH ORDINALITY AS k(idempotency_key, ord)"
    "  JOIN journal_transaction j ON j.principal_id = $1 AND j.idempotency_key = k.idempotency_key";

constexpr const char* k_find_hold_key = "transfer_batch_find_hold_key";
constexpr const char* k_find_hold_key_sql = "SELECT 1 FROM hold WHERE principal_id = $1 AND idempotency_key = $2";

constexpr const char* k_store_batch = "transfer_batch_store";
constexpr const char* k_store_batch_sql =
    "INSERT INTO transfer_batch (principal_id, idempotency_key, request_hash, items, response_status, response_body)"
    " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (principal_id, idempotency_key) DO NOTHING";

// The leases of the refusals a stored answer holds, as the writer's fence reads them.
constexpr const char* k_lock_leases = "transfer_batch_lock_leases";
constexpr const char* k_lock_leases_sql =
    "SELECT partition, COALESCE(node_id, ''), epoch FROM partition_lease"
    "  WHERE partition = ANY($1::int[]) ORDER BY partition FOR SHARE";

// Defined on first use (defining a statement libpqxx knows already, with the same text, does
// nothing), as in settlements.cpp: most connections never serve a batch.
void prepare(pqxx::connection& conn) {
  conn.prepare(k_find_batch, k_find_batch_sql);
  conn.prepare(k_find_items, k_find_items_sql);
  conn.prepare(k_find_hold_key, k_find_hold_key_sql);
  conn.prepare(k_store_batch, k_store_batch_sql);
  conn.prepare(k_lock_leases, k_lock_leases_sql);
}

std::optional<stored_batch> read_batch(pqxx::transaction_base& txn, ledger::principal_id principal,
                                       const std::string& key) {
  auto rows = txn.exec_prepared(k_find_batch, principal, key);
  if (rows.empty()) return std::nullopt;
  return stored_batch{rows[0][0].as<std::string>(), rows[0][1].as<int>(), rows[0][2].as<std::string>()};
}

}  // namespace

batch_lookup find_transfer_batch(pqxx::connection& conn, ledger::principal_id principal, const std::string& key,
                                 const std::vector<std::string>& item_keys) {
  prepare(conn);
  pqxx::read_transaction txn(conn);
  batch_lookup out;
  out.batch = read_batch(txn, principal, key);
  out.items.resize(item_keys.size());
  if (out.batch || item_keys.empty()) return out;
  out.key_held_by_a_hold = !txn.exec_prepared(k_find_hold_key, principal, key).empty();
  for (const auto& row : txn.exec_prepared(k_find_items, principal, pg_array(item_keys))) {
    const auto i = row[0].as<std::size_t>() - 1;
    out.items.at(i) =
        stored_response{row[1].as<std::string>(), row[2].as<std::string>(), row[3].as<int>(), row[4].as<std::string>()};
  }
  return out;
}

std::optional<stored_batch> store_transfer_batch(pqxx::connection& conn, ledger::principal_id principal,
                                                 const std::string& key, const stored_batch& answer, int items,
                                                 const std::vector<lease_fence>& fences) {
  prepare(conn);
  pqxx::work txn(conn);
  if (!fences.empty()) {
    std::vector<std::int64_t> partitions;
    for (const auto& f : fences) partitions.push_back(f.partition);
    std::map<int, std::pair<std::string, std::int64_t>> holders;
    for (const auto& row : txn.exec_prepared(k_lock_leases, pg_array(partitions))) {
      holders[row[0].as<int>()] = {row[1].as<std::string>(), row[2].as<std::int64_t>()};
    }
    for (const auto& f : fences) {
      const auto it = holders.find(f.partition);
      if (it == holders.end() || it->second.first != f.node_id || it->second.second != f.epoch) return std::nullopt;
    }
  }
  txn.exec_prepared0(k_store_batch, principal, key, answer.request_hash, items, answer.status, answer.body);
  auto stored = read_batch(txn, principal, key);
  txn.commit();
  return stored ? *stored : answer;
}

}  // namespace persistence
