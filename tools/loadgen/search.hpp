#pragma once

// The search for the highest rate a server sustains within the latency target: how one step of
// open load is judged, and the climb from step to step.

#include "tools/loadgen/options.hpp"
#include "tools/loadgen/report.hpp"
#include "tools/loadgen/stats.hpp"

namespace loadgen {

// Judges one step of intended `rate` per second from its window. It is within target when some
// requests were accepted, the accepted requests' p99 is at most `o.p99_target_ms`, at most 1% of
// the scheduled requests were not accepted (refused, failed or unanswered), and the accepted
// rate reached 90% of `rate`.
search_step evaluate_step(const options& o, const window_stats& w, double rate);

}  // namespace loadgen
