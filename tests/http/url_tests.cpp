// The path and query parser of the routes (http/url.hpp), as pure functions: which path segments,
// ids, query values, transaction ids and Idempotency-Keys the routes get, at the edges.

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "http/url.hpp"

namespace api {
namespace {

using parts = std::vector<std::string_view>;

TEST(split_path, gives_the_non_empty_segments_after_the_leading_slash) {
  // Empty segments (repeated, leading or trailing slashes) are skipped: "/v1//accounts/7/" routes as "/v1/accounts/7".
  EXPECT_EQ(split_path("/v1/accounts/7"), (parts{"v1", "accounts", "7"}));
  EXPECT_EQ(split_path("/v1//accounts/7/"), (parts{"v1", "accounts", "7"}));
  EXPECT_EQ(split_path("//healthz"), (parts{"healthz"}));
  EXPECT_EQ(split_path("/"), parts{});
  EXPECT_EQ(split_path(""), parts{});
  EXPECT_EQ(split_path("///"), parts{});
}

TEST(split_path, skips_the_first_character_whatever_it_is) {
  // The first character is taken for the leading '/': an origin-form target always has one.
  EXPECT_EQ(split_path("xhealthz"), (parts{"healthz"}));
  EXPECT_EQ(split_path("*"), parts{});
  EXPECT_EQ(split_path("http://h/healthz"), (parts{"ttp:", "h", "healthz"}));
}

TEST(split_path, segments_point_into_the_path) {
  // The views are slices of the argument, not copies, so they live as long as the path.
  const std::string path = "/v1/transactions/abc";
  const auto p = split_path(path);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[2].data(), path.data() + 17);
  EXPECT_EQ(p[2].size(), 3u);
}

TEST(parse_id, accepts_positive_int64_digits_only) {
  // Ids are 1 to 19 ASCII digits of a positive int64; signs, spaces, zero and overflow are refused.
  EXPECT_EQ(parse_id("1"), 1);
  EXPECT_EQ(parse_id("42"), 42);
  EXPECT_EQ(parse_id("007"), 7);
  EXPECT_EQ(parse_id("9223372036854775807"), 9223372036854775807);
  EXPECT_EQ(parse_id("9223372036854775808"), std::nullopt);
  EXPECT_EQ(parse_id("00000000000000000001"), std::nullopt);  // 20 digits
  EXPECT_EQ(parse_id("0"), std::nullopt);
  EXPECT_EQ(parse_id(""), std::nullopt);
  EXPECT_EQ(parse_id("-1"), std::nullopt);
  EXPECT_EQ(parse_id("+1"), std::nullopt);
  EXPECT_EQ(parse_id(" 1"), std::nullopt);
  EXPECT_EQ(parse_id("1 "), std::nullopt);
  EXPECT_EQ(parse_id("1e3"), std::nullopt);
  EXPECT_EQ(parse_id("0x10"), std::nullopt);
  EXPECT_EQ(parse_id(std::string_view("1\0", 2)), std::nullopt);
}

TEST(query_param, returns_the_first_pair_of_that_name_as_sent) {
  // No percent-decoding, the first of repeated names wins, and a name without '=' has the empty value.
  EXPECT_EQ(query_param("limit=10&after=5", "limit"), "10");
  EXPECT_EQ(query_param("limit=10&after=5", "after"), "5");
  EXPECT_EQ(query_param("limit=10&limit=20", "limit"), "10");
  EXPECT_EQ(query_param("limit&after=5", "limit"), "");
  EXPECT_EQ(query_param("limit=&after=5", "limit"), "");
  EXPECT_EQ(query_param("limit=a=b", "limit"), "a=b");
  EXPECT_EQ(query_param("limit=%31", "limit"), "%31");
  EXPECT_EQ(query_param("li%6dit=1", "limit"), std::nullopt);
  EXPECT_EQ(query_param("xlimit=1&limitx=2", "limit"), std::nullopt);
  EXPECT_EQ(query_param("", "limit"), std::nullopt);
  EXPECT_EQ(query_param("&&&", "limit"), std::nullopt);
  EXPECT_EQ(query_param("a=1&&limit=3&", "limit"), "3");
}

TEST(is_valid_uuid, wants_8_4_4_4_12_hex_digits) {
  // Either case of hex digit is a UUID; anything off by one character or one dash is not.
  EXPECT_TRUE(is_valid_uuid("123e4567-e89b-12d3-a456-426614174000"));
  EXPECT_TRUE(is_valid_uuid("123E4567-E89B-12D3-A456-426614174000"));
  EXPECT_FALSE(is_valid_uuid("123e4567-e89b-12d3-a456-42661417400"));
  EXPECT_FALSE(is_valid_uuid("123e4567-e89b-12d3-a456-4266141740000"));
  EXPECT_FALSE(is_valid_uuid("123e4567e89b-12d3-a456-426614174000-"));
  EXPECT_FALSE(is_valid_uuid("123e4567-e89b-12d3-a456-42661417400g"));
  EXPECT_FALSE(is_valid_uuid("{23e4567-e89b-12d3-a456-426614174000"));
  EXPECT_FALSE(is_valid_uuid(std::string_view("123e4567-e89b-12d3-a456-42661417400\0", 36)));
  EXPECT_FALSE(is_valid_uuid(""));
}

TEST(is_valid_idempotency_key, wants_1_to_255_visible_ascii_characters) {
  // Space, controls, DEL and bytes above 0x7e are refused; so are the empty key and 256 characters.
  EXPECT_TRUE(is_valid_idempotency_key("pay-1"));
  EXPECT_TRUE(is_valid_idempotency_key("!~"));
  EXPECT_TRUE(is_valid_idempotency_key(std::string(255, 'k')));
  EXPECT_FALSE(is_valid_idempotency_key(std::string(256, 'k')));
  EXPECT_FALSE(is_valid_idempotency_key(""));
  EXPECT_FALSE(is_valid_idempotency_key("pay 1"));
  EXPECT_FALSE(is_valid_idempotency_key("pay\t1"));
  EXPECT_FALSE(is_valid_idempotency_key("pay\x7f"));
  EXPECT_FALSE(is_valid_idempotency_key("caf\xc3\xa9"));
  EXPECT_FALSE(is_valid_idempotency_key(std::string_view("a\0", 2)));
}

TEST(canonical_uuid, writes_a_uuid_as_the_database_does) {
  // Upper-case hex digits become lower case; digits and dashes stay.
  EXPECT_EQ(canonical_uuid("01A22B8F-859E-7CE0-B47F-380985775239"), "01a22b8f-859e-7ce0-b47f-380985775239");
  EXPECT_EQ(canonical_uuid("01a22b8f-859e-7ce0-b47f-380985775239"), "01a22b8f-859e-7ce0-b47f-380985775239");
}

TEST(is_json_media_type, takes_json_in_any_case_with_or_without_parameters) {
  // RFC 9110: type and subtype are case-insensitive; parameters follow a ';'.
  EXPECT_TRUE(is_json_media_type("application/json"));
  EXPECT_TRUE(is_json_media_type("Application/JSON"));
  EXPECT_TRUE(is_json_media_type("application/json; charset=utf-8"));
  EXPECT_TRUE(is_json_media_type(" application/json ;charset=UTF-8"));
  EXPECT_FALSE(is_json_media_type("application/jsonx"));
  EXPECT_FALSE(is_json_media_type("text/json"));
  EXPECT_FALSE(is_json_media_type(""));
}

TEST(bearer_token, takes_the_scheme_in_any_case_and_a_non_empty_token) {
  // RFC 9110 11.1: the auth scheme is case-insensitive; the token is what follows the spaces.
  EXPECT_EQ(bearer_token("Bearer wk_abc"), "wk_abc");
  EXPECT_EQ(bearer_token("bearer wk_abc"), "wk_abc");
  EXPECT_EQ(bearer_token("BEARER   wk_abc"), "wk_abc");
  EXPECT_FALSE(bearer_token("Bearer "));
  EXPECT_FALSE(bearer_token("Bearer"));
  EXPECT_FALSE(bearer_token("Bearerwk_abc"));
  EXPECT_FALSE(bearer_token("Basic dXNlcjpwYXNz"));
  EXPECT_FALSE(bearer_token(""));
}

}  // namespace
}  // namespace api
