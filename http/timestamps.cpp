#include "http/timestamps.hpp"

#include "base/hex.hpp"

namespace api {
namespace {

constexpr std::int64_t k_us_per_second = 1'000'000;
constexpr int k_fraction_digits_max = 9;
constexpr int k_microsecond_digits = 6;

// `count` ASCII digits at `pos` as a number, or -1.
int digits(std::string_view s, std::size_t pos, std::size_t count) {
  if (pos + count > s.size()) return -1;
  int value = 0;
  for (std::size_t i = pos; i < pos + count; ++i) {
    if (s[i] < '0' || s[i] > '9') return -1;
    value = value * 10 + (s[i] - '0');
  }
  return value;
}

bool is_leap(int year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

int days_in_month(int year, int month) {
  static constexpr int k_days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && is_leap(year) ? 29 : k_days[month - 1];
}

// Days from 1970-01-01 to the given proleptic Gregorian date (H. Hinnant's days_from_civil).
std::int64_t days_from_civil(int y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const std::int64_t yoe = y - era * 400;
  const std::int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

}  // namespace

std::optional<std::int64_t> parse_rfc3339_us(std::string_view s) {
  // YYYY-MM-DDTHH:MM:SS: 19 characters, then an optional fraction and the offset.
  const int year = digits(s, 0, 4);
  const int month = digits(s, 5, 2);
  const int day = digits(s, 8, 2);
  const int hour = digits(s, 11, 2);
  const int minute = digits(s, 14, 2);
  const int second = digits(s, 17, 2);
  if (year < 1 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 ||
      second < 0 || second > 59) {
    return std::nullopt;
  }
  if (s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':') {
    return std::nullopt;
  }
  if (day > days_in_month(year, month)) return std::nullopt;
  std::size_t pos = 19;
  std::int64_t fraction_us = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int count = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (++count > k_fraction_digits_max) return std::nullopt;
      if (count <= k_microsecond_digits) fraction_us = fraction_us * 10 + (s[pos] - '0');
      ++pos;
    }
    if (count == 0) return std::nullopt;
    for (int i = count; i < k_microsecond_digits; ++i) fraction_us *= 10;
  }
  if (pos >= s.size()) return std::nullopt;
  std::int64_t offset_s = 0;
  if (s[pos] == 'Z' || s[pos] == 'z') {
    ++pos;
  } else if (s[pos] == '+' || s[pos] == '-') {
    const int sign = s[pos] == '-' ? -1 : 1;
    const int offset_hour = digits(s, pos + 1, 2);
    const int offset_minute = digits(s, pos + 4, 2);
    if (offset_hour < 0 || offset_hour > 23 || offset_minute < 0 || offset_minute > 59 || s[pos + 3] != ':') {
      return std::nullopt;
    }
    offset_s = sign * (offset_hour * 3600 + offset_minute * 60);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  const std::int64_t local_s =
      days_from_civil(year, month, day) * 86'400 + hour * 3'600 + minute * 60 + static_cast<std::int64_t>(second);
  return (local_s - offset_s) * k_us_per_second + fraction_us;
}

std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int high = base::hex_digit_value(text[i + 1]);
    const int low = base::hex_digit_value(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out.push_back(static_cast<char>(high * 16 + low));
    i += 2;
  }
  return out;
}

}  // namespace api
