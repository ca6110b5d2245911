#include "tools/loadgen/histogram.hpp"

#include "base/assert.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace loadgen {

histogram::histogram(std::int64_t highest_value, int significant_digits)
    : highest_value_(highest_value), significant_digits_(significant_digits) {
  WALLET_ASSERT(significant_digits >= 1 && significant_digits <= 5, "histogram precision is 1 to 5 digits");
  WALLET_ASSERT(highest_value >= 2, "histogram range must hold at least two values");
  // Values up to 2 * 10^digits need single-unit resolution; the sub-bucket count is the next power
  // of two, and each further bucket doubles the unit while keeping the same number of counters.
  std::int64_t largest_single_unit = 2;
  for (int i = 0; i < significant_digits; ++i) largest_single_unit *= 10;
  const int sub_bucket_count_magnitude =
      static_cast<int>(std::ceil(std::log2(static_cast<double>(largest_single_unit))));
  sub_bucket_half_count_magnitude_ = sub_bucket_count_magnitude - 1;
  sub_bucket_count_ = std::int64_t{1} << sub_bucket_count_magnitude;
  sub_bucket_half_count_ = sub_bucket_count_ / 2;
  sub_bucket_mask_ = sub_bucket_count_ - 1;

  std::int64_t smallest_untrackable = sub_bucket_count_;
  int buckets = 1;
  while (smallest_untrackable <= highest_value) {
    WALLET_ASSERT(buckets < 62, "histogram bucket count is bounded by the int64 range");
    smallest_untrackable <<= 1;
    ++buckets;
  }
  bucket_count_ = buckets;
  counts_.assign(static_cast<std::size_t>((bucket_count_ + 1) * sub_bucket_half_count_), 0);
}

int histogram::bucket_index(std::int64_t value) const {
  const int pow2_ceiling = 64 - std::countl_zero(static_cast<std::uint64_t>(value | sub_bucket_mask_));
  return pow2_ceiling - (sub_bucket_half_count_magnitude_ + 1);
}

std::size_t histogram::counts_index(std::int64_t value) const {
  const int bucket = bucket_index(value);
  const std::int64_t sub_bucket = value >> bucket;
  const std::int64_t bucket_base = static_cast<std::int64_t>(bucket + 1) << sub_bucket_half_count_magnitude_;
  return static_cast<std::size_t>(bucket_base + (sub_bucket - sub_bucket_half_count_));
}

std::int64_t histogram::value_from_counts_index(std::size_t index) const {
  int bucket = static_cast<int>(index >> sub_bucket_half_count_magnitude_) - 1;
  std::int64_t sub_bucket =
      static_cast<std::int64_t>(index & static_cast<std::size_t>(sub_bucket_half_count_ - 1)) + sub_bucket_half_count_;
  if (bucket < 0) {
    sub_bucket -= sub_bucket_half_count_;
    bucket = 0;
  }
  return sub_bucket << bucket;
}

std::int64_t histogram::lowest_equivalent(std::int64_t value) const {
  const int bucket = bucket_index(value);
  return (value >> bucket) << bucket;
}

std::int64_t histogram::highest_equivalent(std::int64_t value) const {
  const int bucket = bucket_index(value);
  return lowest_equivalent(value) + (std::int64_t{1} << bucket) - 1;
}

void histogram::record(std::int64_t value, std::int64_t count) {
  if (count <= 0) return;
  if (value < 0) value = 0;
  if (value > highest_value_) {
    value = highest_value_;
    saturated_ += count;
  }
  const std::size_t index = counts_index(value);
  WALLET_ASSERT(index < counts_.size(), "histogram index within its counters");
  counts_[index] += count;
  if (total_count_ == 0) {
    min_ = value;
    max_ = value;
  } else {
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }
  total_count_ += count;
  sum_ += static_cast<long double>(value) * static_cast<long double>(count);
}

void histogram::merge(const histogram& other) {
  WALLET_ASSERT(other.counts_.size() == counts_.size() && other.highest_value_ == highest_value_ &&
                    other.significant_digits_ == significant_digits_,
                "merged histograms share one layout");
  if (other.total_count_ == 0) return;
  for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  if (total_count_ == 0) {
    min_ = other.min_;
    max_ = other.max_;
  } else {
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
  }
  total_count_ += other.total_count_;
  saturated_ += other.saturated_;
  sum_ += other.sum_;
}

void histogram::reset() {
  std::fill(counts_.begin(), counts_.end(), 0);
  total_count_ = 0;
  min_ = 0;
  max_ = 0;
  saturated_ = 0;
  sum_ = 0;
}

std::int64_t histogram::value_at_percentile(double percentile) const {
  if (total_count_ == 0) return 0;
  percentile = std::clamp(percentile, 0.0, 100.0);
  // The rank of the wanted value, rounded to the nearest count and at least the first value.
  const auto wanted = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::llround(percentile / 100.0 * static_cast<double>(total_count_))));
  std::int64_t seen = 0;
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= wanted) {
      return std::min(highest_equivalent(value_from_counts_index(i)), max_);
    }
  }
  return max_;
}

double histogram::mean() const {
  if (total_count_ == 0) return 0;
  return static_cast<double>(sum_ / static_cast<long double>(total_count_));
}

}  // namespace loadgen
