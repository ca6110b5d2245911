#pragma once

// One HTTP request in flight, as the routes see it: what was asked, and a one-shot way to
// answer that is safe to call from any thread (the answer is posted to the connection's strand).

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
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::string route = "unmatched";  // the route label for metrics
  std::int64_t principal_id = 0;   // once authenticated
  std::vector<std::pair<std::string, std::string>> extra_headers;  // e.g. RateLimit, added to the reply

  // Sends the answer; only the first call counts.
  std::function<void(reply)> respond;
};

using exchange_ptr = std::shared_ptr<exchange>;

}  // namespace api
