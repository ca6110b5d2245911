#pragma once

// One HTTP request in flight, as the routes see it: what was asked, and a one-shot way to
// answer that is safe to call from any thread (the answer is posted to the connection's thread).
//
// Threads: the request fields are written once, before the routes see the exchange. The work
// behind a request moves between threads (reader, limiter, actor) but one step at a time, so
// `extra_headers` belongs to whichever step runs; only the answer that wins reads it, on the
// thread that answers. The connection's own deadline may answer concurrently: it never reads
// `extra_headers`, and `principal_id` (logged with every answer) is atomic.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "http/problem.hpp"

namespace api {

struct reply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

reply problem_reply(const problem& p, std::string_view request_id);

struct exchange {
  std::string request_id;
  std::string method;
  std::string target;  // path and query, as sent
  std::string path;
  std::string query;
  std::string body;
  std::string authorization;
  std::string idempotency_key;
  bool has_idempotency_key = false;
  std::string content_type;
  std::string wallet_signature;  // a provider event's Wallet-Signature header
  std::string client_address;    // the peer's IP address, for per-address limits
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  // By when (from `started`) it is answered, whatever the work behind it does: its route's
  // deadline, or what a forwarding node left for it. Zero: not known (no forward bound is derived).
  std::chrono::milliseconds deadline{0};
  std::string route = "unmatched";                                 // the route label for metrics
  std::atomic<std::int64_t> principal_id{0};                       // once authenticated
  std::vector<std::pair<std::string, std::string>> extra_headers;  // e.g. RateLimit, added to the reply
  std::atomic<bool> answered{false};
  // Cluster mode: forwarded here by the node that received it (docs/scaling.md). It is never
  // forwarded again, and its rate limit was counted where it arrived.
  bool forwarded = false;

  // Sends the answer with `extra_headers`; only the first answer counts (this or the deadline's).
  std::function<void(reply)> respond;
};

using exchange_ptr = std::shared_ptr<exchange>;

// What a request is read and answered under: the limits of its route (http.body_bytes_max and
// http.request_deadline_ms for all but a few routes).
struct request_limits {
  std::int64_t body_bytes_max = 0;
  std::int64_t deadline_ms = 0;
};

}  // namespace api
