// The settlement report parser (ledger/settlement_report.hpp): which lines it takes, which it
// refuses and with what sentence, and that where the text is cut into chunks never changes what
// it reads.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ledger/settlement_report.hpp"

namespace ledger {
namespace {

constexpr amount_minor k_amount_max = 1'000'000'000'000'000;

struct owned_line {
  std::int64_t line_no;
  std::string provider;
  std::string payment_id;
  transaction_type type;
  amount_minor amount;
  std::string currency;
  std::int64_t settled_at_us;
  bool operator==(const owned_line&) const = default;
};

struct outcome {
  bool ok = false;
  std::string error;
  std::int64_t error_line = 0;
  std::vector<owned_line> lines;
  settlement_report_parser parser{k_amount_max, 1'000};
};

// Parses `text` fed in chunks of `chunk` bytes (0: all at once).
outcome parse(const std::string& text, std::size_t chunk = 0, std::int64_t lines_max = 1'000) {
  outcome out;
  out.parser = settlement_report_parser(k_amount_max, lines_max);
  auto keep = [&out](const settlement_line& l) {
    out.lines.push_back({l.line_no, std::string(l.provider), std::string(l.payment_id), l.type, l.amount,
                         std::string(l.currency), l.settled_at_us});
  };
  bool ok = true;
  if (chunk == 0) {
    ok = out.parser.feed(text, keep);
  } else {
    for (std::size_t at = 0; at < text.size() && ok; at += chunk) ok = out.parser.feed(text.substr(at, chunk), keep);
  }
  out.ok = ok && out.parser.finish(keep);
  out.error = out.parser.error();
  out.error_line = out.parser.error_line();
  return out;
}

const std::string k_header = "provider,paymentId,type,amount,currency,settledAt\n";

TEST(settlement_report, reads_every_type_and_the_range_of_settled_at) {
  // Each type maps to its journal type; the parser keeps the provider and the earliest and latest settledAt.
  const auto r = parse(k_header +
                       "stripe,pi_1,payment,5000,EUR,2026-11-30T10:00:00Z\n"
                       "stripe,pi_1,refund,100,EUR,2026-11-30T11:00:00Z\n"
                       "stripe,pi_2,chargeback,700,EUR,2026-11-29T23:00:00Z\n"
                       "stripe,po_1,payout,9000,USD,2026-12-01T00:00:00.25Z\n");
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.lines.size(), 4u);
  EXPECT_EQ(r.lines[0],
            (owned_line{2, "stripe", "pi_1", transaction_type::deposit, 5000, "EUR", 1'796'032'800'000'000}));
  EXPECT_EQ(r.lines[1].type, transaction_type::deposit_refund);
  EXPECT_EQ(r.lines[2].type, transaction_type::chargeback);
  EXPECT_EQ(r.lines[3].type, transaction_type::payout);
  EXPECT_EQ(r.lines[3].line_no, 5);
  EXPECT_EQ(r.parser.lines(), 4);
  EXPECT_EQ(r.parser.provider(), "stripe");
  EXPECT_EQ(r.parser.settled_from_us(), 1'796'032'800'000'000 - 11 * 3'600'000'000LL);
  EXPECT_EQ(r.parser.settled_to_us(), 1'796'083'200'250'000);
}

TEST(settlement_report, the_chunking_of_the_text_changes_nothing) {
  // CRLF line ends, a byte order mark, quoted fields and no final line end, cut every way from 1 byte up.
  const std::string text =
      "\xEF\xBB\xBFprovider,paymentId,type,amount,currency,settledAt\r\n"
      "adyen,\"pi,\"\"x\"\"\",payment,1,EUR,2026-01-01T00:00:00+01:00\r\n"
      "\"adyen\",pi_2,\"refund\",\"2\",EUR,2026-01-01T00:00:00.123456789-02:30";
  const auto whole = parse(text);
  ASSERT_TRUE(whole.ok) << whole.error;
  ASSERT_EQ(whole.lines.size(), 2u);
  EXPECT_EQ(whole.lines[0].payment_id, "pi,\"x\"");
  EXPECT_EQ(whole.lines[1].provider, "adyen");
  EXPECT_EQ(whole.lines[1].settled_at_us, 1'767'225'600'000'000 + 9'000'000'000LL + 123'456);
  EXPECT_EQ(whole.lines[0].settled_at_us, 1'767'225'600'000'000 - 3'600'000'000LL);
  for (std::size_t chunk = 1; chunk <= text.size(); ++chunk) {
    const auto cut = parse(text, chunk);
    ASSERT_TRUE(cut.ok) << chunk << ": " << cut.error;
    EXPECT_EQ(cut.lines, whole.lines) << chunk;
  }
}

TEST(settlement_report, names_the_bad_line_and_what_is_wrong) {
  // The first bad line stops the parse; the error names its number and the field.
  struct bad {
    std::string line;
    std::string says;
  };
  const std::vector<bad> cases = {
      {"stripe,pi_1,payment,-5,EUR,2026-11-30T10:00:00Z", "amount \"-5\""},
      {"stripe,pi_1,payment,0,EUR,2026-11-30T10:00:00Z", "amount \"0\""},
      {"stripe,pi_1,payment,1.5,EUR,2026-11-30T10:00:00Z", "amount"},
      {"stripe,pi_1,payment,1000000000000001,EUR,2026-11-30T10:00:00Z", "at most 1000000000000000"},
      {"stripe,pi_1,payment,99999999999999999999,EUR,2026-11-30T10:00:00Z", "amount"},
      {"stripe,pi_1,deposit,5,EUR,2026-11-30T10:00:00Z", "type \"deposit\""},
      {"stripe,pi_1,payment,5,eur,2026-11-30T10:00:00Z", "currency \"eur\""},
      {"stripe,pi_1,payment,5,EUR,2026-11-30 10:00:00Z", "settledAt"},
      {"stripe,pi_1,payment,5,EUR,2026-02-30T10:00:00Z", "settledAt"},
      {"stripe,pi_1,payment,5,EUR,2026-11-30T10:00:00", "settledAt"},
      {"stripe,pi_1,payment,5,EUR,2026-11-30T24:00:00Z", "settledAt"},
      {"stripe,pi_1,payment,5,EUR,2026-11-30T10:00:00+1:00", "settledAt"},
      {"stripe,pi_1,payment,5,EUR,2026-11-30T10:00:00.Z", "settledAt"},
      {"stripe,pi_1,payment,5,EUR,2026-11-30T10:00:00.1234567891Z", "settledAt"},
      {"Stripe,pi_1,payment,5,EUR,2026-11-30T10:00:00Z", "provider \"Stripe\""},
      {"stripe,,payment,5,EUR,2026-11-30T10:00:00Z", "paymentId \"\""},
      {"stripe,pi 1,payment,5,EUR,2026-11-30T10:00:00Z", "paymentId"},
      {"stripe,pi_1,payment,5,EUR", "5 fields, not 6"},
      {"stripe,pi_1,payment,5,EUR,2026-11-30T10:00:00Z,extra", "more than 6 fields"},
      {"stripe,pi_1,payment,5,EUR,2026-11-30T10:00:00Z,", "more than 6 fields"},
      {"stripe,\"pi_1,payment,5,EUR,2026-11-30T10:00:00Z", "does not close"},
      {"stripe,\"pi_1\"x,payment,5,EUR,2026-11-30T10:00:00Z", "after its closing quote"},
      {"stripe,pi\"1,payment,5,EUR,2026-11-30T10:00:00Z", "quote inside"},
      {"", "empty"},
      {"other,pi_9,payment,5,EUR,2026-11-30T10:00:00Z", "one provider"},
  };
  for (const auto& c : cases) {
    const auto r = parse(k_header + "stripe,pi_0,payment,5,EUR,2026-11-30T10:00:00Z\n" + c.line +
                         "\nstripe,pi_2,payment,5,EUR,2026-11-30T10:00:00Z\n");
    EXPECT_FALSE(r.ok) << c.line;
    EXPECT_EQ(r.error_line, 3) << c.line;
    EXPECT_EQ(r.error.rfind("line 3: ", 0), 0u) << r.error;
    EXPECT_NE(r.error.find(c.says), std::string::npos) << c.line << " -> " << r.error;
    EXPECT_EQ(r.lines.size(), 1u) << "nothing after the bad line is read: " << c.line;
  }
}

TEST(settlement_report, the_header_comes_first_and_one_line_at_least_follows) {
  // A wrong or missing header is line 1; a header alone, or nothing at all, is not a report.
  auto r = parse("paymentId,provider,type,amount,currency,settledAt\nstripe,pi_1,payment,5,EUR,2026-11-30T10:00:00Z\n");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error_line, 1);
  EXPECT_NE(r.error.find("header"), std::string::npos) << r.error;
  r = parse(k_header);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error_line, 2);
  EXPECT_NE(r.error.find("no settlement line"), std::string::npos) << r.error;
  r = parse("");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error_line, 1);
}

TEST(settlement_report, bounds_the_line_length_and_the_line_count) {
  // A line longer than 4096 bytes is refused while it arrives, however it is cut; so is one line too many.
  const std::string long_line = "stripe," + std::string(5000, 'p') + ",payment,5,EUR,2026-11-30T10:00:00Z\n";
  for (std::size_t chunk : {std::size_t{0}, std::size_t{100}, std::size_t{4096}}) {
    const auto r = parse(k_header + long_line, chunk);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error_line, 2) << chunk;
    EXPECT_NE(r.error.find("longer than 4096"), std::string::npos) << r.error;
  }
  std::string three = k_header;
  for (int i = 0; i < 3; ++i) three += "stripe,pi_" + std::to_string(i) + ",payment,5,EUR,2026-11-30T10:00:00Z\n";
  EXPECT_TRUE(parse(three, 0, 3).ok);
  const auto r = parse(three, 0, 2);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error_line, 4);
}

TEST(rfc3339, converts_to_utc_microseconds) {
  // Offsets move the instant, fractions past microseconds are cut, leap days exist where the calendar has them.
  EXPECT_EQ(parse_rfc3339_us("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(parse_rfc3339_us("1970-01-01T01:00:00+01:00"), 0);
  EXPECT_EQ(parse_rfc3339_us("1969-12-31T23:59:59.999999z"), -1);
  EXPECT_EQ(parse_rfc3339_us("2024-02-29T00:00:00Z"), 1'709'164'800'000'000);
  EXPECT_EQ(parse_rfc3339_us("2000-02-29t12:00:00.1234567-00:00"), 951'825'600'123'456);
  EXPECT_EQ(parse_rfc3339_us("2023-02-29T00:00:00Z"), std::nullopt);
  EXPECT_EQ(parse_rfc3339_us("1900-02-29T00:00:00Z"), std::nullopt);
  EXPECT_EQ(parse_rfc3339_us("0000-01-01T00:00:00Z"), std::nullopt);
  EXPECT_EQ(parse_rfc3339_us("2026-11-30T10:00:60Z"), std::nullopt);
  EXPECT_EQ(parse_rfc3339_us("2026-11-30T10:00:00+24:00"), std::nullopt);
  EXPECT_EQ(parse_rfc3339_us("2026-11-30T10:00:00Z "), std::nullopt);
  EXPECT_EQ(parse_rfc3339_us("2026-11-30"), std::nullopt);
}

}  // namespace
}  // namespace ledger
