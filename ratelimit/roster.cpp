#include "ratelimit/roster.hpp"

#include <algorithm>

#include "base/assert.hpp"

namespace ratelimit {

roster_timing roster_timing_for(std::int64_t longest_window_ms) {
  WALLET_ASSERT(longest_window_ms >= 1, "windows are at least a millisecond long");
  roster_timing t;
  t.span_ms = 2 * longest_window_ms;
  return t;
}

roster::roster(const roster_timing& timing, std::int64_t processes_max)
    : timing_(timing), processes_max_(processes_max) {
  WALLET_ASSERT(timing.beat_ms >= 1 && timing.fresh_ms >= timing.beat_ms && timing.span_ms >= 0 &&
                    timing.margin_ms >= 0 && processes_max >= 1,
                "roster timing and processes_max are validated");
}

void roster::renewed(std::int64_t sent_ms, std::int64_t answered_ms, std::int64_t count) {
  // Redis ran the renewal before it answered; the previous entry lived at least until its send
  // time plus the lifetime. Later than that, the entry may have expired in between: a new run.
  if (!running_ || answered_ms >= last_sent_ + timing_.ttl_ms()) {
    running_ = true;
    run_started_ = answered_ms;
    // Stored before the new usable_until_, so no reader pairs that with the old run's start.
    usable_from_.store(run_started_ + timing_.warmup(), std::memory_order_relaxed);
  }
  last_sent_ = sent_ms;
  count_.store(count, std::memory_order_relaxed);
  fresh_until_.store(sent_ms + timing_.fresh_ms, std::memory_order_release);
  usable_until_.store(sent_ms + timing_.ttl_ms() - timing_.span_ms - timing_.margin_ms, std::memory_order_release);
}

std::int64_t roster::processes(std::int64_t now_ms) const {
  if (now_ms > fresh_until_.load(std::memory_order_acquire)) return processes_max_;
  return std::clamp<std::int64_t>(count_.load(std::memory_order_relaxed), 1, processes_max_);
}

bool roster::may_admit_locally(std::int64_t now_ms) const {
  if (now_ms > usable_until_.load(std::memory_order_acquire)) return false;
  return now_ms >= usable_from_.load(std::memory_order_relaxed);
}

}  // namespace ratelimit
