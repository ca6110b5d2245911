#include "tools/loadgen/search.hpp"

#include <cstdint>
#include <optional>

namespace loadgen {

search_step evaluate_step(const options& o, const window_stats& w, double rate) {
  search_step s;
  s.rate = rate;
  const auto accepted = w.accepted_us.count();
  const double length = w.end_s - w.start_s;
  s.achieved = length > 0 ? static_cast<double>(accepted) / length : 0;
  s.p50_us = w.accepted_us.value_at_percentile(50);
  s.p99_us = w.accepted_us.value_at_percentile(99);
  s.not_accepted = w.finished - accepted + (w.scheduled - w.finished);
  // A step is within target when the accepted requests' p99 is, nearly everything was accepted,
  // and the server kept up with the intended rate.
  s.ok = accepted > 0 && static_cast<double>(s.p99_us) <= o.p99_target_ms * 1000.0 &&
         static_cast<double>(s.not_accepted) <= 0.01 * static_cast<double>(w.scheduled) && s.achieved >= 0.9 * rate;
  return s;
}

search_result search_highest_rate(const options& o, const step_runner& run_step) {
  search_result search;
  std::optional<double> last_ok, first_bad;
  bool abandoned = false;
  auto step_at = [&](double rate) {
    const auto outcome = run_step(rate);
    abandoned = abandoned || outcome.abandoned;
    const auto& step = outcome.step;
    search.steps.push_back(step);
    if (step.ok && (!search.best || step.achieved > search.best->achieved)) search.best = step;
    return step.ok;
  };
  // Bounded: rates grow geometrically up to search_max_rate, each tried at most twice.
  for (double rate = o.search_start_rate; rate <= o.search_max_rate && !abandoned; rate *= o.search_step_factor) {
    // A missed step is tried once more before the climb stops: on a machine shared with
    // other work one bad step is often noise, and stopping there understates the server.
    if (step_at(rate) || (!abandoned && step_at(rate))) {
      last_ok = rate;
    } else {
      first_bad = rate;
      break;
    }
  }
  for (std::int64_t i = 0; i < o.search_refine && last_ok && first_bad && !abandoned; ++i) {
    const double mid = (*last_ok + *first_bad) / 2;
    if (step_at(mid)) {
      last_ok = mid;
    } else {
      first_bad = mid;
    }
  }
  return search;
}

}  // namespace loadgen
