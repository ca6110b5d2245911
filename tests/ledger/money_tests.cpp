// Money arithmetic at the int64 edges: every overflow is reported, never wrapped.

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "ledger/money.hpp"

namespace ledger {
namespace {

constexpr amount_minor k_max = std::numeric_limits<amount_minor>::max();
constexpr amount_minor k_min = std::numeric_limits<amount_minor>::min();

TEST(checked_add, exact_up_to_the_edges_and_nullopt_past_them) {
  // Sums that land exactly on INT64_MAX / INT64_MIN are values; one more in either direction is nullopt.
  EXPECT_EQ(checked_add(1, 2), 3);
  EXPECT_EQ(checked_add(k_max, 0), k_max);
  EXPECT_EQ(checked_add(k_max - 1, 1), k_max);
  EXPECT_EQ(checked_add(k_min, 0), k_min);
  EXPECT_EQ(checked_add(k_min + 1, -1), k_min);
  EXPECT_EQ(checked_add(k_min, k_max), -1);
  EXPECT_EQ(checked_add(k_max, k_min), -1);
  EXPECT_EQ(checked_add(k_max, 1), std::nullopt);
  EXPECT_EQ(checked_add(1, k_max), std::nullopt);
  EXPECT_EQ(checked_add(k_max, k_max), std::nullopt);
  EXPECT_EQ(checked_add(k_min, -1), std::nullopt);
  EXPECT_EQ(checked_add(k_min, k_min), std::nullopt);
}

TEST(checked_sub, exact_up_to_the_edges_and_nullopt_past_them) {
  // Subtraction overflows exactly where the mathematical result leaves [INT64_MIN, INT64_MAX].
  EXPECT_EQ(checked_sub(5, 7), -2);
  EXPECT_EQ(checked_sub(k_min + 1, 1), k_min);
  EXPECT_EQ(checked_sub(-1, k_max), k_min);
  EXPECT_EQ(checked_sub(k_max, k_max), 0);
  EXPECT_EQ(checked_sub(k_min, k_min), 0);
  EXPECT_EQ(checked_sub(-1, k_min), k_max);
  EXPECT_EQ(checked_sub(k_min, 1), std::nullopt);
  EXPECT_EQ(checked_sub(0, k_min), std::nullopt);
  EXPECT_EQ(checked_sub(k_max, -1), std::nullopt);
  EXPECT_EQ(checked_sub(-2, k_max), std::nullopt);
}

TEST(checked_neg, only_int64_min_has_no_negation) {
  // -INT64_MIN does not exist in two's complement; every other value negates exactly.
  EXPECT_EQ(checked_neg(0), 0);
  EXPECT_EQ(checked_neg(1), -1);
  EXPECT_EQ(checked_neg(-1), 1);
  EXPECT_EQ(checked_neg(k_max), -k_max);
  EXPECT_EQ(checked_neg(k_min + 1), k_max);
  EXPECT_EQ(checked_neg(k_min), std::nullopt);
}

TEST(parse_digits, accepts_up_to_nineteen_digits_within_int64) {
  // Plain digit strings parse to their value, including INT64_MAX itself and leading zeros.
  EXPECT_EQ(parse_digits("0"), 0);
  EXPECT_EQ(parse_digits("1"), 1);
  EXPECT_EQ(parse_digits("50000"), 50000);
  EXPECT_EQ(parse_digits("9007199254740991"), json_safe_integer_max);
  EXPECT_EQ(parse_digits("9007199254740992"), json_safe_integer_max + 1);
  EXPECT_EQ(parse_digits("9223372036854775807"), k_max);
  EXPECT_EQ(parse_digits("9223372036854775806"), k_max - 1);
  EXPECT_EQ(parse_digits("0000000000000000001"), 1);  // 19 characters
  EXPECT_EQ(parse_digits("1000000000000000000"), 1'000'000'000'000'000'000);
}

TEST(parse_digits, refuses_overflow_and_more_than_nineteen_digits) {
  // One past INT64_MAX, the largest 19-digit number and any 20-character string are refused.
  EXPECT_EQ(parse_digits("9223372036854775808"), std::nullopt);
  EXPECT_EQ(parse_digits("9223372036854775810"), std::nullopt);
  EXPECT_EQ(parse_digits("9999999999999999999"), std::nullopt);
  EXPECT_EQ(parse_digits("10000000000000000000"), std::nullopt);
  EXPECT_EQ(parse_digits("00000000000000000001"), std::nullopt);  // 20 characters, small value
  EXPECT_EQ(parse_digits("18446744073709551617"), std::nullopt);  // wraps to 1 modulo 2^64
}

TEST(parse_digits, refuses_anything_but_ascii_digits) {
  // Signs, spaces, decimals, exponents, hex, and non-ASCII digits are all refused.
  for (const char* text : {"", "+1", "-1", " 1", "1 ", "1.0", "1.", ".5", "1e3", "1E3", "0x10", "1_000", "1,000", "12a",
                           "a12", "\xef\xbc\x91" /* fullwidth 1 */, "\t5", "NaN", "Infinity"}) {
    EXPECT_EQ(parse_digits(text), std::nullopt) << "text: \"" << text << "\"";
  }
  // An embedded NUL is not a terminator: the view's whole length is checked.
  EXPECT_EQ(parse_digits(std::string_view("12\0"
                                          "3",
                                          4)),
            std::nullopt);
}

TEST(check_request_amount, positive_and_at_most_the_maximum) {
  // The bounds are inclusive at both ends (1 and max); the messages tell the client what to send.
  EXPECT_TRUE(check_request_amount(1, 100).ok);
  EXPECT_TRUE(check_request_amount(100, 100).ok);
  EXPECT_TRUE(check_request_amount(1, 100).message.empty());
  EXPECT_TRUE(check_request_amount(k_max, k_max).ok);

  const std::string positive = "amount must be a positive integer number of minor units";
  for (amount_minor bad : {amount_minor{0}, amount_minor{-1}, k_min}) {
    const amount_check c = check_request_amount(bad, 100);
    EXPECT_FALSE(c.ok) << bad;
    EXPECT_EQ(c.message, positive) << bad;
  }
  const amount_check over = check_request_amount(101, 100);
  EXPECT_FALSE(over.ok);
  EXPECT_EQ(over.message, "amount must not exceed 100 minor units");
  const amount_check way_over = check_request_amount(k_max, 1'000'000'000'000'000);
  EXPECT_FALSE(way_over.ok);
  EXPECT_EQ(way_over.message, "amount must not exceed 1000000000000000 minor units");
}

}  // namespace
}  // namespace ledger
