#pragma once

// Answers kept for management requests sent with an Idempotency-Key (migration 031): the request's
// effect and its answer commit in one transaction, and the same request under the same key is
// answered from the stored row. The functions run inside the caller's transaction.

#include <functional>
#include <optional>
#include <string>

#include "ledger/types.hpp"
#include "persistence/pqxx_fwd.hpp"

namespace pqxx {
class transaction_base;
}

namespace persistence {

// A request under an Idempotency-Key: the key is the principal's, and names one request of one
// route (`route`, e.g. "webhook_endpoint.create"); `request_hash` says which request.
struct replay_request {
  ledger::principal_id principal = 0;
  std::string key;
  std::string route;
  std::string request_hash;
};

// What is stored under a key.
struct stored_answer {
  bool same_request = false;  // the same route and request hash as the request looked up
  int status = 0;
  std::string body;
};

// A request under an Idempotency-Key as a write function takes it: the key, the status of its
// answer and how its body is written from the row the request made or changed; `stored` is set
// when the key was held already (the write then did nothing).
template <typename Record>
struct replayable {
  replay_request request;
  int status = 0;
  std::function<std::string(const Record&)> render;
  std::optional<stored_answer> stored;
};

// The answer stored under the request's key; nullopt: none. The second reads in a transaction of
// its own.
std::optional<stored_answer> find_replay(pqxx::transaction_base& txn, const replay_request& r);
std::optional<stored_answer> find_replay(pqxx::connection& conn, const replay_request& r);

// Takes the key for this transaction: nullopt when taken (the caller makes the request's effect
// and then records its answer with record_replay, in the same transaction; a rollback frees the
// key). Otherwise the answer of the request that holds it: a transaction holding it uncommitted is
// waited for, so what is returned is committed.
std::optional<stored_answer> claim_replay(pqxx::transaction_base& txn, const replay_request& r);

// The answer of the request whose key this transaction claimed.
void record_replay(pqxx::transaction_base& txn, const replay_request& r, int status, const std::string& body);

// Deletes at most `limit` kept answers made more than `retention_hours` ago, oldest first, in a
// transaction of its own (rows another transaction has locked are left for the next call); the
// number deleted. A key whose answer is deleted names a new request from then on.
std::int64_t prune_replays(pqxx::connection& conn, std::int64_t retention_hours, int limit);

}  // namespace persistence
