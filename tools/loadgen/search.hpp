#pragma once

// The search for the highest rate a server sustains within the latency target: how one step of
// open load is judged, and the climb from step to step.

#include "tools/loadgen/options.hpp"
#include "tools/loadgen/report.hpp"
#include "tools/loadgen/stats.hpp"

#include <functional>

namespace loadgen {

// Judges one step of intended `rate` per second from its window. It is within target when some
// requests were accepted, the accepted requests' p99 is at most `o.p99_target_ms`, at most 1% of
// the scheduled requests were not accepted (refused, failed or unanswered), and the accepted
// rate reached 90% of `rate`.
search_step evaluate_step(const options& o, const window_stats& w, double rate);

// What one step came to: its judgement, and whether it was abandoned (requests still unanswered
// when its drain timeout ran out), which ends the search after it.
struct step_outcome {
  search_step step;
  bool abandoned = false;
};

// Runs one step of open load at `rate` per second and judges it.
using step_runner = std::function<step_outcome(double rate)>;

// Steps up the rate until a step misses the target, then bisects between the last good and the
// first bad rate. Rates grow geometrically from `o.search_start_rate` by `o.search_step_factor`
// up to `o.search_max_rate`; a missed step of the climb is run once more before the climb stops;
// then `o.search_refine` bisection steps. Every step run is in the result, in order, and the
// best is the passing step with the highest achieved rate (the earliest on a tie).
search_result search_highest_rate(const options& o, const step_runner& run_step);

}  // namespace loadgen
