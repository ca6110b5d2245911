#include "tools/loadgen/schedule.hpp"

#include "base/assert.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace loadgen {
namespace {

double segment_count(const rate_segment& s) { return (s.rate_start + s.rate_end) / 2.0 * s.duration_s; }

}  // namespace

rate_profile::rate_profile(std::vector<rate_segment> segments) : segments_(std::move(segments)) {
  for (const auto& s : segments_) {
    WALLET_ASSERT(s.duration_s >= 0 && s.rate_start >= 0 && s.rate_end >= 0,
                  "rate segments have non-negative durations and rates");
  }
}

rate_profile rate_profile::constant(double rate, double duration_s) { return rate_profile({{duration_s, rate, rate}}); }

rate_profile rate_profile::ramp(double rate_from, double rate, double ramp_s, double duration_s) {
  ramp_s = std::min(ramp_s, duration_s);
  std::vector<rate_segment> segments;
  if (ramp_s > 0) segments.push_back({ramp_s, rate_from, rate});
  if (duration_s > ramp_s) segments.push_back({duration_s - ramp_s, rate, rate});
  return rate_profile(std::move(segments));
}

rate_profile rate_profile::spike(double baseline, double multiplier, double spike_start_s, double spike_ramp_s,
                                 double spike_hold_s, double duration_s) {
  const double peak = baseline * multiplier;
  std::vector<rate_segment> segments;
  double t = 0;
  // Each piece is cut at the end of the run, so a short run simply ends inside the spike.
  auto add = [&](double length, double from, double to) {
    const double room = duration_s - t;
    if (room <= 0 || length <= 0) return;
    if (length > room) {
      to = from + (to - from) * (room / length);
      length = room;
    }
    segments.push_back({length, from, to});
    t += length;
  };
  add(spike_start_s, baseline, baseline);
  add(spike_ramp_s, baseline, peak);
  add(spike_hold_s, peak, peak);
  add(spike_ramp_s, peak, baseline);
  add(duration_s - t, baseline, baseline);
  return rate_profile(std::move(segments));
}

double rate_profile::duration_s() const {
  double total = 0;
  for (const auto& s : segments_) total += s.duration_s;
  return total;
}

double rate_profile::rate_at(double t_s) const {
  double start = 0;
  for (const auto& s : segments_) {
    if (t_s < start + s.duration_s) {
      if (s.duration_s <= 0) return s.rate_start;
      return s.rate_start + (s.rate_end - s.rate_start) * ((t_s - start) / s.duration_s);
    }
    start += s.duration_s;
  }
  return 0;
}

double rate_profile::expected_count(double t_s) const {
  double start = 0;
  double count = 0;
  for (const auto& s : segments_) {
    if (t_s >= start + s.duration_s) {
      count += segment_count(s);
      start += s.duration_s;
      continue;
    }
    const double dt = std::max(0.0, t_s - start);
    const double slope = s.duration_s > 0 ? (s.rate_end - s.rate_start) / s.duration_s : 0;
    return count + s.rate_start * dt + slope * dt * dt / 2.0;
  }
  return count;
}

std::string rate_profile::describe() const {
  std::ostringstream text;
  for (std::size_t i = 0; i < segments_.size(); ++i) {
    const auto& s = segments_[i];
    if (i) text << ", ";
    if (s.rate_start == s.rate_end) {
      text << s.rate_start << "/s for " << s.duration_s << " s";
    } else {
      text << s.rate_start << "->" << s.rate_end << "/s over " << s.duration_s << " s";
    }
  }
  return text.str();
}

arrival_schedule::arrival_schedule(rate_profile profile, std::uint64_t offset, std::uint64_t stride)
    : profile_(std::move(profile)), index_(offset), stride_(stride) {
  WALLET_ASSERT(stride >= 1 && offset < stride, "a sender's offset lies within the stride");
}

std::optional<std::int64_t> arrival_schedule::next() {
  const auto t = time_of(index_);
  if (!t) return std::nullopt;
  index_ += stride_;
  return static_cast<std::int64_t>(std::llround(*t * 1e9));
}

std::optional<double> arrival_schedule::time_of(std::uint64_t k) {
  const auto& segments = profile_.segments();
  const double target = static_cast<double>(k);
  // Bounded: each step moves to the next segment, and there are finitely many.
  while (segment_ < segments.size()) {
    const auto& s = segments[segment_];
    const double in_segment = segment_count(s);
    const double need = target - segment_start_count_;
    if (need < in_segment && s.duration_s > 0) {
      // Solve rate_start * dt + slope * dt^2 / 2 = need for dt. This form has no cancellation
      // for ramps in either direction and reduces to need / rate for a constant rate.
      const double a = s.rate_start;
      const double slope = (s.rate_end - s.rate_start) / s.duration_s;
      const double root = std::sqrt(std::max(0.0, a * a + 2.0 * slope * need));
      const double denominator = a + root;
      const double dt = denominator > 0 ? std::clamp(2.0 * need / denominator, 0.0, s.duration_s) : 0.0;
      return segment_start_s_ + dt;
    }
    segment_start_count_ += in_segment;
    segment_start_s_ += s.duration_s;
    ++segment_;
  }
  return std::nullopt;
}

}  // namespace loadgen
