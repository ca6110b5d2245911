#pragma once

// The check for revoked API keys: every third of `auth.key_cache_ttl_ms`, on a timer thread of
// its own, one read of the keys revoked lately (by any server) goes through the reader pool; the
// key cache forgets them and counts every other key as confirmed from the check's start
// (actors/key_cache.hpp). One query per check, whatever the number of cached keys, so clients
// whose keys are cached never pay a read to stay trusted.
//
// A check reads the revocations since the start of the last check that succeeded, plus
// `k_overlap`: a revocation's time is its transaction's start, which may precede its COMMIT by a
// lock wait and a few statements (seconds at most), and the overlap covers that. When checks
// fail (the database is down, the readers are busy) the cache's entries age out after the TTL and
// each key is read again on its next use.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>

#include "base/ticker.hpp"
#include "actors/key_cache.hpp"
#include "actors/reader_pool.hpp"

namespace actors {

struct key_revocation_stats {
  std::uint64_t checks = 0;    // checks that succeeded
  std::uint64_t failures = 0;  // checks that could not read
};

class key_revocations {
 public:
  static constexpr std::chrono::milliseconds k_overlap{60'000};
  // Revoked keys one check reads at most; more (a mass revocation) forgets every cached key. A
  // check's window is about k_overlap long (longer while checks fail), and each revocation needs a
  // key made first: two requests against the principal's write limit, so at the default 100 a
  // second more than thirty principals making and revoking keys as fast as they may reach it.
  static constexpr int k_keys_per_check_max = 100'000;

  // `covered_from`: when the cache began to hold keys (every revocation committed after it must be
  // read by the first check).
  key_revocations(key_cache& keys, std::shared_ptr<reader_pool> readers, std::chrono::milliseconds ttl,
                  key_cache::clock::time_point covered_from);
  ~key_revocations();
  key_revocations(const key_revocations&) = delete;
  key_revocations& operator=(const key_revocations&) = delete;

  void start();
  void stop();

  key_revocation_stats stats() const;

 private:
  void check();

  key_cache& keys_;
  std::shared_ptr<reader_pool> readers_;
  std::chrono::milliseconds interval_;
  std::atomic<bool> in_flight_{false};
  std::atomic<bool> failing_{false};
  std::mutex covered_mutex_;
  key_cache::clock::time_point covered_from_;
  std::atomic<std::uint64_t> checks_{0};
  std::atomic<std::uint64_t> failures_{0};

  base::ticker timer_;  // last: stopped first
};

}  // namespace actors
