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

// Lease rows (those `where` selects, with $1 a node id), locked in ascending partition order
// before they are updated. Writers lock the rows of their postings' partitions FOR SHARE in that
// order (persistence/batch.cpp); an UPDATE by node id alone takes its rows in the order it scans
// them, so it could hold a high partition while waiting for a low one a writer holds, while that
// writer waits for the high one: a deadlock, broken only after PostgreSQL's deadlock_timeout by
// failing one of them.
std::string lease_rows(const std::string& where) {
  return "(SELECT partition FROM partition_lease WHERE " + where + " ORDER BY partition FOR UPDATE) AS mine";
}

// Whether instance $2 speaks for node id $1 (migration 018). The node's row is locked FOR SHARE,
// so another process's takeover of the node id (an UPDATE of that row) waits until this
// transaction ends, and one that committed first is seen: a process that was taken over neither
// renews nor takes a lease, even when its round began before the takeover.
constexpr const char* k_speaks_for =
    "EXISTS (SELECT 1 FROM cluster_node n WHERE n.node_id = $1 AND n.instance = $2::uuid FOR SHARE OF n)";

// The rows of the leases this process's node holds, as lease_rows(), while it speaks for the node.
std::string own_rows(const std::string& where) { return lease_rows(where + " AND " + k_speaks_for); }

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

heartbeat_result heartbeat(pqxx::connection& conn, const node_identity& me, const std::string& address,
                           std::int64_t ttl_ms) {
  heartbeat_result out;
  pqxx::work txn(conn);
  const auto ttl = interval_ms(ttl_ms);
  const auto row = txn.exec_params(
      "SELECT COALESCE(instance::text, ''), address,"
      "       GREATEST(0, ceil(extract(epoch FROM heartbeat_at + $2::interval - now()) * 1000))::bigint"
      "  FROM cluster_node WHERE node_id = $1 FOR UPDATE",
      me.node_id, ttl);
  if (row.empty()) {
    // Two processes inserting at once: one of them fails on the key, and its next round finds the
    // other's row.
    txn.exec_params("INSERT INTO cluster_node (node_id, address, instance) VALUES ($1, $2, $3::uuid)", me.node_id,
                    address, me.instance);
  } else {
    if (row[0][0].as<std::string>() != me.instance) {
      if (const auto lapses_in = row[0][2].as<std::int64_t>(); lapses_in > 0) {
        out.in_use = true;
        out.other_address = row[0][1].as<std::string>();
        out.lapses_in_ms = lapses_in;
        return out;  // nothing written: the transaction rolls back
      }
      // The other process is silent: its leases are handed back before this one speaks for the
      // node id, so it takes them at a new epoch instead of renewing them at the silent one's.
      txn.exec_params("UPDATE partition_lease AS l SET node_id = NULL, expires_at = '-infinity' FROM " +
                          lease_rows("node_id = $1") + " WHERE l.partition = mine.partition",
                      me.node_id);
      out.took_over = true;
    }
    txn.exec_params(
        "UPDATE cluster_node SET address = $2, instance = $3::uuid, heartbeat_at = now() WHERE node_id = $1",
        me.node_id, address, me.instance);
  }
  out.live_nodes =
      txn.exec_params1("SELECT count(*) FROM cluster_node WHERE heartbeat_at > now() - $1::interval", ttl)[0].as<int>();
  txn.commit();
  return out;
}

std::vector<lease> renew_leases(pqxx::connection& conn, const node_identity& me, std::int64_t ttl_ms) {
  pqxx::work txn(conn);
  auto rows = txn.exec_params("UPDATE partition_lease AS l SET expires_at = now() + $3::interval FROM " +
                                  own_rows("node_id = $1") +
                                  " WHERE l.partition = mine.partition AND l.node_id = $1"
                                  " RETURNING l.partition, l.epoch",
                              me.node_id, me.instance, interval_ms(ttl_ms));
  txn.commit();
  return leases_of(rows);
}

std::vector<lease> acquire_leases(pqxx::connection& conn, const node_identity& me, std::int64_t ttl_ms, int count) {
  if (count <= 0) return {};
  pqxx::work txn(conn);
  // SKIP LOCKED: two nodes taking over at once split the free partitions instead of queueing on
  // the same rows; a row a writer holds FOR SHARE (its old holder's commit in flight) is skipped
  // this round and taken in a later one.
  auto rows = txn.exec_params(
      std::string("UPDATE partition_lease AS l SET node_id = $1, epoch = l.epoch + 1, expires_at = now() + $3::interval"
                  "  FROM (SELECT partition FROM partition_lease"
                  "         WHERE (node_id IS NULL OR expires_at < now()) AND ") +
          k_speaks_for +
          "         ORDER BY partition LIMIT $4 FOR UPDATE SKIP LOCKED) AS free"
          " WHERE l.partition = free.partition"
          " RETURNING l.partition, l.epoch",
      me.node_id, me.instance, interval_ms(ttl_ms), count);
  txn.commit();
  return leases_of(rows);
}

void release_leases(pqxx::connection& conn, const node_identity& me, const std::vector<int>& partitions) {
  if (partitions.empty()) return;
  std::vector<std::int64_t> ids(partitions.begin(), partitions.end());
  pqxx::work txn(conn);
  txn.exec_params("UPDATE partition_lease AS l SET node_id = NULL, expires_at = '-infinity' FROM " +
                      own_rows("node_id = $1 AND partition = ANY($3::int[])") +
                      " WHERE l.partition = mine.partition AND l.node_id = $1",
                  me.node_id, me.instance, pg_array(ids));
  txn.commit();
}

void leave_cluster(pqxx::connection& conn, const node_identity& me) {
  pqxx::work txn(conn);
  txn.exec_params("UPDATE partition_lease AS l SET node_id = NULL, expires_at = '-infinity' FROM " +
                      own_rows("node_id = $1") + " WHERE l.partition = mine.partition AND l.node_id = $1",
                  me.node_id, me.instance);
  // Only its own row: a process that was taken over leaves the other's in place.
  txn.exec_params("DELETE FROM cluster_node WHERE node_id = $1 AND instance = $2::uuid", me.node_id, me.instance);
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
