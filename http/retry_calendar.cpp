#include "http/retry_calendar.hpp"

#include <algorithm>
#include <cmath>

namespace api {
namespace {

std::int64_t phase_of(retry_calendar::clock::time_point t) {
  using phase = std::chrono::duration<std::int64_t, std::ratio<1, retry_calendar::k_phases_per_second>>;
  return std::chrono::duration_cast<phase>(t.time_since_epoch()).count();
}

std::size_t index_of(std::int64_t at, std::size_t size) {
  const auto n = static_cast<std::int64_t>(size);
  return static_cast<std::size_t>(((at % n) + n) % n);
}

}  // namespace

retry_calendar::retry_calendar(options o)
    : options_(o),
      returns_(static_cast<std::size_t>((std::max<std::int64_t>(1, o.retry_after_max_s) + 2) * k_phases_per_second)),
      answered_(static_cast<std::size_t>(std::max<std::int64_t>(1, o.capacity_window_s) + 2)) {}

retry_calendar::slot& retry_calendar::fresh(std::vector<slot>& ring, std::int64_t at) {
  auto& x = ring[index_of(at, ring.size())];
  if (x.at != at) x = slot{at, 0};
  return x;
}

const retry_calendar::slot* retry_calendar::find(const std::vector<slot>& ring, std::int64_t at) {
  const auto& x = ring[index_of(at, ring.size())];
  return x.at == at ? &x : nullptr;
}

std::int64_t retry_calendar::best_before(std::int64_t now_s) const {
  std::int64_t best = 0;
  for (std::int64_t s = now_s - options_.capacity_window_s; s < now_s; ++s) {
    if (const auto* x = find(answered_, s)) best = std::max(best, x->count);
  }
  return best;
}

std::int64_t retry_calendar::room_per_second(std::int64_t now_s) const {
  const auto* current = find(answered_, now_s);
  const std::int64_t best = std::max(best_before(now_s), current ? current->count : 0);
  const auto share = static_cast<std::int64_t>(std::floor(static_cast<double>(best) * options_.returns_share));
  return std::max(options_.returns_min_per_second, share);
}

std::int64_t retry_calendar::book(std::int64_t at_least_s, clock::time_point now) {
  const std::int64_t horizon = std::max<std::int64_t>(1, options_.retry_after_max_s);
  const std::int64_t first = std::clamp<std::int64_t>(at_least_s, 1, horizon);
  const std::int64_t now_p = phase_of(now);
  std::lock_guard lock(mutex_);
  const std::int64_t room =
      std::max<std::int64_t>(1, room_per_second(now_p / k_phases_per_second) / k_phases_per_second);
  std::int64_t least = first;
  std::int64_t least_count = -1;
  for (std::int64_t wait = first; wait <= horizon; ++wait) {
    auto& x = fresh(returns_, now_p + wait * k_phases_per_second);
    if (x.count < room) {
      ++x.count;
      return wait;
    }
    if (least_count < 0 || x.count < least_count) {
      least = wait;
      least_count = x.count;
    }
  }
  ++fresh(returns_, now_p + least * k_phases_per_second).count;
  return least;
}

void retry_calendar::answered(clock::time_point now) {
  answered_total_.fetch_add(1, std::memory_order_relaxed);
  const std::int64_t now_s = phase_of(now) / k_phases_per_second;
  std::lock_guard lock(mutex_);
  ++fresh(answered_, now_s).count;
  if (capacity_second_ != now_s) {
    capacity_second_ = now_s;
    capacity_.store(best_before(now_s), std::memory_order_relaxed);
  }
}

retry_calendar::snapshot retry_calendar::read(clock::time_point now) const {
  const std::int64_t now_p = phase_of(now);
  std::lock_guard lock(mutex_);
  snapshot r;
  r.returns_per_second = room_per_second(now_p / k_phases_per_second);
  const std::int64_t last = options_.retry_after_max_s * k_phases_per_second;
  for (std::int64_t ahead = 1; ahead <= last; ++ahead) {
    const auto* x = find(returns_, now_p + ahead);
    if (x == nullptr || x->count == 0) continue;
    r.booked += x->count;
    r.furthest_s = (ahead + k_phases_per_second - 1) / k_phases_per_second;
  }
  return r;
}

}  // namespace api
