#pragma once

// When the clients this server answers 503 should come back (docs/backpressure.md).
//
// A 503 tells its client to retry after `Retry-After` whole seconds. Told the same wait, the
// clients refused in an overload all come back together, into the same overload: each wave of
// returns is refused again, and the refusals take the CPU the admitted requests needed. The
// calendar books every refusal's return: the first whole-second wait, at or after the least the
// refusal asked for, whose return still has room.
//
// A client told to wait k seconds comes back at the same fraction of a second as it was refused,
// and refusals come in clumps (every request that finds the server full in the same few
// milliseconds). So room is kept per 10 ms phase of each second: a clump fills its phase of the
// next seconds one after the other, instead of coming back whole in the next one. Each second
// has room for a share of what the server answered (other than 503) in its busiest recent second,
// so that the returns of a spike come back over the seconds after it at a pace the server carries
// beside its new requests. When the whole horizon is booked, returns go where they are fewest.
//
// The same count of answers per second gives the server's recent capacity, which bounds the
// requests admitted (admission.queue_target_ms).
//
// Thread-safe (one mutex; a booking looks at one phase per second of the horizon).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

namespace api {

class retry_calendar {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::int64_t k_phases_per_second = 100;

  struct options {
    // The longest Retry-After given, in seconds: the calendar's horizon.
    std::int64_t retry_after_max_s = 30;
    // Returns a second may hold, as a share of the answers (other than 503) of the busiest of the
    // last `capacity_window_s` seconds...
    double returns_share = 0.25;
    std::int64_t capacity_window_s = 10;
    // ... and never fewer than this: a server that answers nothing but 503 (its database down)
    // still lets clients back at this pace.
    std::int64_t returns_min_per_second = 100;
  };

  explicit retry_calendar(options o);

  // Books the return of one refused request and answers its Retry-After in whole seconds: at
  // least `at_least_s` (and 1), at most options.retry_after_max_s.
  std::int64_t book(std::int64_t at_least_s, clock::time_point now = clock::now());
  // Counts one answer other than a 503.
  void answered(clock::time_point now = clock::now());
  // The answers (other than 503) of the busiest of the last options.capacity_window_s whole
  // seconds: what the server has shown it carries. Lock-free, for a check on every request;
  // brought up to date as each second ends (by the first answer after it).
  std::int64_t capacity_per_second() const { return capacity_.load(std::memory_order_relaxed); }
  // Every answer counted so far (for /metrics).
  std::uint64_t answered_total() const { return answered_total_.load(std::memory_order_relaxed); }

  struct snapshot {
    std::int64_t returns_per_second = 0;  // the room of each second, now
    std::int64_t booked = 0;              // returns booked in the seconds still to come
    std::int64_t furthest_s = 0;          // the furthest wait booked, from now
  };
  snapshot read(clock::time_point now = clock::now()) const;

 private:
  struct slot {
    std::int64_t at = -1;  // the second or phase it stands for (since the clock's epoch); -1: none
    std::int64_t count = 0;
  };
  // The slot of `at` in `ring`, emptied first when it last stood for an earlier time.
  static slot& fresh(std::vector<slot>& ring, std::int64_t at);
  static const slot* find(const std::vector<slot>& ring, std::int64_t at);
  // The busiest second of the window before `now_s` (the ongoing second left out).
  std::int64_t best_before(std::int64_t now_s) const;
  std::int64_t room_per_second(std::int64_t now_s) const;

  const options options_;
  mutable std::mutex mutex_;
  std::vector<slot> returns_;          // per phase, over the horizon
  std::vector<slot> answered_;         // per second, over the capacity window
  std::int64_t capacity_second_ = -1;  // the second capacity_ was computed in
  std::atomic<std::int64_t> capacity_{0};
  std::atomic<std::uint64_t> answered_total_{0};
};

}  // namespace api
