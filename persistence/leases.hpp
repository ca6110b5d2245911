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

// A running process of a node (migration 018): its node id, which the leases and the fence name,
// and the instance id it drew at start (a UUID), which tells it from another process started with
// the same node id. Every function below acts only while `instance` speaks for `node_id`.
struct node_identity {
  std::string node_id;
  std::string instance;
};

// What a heartbeat found.
struct heartbeat_result {
  // Another process speaks for this node id, and its heartbeat is younger than the TTL: nothing
  // was written, and this process must neither renew nor take leases.
  bool in_use = false;
  std::string other_address;      // that process's address
  std::int64_t lapses_in_ms = 0;  // when its heartbeat will be older than the TTL
  // This process took the node id over from one whose heartbeat had lapsed, and handed that one's
  // leases back: it takes them again one epoch higher, and the silent one's writers are fenced.
  bool took_over = false;
  int live_nodes = 0;  // nodes whose heartbeat is younger than the TTL, this one included
};

// Records that `me` is up and reachable at `address`, unless another live process speaks for its
// node id (a process whose heartbeat is `ttl_ms` old or more has lapsed).
heartbeat_result heartbeat(pqxx::connection& conn, const node_identity& me, const std::string& address,
                           std::int64_t ttl_ms);

// Extends every lease `me` holds by `ttl_ms` from now; answers those leases. A lease it no longer
// holds (another node took it over, at a higher epoch) is not among them.
std::vector<lease> renew_leases(pqxx::connection& conn, const node_identity& me, std::int64_t ttl_ms);

// Takes up to `count` partitions that nobody holds or whose lease expired, each at its epoch + 1.
std::vector<lease> acquire_leases(pqxx::connection& conn, const node_identity& me, std::int64_t ttl_ms, int count);

// Hands `partitions` back at once (on shutdown, or to make room for a node that joined). A writer
// of this node that still commits a debit of them is refused by the fence.
void release_leases(pqxx::connection& conn, const node_identity& me, const std::vector<int>& partitions);

// Hands every lease back and removes the node: a clean shutdown.
void leave_cluster(pqxx::connection& conn, const node_identity& me);

// Every partition with its current holder, in partition order.
std::vector<lease_owner> lease_owners(pqxx::connection& conn);

}  // namespace persistence
