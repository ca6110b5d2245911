#include "tools/loadgen/schedule.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {

using loadgen::arrival_schedule;
using loadgen::rate_profile;

std::vector<std::int64_t> all_arrivals(const rate_profile& p, std::uint64_t offset = 0, std::uint64_t stride = 1) {
  arrival_schedule s(p, offset, stride);
  std::vector<std::int64_t> times;
  while (auto t = s.next()) times.push_back(*t);
  return times;
}

// A constant 1000/s for one second sends exactly 1000 requests, the k-th at k milliseconds.
TEST(schedule, constant_rate_sends_at_even_intervals) {
  const auto times = all_arrivals(rate_profile::constant(1000, 1));
  ASSERT_EQ(times.size(), 1000u);
  for (std::size_t k = 0; k < times.size(); ++k) EXPECT_NEAR(times[k], static_cast<double>(k) * 1e6, 1) << k;
}

// A linear ramp from 0 to 100/s over 10 s sends 500 requests; the integral 5 t^2 = k puts the k-th at
// sqrt(k / 5) seconds, so arrivals bunch up as the rate grows.
TEST(schedule, ramp_follows_the_integral_of_the_rate) {
  const auto times = all_arrivals(rate_profile::ramp(0, 100, 10, 10));
  ASSERT_EQ(times.size(), 500u);
  for (std::size_t k = 0; k < times.size(); ++k) {
    EXPECT_NEAR(static_cast<double>(times[k]) / 1e9, std::sqrt(static_cast<double>(k) / 5), 1e-6) << k;
  }
}

// The payday spike profile: each phase (baseline, ramp up, peak, ramp down, recovery) receives the
// number of arrivals its rate implies, in time order.
TEST(schedule, spike_profile_puts_the_right_load_in_each_phase) {
  const auto p = rate_profile::spike(100, 10, 10, 2, 5, 30);
  EXPECT_DOUBLE_EQ(p.duration_s(), 30);
  EXPECT_DOUBLE_EQ(p.rate_at(5), 100);
  EXPECT_DOUBLE_EQ(p.rate_at(11), 550);
  EXPECT_DOUBLE_EQ(p.rate_at(14), 1000);
  EXPECT_DOUBLE_EQ(p.rate_at(25), 100);
  const auto times = all_arrivals(p);
  auto count_between = [&](double from_s, double to_s) {
    std::size_t n = 0;
    for (auto t : times) n += (t >= from_s * 1e9 && t < to_s * 1e9);
    return n;
  };
  EXPECT_NEAR(count_between(0, 10), 1000, 1);
  EXPECT_NEAR(count_between(10, 12), 1100, 1);
  EXPECT_NEAR(count_between(12, 17), 5000, 1);
  EXPECT_NEAR(count_between(17, 19), 1100, 1);
  EXPECT_NEAR(count_between(19, 30), 1100, 1);
  EXPECT_NEAR(static_cast<double>(times.size()), p.expected_count(30), 1);
  for (std::size_t k = 1; k < times.size(); ++k) ASSERT_LE(times[k - 1], times[k]);
}

// Splitting the schedule over three senders (stride 3) loses and duplicates nothing: the union of
// their arrivals is the single sender's schedule.
TEST(schedule, strided_senders_share_the_schedule_exactly) {
  const auto p = rate_profile::spike(50, 4, 2, 1, 2, 8);
  const auto whole = all_arrivals(p);
  std::vector<std::int64_t> merged;
  for (std::uint64_t offset = 0; offset < 3; ++offset) {
    arrival_schedule s(p, offset, 3);
    while (auto t = s.next()) {
      EXPECT_EQ(s.last_index() % 3, offset);
      merged.push_back(*t);
    }
  }
  std::sort(merged.begin(), merged.end());
  EXPECT_EQ(merged, whole);
}

}  // namespace
