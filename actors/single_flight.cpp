#include "actors/single_flight.hpp"

#include "base/assert.hpp"

namespace actors {

single_flight::join_result single_flight::join(const std::string& key, const std::string& request_hash,
                                               std::function<void(money_result)> done) {
  std::lock_guard lock(mutex_);
  auto it = flights_.find(key);
  if (it == flights_.end()) {
    flights_.emplace(key, flight{request_hash, {std::move(done)}});
    return join_result::leader;
  }
  if (it->second.request_hash != request_hash) return join_result::conflict;
  it->second.waiters.push_back(std::move(done));
  return join_result::follower;
}

void single_flight::finish(const std::string& key, money_result result) {
  std::vector<std::function<void(money_result)>> waiters;
  {
    std::lock_guard lock(mutex_);
    auto it = flights_.find(key);
    WALLET_ASSERT(it != flights_.end(), "a finished flight was started");
    waiters = std::move(it->second.waiters);
    flights_.erase(it);
  }
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    // The last waiter (usually the only one) takes the result itself; the others a copy each.
    money_result answer = i + 1 == waiters.size() ? std::move(result) : result;
    // The first caller made the transaction; the others receive it as a replay.
    if (i > 0 && answer.outcome == ledger::error_code::ok) answer.replayed = true;
    waiters[i](std::move(answer));
  }
}

std::size_t single_flight::size() const {
  std::lock_guard lock(mutex_);
  return flights_.size();
}

}  // namespace actors
