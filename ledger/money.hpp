#pragma once

// Money is an integer count of minor units. Every operation on it is checked: an overflow is
// reported, never wrapped, and there is no floating point anywhere on this path.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ledger {

using amount_minor = std::int64_t;

// The largest integer a JSON number can carry exactly in every client (2^53 - 1).
inline constexpr amount_minor json_safe_integer_max = 9'007'199'254'740'991;

inline std::optional<amount_minor> checked_add(amount_minor a, amount_minor b) {
  amount_minor out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

inline std::optional<amount_minor> checked_sub(amount_minor a, amount_minor b) {
  amount_minor out = 0;
  if (__builtin_sub_overflow(a, b, &out)) return std::nullopt;
  return out;
}

inline std::optional<amount_minor> checked_neg(amount_minor a) { return checked_sub(0, a); }

// Parses a string of ASCII digits (no sign, no spaces, no leading '+', at most 19 digits)
// into a non-negative amount; nullopt if it is anything else or does not fit in int64.
std::optional<amount_minor> parse_digits(std::string_view text);

// Why an amount was refused, as a sentence that tells the client what to send instead.
struct amount_check {
  bool ok;
  std::string message;
};

// A request amount must be positive and at most `max_minor`.
amount_check check_request_amount(amount_minor value, amount_minor max_minor);

}  // namespace ledger
