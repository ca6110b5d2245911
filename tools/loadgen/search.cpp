#include "tools/loadgen/search.hpp"

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

}  // namespace loadgen
