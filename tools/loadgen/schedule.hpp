#pragma once

// The open-loop arrival schedule: a rate profile (requests per second as a piecewise-linear
// function of time) and the exact arrival times it implies. Arrival k (from 0) is sent at the
// moment the integral of the rate reaches k, so a constant 1000/s sends at 0, 1 ms, 2 ms, ...
// whether or not earlier requests have been answered.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loadgen {

// One piece of the profile: the rate moves linearly from `rate_start` to `rate_end` over
// `duration_s` seconds.
struct rate_segment {
  double duration_s = 0;
  double rate_start = 0;
  double rate_end = 0;
};

class rate_profile {
 public:
  rate_profile() = default;
  explicit rate_profile(std::vector<rate_segment> segments);

  // `rate` per second for `duration_s`.
  static rate_profile constant(double rate, double duration_s);
  // Linearly from `rate_from` to `rate` over `ramp_s`, then `rate` until `duration_s`.
  static rate_profile ramp(double rate_from, double rate, double ramp_s, double duration_s);
  // The payday spike: `baseline` until `spike_start_s`, up to `baseline * multiplier` over
  // `spike_ramp_s`, held `spike_hold_s`, down again over `spike_ramp_s`, then `baseline` (the
  // recovery period) until `duration_s`.
  static rate_profile spike(double baseline, double multiplier, double spike_start_s, double spike_ramp_s,
                            double spike_hold_s, double duration_s);

  double duration_s() const;
  double rate_at(double t_s) const;
  // The number of arrivals expected in [0, t_s): the integral of the rate.
  double expected_count(double t_s) const;
  const std::vector<rate_segment>& segments() const { return segments_; }
  std::string describe() const;

 private:
  std::vector<rate_segment> segments_;
};

// Iterates the arrival times of a profile in order. Arrivals can be split among `stride`
// independent senders: sender `offset` sees arrivals offset, offset + stride, ... only, so the
// union over all senders is exactly the profile's schedule.
class arrival_schedule {
 public:
  explicit arrival_schedule(rate_profile profile, std::uint64_t offset = 0, std::uint64_t stride = 1);

  // The time of the next arrival of this sender, in nanoseconds from the start, or nothing when
  // the profile has ended.
  std::optional<std::int64_t> next();
  // The global index of the arrival last returned by next().
  std::uint64_t last_index() const { return index_ - stride_; }

 private:
  std::optional<double> time_of(std::uint64_t k);

  rate_profile profile_;
  std::uint64_t index_;
  std::uint64_t stride_;
  // Arrivals only move forward, so the search for the segment of arrival k resumes where the
  // previous one ended.
  std::size_t segment_ = 0;
  double segment_start_s_ = 0;
  double segment_start_count_ = 0;
};

}  // namespace loadgen
