#include "tools/loadgen/stats.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <cmath>

namespace loadgen {

std::string classify(const http_response& response) {
  if (response.error != transport_error::none) return "error " + to_string(response.error);
  const int status = response.status;
  if (status >= 400 && status < 500 && status != 429) {
    // The problem `code` tells apart the business rules that share 422.
    boost::system::error_code ec;
    const auto body = boost::json::parse(response.body, ec);
    if (!ec && body.is_object()) {
      if (const auto* code = body.as_object().if_contains("code"); code && code->is_string()) {
        return std::to_string(status) + " " + std::string(code->as_string());
      }
    }
  }
  // A server error that does not say when to come back is a defect of the server or of a proxy
  // in front of it (a 503 of the wallet server always carries Retry-After): told apart, so that
  // a run can require that there was none.
  if (status >= 500 && response.retry_after_s < 0) return std::to_string(status) + " no-retry-after";
  return std::to_string(status);
}

bool is_accepted(const std::string& status_class) { return status_class == "201" || status_class == "200"; }

bool is_outcome_unknown(const http_response& response) {
  if (response.error == transport_error::queue_full) return false;  // never sent
  return response.error != transport_error::none || response.status >= 500;
}

double window_stats::achieved_rate() const {
  const double length = std::max(end_s, last_completion_s) - start_s;
  return length > 0 ? static_cast<double>(finished) / length : 0;
}

double window_stats::intended_rate() const {
  const double length = end_s - start_s;
  return length > 0 ? static_cast<double>(scheduled) / length : 0;
}

void run_stats::begin_window(std::string name, double start_s, double end_s) {
  std::lock_guard lock(mutex_);
  windows_.emplace_back();
  windows_.back().name = std::move(name);
  windows_.back().start_s = start_s;
  windows_.back().end_s = end_s;
  if (total_.scheduled == 0 && total_.finished == 0) total_.start_s = start_s;
  total_.end_s = std::max(total_.end_s, end_s);
}

void run_stats::end_window_early(double end_s) {
  std::lock_guard lock(mutex_);
  if (windows_.empty() || end_s >= windows_.back().end_s) return;
  windows_.back().end_s = end_s;
  total_.end_s = end_s;
}

second_stats* run_stats::second_at(double t_s) {
  if (t_s < 0) t_s = 0;
  const auto second = static_cast<std::size_t>(t_s);
  if (second >= k_series_seconds_max) return nullptr;
  if (series_.size() <= second) series_.resize(second + 1);
  return &series_[second];
}

void run_stats::on_scheduled(double scheduled_s, std::int64_t send_lag_us) {
  std::lock_guard lock(mutex_);
  ++total_.scheduled;
  total_.send_lag_us.record(send_lag_us);
  if (!windows_.empty()) {
    ++windows_.back().scheduled;
    windows_.back().send_lag_us.record(send_lag_us);
  }
  if (auto* s = second_at(scheduled_s)) {
    ++s->intended;
    s->send_lag_max_us = std::max(s->send_lag_max_us, send_lag_us);
  }
}

void run_stats::on_attempt(const std::string& status_class, bool first) {
  std::lock_guard lock(mutex_);
  ++total_.every_attempt[status_class];
  if (!first) return;
  ++total_.first_attempt[status_class];
  if (!windows_.empty()) ++windows_.back().first_attempt[status_class];
}

void run_stats::on_retry() {
  std::lock_guard lock(mutex_);
  ++total_.retries;
  if (!windows_.empty()) ++windows_.back().retries;
}

void run_stats::on_finished(const std::string& status_class, std::int64_t latency_us, std::int64_t attempt_latency_us,
                            double scheduled_s, double completed_s, bool was_retried) {
  const bool accepted = is_accepted(status_class);
  std::lock_guard lock(mutex_);
  auto record = [&](window_stats& w) {
    ++w.finished;
    auto& c = w.classes[status_class];
    ++c.count;
    c.latency_us.record(latency_us);
    if (accepted) w.accepted_us.record(latency_us);
    if (was_retried) {
      ++w.retried_requests;
      ++w.retried_outcome[status_class];
    }
    w.last_completion_s = std::max(w.last_completion_s, completed_s);
  };
  record(total_);
  if (!windows_.empty()) record(windows_.back());
  if (auto* s = second_at(scheduled_s)) {
    ++s->counts[status_class];
    if (accepted) {
      if (!s->accepted_us) s->accepted_us = std::make_unique<histogram>(k_second_latency_us_max, 2);
      s->accepted_us->record(latency_us);
      if (!s->accepted_attempt_us) s->accepted_attempt_us = std::make_unique<histogram>(k_second_latency_us_max, 2);
      s->accepted_attempt_us->record(attempt_latency_us);
    }
  }
  if (auto* s = second_at(completed_s)) {
    ++s->completed;
    if (accepted) ++s->accepted_completed;
  }
}

progress_snapshot run_stats::progress(double now_s) {
  std::lock_guard lock(mutex_);
  progress_snapshot p;
  p.finished = total_.finished;
  for (const auto& [name, c] : total_.classes) p.counts[name] = c.count;
  p.accepted_p99_us = total_.accepted_us.value_at_percentile(99);
  const auto last = static_cast<std::size_t>(std::max(0.0, now_s - 1));
  if (last < series_.size()) {
    p.completed_last_second = series_[last].completed;
    p.scheduled_last_second = series_[last].intended;
  }
  return p;
}

window_stats run_stats::total() const {
  std::lock_guard lock(mutex_);
  return total_;
}

std::vector<window_stats> run_stats::windows() const {
  std::lock_guard lock(mutex_);
  return windows_;
}

}  // namespace loadgen
