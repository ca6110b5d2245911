#include "actors/key_cache.hpp"

#include <algorithm>

namespace actors {

key_cache::key_cache(std::int64_t known_max, std::chrono::milliseconds known_ttl, std::chrono::milliseconds unknown_ttl,
                     std::int64_t unknown_max)
    : known_max_(known_max),
      known_ttl_(known_ttl),
      unknown_ttl_(unknown_ttl),
      unknown_max_(unknown_max),
      confirmed_at_(clock::now()) {}

std::optional<principal_view> key_cache::find(const std::string& key_hash_hex, clock::time_point now) const {
  std::lock_guard lock(mutex_);
  auto it = known_.find(key_hash_hex);
  if (it == known_.end()) return std::nullopt;
  if (now >= std::max(it->second.read_at, confirmed_at_) + known_ttl_) return std::nullopt;
  return it->second.principal;
}

bool key_cache::knows(const std::string& key_hash_hex) const {
  std::lock_guard lock(mutex_);
  return known_.count(key_hash_hex) != 0;
}

bool key_cache::known_unknown(const std::string& key_hash_hex, clock::time_point now) {
  std::lock_guard lock(mutex_);
  auto it = unknown_.find(key_hash_hex);
  if (it == unknown_.end()) return false;
  if (now < it->second) return true;
  unknown_.erase(it);
  return false;
}

void key_cache::remember(const std::string& key_hash_hex, const principal_view& principal, clock::time_point read_at) {
  std::lock_guard lock(mutex_);
  if (auto it = revoked_.find(key_hash_hex); it != revoked_.end() && read_at <= it->second) return;
  if (read_at <= marks_dropped_at_) return;
  if (static_cast<std::int64_t>(known_.size()) >= known_max_ && known_.count(key_hash_hex) == 0) known_.clear();
  known_[key_hash_hex] = known_key{principal, read_at};
  unknown_.erase(key_hash_hex);
}

void key_cache::remember_unknown(const std::string& key_hash_hex, clock::time_point now) {
  if (unknown_ttl_.count() <= 0) return;
  std::lock_guard lock(mutex_);
  if (static_cast<std::int64_t>(unknown_.size()) >= unknown_max_) {
    std::erase_if(unknown_, [now](const auto& item) { return item.second <= now; });
    if (static_cast<std::int64_t>(unknown_.size()) >= unknown_max_) unknown_.clear();
  }
  unknown_[key_hash_hex] = now + unknown_ttl_;
}

void key_cache::mark_revoked(const std::string& key_hash_hex, clock::time_point at) {
  known_.erase(key_hash_hex);
  if (static_cast<std::int64_t>(revoked_.size()) >= unknown_max_ && revoked_.count(key_hash_hex) == 0) {
    std::erase_if(revoked_, [at](const auto& item) { return item.second + k_revoked_mark <= at; });
    if (static_cast<std::int64_t>(revoked_.size()) >= unknown_max_) {
      // Too many marks to keep. A mark only stops a read that started before it from bringing
      // its key back (every marked key left `known_` when it was marked), so remembering no read
      // that started before the marks went keeps the same promise. (A check's marks carry the
      // check's start, which may precede marks made since by revoke().) The other known keys
      // stay: forgetting them would let anyone who revokes keys fast enough make every client's
      // key be read again.
      marks_dropped_at_ = std::max(marks_dropped_at_, at);
      for (const auto& [hash, marked_at] : revoked_) marks_dropped_at_ = std::max(marks_dropped_at_, marked_at);
      revoked_.clear();
    }
  }
  auto& mark = revoked_[key_hash_hex];
  mark = std::max(mark, at);
}

void key_cache::revoke(const std::string& key_hash_hex, clock::time_point now) {
  std::lock_guard lock(mutex_);
  mark_revoked(key_hash_hex, now);
}

void key_cache::confirm(const std::vector<std::string>& revoked_key_hashes, bool complete,
                        clock::time_point check_started) {
  std::lock_guard lock(mutex_);
  for (const auto& hash : revoked_key_hashes) mark_revoked(hash, check_started);
  if (!complete) known_.clear();
  std::erase_if(revoked_, [check_started](const auto& item) { return item.second + k_revoked_mark <= check_started; });
  confirmed_at_ = std::max(confirmed_at_, check_started);
}

std::size_t key_cache::unknown_count() const {
  std::lock_guard lock(mutex_);
  return unknown_.size();
}

std::size_t key_cache::known_count() const {
  std::lock_guard lock(mutex_);
  return known_.size();
}

}  // namespace actors
