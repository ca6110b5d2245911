#pragma once

// The account facts the money flows need before any actor is asked (owner, currency, kind, credit
// shards), and the clearing account of each currency: from memory, or read once through the
// reader pool. Thread-safe.

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "actors/directory.hpp"
#include "actors/reader_pool.hpp"
#include "ledger/errors.hpp"

namespace persistence {
struct account_record;
}

namespace actors {

account_facts facts_of(const persistence::account_record& record);

class account_cache {
 public:
  account_cache(std::size_t capacity, std::shared_ptr<reader_pool> readers);

  // The facts of an account, or nullopt when it does not exist; not ok when the database could
  // not be asked.
  void facts(ledger::account_id id, std::function<void(ledger::error_code, std::optional<account_facts>)> done);
  // The same, read from the database even when cached (the cached fee schedule was outdated).
  void refresh(ledger::account_id id, std::function<void(ledger::error_code, std::optional<account_facts>)> done);
  // The system account with `role` in `currency` (e.g. "clearing:manual", "fee_revenue"), made on
  // first use; `allow_negative` for the accounts that may go negative (clearing, losses).
  void system_account(const std::string& currency, const std::string& role, bool allow_negative,
                      std::function<void(ledger::error_code, ledger::account_id)> done);

  void remember(account_facts facts) { directory_.put(std::move(facts)); }
  void remember(const persistence::account_record& record) { remember(facts_of(record)); }

 private:
  account_directory directory_;
  std::shared_ptr<reader_pool> readers_;
  std::mutex system_mutex_;
  std::unordered_map<std::string, ledger::account_id> system_;  // by "role/currency"
};

}  // namespace actors
