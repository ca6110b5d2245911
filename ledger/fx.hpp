#pragma once

// Currency exchange without floating point (docs/corrections.md): a rate is an exact decimal,
// parsed into an integer mantissa and a decimal scale; a conversion multiplies in 128 bits and
// rounds down, in minor units of each currency (ISO 4217: JPY has 0 decimals, USD 2, KWD 3).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ledger/money.hpp"

namespace ledger::fx {

// At most this many significant digits, and at most this many digits after the point.
inline constexpr int k_rate_digits_max = 12;
inline constexpr int k_rate_scale_max = 18;

// value = mantissa / 10^scale, with mantissa > 0 and no trailing zero after the point.
struct rate {
  std::int64_t mantissa = 0;
  int scale = 0;
  friend bool operator==(const rate& a, const rate& b) { return a.mantissa == b.mantissa && a.scale == b.scale; }
};

// "0.9215", "150", "1.5": digits with at most one '.', digits on both of its sides, no sign, no
// exponent; > 0; at most k_rate_digits_max significant digits and k_rate_scale_max decimals.
std::optional<rate> parse_rate(std::string_view text);
// The canonical text of a rate: no leading zero before the first digit that counts, no trailing
// zero after the point ("0.9215", "150", "0.001").
std::string to_string(const rate& r);

// The decimals of a currency's minor unit, by ISO 4217 (a table of the currencies that have other
// than 2; every other code has 2).
int minor_units(std::string_view currency);

// floor(amount × rate × 10^(minor_units(to) − minor_units(from))): `amount` minor units of `from`
// in minor units of `to`, rounded down (the platform never gives more than the rate). nullopt when
// amount ≤ 0 or the result does not fit in int64.
std::optional<amount_minor> convert(amount_minor amount, const rate& r, std::string_view from, std::string_view to);

}  // namespace ledger::fx
