#pragma once

// Log lines that come in floods when the server sheds load (one per 503 answer): logging each, a
// formatted line and a write apiece, would make an overload pay for its own record. A throttle
// lets one line through per period and counts the rest, which the next line reports. The metrics
// still count every answer (wallet_http_requests_total).

#include <atomic>
#include <cstdint>

namespace api {

class log_throttle {
 public:
  explicit log_throttle(std::int64_t period_us) : period_us_(period_us) {}

  // Whether the line of an event at `now_us` (a steady clock) is to be logged; if so,
  // `held_back` is how many lines were not since the last one that was. Thread-safe.
  bool admit(std::int64_t now_us, std::int64_t& held_back) {
    auto next = next_us_.load(std::memory_order_relaxed);
    if (now_us < next || !next_us_.compare_exchange_strong(next, now_us + period_us_, std::memory_order_relaxed)) {
      held_back_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    held_back = held_back_.exchange(0, std::memory_order_relaxed);
    return true;
  }

 private:
  const std::int64_t period_us_;
  std::atomic<std::int64_t> next_us_{0};
  std::atomic<std::int64_t> held_back_{0};
};

}  // namespace api
