// The bytes of an answer (http/response.hpp, its head and then its body): the same as Beast's serializer writes for the same
// message, whatever the status, version, connection and fields; and no field can smuggle a line.

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/response.hpp"

namespace api {
namespace {

// The bytes the server sends: the head, then the body when the status carries one.
std::string serialize_reply(const reply& r, std::string_view request_id, unsigned version, bool keep_alive) {
  return serialize_head(r, request_id, version, keep_alive) + (carries_body(r.status) ? r.body : std::string());
}

namespace bhttp = boost::beast::http;

// What the server wrote for an answer before http/response.hpp: Beast's message and serializer.
std::string beast_bytes(const reply& r, std::string_view request_id, unsigned version, bool keep_alive) {
  bhttp::response<bhttp::string_body> res(static_cast<bhttp::status>(r.status), version);
  res.set(bhttp::field::server, "wallet-server");
  res.set(bhttp::field::content_type, r.content_type);
  res.set("X-Request-Id", request_id);
  for (const auto& [name, value] : r.headers) res.set(name, value);
  res.body() = r.body;
  res.keep_alive(keep_alive);
  res.prepare_payload();
  std::ostringstream out;
  out << res;
  return out.str();
}

reply sample(int status, std::vector<std::pair<std::string, std::string>> headers = {}) {
  reply r;
  r.status = status;
  r.body = R"({"transactionId":"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","status":"posted"})";
  r.headers = std::move(headers);
  return r;
}

TEST(serialize_reply, writes_what_beast_writes_for_every_status_version_and_connection) {
  for (const int status : {200, 201, 202, 400, 401, 403, 404, 405, 409, 413, 415, 422, 429, 431, 500, 503, 504}) {
    for (const unsigned version : {10u, 11u}) {
      for (const bool keep_alive : {true, false}) {
        SCOPED_TRACE(std::to_string(status) + " HTTP " + std::to_string(version) + (keep_alive ? " keep" : " close"));
        const auto r = sample(status, {{"Retry-After", "3"}, {"Location", "/v1/transfers/7"}});
        EXPECT_EQ(serialize_reply(r, "req-1", version, keep_alive), beast_bytes(r, "req-1", version, keep_alive));
      }
    }
  }
}

TEST(serialize_reply, writes_what_beast_writes_for_empty_bodies_and_other_content_types) {
  reply r = sample(200);
  r.body.clear();
  EXPECT_EQ(serialize_reply(r, "", 11, true), beast_bytes(r, "", 11, true));
  r.content_type = "text/plain; version=0.0.4";
  r.body = "wallet_requests_total 1\n";
  EXPECT_EQ(serialize_reply(r, "abc", 11, true), beast_bytes(r, "abc", 11, true));
}

TEST(serialize_reply, a_field_named_again_replaces_the_earlier_one_as_beast_does) {
  // Names compare case-insensitively; the later field goes where the later one stood.
  const auto r = sample(201, {{"Idempotent-Replayed", "false"},
                              {"content-type", "application/json; charset=utf-8"},
                              {"idempotent-replayed", "true"},
                              {"X-Request-Id", "theirs"}});
  const auto bytes = serialize_reply(r, "ours", 11, true);
  EXPECT_EQ(bytes, beast_bytes(r, "ours", 11, true));
  EXPECT_EQ(bytes.find("Content-Type:"), std::string::npos);
  EXPECT_NE(bytes.find("content-type: application/json; charset=utf-8\r\n"), std::string::npos);
  EXPECT_EQ(bytes.find("Idempotent-Replayed: false"), std::string::npos);
  EXPECT_NE(bytes.find("idempotent-replayed: true\r\n"), std::string::npos);
  EXPECT_NE(bytes.find("X-Request-Id: theirs\r\n"), std::string::npos);
}

// What a client reads back: the fields and body a parser finds in the bytes.
bhttp::response<bhttp::string_body> parsed(const std::string& bytes) {
  bhttp::response_parser<bhttp::string_body> parser;
  parser.eager(true);
  boost::system::error_code ec;
  parser.put(boost::asio::buffer(bytes), ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_TRUE(parser.is_done());
  return parser.release();
}

TEST(serialize_reply, the_framing_is_the_servers_own) {
  // A Content-Length, Connection or Transfer-Encoding among the answer's fields would frame the
  // body wrongly or keep a closing connection open: they are left out, and the server's are written.
  auto r = sample(201, {{"Content-Length", "1"}, {"Connection", "keep-alive"}, {"Transfer-Encoding", "chunked"}});
  const auto res = parsed(serialize_reply(r, "id", 11, false));
  EXPECT_EQ(res.body(), r.body);
  EXPECT_EQ(res[bhttp::field::content_length], std::to_string(r.body.size()));
  EXPECT_EQ(res[bhttp::field::connection], "close");
  EXPECT_EQ(res.count(bhttp::field::transfer_encoding), 0u);
  EXPECT_FALSE(res.keep_alive());
}

TEST(serialize_reply, statuses_without_a_body_get_neither_body_nor_length) {
  for (const int status : {100, 204, 304}) {
    const auto bytes = serialize_reply(sample(status), "id", 11, true);
    EXPECT_EQ(bytes.find("Content-Length"), std::string::npos) << status;
    EXPECT_EQ(bytes.substr(bytes.size() - 4), "\r\n\r\n") << status;
  }
}

TEST(serialize_reply, a_line_break_in_a_field_cannot_start_another_field) {
  const auto r = sample(400, {{"X-Note", "a\r\nSet-Cookie: stolen=1"}});
  const auto bytes = serialize_reply(r, "id\r\nX-Injected: 1", 11, true);
  const auto res = parsed(bytes);
  EXPECT_EQ(res.count("Set-Cookie"), 0u);
  EXPECT_EQ(res.count("X-Injected"), 0u);
  EXPECT_EQ(res["X-Note"], "a  Set-Cookie: stolen=1");
  EXPECT_EQ(res["X-Request-Id"], "id  X-Injected: 1");
  EXPECT_EQ(res.body(), r.body);
}

}  // namespace
}  // namespace api
