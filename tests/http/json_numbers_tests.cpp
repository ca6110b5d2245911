// How the strict JSON reader (http/json_input.hpp) reads numbers, and what an amount field answers
// for each kind: the message must name what is wrong with the number that was sent.

#include <gtest/gtest.h>

#include <string>

#include "http/json_input.hpp"

namespace api {
namespace {

constexpr std::int64_t amount_max = 1'000'000'000'000'000'000;

json_scalar::kind kind_of(const std::string& number) {
  const auto parsed = parse_json_object(R"({"n":)" + number + "}");
  EXPECT_TRUE(parsed.ok) << number << ": " << parsed.error;
  const json_scalar* v = parsed.object.find("n");
  return v == nullptr ? json_scalar::kind::null : v->type;
}

// The amount field's error for a body {"amount": NUMBER}, or "" when accepted.
std::string amount_error(const std::string& number) {
  const auto parsed = parse_json_object(R"({"amount":)" + number + "}");
  EXPECT_TRUE(parsed.ok) << number << ": " << parsed.error;
  field_reader f(parsed.object);
  f.amount("amount", amount_max);
  return f.error();
}

TEST(json_numbers, integers_beyond_int64_are_big_integers_whatever_their_size) {
  // Past UINT64_MAX or below INT64_MIN the parser sees a double; without '.' or an exponent it is still an integer.
  EXPECT_EQ(kind_of("9223372036854775807"), json_scalar::kind::integer);
  EXPECT_EQ(kind_of("-9223372036854775808"), json_scalar::kind::integer);
  EXPECT_EQ(kind_of("9223372036854775808"), json_scalar::kind::big_integer);
  EXPECT_EQ(kind_of("18446744073709551615"), json_scalar::kind::big_integer);
  EXPECT_EQ(kind_of("18446744073709551616"), json_scalar::kind::big_integer);
  EXPECT_EQ(kind_of("123456789012345678901234567890"), json_scalar::kind::big_integer);
  EXPECT_EQ(kind_of("-9223372036854775809"), json_scalar::kind::big_integer);
  EXPECT_EQ(kind_of("1e3"), json_scalar::kind::fraction);
  EXPECT_EQ(kind_of("1E30"), json_scalar::kind::fraction);
  EXPECT_EQ(kind_of("10.0"), json_scalar::kind::fraction);
  EXPECT_EQ(kind_of("-0.5"), json_scalar::kind::fraction);
}

TEST(json_numbers, an_integer_amount_is_refused_for_its_size_or_sign_never_for_a_fraction) {
  // Every integer that is not an amount is told why: too large for a JSON number, or not positive.
  EXPECT_EQ(amount_error("9007199254740991"), "");
  for (const std::string big :
       {"9007199254740992", "9223372036854775808", "18446744073709551616", "123456789012345678901234567890"}) {
    const auto error = amount_error(big);
    EXPECT_NE(error.find("larger than 2^53-1"), std::string::npos) << big << ": " << error;
  }
  for (const std::string negative :
       {"-1", "-0", "-9223372036854775808", "-9223372036854775809", "-123456789012345678901234567890"}) {
    const auto error = amount_error(negative);
    EXPECT_NE(error.find("positive"), std::string::npos) << negative << ": " << error;
    EXPECT_EQ(error.find("fraction"), std::string::npos) << negative << ": " << error;
  }
}

TEST(json_numbers, a_fraction_or_exponent_amount_is_refused_as_such) {
  // 1e3 and 10.0 are whole numbers, but money is sent as integer minor units: the message says so.
  for (const std::string number : {"1e3", "10.0", "0.5", "1E30"}) {
    const auto error = amount_error(number);
    EXPECT_NE(error.find("without fraction or exponent"), std::string::npos) << number << ": " << error;
  }
}

}  // namespace
}  // namespace api
