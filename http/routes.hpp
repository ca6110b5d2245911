#pragma once

// The wallet's HTTP API (docs/design.md §6, docs/openapi.json): the route table of every
// resource's handlers (http/handlers/), behind the request pipeline (http/pipeline.hpp).

#include <memory>
#include <string>

#include "actors/ledger_service.hpp"
#include "config/settings.hpp"
#include "http/exchange.hpp"
#include "http/metrics.hpp"
#include "http/router.hpp"

namespace ratelimit {
class limiter;
}

namespace api {

class routes {
 public:
  routes(const config::settings& settings, actors::ledger_service& service, ratelimit::limiter* limiter,
         metrics& metrics);
  ~routes();

  void handle(const exchange_ptr& ex);
  // Cluster mode: serves a request another node forwarded here (docs/scaling.md) through the same
  // routes and pipeline, without counting its rate limit again; `done` gets the answer.
  void serve_forwarded(actors::forwarded_request request, std::function<void(actors::forwarded_reply)> done);
  // Stops using the rate limiter (which the caller may then destroy); requests still on their way
  // through the routes answer 503 "shutting down" from here on.
  void stop();

  // The route table, as dispatch uses it (tests check it against docs/openapi.json).
  const router& table() const;
  // The limits of the route a method and path reach (the http settings' unless the route has its
  // own): what the server reads a request's body under, once its header is read, and answers it within.
  request_limits limits(std::string_view method, std::string_view path) const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace api
