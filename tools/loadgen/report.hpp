#pragma once

// How a run is told: the end-of-run table, the spike analysis, and the files of --out-dir
// (summary.json for scripts, timeseries.json, and report.html with inline SVG charts).

#include "tools/loadgen/options.hpp"
#include "tools/loadgen/stats.hpp"
#include "tools/loadgen/verify.hpp"

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace loadgen {

struct search_step {
  double rate = 0;
  double achieved = 0;  // accepted answers per second over the step
  std::int64_t p50_us = 0;
  std::int64_t p99_us = 0;
  std::int64_t not_accepted = 0;
  bool ok = false;
};

struct search_result {
  std::vector<search_step> steps;
  std::optional<search_step> best;
};

struct spike_result {
  double start_s = 0;
  double end_s = 0;
  double duration_s = 0;
  double share_429 = 0;  // of requests whose first answer was 429
  double share_503 = 0;
  double share_errors = 0;           // of requests whose first attempt got no HTTP answer at all
  std::int64_t p99_accepted_us = 0;  // of requests scheduled during the spike, from their schedule
  // Of the same requests, the accepted answer's own latency (from when that attempt was due):
  // what a 201 cost once sent, the Retry-After waits of earlier 503s left out.
  std::int64_t p99_accepted_answer_us = 0;
  std::int64_t baseline_p99_us = 0;  // before the spike, after the warm-up
  double recovery_s = -1;            // from the end of the spike until p99 is back; -1: never
};

struct cpu_usage {
  double user_s = 0;  // the whole process (getrusage)
  double system_s = 0;
  double io_threads_s = 0;  // the HTTP client's I/O threads alone
  double wall_s = 0;
};

// What became of the transfers whose outcome was unknown when the load ended (a transport error
// such as a refused or reset connection, a 5xx, or no answer by the drain timeout): each was
// replayed with its own Idempotency-Key until the server gave a definite answer.
struct unknown_outcomes {
  std::int64_t replayed = 0;
  std::int64_t found_committed = 0;    // answered 201 from the stored result: it had committed
  std::int64_t applied_on_replay = 0;  // answered 201 without it: it had not, and applied now
  std::int64_t refused = 0;            // answered 4xx: it never applied
  std::int64_t unresolved = 0;         // no definite answer even then
};

struct run_report {
  const options* opts = nullptr;
  std::string description;  // workload and load shape in words
  window_stats total;
  std::optional<search_result> search;
  std::optional<spike_result> spike;
  cpu_usage cpu;
  std::uint64_t reconnects = 0;
  // Retried transfers answered 201 from the stored result of an earlier attempt.
  std::int64_t retries_found_committed = 0;
  // Transfers answered 201, during the load or on replay; with the replays, set when verifying.
  std::int64_t acknowledged = 0;
  std::optional<unknown_outcomes> unknown;
  std::optional<verification> verdict;
};

// Compares the seconds before, during and after the spike of an open-loop spike profile.
std::optional<spike_result> analyze_spike(const options& o, const run_stats& stats);

void print_table(std::ostream& out, const run_report& report);
std::string summary_json(const run_report& report);
std::string timeseries_json(const run_stats& stats);
std::string html_report(const run_report& report, const run_stats& stats);
// Writes the three files into `dir` (created when missing); throws std::runtime_error on failure.
void write_outputs(const std::string& dir, const run_report& report, const run_stats& stats);

}  // namespace loadgen
