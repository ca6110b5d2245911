#pragma once

// Concurrent requests with one Idempotency-Key share one execution (single flight).
//
// The first request of a key leads: it executes, and finish() hands its result to every request
// that joined meanwhile. A request with the same key but a different body is refused at once
// (idempotency_key_reused). Once finished, the key is free again: a later request with it is
// answered from the database's stored receipt by whoever executes it.
//
// Thread-safe. Callbacks run outside the lock, on the thread that calls finish().

#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/commands.hpp"

namespace actors {

class single_flight {
 public:
  enum class join_result { leader, follower, conflict };

  // Joins the flight of `key`. For `follower`, `done` is kept and called by finish(); for
  // `leader` it is kept as the first waiter; for `conflict` it is not kept (the caller answers).
  join_result join(const std::string& key, const std::string& request_hash, std::function<void(money_result)> done);

  // Ends the flight of `key`: the leader gets `result`, the followers get it too, marked as a
  // replay when it is a success (they did not make the transaction).
  void finish(const std::string& key, money_result result);

  // Flights in progress (for tests and metrics).
  std::size_t size() const;

 private:
  struct flight {
    std::string request_hash;
    std::vector<std::function<void(money_result)>> waiters;
  };
  mutable std::mutex mutex_;
  std::unordered_map<std::string, flight> flights_;
};

}  // namespace actors
