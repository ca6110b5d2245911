#include "persistence/replays.hpp"

#include <pqxx/pqxx>

#include "base/assert.hpp"

namespace persistence {
namespace {

stored_answer read_answer(const pqxx::row& row, const replay_request& r) {
  stored_answer a;
  a.same_request = row[0].as<std::string>() == r.route && row[1].as<std::string>() == r.request_hash;
  a.status = row[2].as<int>();
  a.body = row[3].as<std::string>();
  return a;
}

constexpr const char* k_find_sql =
    "SELECT route, request_hash, response_status, response_body FROM request_replay"
    " WHERE principal_id = $1 AND idempotency_key = $2";

}  // namespace

std::optional<stored_answer> find_replay(pqxx::transaction_base& txn, const replay_request& r) {
  const auto rows = txn.exec_params(k_find_sql, r.principal, r.key);
  if (rows.empty()) return std::nullopt;
  return read_answer(rows[0], r);
}

std::optional<stored_answer> find_replay(pqxx::connection& conn, const replay_request& r) {
  pqxx::read_transaction txn(conn);
  return find_replay(txn, r);
}

std::optional<stored_answer> claim_replay(pqxx::transaction_base& txn, const replay_request& r) {
  WALLET_ASSERT(r.principal > 0 && !r.key.empty() && !r.route.empty(), "a key of a principal's, for a route");
  // The answer is recorded before the commit: no other transaction ever reads the placeholder.
  // The row in conflict may be deleted by the pruner before it is read (it was past its
  // retention): the key is then free, and taken on the second try, or held by a row just made,
  // which no prune deletes.
  for (int attempt = 0;; ++attempt) {
    const auto taken = txn.exec_params(
        "INSERT INTO request_replay (principal_id, idempotency_key, route, request_hash, response_status,"
        " response_body) VALUES ($1, $2, $3, $4, 0, '')"
        " ON CONFLICT (principal_id, idempotency_key) DO NOTHING RETURNING 1",
        r.principal, r.key, r.route, r.request_hash);
    if (!taken.empty()) return std::nullopt;
    const auto rows = txn.exec_params(k_find_sql, r.principal, r.key);
    if (!rows.empty()) return read_answer(rows[0], r);
    WALLET_ASSERT(attempt == 0, "a key in conflict twice is held by a row younger than the retention");
  }
}

void record_replay(pqxx::transaction_base& txn, const replay_request& r, int status, const std::string& body) {
  const auto updated = txn.exec_params(
      "UPDATE request_replay SET response_status = $3, response_body = $4"
      " WHERE principal_id = $1 AND idempotency_key = $2",
      r.principal, r.key, status, body);
  WALLET_ASSERT(updated.affected_rows() == 1, "the key was claimed in this transaction");
}

std::int64_t prune_replays(pqxx::connection& conn, std::int64_t retention_hours, int limit) {
  WALLET_ASSERT(retention_hours > 0 && limit > 0, "a retention and a batch");
  pqxx::work txn(conn);
  const auto deleted =
      txn.exec_params(
             "WITH doomed AS ("
             "  SELECT principal_id, idempotency_key FROM request_replay"
             "   WHERE created_at < now() - $1::bigint * interval '1 hour'"
             "   ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)"
             " DELETE FROM request_replay r USING doomed"
             " WHERE r.principal_id = doomed.principal_id AND r.idempotency_key = doomed.idempotency_key",
             retention_hours, limit)
          .affected_rows();
  txn.commit();
  return static_cast<std::int64_t>(deleted);
}

}  // namespace persistence
