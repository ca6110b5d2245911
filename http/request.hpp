#pragma once

// Reading a request, the part that needs no connection: the limits it is read under, and the
// exchange the routes see, built from the parsed request. Shared by the server
// (http/server.cpp) and the request fuzzer (fuzz/http_request_fuzz.cpp), so that the fuzzer
// reads as the server does. Included only where Beast's HTTP headers are already needed.

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <cstddef>

#include "config/settings.hpp"
#include "http/exchange.hpp"

namespace api {

using request_parser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// Sets the body and header limits a request is read under (413 and 431 beyond them).
void apply_limits(request_parser& parser, const config::http_settings& settings);

// The same in two steps, for a server whose body limit depends on the route (a settlement report
// may be far larger than any other body): first the header limit, with no body limit until the
// header has been read; then the route's body limit, before any of the body is read. The second
// returns false when the header's Content-Length exceeds that limit already (413 at once).
void apply_header_limit(request_parser& parser, const config::http_settings& settings);
bool apply_body_limit(request_parser& parser, std::int64_t body_bytes_max);

// The most a connection's read buffer may hold. Beast bounds a request's header and its body,
// but not a chunked body's trailer nor its chunk extensions: it waits for their end, holding
// everything before it. So the buffer is bounded too, at a header's worth plus one 4 KiB read;
// past that, reading fails (400) instead of buffering until the read deadline.
std::size_t read_buffer_bytes_max(const config::http_settings& settings);

// Fills the request fields of `ex` (request id, method, target, path and query, body,
// Authorization, Idempotency-Key, Content-Type) from `req`. The request id is the client's
// X-Request-Id when that is 1 to 64 visible ASCII characters, else a new one. The body is moved
// out of `req` rather than copied: it may be as large as the body limit, and is read only here.
// Returns the name of a header the request sends more than once that it may send only once
// (Authorization, Idempotency-Key, Content-Type, Wallet-Signature; the request is then refused:
// a proxy or a signer that reads another copy than the server would see another request), or
// nullptr.
const char* fill_exchange(exchange& ex, boost::beast::http::request<boost::beast::http::string_body>& req);

// The client's address behind a trusted proxy (http.trusted_proxies): the last address of the
// request's last X-Forwarded-For header, the one that proxy added (those before it came with the
// request and prove nothing), in its canonical form. `peer` when there is no such header or its
// last entry is not an IP address.
std::string forwarded_client(const boost::beast::http::request<boost::beast::http::string_body>& req,
                             const std::string& peer);

}  // namespace api
