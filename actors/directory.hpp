#pragma once

// A bounded, thread-safe cache of the account facts that never change once written: owner,
// currency, kind, and the credit shards of a hot account (shards are only ever added, and a
// newer shard list replaces an older one). Status and balances are NOT cached here: the ledger
// writer reads those under its row lock.
//
// The one fact that does change is a payee's fee schedule (PUT /v1/accounts/{id}/fees replaces
// the entry). It is cached as a hint only: it decides whether a payment names fee_revenue, so
// that payments to payees without fees never lock that row. The fee itself is priced by the
// ledger writer from the schedule it reads with the credit row under its lock, so an outdated
// schedule here is never applied: a payment built without a fee leg for a payee that now charges
// one is refused by the writer (fees_changed) and built again with it (flow_transfer.cpp).

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cluster/ownership.hpp"
#include "ledger/fees.hpp"
#include "ledger/types.hpp"

namespace actors {

struct account_facts {
  ledger::account_id id = 0;
  std::optional<ledger::principal_id> owner_id;
  std::string currency;
  ledger::account_kind kind = ledger::account_kind::user;
  std::vector<ledger::account_id> shards;    // by shard number
  std::optional<ledger::fee_schedule> fees;  // a hint: see above
};

class account_directory {
 public:
  explicit account_directory(std::size_t capacity) : capacity_(capacity) {}

  std::optional<account_facts> find(ledger::account_id id) const {
    std::shared_lock lock(mutex_);
    auto it = facts_.find(id);
    if (it == facts_.end()) return std::nullopt;
    return it->second;
  }

  void put(account_facts facts) {
    std::unique_lock lock(mutex_);
    // Bounded: when full, start over. Entries are cheap to reload and the hot ones come back
    // at once; a full LRU would cost a list node per lookup on the hot path.
    if (facts_.size() >= capacity_ && facts_.find(facts.id) == facts_.end()) facts_.clear();
    // Shards are only ever added: facts read before the account was made hot, stored after the
    // shards were, must not take them away (payments would credit the main row again, and new
    // actors would leave the shards' money out of the funds they see).
    auto& entry = facts_[facts.id];
    if (entry.id == facts.id && entry.shards.size() > facts.shards.size()) facts.shards = std::move(entry.shards);
    entry = std::move(facts);
  }

  // The shard a credit should land on when the posting is committed by `writer_index` of
  // `writer_count`: one whose number maps to that writer, so each shard row has one writer.
  // Cluster mode (`owned`): among the shards whose own partition this node holds, so that each
  // shard row is credited (and swept) by one node's writers (docs/scaling.md); when it holds
  // none of them, among all of them (correct still: the row lock orders the writers).
  static ledger::account_id credit_row(const account_facts& facts, std::size_t writer_index, std::size_t writer_count,
                                       std::uint64_t spread, const cluster::ownership* owned = nullptr) {
    if (facts.shards.empty()) return facts.id;
    const std::vector<ledger::account_id>* pool = &facts.shards;
    std::vector<ledger::account_id> held;
    if (owned != nullptr) {
      for (auto shard : facts.shards) {
        if (owned->lease_for(shard)) held.push_back(shard);
      }
      if (!held.empty()) pool = &held;
    }
    // The writer's own shards are every writer_count-th from writer_index: pick one of them by
    // index (this runs for every payment to a hot account, so it allocates nothing).
    const std::size_t size = pool->size();
    const std::size_t mine = writer_index < size ? (size - writer_index + writer_count - 1) / writer_count : 0;
    if (mine == 0) return (*pool)[spread % size];
    return (*pool)[writer_index + (spread % mine) * writer_count];
  }

 private:
  std::size_t capacity_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<ledger::account_id, account_facts> facts_;
};

}  // namespace actors
