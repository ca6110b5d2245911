// The bounds of the strict JSON reader (http/json_input.hpp): at most 64 fields, field names of
// at most 64 bytes, string values of at most 4096 bytes. A body at a bound is read; a body past
// one is refused with a message that names the bound, not called invalid JSON (it is valid).

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "http/json_input.hpp"

namespace api {
namespace {

std::string with_fields(int n) {
  std::string body = "{";
  for (int i = 0; i < n; ++i) body += (i == 0 ? "" : ",") + ("\"f" + std::to_string(i) + "\":" + std::to_string(i));
  return body + "}";
}

TEST(json_limits, sixty_four_fields_are_read_and_sixty_five_are_refused_as_too_many) {
  // The field count bound is 64; the 65th field is refused with a message saying so.
  const auto at = parse_json_object(with_fields(64));
  EXPECT_TRUE(at.ok) << at.error;
  EXPECT_EQ(at.object.fields.size(), 64u);
  const auto past = parse_json_object(with_fields(65));
  EXPECT_FALSE(past.ok);
  EXPECT_EQ(past.error, "the request body has more than 64 fields");
}

TEST(json_limits, a_field_name_of_64_bytes_is_read_and_one_of_65_is_refused_as_too_long) {
  // Field names are bounded at 64 bytes.
  const auto at = parse_json_object("{\"" + std::string(64, 'k') + "\":1}");
  EXPECT_TRUE(at.ok) << at.error;
  const auto past = parse_json_object("{\"" + std::string(65, 'k') + "\":1}");
  EXPECT_FALSE(past.ok);
  EXPECT_EQ(past.error, "a field name is longer than 64 bytes");
}

TEST(json_limits, a_string_of_4096_bytes_is_read_and_one_of_4097_is_refused_naming_its_field) {
  // String values are bounded at 4096 bytes (after unescaping); the message names the field.
  const auto at = parse_json_object("{\"name\":\"" + std::string(4096, 's') + "\"}");
  EXPECT_TRUE(at.ok) << at.error;
  EXPECT_EQ(at.object.find("name")->text.size(), 4096u);
  const auto past = parse_json_object("{\"name\":\"" + std::string(4097, 's') + "\"}");
  EXPECT_FALSE(past.ok);
  EXPECT_EQ(past.error, "field \"name\" is longer than 4096 bytes");
}

TEST(json_limits, malformed_json_is_still_called_invalid) {
  // The precise messages are for valid JSON past a bound; broken JSON keeps its own message.
  for (const std::string body : {"", "{", "{\"a\":}", "{\"a\":1,}", "{\"a\":1} x", "{\"a\":01}"}) {
    const auto r = parse_json_object(body);
    EXPECT_FALSE(r.ok) << body;
    EXPECT_EQ(r.error, "the request body is not valid JSON") << body;
  }
}

// Bodies read whole (batches, lookups, webhook endpoints): a key twice in one object is found at any
// depth, the same key in two objects is not a repeat, and a key written in parts is one key.
TEST(json_limits, a_key_twice_in_one_object_is_found_at_any_depth) {
  EXPECT_EQ(duplicate_key(R"({"a":1,"b":[{"a":1},{"a":2}],"c":{"a":{"a":3}}})"), std::nullopt);
  EXPECT_EQ(duplicate_key(R"({"atomic":true,"atomic":false})"), "atomic");
  EXPECT_EQ(duplicate_key(R"({"transfers":[{"amount":1},{"to":2,"amount":100,"amount":100000}]})"), "amount");
  EXPECT_EQ(duplicate_key(R"({"x":{"y":{"z":1,"z":2}}})"), "z");
  const std::string long_key(5'000, 'k');
  EXPECT_EQ(duplicate_key("{\"" + long_key + "\":1,\"" + long_key + "\":2}"), long_key);
  EXPECT_EQ(duplicate_key("not json"), std::nullopt);
}

}  // namespace
}  // namespace api
