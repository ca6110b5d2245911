// RFC 3339 date-times in a query string (http/timestamps.hpp): the instant each valid form names,
// in microseconds since the epoch, and every malformed or impossible one refused rather than
// guessed at; percent-escapes decoded, bad escapes refused.

#include <gtest/gtest.h>

#include "http/timestamps.hpp"

namespace api {
namespace {

// 2026-11-30T01:59:00Z, as `date -u -d 2026-11-30T01:59:00Z +%s` gives it.
constexpr std::int64_t k_base_s = 1'796'003'940;
constexpr std::int64_t k_us = 1'000'000;

TEST(timestamps, utc_times_with_and_without_a_fraction) {
  // Z in either case, 'T' in either case; a fraction of 1 to 6 digits is that many micro-digits.
  EXPECT_EQ(parse_rfc3339_us("2026-11-30T01:59:00Z"), k_base_s * k_us);
  EXPECT_EQ(parse_rfc3339_us("2026-11-30t01:59:00z"), k_base_s * k_us);
  EXPECT_EQ(parse_rfc3339_us("2026-11-30T01:59:00.5Z"), k_base_s * k_us + 500'000);
  EXPECT_EQ(parse_rfc3339_us("2026-11-30T01:59:00.123456Z"), k_base_s * k_us + 123'456);
  EXPECT_EQ(parse_rfc3339_us("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(parse_rfc3339_us("1969-12-31T23:59:59.999999Z"), -1);
}

TEST(timestamps, digits_past_the_microsecond_are_cut_not_rounded) {
  // A time "at or before" 00.0000019 includes an entry at 00.000001 and not one at 00.000002.
  EXPECT_EQ(parse_rfc3339_us("2026-11-30T01:59:00.0000019Z"), k_base_s * k_us + 1);
  EXPECT_EQ(parse_rfc3339_us("2026-11-30T01:59:00.999999999Z"), k_base_s * k_us + 999'999);
}

TEST(timestamps, an_offset_names_the_same_instant_in_utc) {
  EXPECT_EQ(parse_rfc3339_us("2026-11-30T02:59:00+01:00"), k_base_s * k_us);
  EXPECT_EQ(parse_rfc3339_us("2026-11-29T20:29:00-05:30"), k_base_s * k_us);
  EXPECT_EQ(parse_rfc3339_us("2026-11-30T01:59:00-00:00"), k_base_s * k_us);
}

TEST(timestamps, calendar_edges) {
  // Leap days exist only in leap years (2000 was one, 1900 was not); years run 0001 to 9999.
  EXPECT_TRUE(parse_rfc3339_us("2024-02-29T00:00:00Z"));
  EXPECT_TRUE(parse_rfc3339_us("2000-02-29T00:00:00Z"));
  EXPECT_FALSE(parse_rfc3339_us("1900-02-29T00:00:00Z"));
  EXPECT_FALSE(parse_rfc3339_us("2026-02-29T00:00:00Z"));
  EXPECT_FALSE(parse_rfc3339_us("2026-04-31T00:00:00Z"));
  EXPECT_EQ(parse_rfc3339_us("0001-01-01T00:00:00Z"), -62'135'596'800LL * k_us);
  EXPECT_EQ(parse_rfc3339_us("9999-12-31T23:59:59Z"), 253'402'300'799LL * k_us);
}

TEST(timestamps, malformed_or_impossible_times_are_refused) {
  for (const char* bad : {"",
                          "2026-11-30",
                          "2026-11-30T01:59Z",
                          "2026-11-30T01:59:00",
                          "2026-11-30 01:59:00Z",
                          "2026-11-30T01:59:00ZZ",
                          "2026-11-30T01:59:00.Z",
                          "2026-11-30T01:59:00.1234567890Z",
                          "2026-13-01T00:00:00Z",
                          "2026-00-01T00:00:00Z",
                          "2026-11-00T00:00:00Z",
                          "2026-11-30T24:00:00Z",
                          "2026-11-30T23:60:00Z",
                          "2026-12-31T23:59:60Z",
                          "0000-01-01T00:00:00Z",
                          "2026-11-30T01:59:00+1:00",
                          "2026-11-30T01:59:00+01",
                          "2026-11-30T01:59:00+24:00",
                          "2026-11-30T01:59:00+01:60",
                          "2026-11-30T01:59:00+0100",
                          "+2026-11-30T01:59:00Z",
                          "2026/11/30T01:59:00Z",
                          "1795960740",
                          "now"}) {
    EXPECT_FALSE(parse_rfc3339_us(bad)) << bad;
  }
}

TEST(timestamps, percent_escapes_are_decoded_and_plus_stays_plus) {
  EXPECT_EQ(percent_decode("2026-11-30T02%3A59%3A00%2B01%3A00"), "2026-11-30T02:59:00+01:00");
  EXPECT_EQ(percent_decode("a+b"), "a+b");
  EXPECT_EQ(percent_decode("%7e%7E"), "~~");
  EXPECT_FALSE(percent_decode("%"));
  EXPECT_FALSE(percent_decode("%2"));
  EXPECT_FALSE(percent_decode("%zz"));
}

}  // namespace
}  // namespace api
