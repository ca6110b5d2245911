#pragma once

// Small helpers over the wallet API for setup and verification: reading fields of its JSON
// answers, calls that retry transient failures, and running many calls with bounded concurrency.

#include "tools/loadgen/http_client.hpp"

#include <boost/json/value.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace loadgen {

// The parsed body of an answer, or nothing when it is not a JSON object.
std::optional<boost::json::object> parse_object(const std::string& body);
// An integer field given as a JSON integer or as a string of digits (amounts, ids).
std::optional<std::int64_t> int_field(const boost::json::object& o, std::string_view key);
std::optional<std::string> string_field(const boost::json::object& o, std::string_view key);
// A short description of an answer for error messages: status and the start of the body.
std::string describe(const http_response& response);

// Sends `request` on I/O thread `thread`, retrying 429, 503 and transport failures (after
// Retry-After, or a short growing pause) up to `attempts_max` attempts in all. The callback gets
// the last answer. Used for setup and verification, where a transient failure is not a result.
void call_with_retries(http_client& client, std::size_t thread, http_request request, int attempts_max,
                       http_callback callback);

// Runs tasks 0..count-1 with at most `concurrency` in flight and blocks until all are done. A
// task gets its index, the I/O thread to use, and a `done` to call exactly once when it finishes.
using bulk_task = std::function<void(std::size_t index, std::size_t thread, std::function<void()> done)>;
void run_bulk(http_client& client, std::size_t count, std::size_t concurrency, const bulk_task& task);

}  // namespace loadgen
