#pragma once

// Prometheus metrics of the HTTP layer: requests by route and status, a latency histogram per
// route, open connections. Other modules' gauges are appended at render time.

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "actors/ledger_service.hpp"
#include "http/exchange.hpp"
#include "http/retry_calendar.hpp"
#include "ratelimit/limiter.hpp"

namespace api {

class metrics {
 public:
  metrics() = default;
  explicit metrics(retry_calendar::options returns) : retry_returns(returns) {}

  void observe(const std::string& route, int status, double seconds);
  std::atomic<std::int64_t> open_connections{0};
  std::atomic<std::int64_t> inflight_requests{0};  // read and not yet answered
  // Admitted and not finished, answered or not (the bound of admission.inflight_requests_max).
  const std::shared_ptr<admission_budget> admission = std::make_shared<admission_budget>();
  std::atomic<std::uint64_t> connections_refused{0};
  std::atomic<std::uint64_t> accept_failures{0};          // accept() errors (e.g. out of file descriptors)
  std::atomic<std::uint64_t> forwarded_requests{0};       // cluster mode: sent to the partition's holder
  std::atomic<std::uint64_t> forward_failures{0};         // ... that did not reach it or got no answer
  std::atomic<std::uint64_t> unauthenticated_refused{0};  // 429 before a key lookup, per address
  std::atomic<std::uint64_t> unknown_account_refused{0};  // 429 to a principal naming unknown accounts
  std::atomic<std::uint64_t> bodies_lingered{0};          // error answers followed by reading the body
  // Every answer passes it: a 503's Retry-After is booked into a second with room for its return.
  retry_calendar retry_returns{retry_calendar::options{}};
  // Set when a shutdown begins: /readyz answers 503 from then on, so that a load balancer stops
  // sending requests here during http.shutdown_drain_ms, while they are still served.
  std::atomic<bool> shutting_down{false};
  // Series of parts the HTTP layer does not know (the outbox relay), appended to the page: set
  // before the server starts, then only called.
  std::function<std::string()> more_series;

  // The text exposition of everything observed so far, followed by `extra`.
  std::string render(const std::string& extra) const;
  // The page GET /metrics answers: the HTTP layer's metrics, the service's gauges and counters,
  // and the rate limiter's when there is one.
  std::string render_page(const actors::service_stats& service,
                          const std::optional<ratelimit::limiter::stats>& limiter) const;

 private:
  static constexpr std::array<double, 14> bounds_s{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                   0.1,    0.25,  0.5,    1.0,   2.5,  5.0,   10.0};
  struct histogram {
    std::array<std::uint64_t, bounds_s.size() + 1> buckets{};
    double sum_s = 0;
    std::uint64_t count = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::map<std::string, histogram> latency_;
};

}  // namespace api
