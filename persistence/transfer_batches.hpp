#pragma once

// Batch transfers (migration 013, docs/money-flows.md): the stored answer of a batch under its
// Idempotency-Key (stored when it refuses an item), and the items of a batch that committed already. Each function runs its own
// short transaction on the connection it is given.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ledger/types.hpp"
#include "persistence/batch.hpp"
#include "persistence/history.hpp"

#include "persistence/pqxx_fwd.hpp"

namespace persistence {

struct stored_batch {
  std::string request_hash;
  int status = 0;
  std::string body;
};

struct batch_lookup {
  // The batch's stored answer, when it was answered before.
  std::optional<stored_batch> batch;
  // Per item key (in the order given): its committed journal transaction's stored receipt.
  std::vector<std::optional<stored_response>> items;
  // The batch's key is a hold's (migration 011): the batch is another request under it.
  bool key_held_by_a_hold = false;
};

// The stored answer of (principal, key), and which of `item_keys` committed already (a batch whose
// answer was never stored, e.g. the server stopped before, is run again: its committed items then
// replay their own receipts instead of being posted twice).
batch_lookup find_transfer_batch(pqxx::connection& conn, ledger::principal_id principal, const std::string& key,
                                 const std::vector<std::string>& item_keys);

// Stores the answer of a batch; when another request stored one for the same key first, that one
// is returned instead (the caller answers with what is stored). `fences` (cluster mode): the leases
// under which the writer refused items that a later decision could commit (insufficient funds, an
// inactive account). The answer is stored only while each of them still names its node at its
// epoch, checked under the lease rows' locks (FOR SHARE, as the writer's fence): a node that lost
// a payer's partition since must not store a refusal that the partition's new holder may have
// overturned already. nullopt then, and nothing is stored.
std::optional<stored_batch> store_transfer_batch(pqxx::connection& conn, ledger::principal_id principal,
                                                 const std::string& key, const stored_batch& answer, int items,
                                                 const std::vector<lease_fence>& fences = {});

}  // namespace persistence
