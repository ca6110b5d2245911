#pragma once

// The API keys this server has seen, by the SHA-256 of the key: the principal of a known key, and
// for a while the keys the database did not know, so that neither a returning client nor a flood
// of bad keys costs a database read per request. Thread-safe; bounded on both sides (when a side
// is full it starts over: its entries are cheap to read again).
//
// A known key is trusted for `known_ttl` since it was last confirmed: since the read that found
// it, or since the start of the last check for revoked keys that succeeded (confirm(), which
// actors/key_revocations.hpp runs every third of the TTL), whichever is later. A key revoked on
// any server is therefore refused here within `known_ttl` of its revocation's COMMIT, whatever
// happens to the checks; while they succeed, no key costs a read to stay trusted. A key revoked
// through this server is forgotten at once (revoke()).
//
// Revoked keys leave a mark for `k_revoked_mark`: a read that started before the revocation
// was seen, and answers after it, must not bring the key back.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/views.hpp"

namespace actors {

class key_cache {
 public:
  using clock = std::chrono::steady_clock;

  // How long a revoked key's mark lasts: far longer than any read of a key can take (reads are
  // bounded by the statement timeout), and longer than the window of recent revocations that
  // each check reads (actors/key_revocations.hpp).
  static constexpr std::chrono::milliseconds k_revoked_mark{10 * 60 * 1000};

  // `known_max` principals, each trusted for `known_ttl` since it was last confirmed;
  // `unknown_ttl` 0 remembers no unknown key; at most `unknown_max` of them (and of revoked marks).
  key_cache(std::int64_t known_max, std::chrono::milliseconds known_ttl, std::chrono::milliseconds unknown_ttl,
            std::int64_t unknown_max);

  // The principal of a key confirmed within the TTL; nullopt when the key is not known, or its
  // confirmation is too old (then the key must be read again).
  std::optional<principal_view> find(const std::string& key_hash_hex, clock::time_point now = clock::now()) const;
  // Whether the key was valid when this server last looked, however long ago (a returning client
  // whose key must be confirmed again, not a guess).
  bool knows(const std::string& key_hash_hex) const;
  // True while the key is remembered as unknown to the database.
  bool known_unknown(const std::string& key_hash_hex, clock::time_point now);

  // A key the database confirmed by a read that started at `read_at`; ignored when the key was
  // seen revoked since then.
  void remember(const std::string& key_hash_hex, const principal_view& principal,
                clock::time_point read_at = clock::now());
  void remember_unknown(const std::string& key_hash_hex, clock::time_point now);

  // A key revoked (committed) through this server: forgotten now.
  void revoke(const std::string& key_hash_hex, clock::time_point now = clock::now());
  // The outcome of a check for revoked keys that started at `check_started`: those keys are
  // forgotten, and every other key is confirmed as of `check_started`. `complete` false: the
  // check may have missed some (it hit its bound), so every known key is forgotten.
  void confirm(const std::vector<std::string>& revoked_key_hashes, bool complete, clock::time_point check_started);

  std::size_t unknown_count() const;
  std::size_t known_count() const;

 private:
  struct known_key {
    principal_view principal;
    clock::time_point read_at;
  };
  void mark_revoked(const std::string& key_hash_hex, clock::time_point at);

  std::int64_t known_max_;
  std::chrono::milliseconds known_ttl_;
  std::chrono::milliseconds unknown_ttl_;
  std::int64_t unknown_max_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, known_key> known_;
  // The start of the last check for revoked keys that succeeded (or the cache's creation).
  clock::time_point confirmed_at_;
  // Until when each unknown key is answered "unknown" without a read.
  std::unordered_map<std::string, clock::time_point> unknown_;
  // When each revoked key was seen revoked here.
  std::unordered_map<std::string, clock::time_point> revoked_;
  // When marks were last dropped for want of room: a read that started by then may have found a
  // key whose mark is gone, so it is not remembered.
  clock::time_point marks_dropped_at_ = clock::time_point::min();
};

}  // namespace actors
