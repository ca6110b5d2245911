#include "http/token_buckets.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "base/assert.hpp"

namespace api {

token_buckets::token_buckets(std::int64_t rate_per_second, std::int64_t burst, std::size_t keys_max)
    : rate_per_second_(static_cast<double>(rate_per_second)), burst_(static_cast<double>(burst)), keys_max_(keys_max) {
  WALLET_ASSERT(rate_per_second >= 1 && burst >= 1 && keys_max >= 1, "token buckets need positive bounds");
}

void token_buckets::refill(bucket& b, clock::time_point now) const {
  const double elapsed_s = std::chrono::duration<double>(now - b.at).count();
  if (elapsed_s > 0) b.tokens = std::min(burst_, b.tokens + elapsed_s * rate_per_second_);
  b.at = std::max(b.at, now);
}

token_buckets::bucket* token_buckets::found(const std::string& key, clock::time_point now) {
  const auto it = buckets_.find(key);
  if (it == buckets_.end()) return nullptr;
  refill(it->second, now);
  return &it->second;
}

token_buckets::bucket* token_buckets::refreshed(const std::string& key, clock::time_point now) {
  if (bucket* b = found(key, now)) return b;
  if (buckets_.size() >= keys_max_) {
    // A full bucket says nothing a new one would not: drop those first.
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      refill(it->second, now);
      it = it->second.tokens >= burst_ ? buckets_.erase(it) : std::next(it);
    }
    if (buckets_.size() >= keys_max_) return nullptr;
  }
  return &buckets_.emplace(key, bucket{burst_, now}).first->second;
}

bool token_buckets::take(const std::string& key, clock::time_point now) {
  std::lock_guard lock(mutex_);
  bucket* b = refreshed(key, now);
  if (b == nullptr || b->tokens < 1.0) return false;
  b->tokens -= 1.0;
  return true;
}

void token_buckets::charge(const std::string& key, clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (bucket* b = refreshed(key, now)) b->tokens = std::max(-rate_per_second_ * k_debt_max_s, b->tokens - 1.0);
}

bool token_buckets::has_token(const std::string& key, clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (const bucket* b = found(key, now)) return b->tokens >= 1.0;
  // No bucket: a full one, if the table has room for it. When it has none, the answer is the one
  // take() would get: room made by dropping full buckets, or no token for a new key.
  if (buckets_.size() < keys_max_) return true;
  const bucket* b = refreshed(key, now);
  return b != nullptr && b->tokens >= 1.0;
}

std::int64_t token_buckets::retry_after_s(const std::string& key, clock::time_point now) {
  std::lock_guard lock(mutex_);
  const bucket* b = found(key, now);
  if (b == nullptr) return 1;
  const double missing = std::max(0.0, 1.0 - b->tokens);
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(missing / rate_per_second_)));
}

std::size_t token_buckets::size() const {
  std::lock_guard lock(mutex_);
  return buckets_.size();
}

}  // namespace api
