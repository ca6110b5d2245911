#include "ledger/settlement_report.hpp"

#include <array>

namespace ledger {
namespace {

// A line longer than this is refused rather than buffered: six short fields fit in far less.
constexpr std::size_t k_line_bytes_max = 4096;
constexpr std::size_t k_field_count = 6;
constexpr std::string_view k_bom = "\xEF\xBB\xBF";

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The number written by exactly `n` digits at `text[at]`, or -1.
int digits(std::string_view text, std::size_t at, std::size_t n) {
  if (at + n > text.size()) return -1;
  int value = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (!is_digit(text[i])) return -1;
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

bool is_leap(int year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

int days_in_month(int year, int month) {
  static constexpr std::array<int, 12> days{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && is_leap(year) ? 29 : days[static_cast<std::size_t>(month - 1)];
}

// Days from 1970-01-01 to the date (proleptic Gregorian), after H. Hinnant's days_from_civil.
std::int64_t days_from_civil(int year, int month, int day) {
  const std::int64_t y = year - (month <= 2 ? 1 : 0);
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const std::int64_t yoe = y - era * 400;
  const std::int64_t mp = (month + 9) % 12;
  const std::int64_t doy = (153 * mp + 2) / 5 + day - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// 1 to 255 printable ASCII characters without spaces.
bool is_payment_id(std::string_view id) {
  if (id.empty() || id.size() > k_settlement_payment_id_max) return false;
  for (char c : id) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

// A field as it is quoted in an error message: at most 40 characters, controls shown as '?'.
std::string shown(std::string_view field) {
  std::string out = "\"";
  for (std::size_t i = 0; i < field.size() && i < 40; ++i) {
    const char c = field[i];
    out += (c < 0x20 || c == 0x7f) ? '?' : c;
  }
  if (field.size() > 40) out += "...";
  return out + "\"";
}

}  // namespace

std::optional<transaction_type> parse_settlement_type(std::string_view text) {
  if (text == "payment") return transaction_type::deposit;
  if (text == "refund") return transaction_type::deposit_refund;
  if (text == "chargeback") return transaction_type::chargeback;
  if (text == "payout") return transaction_type::payout;
  return std::nullopt;
}

std::optional<std::int64_t> parse_rfc3339_us(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS, then an optional fraction, then Z or +HH:MM / -HH:MM.
  if (text.size() < 20) return std::nullopt;
  const int year = digits(text, 0, 4);
  const int month = digits(text, 5, 2);
  const int day = digits(text, 8, 2);
  const int hour = digits(text, 11, 2);
  const int minute = digits(text, 14, 2);
  const int second = digits(text, 17, 2);
  if (text[4] != '-' || text[7] != '-' || (text[10] != 'T' && text[10] != 't') || text[13] != ':' || text[16] != ':') {
    return std::nullopt;
  }
  if (year < 1 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 ||
      second < 0 || second > 59 || day > days_in_month(year, month)) {
    return std::nullopt;
  }
  std::size_t at = 19;
  std::int64_t fraction_us = 0;
  if (text[at] == '.') {
    ++at;
    const std::size_t first = at;
    std::int64_t scale = 100'000;
    while (at < text.size() && is_digit(text[at])) {
      if (at - first >= 9) return std::nullopt;
      fraction_us += (text[at] - '0') * scale;
      scale /= 10;
      ++at;
    }
    if (at == first) return std::nullopt;
  }
  if (at >= text.size()) return std::nullopt;
  std::int64_t offset_s = 0;
  if (text[at] == 'Z' || text[at] == 'z') {
    ++at;
  } else if (text[at] == '+' || text[at] == '-') {
    const int offset_hour = digits(text, at + 1, 2);
    const int offset_minute = digits(text, at + 4, 2);
    if (at + 6 != text.size() || text[at + 3] != ':' || offset_hour < 0 || offset_hour > 23 || offset_minute < 0 ||
        offset_minute > 59) {
      return std::nullopt;
    }
    offset_s = (text[at] == '+' ? 1 : -1) * (offset_hour * 3600 + offset_minute * 60);
    at += 6;
  } else {
    return std::nullopt;
  }
  if (at != text.size()) return std::nullopt;
  const std::int64_t seconds =
      days_from_civil(year, month, day) * 86'400 + hour * 3'600 + minute * 60 + second - offset_s;
  return seconds * 1'000'000 + fraction_us;
}

settlement_report_parser::settlement_report_parser(amount_minor amount_max, std::int64_t lines_max)
    : amount_max_(amount_max), lines_max_(lines_max) {}

bool settlement_report_parser::fail(std::string message) {
  error_line_ = line_no_;
  error_ = "line " + std::to_string(line_no_) + ": " + std::move(message);
  return false;
}

bool settlement_report_parser::feed(std::string_view chunk,
                                    const std::function<void(const settlement_line&)>& on_line) {
  if (!error_.empty()) return false;
  while (!chunk.empty()) {
    const auto end = chunk.find('\n');
    if (end == std::string_view::npos) {
      if (partial_.size() + chunk.size() > k_line_bytes_max) {
        ++line_no_;
        return fail("the line is longer than " + std::to_string(k_line_bytes_max) + " bytes");
      }
      partial_.append(chunk);
      return true;
    }
    std::string_view line = chunk.substr(0, end);
    chunk.remove_prefix(end + 1);
    if (!partial_.empty()) {
      if (partial_.size() + line.size() > k_line_bytes_max) {
        ++line_no_;
        return fail("the line is longer than " + std::to_string(k_line_bytes_max) + " bytes");
      }
      partial_.append(line);
      const std::string whole = std::move(partial_);
      partial_.clear();
      if (!parse_line(whole, on_line)) return false;
      continue;
    }
    if (!parse_line(line, on_line)) return false;
  }
  return true;
}

bool settlement_report_parser::finish(const std::function<void(const settlement_line&)>& on_line) {
  if (!error_.empty()) return false;
  if (!partial_.empty()) {
    const std::string last = std::move(partial_);
    partial_.clear();
    if (!parse_line(last, on_line)) return false;
  }
  if (line_no_ == 0) {
    line_no_ = 1;
    return fail("the report is empty; its first line must be the header " + std::string(k_settlement_header));
  }
  if (lines_ == 0) {
    ++line_no_;
    return fail("the report has no settlement line after its header");
  }
  return true;
}

bool settlement_report_parser::parse_line(std::string_view text,
                                          const std::function<void(const settlement_line&)>& on_line) {
  ++line_no_;
  if (text.size() > k_line_bytes_max) {
    return fail("the line is longer than " + std::to_string(k_line_bytes_max) + " bytes");
  }
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  if (line_no_ == 1) {
    if (text.substr(0, k_bom.size()) == k_bom) text.remove_prefix(k_bom.size());
    if (text != k_settlement_header) {
      return fail("the first line must be the header " + std::string(k_settlement_header) + ", not " + shown(text));
    }
    return true;
  }
  if (text.empty()) return fail("the line is empty; every line after the header is one settlement");
  if (lines_ >= lines_max_) {
    return fail("the report has more than " + std::to_string(lines_max_) + " settlement lines");
  }

  // Split into fields; a quoted field is copied, unquoted, into unquoted_ (reserved to the line's
  // size first, so that the views into it stay valid while it grows).
  std::array<std::string_view, k_field_count> fields;
  std::size_t count = 0;
  unquoted_.clear();
  unquoted_.reserve(text.size());
  std::size_t at = 0;
  for (;;) {
    if (count == k_field_count) {
      return fail("the line has more than " + std::to_string(k_field_count) + " fields (" +
                  std::string(k_settlement_header) + ")");
    }
    std::string_view field;
    if (at < text.size() && text[at] == '"') {
      const std::size_t start = unquoted_.size();
      ++at;
      for (;;) {
        if (at >= text.size()) return fail("field " + std::to_string(count + 1) + " opens a quote it does not close");
        if (text[at] == '"') {
          if (at + 1 < text.size() && text[at + 1] == '"') {
            unquoted_ += '"';
            at += 2;
            continue;
          }
          ++at;
          break;
        }
        unquoted_ += text[at++];
      }
      if (at < text.size() && text[at] != ',') {
        return fail("field " + std::to_string(count + 1) + " has text after its closing quote");
      }
      field = std::string_view(unquoted_).substr(start);
    } else {
      const auto comma = text.find(',', at);
      field = text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
      if (field.find('"') != std::string_view::npos) {
        return fail("field " + std::to_string(count + 1) + " has a quote inside; enclose the whole field in quotes");
      }
      at += field.size();
    }
    fields[count++] = field;
    if (at >= text.size()) break;
    ++at;  // the comma
    if (at == text.size()) {
      // A comma ends the line: an empty last field follows.
      if (count == k_field_count) {
        return fail("the line has more than " + std::to_string(k_field_count) + " fields (" +
                    std::string(k_settlement_header) + ")");
      }
      fields[count++] = std::string_view();
      break;
    }
  }
  if (count != k_field_count) {
    return fail("the line has " + std::to_string(count) + " fields, not " + std::to_string(k_field_count) + " (" +
                std::string(k_settlement_header) + ")");
  }

  settlement_line line;
  line.line_no = line_no_;
  line.provider = fields[0];
  if (!is_valid_provider_name(line.provider)) {
    return fail("provider " + shown(line.provider) +
                " is not a provider name (1 to 40 of a-z, 0-9, _ and -, starting with a letter or digit)");
  }
  if (provider_.empty()) {
    provider_ = std::string(line.provider);
  } else if (line.provider != provider_) {
    return fail("provider " + shown(line.provider) + " differs from \"" + provider_ +
                "\" of the lines before; a report covers one provider");
  }
  line.payment_id = fields[1];
  if (!is_payment_id(line.payment_id)) {
    return fail("paymentId " + shown(line.payment_id) + " must be 1 to " + std::to_string(k_settlement_payment_id_max) +
                " printable ASCII characters without spaces");
  }
  const auto type = parse_settlement_type(fields[2]);
  if (!type) return fail("type " + shown(fields[2]) + " must be payment, refund, chargeback or payout");
  line.type = *type;
  const auto amount = parse_digits(fields[3]);
  if (!amount || *amount <= 0 || *amount > amount_max_) {
    return fail("amount " + shown(fields[3]) + " must be a positive integer number of minor units, at most " +
                std::to_string(amount_max_));
  }
  line.amount = *amount;
  line.currency = fields[4];
  if (!is_valid_currency(line.currency)) {
    return fail("currency " + shown(line.currency) + " must be three upper-case letters (ISO 4217), e.g. EUR");
  }
  const auto settled_at = parse_rfc3339_us(fields[5]);
  if (!settled_at) {
    return fail("settledAt " + shown(fields[5]) + " must be an RFC 3339 date-time, e.g. 2026-11-30T10:15:00Z");
  }
  line.settled_at_us = *settled_at;
  if (lines_ == 0 || line.settled_at_us < settled_from_us_) settled_from_us_ = line.settled_at_us;
  if (lines_ == 0 || line.settled_at_us > settled_to_us_) settled_to_us_ = line.settled_at_us;
  ++lines_;
  on_line(line);
  return true;
}

}  // namespace ledger
