#include "persistence/leases.hpp"

#include <pqxx/pqxx>

#include "persistence/database.hpp"

namespace persistence {
namespace {

std::vector<lease> leases_of(const pqxx::result& rows) {
  std::vector<lease> out;
  out.reserve(rows.size());
  for (const auto& row : rows) out.push_back({row[0].as<int>(), row[1].as<std::int64_t>()});
  return out;
}

std::string interval_ms(std::int64_t ms) { return std::to_string(ms) + " milliseconds"; }

// A node's own lease rows (those `where` selects, with $1 its node id), locked in ascending
// partition order before they are updated. Writers lock the rows of their postings' partitions
// FOR SHARE in that order (persistence/batch.cpp); an UPDATE by node id alone takes its rows in
// the order it scans them, so it could hold a high partition while waiting for a low one a writer
// holds, while that writer waits for the high one: a deadlock, broken only after PostgreSQL's
// deadlock_timeout by failing one of them.
std::string own_rows(const std::string& where) {
  return "(SELECT partition FROM partition_lease WHERE " + where + " ORDER BY partition FOR UPDATE) AS mine";
}

}  // namespace

int ensure_partitions(pqxx::connection& conn, int partitions) {
  pqxx::work txn(conn);
  txn.exec_params("INSERT INTO cluster_config (partitions) VALUES ($1) ON CONFLICT (singleton) DO NOTHING", partitions);
  const int stored = txn.exec1("SELECT partitions FROM cluster_config")[0].as<int>();
  txn.exec_params(
      "INSERT INTO partition_lease (partition) SELECT generate_series(0, $1 - 1) ON CONFLICT (partition) DO NOTHING",
      stored);
  txn.commit();
  return stored;
}

int heartbeat(pqxx::connection& conn, const std::string& node_id, const std::string& address, std::int64_t ttl_ms) {
  pqxx::work txn(conn);
  txn.exec_params(
      "INSERT INTO cluster_node (node_id, address) VALUES ($1, $2)"
      " ON CONFLICT (node_id) DO UPDATE SET address = EXCLUDED.address, heartbeat_at = now()",
      node_id, address);
  const int live = txn.exec_params1("SELECT count(*) FROM cluster_node WHERE heartbeat_at > now() - $1::interval",
                                    interval_ms(ttl_ms))[0]
                       .as<int>();
  txn.commit();
  return live;
}

std::vector<lease> renew_leases(pqxx::connection& conn, const std::string& node_id, std::int64_t ttl_ms) {
  pqxx::work txn(conn);
  auto rows = txn.exec_params("UPDATE partition_lease AS l SET expires_at = now() + $2::interval FROM " +
                                  own_rows("node_id = $1") +
                                  " WHERE l.partition = mine.partition AND l.node_id = $1"
                                  " RETURNING l.partition, l.epoch",
                              node_id, interval_ms(ttl_ms));
  txn.commit();
  return leases_of(rows);
}

std::vector<lease> acquire_leases(pqxx::connection& conn, const std::string& node_id, std::int64_t ttl_ms, int count) {
  if (count <= 0) return {};
  pqxx::work txn(conn);
  // SKIP LOCKED: two nodes taking over at once split the free partitions instead of queueing on
  // the same rows; a row a writer holds FOR SHARE (its old holder's commit in flight) is skipped
  // this round and taken in a later one.
  auto rows = txn.exec_params(
      "UPDATE partition_lease AS l SET node_id = $1, epoch = l.epoch + 1, expires_at = now() + $2::interval"
      "  FROM (SELECT partition FROM partition_lease"
      "         WHERE node_id IS NULL OR expires_at < now()"
      "         ORDER BY partition LIMIT $3 FOR UPDATE SKIP LOCKED) AS free"
      " WHERE l.partition = free.partition"
      " RETURNING l.partition, l.epoch",
      node_id, interval_ms(ttl_ms), count);
  txn.commit();
  return leases_of(rows);
}

void release_leases(pqxx::connection& conn, const std::string& node_id, const std::vector<int>& partitions) {
  if (partitions.empty()) return;
  std::vector<std::int64_t> ids(partitions.begin(), partitions.end());
  pqxx::work txn(conn);
  txn.exec_params("UPDATE partition_lease AS l SET node_id = NULL, expires_at = '-infinity' FROM " +
                      own_rows("node_id = $1 AND partition = ANY($2::int[])") +
                      " WHERE l.partition = mine.partition AND l.node_id = $1",
                  node_id, pg_array(ids));
  txn.commit();
}

void leave_cluster(pqxx::connection& conn, const std::string& node_id) {
  pqxx::work txn(conn);
  txn.exec_params("UPDATE partition_lease AS l SET node_id = NULL, expires_at = '-infinity' FROM " +
                      own_rows("node_id = $1") + " WHERE l.partition = mine.partition AND l.node_id = $1",
                  node_id);
  txn.exec_params("DELETE FROM cluster_node WHERE node_id = $1", node_id);
  txn.commit();
}

std::vector<lease_owner> lease_owners(pqxx::connection& conn) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec(
      "SELECT l.partition, CASE WHEN l.expires_at > now() THEN l.node_id ELSE '' END, l.epoch,"
      "       COALESCE(n.address, '')"
      "  FROM partition_lease l LEFT JOIN cluster_node n ON n.node_id = l.node_id AND l.expires_at > now()"
      " ORDER BY l.partition");
  std::vector<lease_owner> out;
  out.reserve(rows.size());
  for (const auto& row : rows) {
    out.push_back({row[0].as<int>(), row[1].as<std::string>(), row[2].as<std::int64_t>(), row[3].as<std::string>()});
  }
  return out;
}

}  // namespace persistence
