#include "ledger/money.hpp"

namespace ledger {

std::optional<amount_minor> parse_digits(std::string_view text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  amount_minor value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    if (__builtin_mul_overflow(value, amount_minor{10}, &value)) return std::nullopt;
    if (__builtin_add_overflow(value, amount_minor{c - '0'}, &value)) return std::nullopt;
  }
  return value;
}

amount_check check_request_amount(amount_minor value, amount_minor max_minor) {
  if (value <= 0) return {false, "amount must be a positive integer number of minor units"};
  if (value > max_minor) {
    return {false, "amount must not exceed " + std::to_string(max_minor) + " minor units"};
  }
  return {true, {}};
}

}  // namespace ledger
