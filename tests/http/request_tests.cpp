// http/request.hpp: the limits the server reads a request under (including the bound on its
// read buffer), what the routes see of a parsed request, and which X-Request-Id the server
// takes from the client and echoes in headers, bodies and logs.

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "http/request.hpp"

namespace api {
namespace {

namespace bhttp = boost::beast::http;

// The bytes a client sends, as a stream that hands them out 1000 at a time, then end of file.
class byte_stream {
 public:
  explicit byte_stream(std::string_view bytes) : rest_(bytes) {}
  template <class MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers, boost::system::error_code& ec) {
    if (rest_.empty()) {
      ec = boost::asio::error::eof;
      return 0;
    }
    ec = {};
    const auto piece = boost::asio::buffer(rest_.data(), std::min<std::size_t>(1000, rest_.size()));
    const auto n = boost::asio::buffer_copy(buffers, piece);
    rest_.remove_prefix(n);
    return n;
  }
  template <class MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers) {
    boost::system::error_code ec;
    const auto n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

 private:
  std::string_view rest_;
};

// Reads one request from `bytes` as the server does: its limits, its read buffer.
boost::system::error_code read_as_the_server(const std::string& bytes, const config::http_settings& settings) {
  byte_stream stream(bytes);
  boost::beast::flat_buffer buffer(read_buffer_bytes_max(settings));
  request_parser parser;
  apply_limits(parser, settings);
  boost::system::error_code ec;
  bhttp::read(stream, buffer, parser, ec);
  return ec;
}

// Reads one request as the server does when a route has a body limit of its own: the header under
// no body limit, then the body under `route_limit`. Gives the error, or the body read.
struct two_step_read {
  boost::system::error_code ec;
  bool refused_at_header = false;
  std::string body;
};
two_step_read read_with_route_limit(const std::string& bytes, const config::http_settings& settings,
                                    std::int64_t route_limit) {
  byte_stream stream(bytes);
  boost::beast::flat_buffer buffer(read_buffer_bytes_max(settings));
  request_parser parser;
  apply_header_limit(parser, settings);
  two_step_read out;
  bhttp::read_header(stream, buffer, parser, out.ec);
  if (out.ec) return out;
  if (!apply_body_limit(parser, route_limit)) {
    out.refused_at_header = true;
    return out;
  }
  bhttp::read(stream, buffer, parser, out.ec);
  if (!out.ec) out.body = parser.get().body();
  return out;
}

bhttp::request<bhttp::string_body> request_with(std::string target) {
  bhttp::request<bhttp::string_body> req{bhttp::verb::post, target, 11};
  req.set(bhttp::field::host, "x");
  return req;
}

std::string request_id_for(const std::string& sent) {
  auto req = request_with("/healthz");
  req.set("X-Request-Id", sent);
  exchange ex;
  fill_exchange(ex, req);
  return ex.request_id;
}

bool is_generated(const std::string& id) {
  return id.size() == 16 &&
         std::all_of(id.begin(), id.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Behind a trusted proxy the client is the last address of the last X-Forwarded-For header: the
// one the proxy added. What a client wrote before it, or a header that is not an address, never
// replaces the peer with an address of the client's choosing.
TEST(forwarded_client, is_the_address_the_proxy_added) {
  const std::string peer = "127.0.0.1";
  auto req = request_with("/v1/accounts");
  EXPECT_EQ(forwarded_client(req, peer), peer);
  req.set("X-Forwarded-For", "203.0.113.7");
  EXPECT_EQ(forwarded_client(req, peer), "203.0.113.7");
  req.set("X-Forwarded-For", "10.9.9.9, 198.51.100.2 ");
  EXPECT_EQ(forwarded_client(req, peer), "198.51.100.2");
  req.insert("X-Forwarded-For", "2001:DB8::0:1");
  EXPECT_EQ(forwarded_client(req, peer), "2001:db8::1");
  req.insert("X-Forwarded-For", "198.51.100.2, unknown");
  EXPECT_EQ(forwarded_client(req, peer), peer);
  req.set("X-Forwarded-For", "");
  EXPECT_EQ(forwarded_client(req, peer), peer);
  req.set("X-Forwarded-For", "::ffff:192.0.2.1");
  EXPECT_EQ(forwarded_client(req, peer), "192.0.2.1");
}

TEST(read_limits, bound_the_body_the_header_and_what_beast_leaves_unbounded) {
  // Beast waits for the end of a trailer or a chunk extension without a bound of its own; the
  // read buffer stops both at header_bytes_max + 4 KiB, while requests within the limits read.
  const config::http_settings settings;
  ASSERT_EQ(read_buffer_bytes_max(settings), static_cast<std::size_t>(settings.header_bytes_max) + 4096);
  const std::string head = "POST /v1/transfers HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string body(static_cast<std::size_t>(settings.body_bytes_max), 'b');
  EXPECT_FALSE(read_as_the_server(head + "0\r\nX-Trailer: " + std::string(1000, 't') + "\r\n\r\n", settings));
  EXPECT_FALSE(read_as_the_server(head + "1;ext=" + std::string(1000, 'e') + "\r\nx\r\n0\r\n\r\n", settings));
  const std::string with_length = "POST / HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  const std::string with_length_past =
      "POST / HTTP/1.1\r\nContent-Length: " + std::to_string(body.size() + 1) + "\r\n\r\n";
  EXPECT_FALSE(read_as_the_server(with_length + body, settings));
  EXPECT_FALSE(read_as_the_server("GET / HTTP/1.1\r\nX-Big: " + std::string(8000, 'h') + "\r\n\r\n", settings));

  EXPECT_EQ(read_as_the_server(head + "0\r\nX-Trailer: " + std::string(20'000, 't') + "\r\n\r\n", settings),
            bhttp::error::buffer_overflow);
  EXPECT_EQ(read_as_the_server(head + "1;ext=" + std::string(20'000, 'e') + "\r\nx\r\n0\r\n\r\n", settings),
            bhttp::error::buffer_overflow);
  EXPECT_EQ(read_as_the_server(with_length_past + body + "b", settings), bhttp::error::body_limit);
  EXPECT_EQ(read_as_the_server("GET / HTTP/1.1\r\nX-Big: " + std::string(9000, 'h') + "\r\n\r\n", settings),
            bhttp::error::header_limit);
}

TEST(read_limits, a_route_with_a_limit_of_its_own_reads_under_that_limit_only) {
  // The header is read under no body limit; the route's limit then holds for its body, larger or
  // smaller than body_bytes_max: a declared length past it is refused before any of the body is
  // read, a chunked body past it while it is read. The header limit stays in force throughout.
  const config::http_settings settings;
  const std::string body(100'000, 'r');
  const std::string with_length = "POST /r HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  auto read = read_with_route_limit(with_length + body, settings, 1'000'000);
  EXPECT_FALSE(read.ec) << read.ec.message();
  EXPECT_EQ(read.body, body);
  read = read_with_route_limit(with_length + body, settings, settings.body_bytes_max);
  EXPECT_TRUE(read.refused_at_header);
  read = read_with_route_limit("POST /r HTTP/1.1\r\nContent-Length: 1073741824\r\n\r\n", settings, 1'000'000);
  EXPECT_TRUE(read.refused_at_header);
  const std::string chunked =
      "POST /r HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n186a0\r\n" + body + "\r\n0\r\n\r\n";
  read = read_with_route_limit(chunked, settings, 1'000'000);
  EXPECT_FALSE(read.ec) << read.ec.message();
  EXPECT_EQ(read.body, body);
  read = read_with_route_limit(chunked, settings, 99'999);
  EXPECT_FALSE(read.refused_at_header);
  EXPECT_EQ(read.ec, bhttp::error::body_limit);
  read = read_with_route_limit("GET / HTTP/1.1\r\nX-Big: " + std::string(9000, 'h') + "\r\n\r\n", settings, 1'000'000);
  EXPECT_EQ(read.ec, bhttp::error::header_limit);
}

TEST(fill_exchange, copies_what_the_routes_read) {
  // Method, target split at the first '?', body, and the first of each header the routes read.
  auto req = request_with("/v1/accounts/7/entries?limit=10&after=5?x");
  req.insert(bhttp::field::authorization, "Bearer one");
  req.insert(bhttp::field::authorization, "Bearer two");
  req.insert("Idempotency-Key", "pay-1");
  req.insert(bhttp::field::content_type, "application/json");
  req.body() = R"({"amount":1})";
  exchange ex;
  fill_exchange(ex, req);
  EXPECT_EQ(ex.method, "POST");
  EXPECT_EQ(ex.target, "/v1/accounts/7/entries?limit=10&after=5?x");
  EXPECT_EQ(ex.path, "/v1/accounts/7/entries");
  EXPECT_EQ(ex.query, "limit=10&after=5?x");
  EXPECT_EQ(ex.body, R"({"amount":1})");
  EXPECT_EQ(ex.authorization, "Bearer one");
  EXPECT_TRUE(ex.has_idempotency_key);
  EXPECT_EQ(ex.idempotency_key, "pay-1");
  EXPECT_EQ(ex.content_type, "application/json");
}

TEST(fill_exchange, an_empty_idempotency_key_is_still_sent) {
  // The routes tell "no key" (400: required) from "an empty key" (400: malformed) by has_idempotency_key.
  auto req = request_with("/v1/deposits");
  req.set("Idempotency-Key", "");
  exchange ex;
  fill_exchange(ex, req);
  EXPECT_TRUE(ex.has_idempotency_key);
  EXPECT_EQ(ex.idempotency_key, "");
  EXPECT_EQ(ex.query, "");
}

TEST(fill_exchange, keeps_a_client_request_id_of_1_to_64_visible_characters) {
  // A usable X-Request-Id is echoed as sent, up to 64 characters; without one the server makes one.
  EXPECT_EQ(request_id_for("req-1"), "req-1");
  EXPECT_EQ(request_id_for(std::string(64, 'r')), std::string(64, 'r'));
  EXPECT_EQ(request_id_for("!~"), "!~");
  exchange ex;
  auto req = request_with("/healthz");
  fill_exchange(ex, req);
  EXPECT_TRUE(is_generated(ex.request_id)) << ex.request_id;
}

TEST(fill_exchange, replaces_a_request_id_that_is_empty_too_long_or_not_visible_ascii) {
  // The id is echoed in a response header, in every problem+json body and in every log line: an
  // empty one, one with spaces or tabs, or one with bytes beyond ASCII (invalid UTF-8 in a JSON
  // body) would reach all three, so the server makes its own instead.
  EXPECT_TRUE(is_generated(request_id_for(""))) << request_id_for("");
  EXPECT_TRUE(is_generated(request_id_for(std::string(65, 'r'))));
  EXPECT_TRUE(is_generated(request_id_for("a b"))) << request_id_for("a b");
  EXPECT_TRUE(is_generated(request_id_for("a\tb"))) << request_id_for("a\tb");
  EXPECT_TRUE(is_generated(request_id_for("caf\xe9"))) << request_id_for("caf\xe9");
  EXPECT_TRUE(is_generated(request_id_for("a\x7f"))) << request_id_for("a\x7f");
}

}  // namespace
}  // namespace api
