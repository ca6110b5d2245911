// fill_exchange (http/request.hpp): what the routes see of a parsed request, and which
// X-Request-Id the server takes from the client and echoes in headers, bodies and logs.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "http/request.hpp"

namespace api {
namespace {

namespace bhttp = boost::beast::http;

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
  return id.size() == 16 && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
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
