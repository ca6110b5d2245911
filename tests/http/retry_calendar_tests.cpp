// The calendar of 503 returns (http/retry_calendar.hpp) on a clock the test moves: where it books
// returns, how much room a second has, what it does when the horizon is full, and the capacity
// it reports to the admission bound.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "http/retry_calendar.hpp"

namespace {

using api::retry_calendar;
using namespace std::chrono_literals;

const retry_calendar::clock::time_point t0{1000s};

retry_calendar::options small_horizon() {
  retry_calendar::options o;
  o.retry_after_max_s = 5;
  o.returns_share = 0.25;
  o.capacity_window_s = 10;
  o.returns_min_per_second = 100;  // one return per 10 ms phase
  return o;
}

// `n` answers (other than 503) in the second that starts at `at`, spread over its first half.
void answer(retry_calendar& calendar, retry_calendar::clock::time_point at, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) calendar.answered(at + std::chrono::microseconds(i * 500'000 / n));
}

TEST(retry_calendar, a_clump_of_refusals_comes_back_one_second_after_another) {
  retry_calendar calendar(small_horizon());
  // Nothing answered yet: the least room, one return per phase and second.
  std::vector<std::int64_t> waits;
  for (int i = 0; i < 5; ++i) waits.push_back(calendar.book(1, t0));
  EXPECT_EQ(waits, (std::vector<std::int64_t>{1, 2, 3, 4, 5}));
  // Refused 10 ms later, a request comes back in another phase: the next second has room there.
  EXPECT_EQ(calendar.book(1, t0 + 10ms), 1);
  // Within the same 10 ms phase, the clump still fills one second after another.
  EXPECT_EQ(calendar.book(1, t0 + 11ms), 2);
}

TEST(retry_calendar, a_second_has_room_for_a_share_of_the_busiest_recent_second) {
  retry_calendar calendar(small_horizon());
  answer(calendar, t0, 10'000);
  // The next second: 25% of 10,000 is 2,500 returns a second, 25 for each 10 ms phase.
  const auto now = t0 + 1s;
  calendar.answered(now);
  EXPECT_EQ(calendar.capacity_per_second(), 10'000);
  for (int i = 0; i < 25; ++i) EXPECT_EQ(calendar.book(1, now), 1) << i;
  EXPECT_EQ(calendar.book(1, now), 2);
  const auto seen = calendar.read(now);
  EXPECT_EQ(seen.returns_per_second, 2'500);
  EXPECT_EQ(seen.booked, 26);
  EXPECT_EQ(seen.furthest_s, 2);
}

TEST(retry_calendar, the_wait_asked_for_is_the_least_and_the_horizon_the_most) {
  retry_calendar calendar(small_horizon());
  EXPECT_EQ(calendar.book(3, t0), 3);
  EXPECT_EQ(calendar.book(3, t0), 4);
  EXPECT_EQ(calendar.book(0, t0 + 20ms), 1);
  EXPECT_EQ(calendar.book(60, t0 + 30ms), 5);
}

TEST(retry_calendar, a_full_horizon_takes_returns_where_they_are_fewest) {
  retry_calendar calendar(small_horizon());
  for (int i = 0; i < 5; ++i) calendar.book(1, t0);
  // Every second of the horizon holds one return of this phase: the next go to the fewest,
  // earliest first, so the horizon fills evenly.
  std::vector<std::int64_t> waits;
  for (int i = 0; i < 7; ++i) waits.push_back(calendar.book(1, t0));
  EXPECT_EQ(waits, (std::vector<std::int64_t>{1, 2, 3, 4, 5, 1, 2}));
  EXPECT_EQ(calendar.read(t0).booked, 12);
}

TEST(retry_calendar, returns_of_the_past_take_no_room) {
  retry_calendar calendar(small_horizon());
  for (int i = 0; i < 5; ++i) calendar.book(1, t0);
  EXPECT_EQ(calendar.read(t0).booked, 5);
  // Ten seconds on, those returns are all behind: the same phase has room again.
  EXPECT_EQ(calendar.read(t0 + 10s).booked, 0);
  EXPECT_EQ(calendar.book(1, t0 + 10s), 1);
  EXPECT_EQ(calendar.book(1, t0 + 10s), 2);
}

TEST(retry_calendar, capacity_is_the_busiest_whole_second_of_the_window) {
  retry_calendar calendar(small_horizon());
  EXPECT_EQ(calendar.capacity_per_second(), 0);
  answer(calendar, t0, 300);
  // The ongoing second is not counted until it ends.
  EXPECT_EQ(calendar.capacity_per_second(), 0);
  answer(calendar, t0 + 1s, 700);
  EXPECT_EQ(calendar.capacity_per_second(), 300);
  answer(calendar, t0 + 2s, 100);
  EXPECT_EQ(calendar.capacity_per_second(), 700);
  // Ten seconds after the 700, it has left the window; the seconds between answered nothing.
  calendar.answered(t0 + 12s);
  EXPECT_EQ(calendar.capacity_per_second(), 100);
  calendar.answered(t0 + 13s);
  EXPECT_EQ(calendar.capacity_per_second(), 1);
  calendar.answered(t0 + 30s);
  EXPECT_EQ(calendar.capacity_per_second(), 0);
}

}  // namespace
