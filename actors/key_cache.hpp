#pragma once

// The API keys this server has seen, by the SHA-256 of the key: the principal of a known key, and
// for a while the keys the database did not know, so that neither a returning client nor a flood
// of bad keys costs a database read per request. Thread-safe; bounded on both sides (when a side
// is full it starts over: its entries are cheap to read again).

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "actors/views.hpp"

namespace actors {

class key_cache {
 public:
  // `known_max` principals; `unknown_ttl` 0 remembers no unknown key; at most `unknown_max` of them.
  key_cache(std::int64_t known_max, std::chrono::milliseconds unknown_ttl, std::int64_t unknown_max);

  std::optional<principal_view> find(const std::string& key_hash_hex) const;
  // True while the key is remembered as unknown to the database.
  bool known_unknown(const std::string& key_hash_hex, std::chrono::steady_clock::time_point now);

  void remember(const std::string& key_hash_hex, const principal_view& principal);
  void remember_unknown(const std::string& key_hash_hex, std::chrono::steady_clock::time_point now);

  std::size_t unknown_count() const;

 private:
  std::int64_t known_max_;
  std::chrono::milliseconds unknown_ttl_;
  std::int64_t unknown_max_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, principal_view> known_;
  // Until when each unknown key is answered "unknown" without a read.
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> unknown_;
};

}  // namespace actors
