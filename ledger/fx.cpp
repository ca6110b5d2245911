#include "ledger/fx.hpp"

#include <algorithm>
#include <array>
#include <limits>

namespace ledger::fx {
namespace {

using wide = __int128;

// ISO 4217 currencies whose minor unit is not 1/100, with their decimals.
struct minor_unit {
  std::string_view code;
  int decimals;
};
constexpr std::array<minor_unit, 26> k_minor_units{{
    {"BHD", 3}, {"BIF", 0}, {"CLF", 4}, {"CLP", 0}, {"DJF", 0}, {"GNF", 0}, {"IQD", 3}, {"ISK", 0}, {"JOD", 3},
    {"JPY", 0}, {"KMF", 0}, {"KRW", 0}, {"KWD", 3}, {"LYD", 3}, {"OMR", 3}, {"PYG", 0}, {"RWF", 0}, {"TND", 3},
    {"UGX", 0}, {"UYI", 0}, {"UYW", 4}, {"VND", 0}, {"VUV", 0}, {"XAF", 0}, {"XOF", 0}, {"XPF", 0},
}};

wide pow10(int n) {
  wide v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}

}  // namespace

std::optional<rate> parse_rate(std::string_view text) {
  const auto point = text.find('.');
  const auto whole = text.substr(0, point);
  const auto frac = point == std::string_view::npos ? std::string_view{} : text.substr(point + 1);
  if (whole.empty() || (point != std::string_view::npos && frac.empty())) return std::nullopt;
  auto digits_only = [](std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits_only(whole) || !digits_only(frac)) return std::nullopt;
  // Trailing zeros after the point carry no value; leading zeros neither.
  auto trimmed = frac;
  while (!trimmed.empty() && trimmed.back() == '0') trimmed.remove_suffix(1);
  if (static_cast<int>(trimmed.size()) > k_rate_scale_max) return std::nullopt;
  std::string digits = std::string(whole) + std::string(trimmed);
  const auto first = digits.find_first_not_of('0');
  if (first == std::string::npos) return std::nullopt;  // zero
  digits.erase(0, first);
  if (static_cast<int>(digits.size()) > k_rate_digits_max) return std::nullopt;
  rate r;
  for (char c : digits) r.mantissa = r.mantissa * 10 + (c - '0');  // < 10^12: no overflow
  r.scale = static_cast<int>(trimmed.size());
  return r;
}

std::string to_string(const rate& r) {
  std::string digits = std::to_string(r.mantissa);
  if (r.scale == 0) return digits;
  if (static_cast<int>(digits.size()) <= r.scale) digits.insert(0, r.scale - digits.size() + 1, '0');
  digits.insert(digits.size() - r.scale, 1, '.');
  return digits;
}

int minor_units(std::string_view currency) {
  for (const auto& m : k_minor_units) {
    if (m.code == currency) return m.decimals;
  }
  return 2;
}

std::optional<amount_minor> convert(amount_minor amount, const rate& r, std::string_view from, std::string_view to) {
  if (amount <= 0 || r.mantissa <= 0 || r.scale < 0 || r.scale > k_rate_scale_max) return std::nullopt;
  const int shift = minor_units(to) - minor_units(from);
  // amount < 2^63 and mantissa < 10^12, so the product is below 10^31; times 10^4 at most (a
  // shift of 4 decimals) it stays below 10^35, inside the 1.7 × 10^38 of a signed 128-bit integer.
  wide numerator = static_cast<wide>(amount) * r.mantissa;
  wide denominator = pow10(r.scale);
  if (shift > 0) numerator *= pow10(shift);
  if (shift < 0) denominator *= pow10(-shift);
  const wide result = numerator / denominator;  // both positive: truncation is the floor
  if (result > std::numeric_limits<amount_minor>::max()) return std::nullopt;
  return static_cast<amount_minor>(result);
}

}  // namespace ledger::fx
