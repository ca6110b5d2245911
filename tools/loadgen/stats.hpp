#pragma once

// What a run measured: latencies per status class, retries and how they ended, and a per-second
// time series. Every latency is counted from the request's scheduled send time, so a server that
// stalls cannot hide the requests that queued behind the stall (no coordinated omission).

#include "tools/loadgen/histogram.hpp"
#include "tools/loadgen/http_client.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace loadgen {

// Latencies are microseconds; one hour is the longest we track exactly, anything longer is
// counted as one hour.
constexpr std::int64_t k_latency_us_max = 3'600'000'000;
// Per-second histograms keep two digits over a minute: enough for a chart, at 20 KB a second.
constexpr std::int64_t k_second_latency_us_max = 60'000'000;
// The time series covers at most this many seconds of a run.
constexpr std::size_t k_series_seconds_max = 4 * 3600;

// The class of a final answer: "201", "200", "422 insufficient_funds", "429", "503",
// "error timeout", ...; 4xx answers carry their problem `code` when the body has one.
std::string classify(const http_response& response);
bool is_accepted(const std::string& status_class);
// An answer after which the request may or may not have been applied: transport errors and 5xx.
bool is_outcome_unknown(const http_response& response);

struct class_stats {
  std::int64_t count = 0;
  histogram latency_us{k_latency_us_max, 3};
};

// Everything counted over one stretch of a run (the whole run, or one search step).
struct window_stats {
  std::string name;
  double start_s = 0;
  double end_s = 0;  // of the schedule, not of the last answer
  std::int64_t scheduled = 0;
  std::int64_t finished = 0;
  std::map<std::string, class_stats> classes;
  histogram accepted_us{k_latency_us_max, 3};
  // How late each request left the load generator after its scheduled time. Large values mean
  // the generator itself could not keep up (its latency figures stay honest, but the server then
  // saw less load than intended).
  histogram send_lag_us{k_latency_us_max, 3};
  std::map<std::string, std::int64_t> first_attempt;  // the class each request's first answer had
  std::map<std::string, std::int64_t> every_attempt;  // the class of every answer, retries included
  std::int64_t retries = 0;                           // extra attempts sent
  std::int64_t retried_requests = 0;
  std::map<std::string, std::int64_t> retried_outcome;  // final class of requests that were retried
  double last_completion_s = 0;

  double achieved_rate() const;
  double intended_rate() const;
};

struct second_stats {
  std::int64_t intended = 0;   // requests scheduled in this second
  std::int64_t completed = 0;  // final answers that arrived in this second
  std::int64_t accepted_completed = 0;
  std::int64_t send_lag_max_us = 0;            // of requests scheduled in this second
  std::map<std::string, std::int64_t> counts;  // final classes of requests scheduled in this second
  std::unique_ptr<histogram> accepted_us;      // of requests scheduled in this second
  // Of the same requests, the accepted answer's own latency: from when that attempt was due (the
  // schedule, or the end of a Retry-After wait) to its answer; the client's own queue counts.
  std::unique_ptr<histogram> accepted_attempt_us;
};

struct progress_snapshot {
  std::int64_t finished = 0;
  std::int64_t completed_last_second = 0;
  std::int64_t scheduled_last_second = 0;
  std::map<std::string, std::int64_t> counts;
  std::int64_t accepted_p99_us = 0;
};

class run_stats {
 public:
  run_stats() = default;

  // Starts a new window (e.g. a search step); the whole-run window goes on.
  void begin_window(std::string name, double start_s, double end_s);
  // The load ended before its schedule did (a signal): the current window, and the run, end at
  // `end_s` instead, so that their rates count the time the load ran.
  void end_window_early(double end_s);
  void on_scheduled(double scheduled_s, std::int64_t send_lag_us);
  // One HTTP answer (or transport failure) of an attempt; `first` for a request's first attempt.
  void on_attempt(const std::string& status_class, bool first);
  void on_retry();
  // The final outcome of a request: `latency_us` from its schedule, `attempt_latency_us` from when
  // its last attempt was due.
  void on_finished(const std::string& status_class, std::int64_t latency_us, std::int64_t attempt_latency_us,
                   double scheduled_s, double completed_s, bool was_retried);

  progress_snapshot progress(double now_s);
  // Copies, under the lock, for the report.
  window_stats total() const;
  std::vector<window_stats> windows() const;

  // The series is read after the run has finished, when nothing records any more.
  const std::vector<second_stats>& series() const { return series_; }

 private:
  second_stats* second_at(double t_s);

  mutable std::mutex mutex_;
  window_stats total_;
  std::vector<window_stats> windows_;
  std::vector<second_stats> series_;
};

}  // namespace loadgen
