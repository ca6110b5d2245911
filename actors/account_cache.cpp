#include "actors/account_cache.hpp"

#include "persistence/accounts.hpp"
#include "persistence/flows.hpp"

namespace actors {

account_facts facts_of(const persistence::account_record& record) {
  account_facts f;
  f.id = record.id;
  f.owner_id = record.owner_id;
  f.currency = record.currency;
  f.kind = record.kind;
  for (const auto& s : record.shards) f.shards.push_back(s.id);
  f.fees = record.fees;
  return f;
}

account_cache::account_cache(std::size_t capacity, std::shared_ptr<reader_pool> readers)
    : directory_(capacity), readers_(std::move(readers)) {}

void account_cache::facts(ledger::account_id id,
                          std::function<void(ledger::error_code, std::optional<account_facts>)> done) {
  if (auto known = directory_.find(id)) return done(ledger::error_code::ok, std::move(known));
  refresh(id, std::move(done));
}

void account_cache::refresh(ledger::account_id id,
                            std::function<void(ledger::error_code, std::optional<account_facts>)> done) {
  readers_->read<std::optional<persistence::account_record>>(
      [id](pqxx::connection& conn) { return persistence::find_account(conn, id); },
      [this, done](query_result<std::optional<persistence::account_record>> r) {
        if (r.outcome != ledger::error_code::ok) return done(r.outcome, std::nullopt);
        if (!r.value) return done(ledger::error_code::ok, std::nullopt);
        auto f = facts_of(*r.value);
        directory_.put(f);
        done(ledger::error_code::ok, std::move(f));
      });
}

void account_cache::system_account(const std::string& currency, const std::string& role, bool allow_negative,
                                   std::function<void(ledger::error_code, ledger::account_id)> done) {
  const std::string key = role + "/" + currency;
  ledger::account_id cached = 0;
  {
    std::lock_guard lock(system_mutex_);
    if (auto it = system_.find(key); it != system_.end()) cached = it->second;
  }
  // Answered outside the lock: the answer goes on to the next step of a flow.
  if (cached != 0) return done(ledger::error_code::ok, cached);
  readers_->read<ledger::account_id>(
      [currency, role, allow_negative](pqxx::connection& conn) {
        return persistence::ensure_system_account(conn, currency, role, allow_negative);
      },
      [this, key, done](query_result<ledger::account_id> r) {
        if (r.outcome == ledger::error_code::ok) {
          std::lock_guard lock(system_mutex_);
          system_[key] = r.value;
        }
        done(r.outcome, r.value);
      });
}

}  // namespace actors
