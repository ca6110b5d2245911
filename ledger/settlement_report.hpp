#pragma once

// A payment provider's settlement report (docs/settlements.md), read one line at a time: what the
// provider says it settled, to be matched against the journal transactions of its clearing
// accounts. Pure: the caller hands over text, in chunks of any size, and gets checked lines back
// one by one; nothing is kept but the line being read, so a report is never held as a whole.
//
// The format is CSV with a fixed header line and one settlement per line:
//
//   provider,paymentId,type,amount,currency,settledAt
//   stripe,pi_123,payment,5000,EUR,2026-11-30T10:15:00Z
//
// A field may be enclosed in double quotes (a quote inside is written twice); a quoted field does
// not span lines. Lines end with LF or CRLF; a UTF-8 byte order mark before the header is skipped.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "ledger/money.hpp"
#include "ledger/types.hpp"

namespace ledger {

inline constexpr std::string_view k_settlement_header = "provider,paymentId,type,amount,currency,settledAt";
inline constexpr std::size_t k_settlement_payment_id_max = 255;

// payment, refund, chargeback, payout: the journal transaction types DEPOSIT, DEPOSIT_REFUND,
// CHARGEBACK and PAYOUT; nullopt for any other text.
std::optional<transaction_type> parse_settlement_type(std::string_view text);

// An RFC 3339 date-time ("2026-11-30T10:15:00Z", "2026-11-30T11:15:00.5+01:00") as microseconds
// since 1970-01-01T00:00:00Z; nullopt when it is not one (years 0001 to 9999, seconds 00 to 59,
// at most 9 fraction digits, of which the first 6 are kept).
std::optional<std::int64_t> parse_rfc3339_us(std::string_view text);

// One settlement. The views point into the line given to the parser (or into the parser's own
// buffer for a quoted field) and are valid until its next call.
struct settlement_line {
  std::int64_t line_no = 0;  // 1 is the header
  std::string_view provider;
  std::string_view payment_id;
  transaction_type type = transaction_type::deposit;
  amount_minor amount = 0;
  std::string_view currency;
  std::int64_t settled_at_us = 0;
};

class settlement_report_parser {
 public:
  // `amount_max`: the largest amount of one line, in minor units; `lines_max`: the most data lines.
  settlement_report_parser(amount_minor amount_max, std::int64_t lines_max);

  // Feeds the next chunk of the report; `on_line` gets each settlement line as soon as it is
  // complete. Returns false once a line is bad (error() says which and why); nothing more is read.
  bool feed(std::string_view chunk, const std::function<void(const settlement_line&)>& on_line);
  // The end of the report: reads a last line that has no line end. False when it is bad, or when
  // the report has no header or no settlement line.
  bool finish(const std::function<void(const settlement_line&)>& on_line);

  // "line 7: ..." naming the first bad line and what is wrong with it; empty while none is.
  const std::string& error() const { return error_; }
  std::int64_t error_line() const { return error_line_; }

  // What the report held so far: its settlement lines, their provider (every line must name the
  // same one) and the earliest and latest settledAt.
  std::int64_t lines() const { return lines_; }
  const std::string& provider() const { return provider_; }
  std::int64_t settled_from_us() const { return settled_from_us_; }
  std::int64_t settled_to_us() const { return settled_to_us_; }

 private:
  bool parse_line(std::string_view text, const std::function<void(const settlement_line&)>& on_line);
  bool fail(std::string message);

  amount_minor amount_max_;
  std::int64_t lines_max_;
  std::string partial_;   // the start of a line whose end has not arrived yet
  std::string unquoted_;  // the unquoted fields of the current line, when any was quoted
  std::int64_t line_no_ = 0;
  std::int64_t lines_ = 0;
  std::string provider_;
  std::int64_t settled_from_us_ = 0;
  std::int64_t settled_to_us_ = 0;
  std::string error_;
  std::int64_t error_line_ = 0;
};

}  // namespace ledger
