#pragma once

// The one mapping from a ledger outcome to an HTTP status and a problem+json body (RFC 9457).
// Every 4xx and 5xx answer of the server goes through problem_for().

#include <cstdint>
#include <string>
#include <string_view>

#include "ledger/errors.hpp"

namespace api {

struct problem {
  int status = 500;
  std::string code;    // stable, machine-readable
  std::string title;   // short, human-readable, fixed per code
  std::string detail;  // what went wrong with this request and what to do
  std::int64_t retry_after_s = 0;
};

problem problem_for(ledger::error_code code, std::string detail, std::int64_t retry_after_s = 0);

// A problem whose code is not a ledger outcome (HTTP-level: route_not_found, method_not_allowed,
// payload_too_large, unsupported_media_type, malformed_request, rate_limited, ...).
problem http_problem(int status, std::string code, std::string title, std::string detail,
                     std::int64_t retry_after_s = 0);

std::string problem_json(const problem& p, std::string_view request_id);

}  // namespace api
