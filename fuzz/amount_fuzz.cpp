// Fuzzes the amount parsers: ledger::parse_digits (amounts and ids written as strings) and
// api::field_reader::amount (the "amount" field of a JSON body, as a number or as a string).
//
// The input is the amount as the client wrote it. Properties:
// - parse_digits accepts exactly 1 to 19 ASCII digits whose value fits in int64, and what it
//   returns prints back as the same digits (without leading zeros);
// - field_reader::amount never returns a value outside [1, max], never accepts a fraction, an
//   exponent, a boolean or a number beyond 2^53-1, and whatever it accepts round-trips to the
//   digits that were sent; it accepts every well-formed amount within those bounds;
// - an integer that is refused is refused for what it is (too large, not positive), never blamed
//   on a fraction or an exponent it does not have.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "config/settings.hpp"
#include "http/json_input.hpp"
#include "base/assert.hpp"
#include "ledger/money.hpp"

namespace {

bool all_digits(std::string_view s) {
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::string_view without_leading_zeros(std::string_view digits) {
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  return digits;
}

// The digits' value, or nullopt when it does not fit in int64; compared as text, not computed,
// so that this model shares no arithmetic with the code under test.
std::optional<std::int64_t> model_value(std::string_view digits) {
  static constexpr std::string_view int64_max = "9223372036854775807";
  const auto d = without_leading_zeros(digits);
  if (d.size() > int64_max.size() || (d.size() == int64_max.size() && d > int64_max)) return std::nullopt;
  std::int64_t v = 0;
  for (char c : d) v = v * 10 + (c - '0');
  return v;
}

void check_parse_digits(std::string_view text) {
  const auto parsed = ledger::parse_digits(text);
  const bool well_formed = !text.empty() && text.size() <= 19 && all_digits(text);
  const auto expected = well_formed ? model_value(text) : std::nullopt;
  WALLET_ASSERT(parsed == expected, "parse_digits accepts exactly 1 to 19 digits that fit in int64");
  if (parsed) {
    WALLET_ASSERT(*parsed >= 0, "parse_digits never returns a negative value");
    WALLET_ASSERT(std::to_string(*parsed) == without_leading_zeros(text), "a parsed amount prints back as its digits");
  }
}

// Escapes `text` as the contents of a JSON string, so that every input reaches the string path.
std::string json_string(std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 0x0F];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

void check_amount_field(const std::string& body, std::int64_t max_minor) {
  const auto parsed = api::parse_json_object(body);
  if (!parsed.ok) return;
  const api::json_scalar* scalar = parsed.object.find("amount");
  WALLET_ASSERT(scalar != nullptr, "a parsed {\"amount\": ...} has the field");
  api::field_reader reader(parsed.object);
  const std::int64_t value = reader.amount("amount", max_minor);
  const bool is_string = scalar->type == api::json_scalar::kind::string;
  const bool is_integer = scalar->type == api::json_scalar::kind::integer;
  const std::string_view text = scalar->text;

  if (reader.ok()) {
    WALLET_ASSERT(value >= 1 && value <= max_minor, "an accepted amount lies in [1, max]");
    WALLET_ASSERT(is_string || is_integer, "only integers and strings of digits are amounts");
    if (is_integer) {
      WALLET_ASSERT(value <= ledger::json_safe_integer_max, "a JSON number amount is at most 2^53-1");
      WALLET_ASSERT(value == scalar->integer, "a JSON number amount is the number sent");
      WALLET_ASSERT(std::to_string(value) == scalar->text, "a JSON number amount round-trips to its text");
    } else {
      WALLET_ASSERT(all_digits(text), "a string amount is made of digits only");
      WALLET_ASSERT(std::to_string(value) == without_leading_zeros(text), "a string amount round-trips to its digits");
    }
    return;
  }

  WALLET_ASSERT(value == 0, "a refused amount reads as 0");
  WALLET_ASSERT(!reader.error().empty(), "a refused amount says why");
  // Completeness: every well-formed amount within the bounds is accepted.
  if (is_string && !text.empty() && text.size() <= 19 && all_digits(text)) {
    const auto v = model_value(text);
    WALLET_ASSERT(!v || *v < 1 || *v > max_minor, "a string of digits within [1, max] is accepted");
  }
  if (is_integer) {
    WALLET_ASSERT(scalar->integer < 1 || scalar->integer > max_minor || scalar->integer > ledger::json_safe_integer_max,
                  "a JSON integer within [1, min(max, 2^53-1)] is accepted");
  }
  // An integer written without fraction or exponent is refused for its size or sign.
  std::string_view number = scalar->text;
  if (!is_string && !number.empty() && number.front() == '-') number.remove_prefix(1);
  if (!is_string && !number.empty() && all_digits(number)) {
    WALLET_ASSERT(reader.error().find("fraction") == std::string::npos,
                  "an integer amount is never refused for a fraction it does not have");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_parse_digits(text);

  static const std::int64_t maxima[] = {config::ledger_settings{}.amount_minor_max, ledger::json_safe_integer_max,
                                        std::numeric_limits<std::int64_t>::max(), 1};
  const std::string as_number = "{\"amount\":" + std::string(text) + "}";
  const std::string as_string = "{\"amount\":" + json_string(text) + "}";
  for (const std::int64_t max_minor : maxima) {
    check_amount_field(as_number, max_minor);
    check_amount_field(as_string, max_minor);
  }
  return 0;
}
