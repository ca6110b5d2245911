#pragma once

// A log-linear histogram of non-negative integers (latencies in microseconds), laid out like
// HdrHistogram: values below 2 * 10^digits are counted exactly, and every larger value lands in a
// bucket no wider than its value / 10^digits, so percentiles keep `significant_digits` digits at
// any magnitude with a fixed, small amount of memory and O(1) recording.

#include <cstdint>
#include <vector>

namespace loadgen {

class histogram {
 public:
  // `highest_value` is the largest value tracked exactly to the given precision; larger values
  // are recorded as `highest_value` and counted in `saturated()`, never dropped.
  histogram(std::int64_t highest_value, int significant_digits);

  void record(std::int64_t value, std::int64_t count = 1);
  // Adds every count of `other`, which must have the same layout (same highest value and digits).
  void merge(const histogram& other);
  void reset();

  // The smallest recorded value v such that `percentile` percent of all values are <= v, reported
  // as the highest value equivalent to v at this precision (and never above the true maximum).
  // 0 when empty.
  std::int64_t value_at_percentile(double percentile) const;

  std::int64_t count() const { return total_count_; }
  std::int64_t min() const { return total_count_ == 0 ? 0 : min_; }
  std::int64_t max() const { return total_count_ == 0 ? 0 : max_; }
  std::int64_t saturated() const { return saturated_; }
  double mean() const;

  // The range of values that share one counter with `value`: [lowest, highest].
  std::int64_t lowest_equivalent(std::int64_t value) const;
  std::int64_t highest_equivalent(std::int64_t value) const;

  std::int64_t highest_value() const { return highest_value_; }
  int significant_digits() const { return significant_digits_; }
  std::size_t counter_count() const { return counts_.size(); }

 private:
  int bucket_index(std::int64_t value) const;
  std::size_t counts_index(std::int64_t value) const;
  std::int64_t value_from_counts_index(std::size_t index) const;

  std::int64_t highest_value_;
  int significant_digits_;
  int sub_bucket_half_count_magnitude_ = 0;
  std::int64_t sub_bucket_count_ = 0;
  std::int64_t sub_bucket_half_count_ = 0;
  std::int64_t sub_bucket_mask_ = 0;
  int bucket_count_ = 0;
  std::vector<std::int64_t> counts_;
  std::int64_t total_count_ = 0;
  std::int64_t min_ = 0;
  std::int64_t max_ = 0;
  std::int64_t saturated_ = 0;
  // Sum of all recorded values for the mean; long double keeps it exact far past int64 overflow
  // concerns at our scale (hours of microsecond latencies).
  long double sum_ = 0;
};

}  // namespace loadgen
