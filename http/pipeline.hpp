#pragma once

// What a request passes before its handler runs, in this order: admission (the server's bound
// on requests in flight), authentication (the API key), the route's role, the principal's rate
// limit, and for routes that name accounts the principal's allowance of unknown-account lookups.
// Each step either answers the request (503, 401, 403, 429) or hands it to the next.

#include <functional>
#include <optional>
#include <shared_mutex>
#include <string>

#include "http/handler_support.hpp"
#include "http/router.hpp"
#include "ratelimit/limiter.hpp"

namespace api {

class pipeline {
 public:
  pipeline(handler_support& support, ratelimit::limiter* limiter);

  // Runs the steps for `r`; `next` runs the handler with the authenticated principal.
  void run(const exchange_ptr& ex, const route& r, std::function<void(const principal&)> next);

  // Stops using the rate limiter (which the caller may then destroy); requests still on their way
  // through answer 503 "shutting down" from here on.
  void stop();

  // Asks Redis through the limiter; ok when there is no limiter.
  void ping_redis(std::function<void(bool ok, std::string detail)> done);
  // The limiter's counters, when there is a limiter.
  std::optional<ratelimit::limiter::stats> limiter_stats();

 private:
  void authenticate(const exchange_ptr& ex, std::function<void(const principal&)> next);
  // Requests in flight beyond which a new one is answered 503 before any work (admission settings).
  std::int64_t inflight_bound() const;
  void rate_limit(const exchange_ptr& ex, const principal& who, rate_class rate, std::function<void()> next);
  void shutting_down(const exchange_ptr& ex) const;

  handler_support& support_;
  // Guards `limiter_` against stop(), after which it is gone.
  std::shared_mutex limiter_mutex_;
  ratelimit::limiter* limiter_;
  std::atomic<bool> stopped_{false};
};

}  // namespace api
