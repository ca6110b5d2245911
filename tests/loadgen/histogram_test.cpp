#include "tools/loadgen/histogram.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace {

using loadgen::histogram;

// Relative error allowed by three significant digits: one part in a thousand (plus rounding).
constexpr double k_three_digits = 0.001;

void expect_close(std::int64_t actual, double expected, double relative) {
  EXPECT_LE(std::abs(static_cast<double>(actual) - expected), expected * relative + 1)
      << "actual " << actual << ", expected " << expected;
}

// Small values are counted exactly: recording 1..1000 once each gives the textbook percentiles.
TEST(histogram, small_values_are_exact) {
  histogram h(3'600'000'000, 3);
  for (int v = 1; v <= 1000; ++v) h.record(v);
  EXPECT_EQ(h.count(), 1000);
  EXPECT_EQ(h.min(), 1);
  EXPECT_EQ(h.max(), 1000);
  EXPECT_EQ(h.value_at_percentile(50), 500);
  EXPECT_EQ(h.value_at_percentile(99), 990);
  EXPECT_EQ(h.value_at_percentile(100), 1000);
  EXPECT_DOUBLE_EQ(h.mean(), 500.5);
}

// Percentiles of a uniform distribution over 1..1,000,000 land within three significant digits of
// the exact values, although most values share buckets.
TEST(histogram, uniform_distribution_percentiles_keep_three_digits) {
  histogram h(3'600'000'000, 3);
  for (std::int64_t v = 1; v <= 1'000'000; ++v) h.record(v);
  for (double p : {10.0, 50.0, 90.0, 99.0, 99.9}) expect_close(h.value_at_percentile(p), p * 10'000, k_three_digits);
  EXPECT_EQ(h.max(), 1'000'000);
}

// Percentiles of an exponential distribution (generated exactly from its quantile function, so the
// expected percentile is known in closed form) keep three digits across four orders of magnitude.
TEST(histogram, exponential_distribution_percentiles_match_the_quantile_function) {
  histogram h(3'600'000'000, 3);
  const int n = 200'000;
  const double mean = 5'000;  // e.g. 5 ms in microseconds
  for (int i = 0; i < n; ++i) {
    const double q = (i + 0.5) / n;
    h.record(static_cast<std::int64_t>(std::llround(-mean * std::log(1 - q))));
  }
  for (double p : {50.0, 90.0, 99.0, 99.9}) {
    expect_close(h.value_at_percentile(p), -mean * std::log(1 - p / 100), 2 * k_three_digits);
  }
  EXPECT_NEAR(h.mean(), mean, mean * 0.01);
}

// Every bucket is narrower than a thousandth of its values, at every magnitude up to an hour.
TEST(histogram, bucket_width_is_bounded_by_the_precision) {
  histogram h(3'600'000'000, 3);
  for (std::int64_t v = 1; v < 3'600'000'000; v = v * 3 + 7) {
    const auto width = h.highest_equivalent(v) - h.lowest_equivalent(v) + 1;
    EXPECT_LE(h.lowest_equivalent(v), v);
    EXPECT_GE(h.highest_equivalent(v), v);
    EXPECT_LE(static_cast<double>(width), std::max(1.0, static_cast<double>(v) * k_three_digits)) << v;
  }
}

// Merging two halves equals recording everything in one; values past the range are kept (clamped)
// and counted, never dropped.
TEST(histogram, merge_and_saturation) {
  histogram a(1'000'000, 3), b(1'000'000, 3), all(1'000'000, 3);
  for (int v = 1; v <= 5000; ++v) {
    (v % 2 ? a : b).record(v * 37);
    all.record(v * 37);
  }
  a.merge(b);
  for (double p : {1.0, 50.0, 99.0, 100.0}) EXPECT_EQ(a.value_at_percentile(p), all.value_at_percentile(p));
  EXPECT_EQ(a.count(), all.count());
  a.record(5'000'000);
  EXPECT_EQ(a.saturated(), 1);
  EXPECT_EQ(a.max(), 1'000'000);
  a.reset();
  EXPECT_EQ(a.count(), 0);
  EXPECT_EQ(a.value_at_percentile(99), 0);
}

}  // namespace
