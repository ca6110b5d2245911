#pragma once

// Partition leases (migration 014, docs/scaling.md): which server node may debit the accounts of
// which partition, at which epoch. Each function runs one short transaction on the connection it
// is given (the lease keeper's own); the fence itself is checked by the posting path
// (batch.cpp), in the writer's transaction.

#include <cstdint>
#include <string>
#include <vector>

#include "persistence/pqxx_fwd.hpp"

namespace persistence {

struct lease {
  int partition = 0;
  std::int64_t epoch = 0;
};

// A partition as every node sees it: its holder (empty: none, or its lease has expired) and the
// address of the holder's node.
struct lease_owner {
  int partition = 0;
  std::string node_id;
  std::int64_t epoch = 0;
  std::string address;
};

// The deployment's partition count: the stored one, or `partitions` when this is the first node
// (which also makes the partitions' lease rows). A caller configured with another count must
// refuse to start: accounts would map to other partitions than the other nodes think.
int ensure_partitions(pqxx::connection& conn, int partitions);

// Records that `node_id` is up and reachable at `address`; answers how many nodes are up (their
// heartbeat is younger than `ttl_ms`), this one included.
int heartbeat(pqxx::connection& conn, const std::string& node_id, const std::string& address, std::int64_t ttl_ms);

// Extends every lease `node_id` holds by `ttl_ms` from now; answers those leases. A lease it no
// longer holds (another node took it over, at a higher epoch) is not among them.
std::vector<lease> renew_leases(pqxx::connection& conn, const std::string& node_id, std::int64_t ttl_ms);

// Takes up to `count` partitions that nobody holds or whose lease expired, each at its epoch + 1.
std::vector<lease> acquire_leases(pqxx::connection& conn, const std::string& node_id, std::int64_t ttl_ms, int count);

// Hands `partitions` back at once (on shutdown, or to make room for a node that joined). A writer
// of this node that still commits a debit of them is refused by the fence.
void release_leases(pqxx::connection& conn, const std::string& node_id, const std::vector<int>& partitions);

// Hands every lease back and removes the node: a clean shutdown.
void leave_cluster(pqxx::connection& conn, const std::string& node_id);

// Every partition with its current holder, in partition order.
std::vector<lease_owner> lease_owners(pqxx::connection& conn);

}  // namespace persistence
