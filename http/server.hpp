#pragma once

// The HTTP/1.1 server (Boost.Beast, asynchronous): keep-alive, a deadline on every read, a body
// and header limit, a bounded number of connections, one strand per connection, answers
// written with Content-Length. Requests are handed to a handler that answers asynchronously.
//
// Shutdown (SIGTERM/SIGINT), in three phases:
// 1. the drain, `shutdown_drain_ms` (0: none; a second signal ends it): requests are served as
//    usual, /readyz answers 503 and every answer closes its connection, so that a load balancer
//    stops sending requests here before any connection is closed under one;
// 2. stop accepting, close idle connections, and give the others `shutdown_grace_ms` to end: a
//    request in flight finishes, one whose bytes arrive now is refused (503 `server_busy`,
//    Connection: close); what is still in flight then is answered 503 (`outcome_unknown`:
//    retry with the same Idempotency-Key; `server_busy` for reads);
// 3. once those answers are written (at most a second more), close every connection left and
//    stop the I/O threads.

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "config/settings.hpp"
#include "http/exchange.hpp"
#include "http/metrics.hpp"

namespace api {

class server {
 public:
  using handler = std::function<void(const exchange_ptr&)>;
  // The limits of a request's route, by its method and path (called on an I/O thread once the
  // request's header is read). Without it, every request has settings.body_bytes_max and
  // settings.request_deadline_ms.
  using limits_of = std::function<request_limits(std::string_view method, std::string_view path)>;

  server(const config::http_settings& settings, metrics& metrics, handler handle, limits_of limits = {});
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Binds and starts accepting on the I/O threads; throws if the address cannot be bound.
  void start();
  // Blocks until SIGINT or SIGTERM (or request_stop()) has shut the server down gracefully.
  void run_until_stopped();
  // As SIGTERM: begins a shutdown, or ends its drain early.
  void request_stop();
  std::uint16_t port() const;

  struct impl;  // public so the connection sessions in server.cpp can reach it

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace api
