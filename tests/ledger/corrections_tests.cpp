// Corrections and currencies in ledger/ (docs/corrections.md): exact decimal rates, conversions
// across minor-unit scales rounded down, postings of explicit legs (zero-sum per currency, funds
// drawn from a main row then its shards, a refusal that changes nothing), and the reversal,
// adjustment and exchange rules as tables of entries.

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "ledger/flows.hpp"
#include "ledger/fx.hpp"
#include "ledger/posting.hpp"

namespace ledger {
namespace {

using entry_tuple = std::tuple<account_id, amount_minor, amount_minor>;

account_state row(account_id id, amount_minor balance, std::string currency, bool negative = false,
                  account_id parent = 0) {
  account_state s;
  s.id = id;
  s.currency = std::move(currency);
  s.balance = balance;
  s.allow_negative = negative;
  s.parent_id = parent;
  return s;
}

std::vector<entry_tuple> tuples(const posting_plan& plan) {
  std::vector<entry_tuple> out;
  for (const auto& e : plan.entries) out.emplace_back(e.account, e.amount, e.balance_after);
  return out;
}

// Rates parse into an exact mantissa and scale, print canonically, and refuse anything that is not
// a positive decimal of at most 12 significant digits.
TEST(FxRate, ParsesExactDecimalsAndRefusesTheRest) {
  EXPECT_EQ(fx::parse_rate("0.9215"), (fx::rate{9215, 4}));
  EXPECT_EQ(fx::parse_rate("150"), (fx::rate{150, 0}));
  EXPECT_EQ(fx::parse_rate("1.50"), (fx::rate{15, 1}));
  EXPECT_EQ(fx::parse_rate("000.001"), (fx::rate{1, 3}));
  EXPECT_EQ(fx::parse_rate("123456789012"), (fx::rate{123456789012, 0}));
  EXPECT_EQ(fx::parse_rate("0.000000123456789012"), (fx::rate{123456789012, 18}));
  for (const char* bad : {"", "0", "0.000", "-1", "+1", "1e3", "1.", ".5", "1.2.3", "1,5", " 1", "1 ", "NaN",
                          "1234567890123", "1.234567890123", "0.0000000000000000001"}) {
    EXPECT_FALSE(fx::parse_rate(bad)) << bad;
  }
  EXPECT_EQ(fx::to_string({9215, 4}), "0.9215");
  EXPECT_EQ(fx::to_string({150, 0}), "150");
  EXPECT_EQ(fx::to_string({1, 3}), "0.001");
  EXPECT_EQ(fx::to_string({15, 1}), "1.5");
  EXPECT_EQ(fx::to_string(*fx::parse_rate("0003.1400")), "3.14");
}

// ISO 4217 minor units: the table's exceptions and 2 for every other code.
TEST(FxRate, MinorUnitsFollowIso4217) {
  EXPECT_EQ(fx::minor_units("JPY"), 0);
  EXPECT_EQ(fx::minor_units("KRW"), 0);
  EXPECT_EQ(fx::minor_units("USD"), 2);
  EXPECT_EQ(fx::minor_units("EUR"), 2);
  EXPECT_EQ(fx::minor_units("GBP"), 2);
  EXPECT_EQ(fx::minor_units("KWD"), 3);
  EXPECT_EQ(fx::minor_units("BHD"), 3);
  EXPECT_EQ(fx::minor_units("CLF"), 4);
}

// Conversions are exact across scales and round down: each row is worked out by hand.
TEST(FxConvert, ExactAcrossMinorUnitScalesRoundedDown) {
  struct row_t {
    amount_minor amount;
    const char* rate;
    const char* from;
    const char* to;
    amount_minor expected;
  };
  const std::vector<row_t> rows{
      // 100.00 USD at 151.37 JPY/USD = 15137 JPY.
      {10'000, "151.37", "USD", "JPY", 15'137},
      // 1.00 USD = 151.37 JPY → 151 JPY (0.37 JPY rounded down).
      {100, "151.37", "USD", "JPY", 151},
      // 0.01 USD = 1.5137 JPY → 1 JPY.
      {1, "151.37", "USD", "JPY", 1},
      // 1000 JPY at 0.002035 KWD/JPY = 2.035 KWD = 2035 fils.
      {1'000, "0.002035", "JPY", "KWD", 2'035},
      // 1 JPY = 0.002035 KWD = 2.035 fils → 2 fils.
      {1, "0.002035", "JPY", "KWD", 2},
      // 1.000 KWD at 3.2519 USD/KWD = 3.2519 USD → 325 cents.
      {1'000, "3.2519", "KWD", "USD", 325},
      // 0.001 KWD = 0.0032519 USD → 0 cents.
      {1, "3.2519", "KWD", "USD", 0},
      // 10.00 EUR at 0.9215 = 9.215 → 921 cents (down, never 922).
      {1'000, "0.9215", "EUR", "USD", 921},
      // 0.99 EUR at 1 = 0.99.
      {99, "1", "EUR", "USD", 99},
      // 1 KWD (1000 fils) at 1 = 1 CLF (10000 ten-thousandths).
      {1'000, "1", "KWD", "CLF", 10'000},
  };
  for (const auto& r : rows) {
    const auto rate = fx::parse_rate(r.rate);
    ASSERT_TRUE(rate) << r.rate;
    EXPECT_EQ(fx::convert(r.amount, *rate, r.from, r.to), std::optional<amount_minor>(r.expected))
        << r.amount << " " << r.from << " at " << r.rate << " to " << r.to;
  }
}

// A product past 64 bits is computed in 128 and still exact; a result past int64 is refused.
TEST(FxConvert, WideIntermediatesAndOverflow) {
  constexpr amount_minor max = std::numeric_limits<amount_minor>::max();
  // max × 0.5 = floor(max / 2): the product max × 5 overflows int64 but not the 128-bit intermediate.
  EXPECT_EQ(fx::convert(max, {5, 1}, "EUR", "USD"), std::optional<amount_minor>(max / 2));
  EXPECT_EQ(fx::convert(max, {999999999999, 12}, "USD", "JPY"),
            std::optional<amount_minor>(
                static_cast<amount_minor>(static_cast<__int128>(max) * 999999999999 / 1'000'000'000'000 / 100)));
  EXPECT_FALSE(fx::convert(max, {2, 0}, "EUR", "USD"));
  EXPECT_FALSE(fx::convert(max / 10, {1, 0}, "JPY", "KWD"));
  EXPECT_FALSE(fx::convert(0, {1, 0}, "EUR", "USD"));
  EXPECT_FALSE(fx::convert(-5, {1, 0}, "EUR", "USD"));
}

// An exchange moves A out of wallet A into fx A, and B out of fx B (which may go negative) into
// wallet B: each currency sums to zero, and the plan's entries are exactly those four.
TEST(Legs, ExchangeSumsToZeroPerCurrency) {
  account_states s{
      {1, row(1, 10'000, "USD")}, {2, row(2, 0, "USD", true)}, {3, row(3, 0, "JPY", true)}, {4, row(4, 5, "JPY")}};
  const auto p = flows::exchange(1, 2, 10'000, "USD", 3, 4, 4, 15'137, "JPY");
  const auto plan = plan_posting(p, s);
  ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(tuples(plan), (std::vector<entry_tuple>{
                              {1, -10'000, 0}, {2, 10'000, 10'000}, {3, -15'137, -15'137}, {4, 15'137, 15'142}}));
  EXPECT_EQ(plan.debit_balance_after, 0);
  EXPECT_EQ(s.at(4).version, 1);
}

// Legs that do not sum to zero in each currency, or leave the debited account overdrawn, are
// refused, and a refusal changes no balance.
TEST(Legs, RefusalsChangeNothing) {
  const account_states before{
      {1, row(1, 100, "USD")}, {2, row(2, 0, "USD", true)}, {3, row(3, 0, "JPY", true)}, {4, row(4, 0, "JPY")}};
  auto s = before;
  // 101 from a wallet of 100.
  EXPECT_EQ(plan_posting(flows::exchange(1, 2, 101, "USD", 3, 4, 4, 150, "JPY"), s).outcome,
            error_code::insufficient_funds);
  // A sum of 1 JPY.
  auto bad = flows::exchange(1, 2, 100, "USD", 3, 4, 4, 150, "JPY");
  bad.legs[3].amount = 151;
  EXPECT_EQ(plan_posting(bad, s).outcome, error_code::invalid_request);
  // A leg in the wrong currency for its account.
  bad = flows::exchange(1, 2, 100, "USD", 3, 4, 4, 150, "JPY");
  bad.legs[3].currency = "USD";
  bad.legs[2].currency = "USD";
  EXPECT_EQ(plan_posting(bad, s).outcome, error_code::currency_mismatch);
  // The routing amount must be the debited account's leg.
  bad = flows::exchange(1, 2, 100, "USD", 3, 4, 4, 150, "JPY");
  bad.amount = 50;
  EXPECT_EQ(plan_posting(bad, s).outcome, error_code::invalid_request);
  for (const auto& [id, state] : before) {
    EXPECT_EQ(s.at(id).balance, state.balance);
    EXPECT_EQ(s.at(id).version, state.version);
  }
}

// The reversal of a payment with a fee to a hot payee: the payee's credit sat on a shard and was
// swept into the main row since, so it is taken back from the main row first and then the shards;
// the fee comes back from fee_revenue and the payer gets the whole amount.
TEST(ReversalRule, MirrorsAPaymentToAHotPayee) {
  // payer 1; payee 10 with shards 11, 12; fee_revenue 20.
  const std::vector<flows::reversed_entry> original{
      {1, 1, -1'000, "EUR", true, {}},
      {11, 10, 970, "EUR", true, {11, 12}},
      {20, 20, 30, "EUR", false, {}},
  };
  auto p = flows::reversal(original);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->type, transaction_type::reversal);
  EXPECT_EQ(p->debit_account, 10);
  EXPECT_EQ(p->amount, 970);
  p->debit_shards = {11, 12};  // as the payee's actor fills them
  account_states s{{1, row(1, 0, "EUR")},
                   {10, row(10, 500, "EUR")},
                   {11, row(11, 400, "EUR", false, 10)},
                   {12, row(12, 100, "EUR", false, 10)},
                   {20, row(20, 30, "EUR")}};
  const auto plan = plan_posting(*p, s);
  ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(tuples(plan),
            (std::vector<entry_tuple>{{1, 1'000, 1'000}, {10, -500, 0}, {11, -400, 0}, {12, -70, 30}, {20, -30, 0}}));
  EXPECT_EQ(plan.debit_balance_after, 30);
}

// The reversal of a payment a hot payer made partly from a shard gives each debit back to the row it
// left, and names the shard's account with the shard: the account whose actor keeps its balance.
TEST(ReversalRule, GivesAHotPayersDebitBackToItsShard) {
  // hot payer 10 with shards 11, 12 paid 900 from its main row (600) and shard 11 (300) to payee 1.
  const std::vector<flows::reversed_entry> original{
      {10, 10, -600, "EUR", true, {11, 12}},
      {11, 10, -300, "EUR", true, {11, 12}},
      {1, 1, 900, "EUR", true, {}},
  };
  auto p = flows::reversal(original);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->debit_account, 1);
  EXPECT_EQ(p->credit_account, 10);
  EXPECT_EQ(p->credit_parent, 10);
  ASSERT_EQ(p->legs.size(), 3u);
  EXPECT_EQ(p->legs[0].parent, 10);
  EXPECT_EQ(p->legs[1].account, 11);
  EXPECT_EQ(p->legs[1].parent, 10);
  EXPECT_EQ(p->legs[2].parent, 0);  // the debit
  account_states s{{1, row(1, 900, "EUR")},
                   {10, row(10, 0, "EUR")},
                   {11, row(11, 0, "EUR", false, 10)},
                   {12, row(12, 0, "EUR", false, 10)}};
  const auto plan = plan_posting(*p, s);
  ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(tuples(plan), (std::vector<entry_tuple>{{10, 600, 600}, {11, 300, 300}, {1, -900, 0}}));

  // Reversed the other way round, the credit onto the shard comes first: the posting's payee is
  // still the shard's account.
  const std::vector<flows::reversed_entry> shard_first{original[1], original[0], original[2]};
  auto q = flows::reversal(shard_first);
  ASSERT_TRUE(q);
  EXPECT_EQ(q->credit_account, 11);
  EXPECT_EQ(q->credit_parent, 10);
}

// A reversal that would overdraw the account it takes a credit back from is refused.
TEST(ReversalRule, RefusedWhenItWouldOverdraw) {
  const std::vector<flows::reversed_entry> deposit{{7, 7, -500, "EUR", false, {}}, {1, 1, 500, "EUR", true, {}}};
  auto p = flows::reversal(deposit);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->debit_account, 1);
  account_states s{{1, row(1, 499, "EUR")}, {7, row(7, -500, "EUR", true)}};
  EXPECT_EQ(plan_posting(*p, s).outcome, error_code::insufficient_funds);
  EXPECT_EQ(s.at(1).balance, 499);
  s.at(1).balance = 500;
  const auto plan = plan_posting(*p, s);
  ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(tuples(plan), (std::vector<entry_tuple>{{7, 500, 0}, {1, -500, 0}}));
}

// The reversal of an exchange mirrors all four legs in both currencies; a reversal that would debit
// two user accounts, or names no credit, is no single posting.
TEST(ReversalRule, ExchangeAndImpossibleShapes) {
  const std::vector<flows::reversed_entry> exchange{{1, 1, -10'000, "USD", true, {}},
                                                    {2, 2, 10'000, "USD", false, {}},
                                                    {3, 3, -15'137, "JPY", false, {}},
                                                    {4, 4, 15'137, "JPY", true, {}}};
  auto p = flows::reversal(exchange);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->debit_account, 4);
  EXPECT_EQ(p->currency, "JPY");
  account_states s{{1, row(1, 0, "USD")},
                   {2, row(2, 10'000, "USD", true)},
                   {3, row(3, -15'137, "JPY", true)},
                   {4, row(4, 15'137, "JPY")}};
  const auto plan = plan_posting(*p, s);
  ASSERT_EQ(plan.outcome, error_code::ok);
  for (account_id id : {1, 2, 3}) EXPECT_EQ(s.at(id).balance, id == 1 ? 10'000 : 0);
  EXPECT_EQ(s.at(4).balance, 0);

  EXPECT_FALSE(
      flows::reversal({{1, 1, 100, "EUR", true, {}}, {2, 2, 100, "EUR", true, {}}, {3, 3, -200, "EUR", false, {}}}));
  EXPECT_FALSE(flows::reversal({{1, 1, -100, "EUR", true, {}}}));
  EXPECT_FALSE(flows::reversal({}));
}

// An adjustment: positive, the adjustment account pays the account; negative, the other way.
TEST(AdjustmentRule, DirectionFollowsTheSign) {
  account_states s{{1, row(1, 100, "EUR")}, {9, row(9, 0, "EUR", true)}};
  auto plan = plan_posting(flows::adjustment(9, 1, 1, 250, "EUR"), s);
  ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(tuples(plan), (std::vector<entry_tuple>{{9, -250, -250}, {1, 250, 350}}));
  plan = plan_posting(flows::adjustment(9, 1, 9, -350, "EUR"), s);
  ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(tuples(plan), (std::vector<entry_tuple>{{1, -350, 0}, {9, 350, 100}}));
  EXPECT_EQ(plan_posting(flows::adjustment(9, 1, 9, -1, "EUR"), s).outcome, error_code::insufficient_funds);
}

// A debit by legs (an exchange, a negative adjustment, a reversal) may not spend what the account's
// active holds keep, as no debit may.
TEST(Legs, HeldMoneyIsNotSpent) {
  account_states s{
      {1, row(1, 100, "USD")}, {2, row(2, 0, "USD", true)}, {3, row(3, 0, "JPY", true)}, {4, row(4, 0, "JPY")}};
  s.at(1).held = 40;
  EXPECT_EQ(plan_posting(flows::exchange(1, 2, 61, "USD", 3, 4, 4, 90, "JPY"), s).outcome,
            error_code::insufficient_funds);
  EXPECT_EQ(plan_posting(flows::exchange(1, 2, 60, "USD", 3, 4, 4, 90, "JPY"), s).outcome, error_code::ok);
  EXPECT_EQ(s.at(1).balance, 40);
}

// Which types a reversal may undo.
TEST(ReversalRule, ReversibleTypes) {
  for (auto t :
       {transaction_type::transfer, transaction_type::capture, transaction_type::deposit, transaction_type::exchange}) {
    EXPECT_TRUE(flows::is_reversible(t)) << to_string(t);
  }
  for (auto t : {transaction_type::adjustment, transaction_type::reversal, transaction_type::sweep,
                 transaction_type::withdrawal, transaction_type::payout, transaction_type::payout_failed,
                 transaction_type::deposit_refund, transaction_type::chargeback, transaction_type::refund}) {
    EXPECT_FALSE(flows::is_reversible(t)) << to_string(t);
  }
}

}  // namespace
}  // namespace ledger
