// The posting rule of each money flow (ledger/flows.hpp), as a table: for each event, the entries
// it makes (account, signed amount, balance after) against given balances, and that they sum to
// zero. The refusals of a flow (too little money, a fee that overflows) change nothing.

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "ledger/flows.hpp"

namespace ledger {
namespace {

// Accounts of the table: a user wallet, another wallet, and the system accounts of one currency.
constexpr account_id k_wallet = 1;
constexpr account_id k_other = 2;
constexpr account_id k_clearing = 10;
constexpr account_id k_pending = 11;
constexpr account_id k_fees = 12;
constexpr account_id k_loss = 13;

account_states accounts(amount_minor wallet_balance) {
  account_states s;
  auto add = [&](account_id id, amount_minor balance, bool allow_negative) {
    account_state a;
    a.id = id;
    a.currency = "EUR";
    a.balance = balance;
    a.allow_negative = allow_negative;
    s.emplace(id, a);
  };
  add(k_wallet, wallet_balance, false);
  add(k_other, 0, false);
  add(k_clearing, 0, true);
  add(k_pending, 500, false);  // a withdrawal of 500 is pending
  add(k_fees, 0, false);
  add(k_loss, 0, true);
  return s;
}

using entry = std::tuple<account_id, amount_minor, amount_minor>;  // account, amount, balance after

struct flow_case {
  std::string event;
  posting rule;
  amount_minor wallet_balance;
  std::vector<entry> entries;
  amount_minor shortfall = 0;
};

std::vector<entry> entries_of(const posting_plan& plan) {
  std::vector<entry> out;
  for (const auto& e : plan.entries) out.emplace_back(e.account, e.amount, e.balance_after);
  return out;
}

TEST(flow_rules, each_event_makes_the_entries_of_its_row_in_the_table) {
  // docs/money-flows.md, one row a case: the entries, in order, and their balances after.
  const std::vector<flow_case> table{
      {"provider payment succeeded",
       flows::deposit(k_clearing, k_wallet, k_wallet, 1'000, "EUR"),
       0,
       {{k_clearing, -1'000, -1'000}, {k_wallet, 1'000, 1'000}}},
      {"withdrawal requested (fee 50)",
       *flows::withdrawal(k_wallet, k_pending, k_fees, 1'000, 50, "EUR"),
       2'000,
       {{k_wallet, -1'050, 950}, {k_pending, 1'000, 1'500}, {k_fees, 50, 50}}},
      {"withdrawal requested (no fee)",
       *flows::withdrawal(k_wallet, k_pending, k_fees, 1'000, 0, "EUR"),
       1'000,
       {{k_wallet, -1'000, 0}, {k_pending, 1'000, 1'500}}},
      {"payout confirmed",
       flows::payout(k_pending, k_clearing, 500, "EUR"),
       0,
       {{k_pending, -500, 0}, {k_clearing, 500, 500}}},
      {"payout failed (the fee is kept)",
       flows::payout_failed(k_pending, k_wallet, k_wallet, 500, "EUR"),
       100,
       {{k_pending, -500, 0}, {k_wallet, 500, 600}}},
      {"refund of a deposit",
       flows::deposit_refund(k_wallet, k_clearing, 300, "EUR"),
       1'000,
       {{k_wallet, -300, 700}, {k_clearing, 300, 300}}},
      {"chargeback the wallet covers",
       flows::chargeback(k_wallet, k_clearing, k_loss, 300, "EUR"),
       1'000,
       {{k_wallet, -300, 700}, {k_clearing, 300, 300}}},
      {"chargeback bigger than the wallet",
       flows::chargeback(k_wallet, k_clearing, k_loss, 1'000, "EUR"),
       400,
       {{k_wallet, -400, 0}, {k_loss, -600, -600}, {k_clearing, 1'000, 1'000}},
       600},
      {"chargeback of an empty wallet",
       flows::chargeback(k_wallet, k_clearing, k_loss, 1'000, "EUR"),
       0,
       {{k_loss, -1'000, -1'000}, {k_clearing, 1'000, 1'000}},
       1'000},
      {"payment",
       flows::transfer(k_wallet, k_other, k_other, 250, "EUR"),
       1'000,
       {{k_wallet, -250, 750}, {k_other, 250, 250}}},
      {"payment with a fee (250 bps + 30: 30 + 25)",
       flows::transfer(k_wallet, k_other, k_other, 1'000, "EUR", flows::payee_fee{k_fees, {250, 30}}),
       1'000,
       {{k_wallet, -1'000, 0}, {k_other, 945, 945}, {k_fees, 55, 55}}},
      {"payment whose fee is all of it (fixed 5000 > 1000)",
       flows::transfer(k_wallet, k_other, k_other, 1'000, "EUR", flows::payee_fee{k_fees, {0, 5'000}}),
       1'000,
       {{k_wallet, -1'000, 0}, {k_fees, 1'000, 1'000}}},
      {"payment whose fee rounds down to zero (1 bps of 250)",
       flows::transfer(k_wallet, k_other, k_other, 250, "EUR", flows::payee_fee{k_fees, {1, 0}}),
       1'000,
       {{k_wallet, -250, 750}, {k_other, 250, 250}}},
      {"payment to a payee whose schedule charges nothing",
       flows::transfer(k_wallet, k_other, k_other, 250, "EUR", flows::payee_fee{k_fees, {0, 0}}),
       1'000,
       {{k_wallet, -250, 750}, {k_other, 250, 250}}},
      {"refund of a payment (the merchant pays the payer back)",
       flows::refund(k_wallet, k_other, k_other, 300, "EUR"),
       1'000,
       {{k_wallet, -300, 700}, {k_other, 300, 300}}},
  };
  for (const auto& c : table) {
    auto states = accounts(c.wallet_balance);
    const auto plan = plan_posting(c.rule, states);
    ASSERT_EQ(plan.outcome, error_code::ok) << c.event;
    EXPECT_EQ(entries_of(plan), c.entries) << c.event;
    EXPECT_TRUE(entries_balance(plan.entries)) << c.event;
    EXPECT_EQ(plan.shortfall, c.shortfall) << c.event;
    EXPECT_GE(states.at(k_wallet).balance, 0) << c.event << ": a wallet never goes negative";
  }
}

TEST(flow_rules, a_withdrawal_or_refund_beyond_the_wallet_is_refused_and_changes_nothing) {
  // Only a chargeback may take less than its amount from the wallet; the others are refused whole.
  for (const auto& rule : {*flows::withdrawal(k_wallet, k_pending, k_fees, 1'000, 50, "EUR"),
                           flows::deposit_refund(k_wallet, k_clearing, 1'001, "EUR"),
                           flows::refund(k_wallet, k_other, k_other, 1'001, "EUR")}) {
    auto states = accounts(1'000);
    const auto before = states;
    const auto plan = plan_posting(rule, states);
    EXPECT_EQ(plan.outcome, error_code::insufficient_funds);
    EXPECT_TRUE(plan.entries.empty());
    for (const auto& [id, s] : before) EXPECT_EQ(states.at(id).balance, s.balance);
  }
}

TEST(flow_rules, the_writer_prices_a_payment_by_the_schedule_it_locked) {
  // The fee of a payment is priced again from the payee's schedule as the ledger writer read it:
  // a fee leg built from an outdated schedule gets the current fee, and a payment built without a
  // fee leg is refused when the payee now charges one (and left alone when it charges nothing).
  auto with_leg = flows::transfer(k_wallet, k_other, k_other, 1'000, "EUR", flows::payee_fee{k_fees, {100, 0}});
  ASSERT_EQ(flows::payee_fee_of(with_leg), 10);
  EXPECT_TRUE(flows::price_payee_fee(with_leg, {200, 5}));
  EXPECT_EQ(flows::payee_fee_of(with_leg), 25);
  EXPECT_TRUE(flows::price_payee_fee(with_leg, {0, 0}));
  EXPECT_EQ(flows::payee_fee_of(with_leg), 0);
  auto states = accounts(1'000);
  const auto plan = plan_posting(with_leg, states);
  ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(entries_of(plan), (std::vector<entry>{{k_wallet, -1'000, 0}, {k_other, 1'000, 1'000}}));

  auto without_leg = flows::transfer(k_wallet, k_other, k_other, 1'000, "EUR");
  EXPECT_TRUE(flows::price_payee_fee(without_leg, {0, 0}));
  EXPECT_TRUE(flows::price_payee_fee(without_leg, {9, 0}));  // floor(1000 × 9 / 10000) = 0
  EXPECT_FALSE(flows::price_payee_fee(without_leg, {10, 0}));
  EXPECT_FALSE(flows::price_payee_fee(without_leg, {0, 1}));
  EXPECT_TRUE(without_leg.extra_credits.empty());
}

TEST(flow_rules, a_fee_that_overflows_the_amount_is_no_withdrawal) {
  // amount + fee must fit in int64: the rule refuses to build the posting.
  EXPECT_FALSE(flows::withdrawal(k_wallet, k_pending, k_fees, std::numeric_limits<amount_minor>::max(), 1, "EUR"));
  EXPECT_FALSE(flows::withdrawal(k_wallet, k_pending, k_fees, 1, -1, "EUR"));
}

TEST(flow_rules, a_chargeback_proceeds_against_a_frozen_wallet_but_a_refund_does_not) {
  // A chargeback is not the wallet owner's choice: it takes what the wallet holds whatever its status.
  auto states = accounts(500);
  states.at(k_wallet).status = account_status::frozen;
  EXPECT_EQ(plan_posting(flows::deposit_refund(k_wallet, k_clearing, 100, "EUR"), states).outcome,
            error_code::account_inactive);
  const auto plan = plan_posting(flows::chargeback(k_wallet, k_clearing, k_loss, 700, "EUR"), states);
  ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(plan.shortfall, 200);
  EXPECT_EQ(states.at(k_wallet).balance, 0);
}

TEST(flow_rules, a_failed_payout_reaches_a_frozen_wallet_but_a_deposit_does_not) {
  // A failed payout gives the wallet its own money back and settles the withdrawal; every other
  // credit of a frozen wallet is refused and changes nothing.
  auto states = accounts(100);
  states.at(k_wallet).status = account_status::frozen;
  EXPECT_EQ(plan_posting(flows::deposit(k_clearing, k_wallet, k_wallet, 100, "EUR"), states).outcome,
            error_code::account_inactive);
  EXPECT_EQ(plan_posting(flows::transfer(k_other, k_wallet, k_wallet, 1, "EUR"), states).outcome,
            error_code::account_inactive);
  EXPECT_EQ(states.at(k_wallet).balance, 100);
  const auto plan = plan_posting(flows::payout_failed(k_pending, k_wallet, k_wallet, 500, "EUR"), states);
  ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(entries_of(plan), (std::vector<entry>{{k_pending, -500, 0}, {k_wallet, 500, 600}}));
}

TEST(flow_rules, a_failed_payout_never_reaches_a_closed_wallet) {
  // A wallet with a PENDING withdrawal does not close; were one closed anyway, it stays at zero.
  auto states = accounts(0);
  states.at(k_wallet).status = account_status::closed;
  EXPECT_EQ(plan_posting(flows::payout_failed(k_pending, k_wallet, k_wallet, 500, "EUR"), states).outcome,
            error_code::account_inactive);
  EXPECT_EQ(states.at(k_wallet).balance, 0);
}

TEST(flow_rules, a_shortfall_account_must_be_allowed_to_go_negative) {
  // Booking a loss to an account that may not go negative would break its own invariant.
  auto states = accounts(0);
  auto rule = flows::chargeback(k_wallet, k_clearing, k_fees, 100, "EUR");
  EXPECT_EQ(plan_posting(rule, states).outcome, error_code::invalid_request);
}

}  // namespace
}  // namespace ledger
