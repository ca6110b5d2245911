#include "actors/key_cache.hpp"

namespace actors {

key_cache::key_cache(std::int64_t known_max, std::chrono::milliseconds unknown_ttl, std::int64_t unknown_max)
    : known_max_(known_max), unknown_ttl_(unknown_ttl), unknown_max_(unknown_max) {}

std::optional<principal_view> key_cache::find(const std::string& key_hash_hex) const {
  std::lock_guard lock(mutex_);
  if (auto it = known_.find(key_hash_hex); it != known_.end()) return it->second;
  return std::nullopt;
}

bool key_cache::known_unknown(const std::string& key_hash_hex, std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mutex_);
  auto it = unknown_.find(key_hash_hex);
  if (it == unknown_.end()) return false;
  if (now < it->second) return true;
  unknown_.erase(it);
  return false;
}

void key_cache::remember(const std::string& key_hash_hex, const principal_view& principal) {
  std::lock_guard lock(mutex_);
  if (static_cast<std::int64_t>(known_.size()) >= known_max_ && known_.count(key_hash_hex) == 0) known_.clear();
  known_[key_hash_hex] = principal;
  unknown_.erase(key_hash_hex);
}

void key_cache::remember_unknown(const std::string& key_hash_hex, std::chrono::steady_clock::time_point now) {
  if (unknown_ttl_.count() <= 0) return;
  std::lock_guard lock(mutex_);
  if (static_cast<std::int64_t>(unknown_.size()) >= unknown_max_) {
    std::erase_if(unknown_, [now](const auto& item) { return item.second <= now; });
    if (static_cast<std::int64_t>(unknown_.size()) >= unknown_max_) unknown_.clear();
  }
  unknown_[key_hash_hex] = now + unknown_ttl_;
}

std::size_t key_cache::unknown_count() const {
  std::lock_guard lock(mutex_);
  return unknown_.size();
}

}  // namespace actors
