#pragma once

// Token buckets per key (a client address, a principal), kept in this process and bounded in
// memory. They guard what must stay cheap before or beside the shared Redis limits: requests whose
// API key needs a database read, and lookups of accounts that turn out not to exist.
//
// Thread-safe (one mutex). has_token() is asked on every transfer, so it neither allocates nor
// grows the table for a key that has no bucket.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace api {

class token_buckets {
 public:
  using clock = std::chrono::steady_clock;

  // A bucket holds at most `burst` tokens and refills at `rate_per_second`. At most `keys_max`
  // buckets are kept; when every one of them is still in use, a new key gets no token (a flood
  // of new addresses is refused rather than allowed to grow the table without bound).
  token_buckets(std::int64_t rate_per_second, std::int64_t burst, std::size_t keys_max);

  // The deepest debt charge() makes, in seconds of the rate.
  static constexpr double k_debt_max_s = 60;

  // Takes one token for `key`; false when its bucket is empty.
  bool take(const std::string& key, clock::time_point now = clock::now());
  // Spends one token for `key` that was already used, whether or not one is left: the bucket may
  // go into debt, which the rate pays back before has_token() is true again. For what is checked
  // with has_token() before it runs and found to cost a token only after: requests checked at
  // once all pass while one token is left, and the debt makes the next ones wait for what they
  // spent beyond it. The debt stops at a minute of the rate (k_debt_max_s), so that no burst,
  // however large, shuts the key out for longer; up to that, over time no more than the rate plus
  // the burst is spent. Nothing is kept when the table is full of live buckets.
  void charge(const std::string& key, clock::time_point now = clock::now());
  // Whether `key` has a token left, without taking it. A key without a bucket has a full one, so
  // while the table has room this adds nothing to it: only take() does. (Asked on every transfer
  // of every principal, it would otherwise hold a full bucket for each of them.)
  bool has_token(const std::string& key, clock::time_point now = clock::now());
  // Whole seconds until `key` has a token again (at least 1).
  std::int64_t retry_after_s(const std::string& key, clock::time_point now = clock::now());

  std::size_t size() const;

 private:
  struct bucket {
    double tokens = 0;
    clock::time_point at;
  };
  // The key's bucket refilled up to `now`, or nullptr when it has none.
  bucket* found(const std::string& key, clock::time_point now);
  // The same, with a full bucket made for a new key; nullptr when the table is full of live buckets.
  bucket* refreshed(const std::string& key, clock::time_point now);
  void refill(bucket& b, clock::time_point now) const;

  double rate_per_second_;
  double burst_;
  std::size_t keys_max_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, bucket> buckets_;
};

}  // namespace api
