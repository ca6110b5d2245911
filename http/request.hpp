#pragma once

// From a parsed HTTP request to the exchange the routes see: the part of reading a request that
// needs no connection, shared by the server (http/server.cpp) and the request fuzzer
// (fuzz/http_request_fuzz.cpp). Included only where Beast's HTTP headers are already needed.

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "http/exchange.hpp"

namespace api {

// Fills the request fields of `ex` (request id, method, target, path and query, body,
// Authorization, Idempotency-Key, Content-Type) from `req`. The request id is the client's
// X-Request-Id when that is 1 to 64 visible ASCII characters, else a new one. The body is moved
// out of `req` rather than copied: it may be as large as the body limit, and is read only here.
void fill_exchange(exchange& ex, boost::beast::http::request<boost::beast::http::string_body>& req);

}  // namespace api
