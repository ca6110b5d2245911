// The rules of holds (ledger/holds.hpp, and the held money in ledger::plan_posting): a hold keeps
// part of the payer's money from every other debit without moving it, is never larger than what
// the payer may spend (main row and hot shards, less the holds it has), and its capture pays out
// of the held money with the payee's fee, releasing the whole hold in the same posting.

#include <gtest/gtest.h>

#include "ledger/flows.hpp"
#include "ledger/holds.hpp"

namespace ledger {
namespace {

constexpr account_id k_payer = 1;
constexpr account_id k_payee = 2;
constexpr account_id k_fees = 12;
constexpr account_id k_shard_a = 101;
constexpr account_id k_shard_b = 102;
constexpr account_id k_clearing = 10;
constexpr account_id k_loss = 13;

account_states accounts(amount_minor payer_balance, amount_minor held = 0) {
  account_states s;
  auto add = [&](account_id id, amount_minor balance, bool allow_negative, account_id parent = 0) {
    account_state a;
    a.id = id;
    a.currency = "EUR";
    a.balance = balance;
    a.allow_negative = allow_negative;
    a.parent_id = parent;
    s.emplace(id, a);
  };
  add(k_payer, payer_balance, false);
  add(k_payee, 0, false);
  add(k_fees, 0, false);
  add(k_clearing, 0, true);
  add(k_loss, 0, true);
  add(k_shard_a, 0, false, k_payer);
  add(k_shard_b, 0, false, k_payer);
  s.at(k_payer).held = held;
  return s;
}

TEST(hold_rules, a_hold_keeps_money_up_to_what_the_payer_may_spend) {
  auto s = accounts(1'000);
  EXPECT_EQ(holds::place(s, k_payer, {}, 600, "EUR"), error_code::ok);
  EXPECT_EQ(s.at(k_payer).held, 600);
  EXPECT_EQ(s.at(k_payer).balance, 1'000);  // a hold moves no money
  EXPECT_EQ(s.at(k_payer).held_version, 1);
  EXPECT_EQ(holds::available(s, k_payer, {}), 400);
  // What is left, exactly, and not one unit more.
  EXPECT_EQ(holds::place(s, k_payer, {}, 401, "EUR"), error_code::hold_exceeds_available);
  EXPECT_EQ(s.at(k_payer).held, 600);
  EXPECT_EQ(holds::place(s, k_payer, {}, 400, "EUR"), error_code::ok);
  EXPECT_EQ(holds::available(s, k_payer, {}), 0);
}

TEST(hold_rules, a_hold_is_refused_for_a_frozen_payer_another_currency_or_no_amount) {
  auto s = accounts(1'000);
  EXPECT_EQ(holds::place(s, k_payer, {}, 0, "EUR"), error_code::invalid_request);
  EXPECT_EQ(holds::place(s, k_payer, {}, 10, "USD"), error_code::currency_mismatch);
  s.at(k_payer).status = account_status::frozen;
  EXPECT_EQ(holds::place(s, k_payer, {}, 10, "EUR"), error_code::account_inactive);
  EXPECT_EQ(s.at(k_payer).held, 0);
  EXPECT_EQ(holds::place(s, 999, {}, 10, "EUR"), error_code::not_found);
}

TEST(hold_rules, a_hot_payer_may_hold_what_its_main_row_and_shards_hold_together) {
  auto s = accounts(100);
  s.at(k_shard_a).balance = 300;
  s.at(k_shard_b).balance = 200;
  EXPECT_EQ(holds::available(s, k_payer, {k_shard_a, k_shard_b}), 600);
  EXPECT_EQ(holds::place(s, k_payer, {k_shard_a, k_shard_b}, 601, "EUR"), error_code::hold_exceeds_available);
  EXPECT_EQ(holds::place(s, k_payer, {k_shard_a, k_shard_b}, 550, "EUR"), error_code::ok);
  // A debit may spend only what the hold leaves, main row and shards together.
  auto too_much = flows::transfer(k_payer, k_payee, k_payee, 51, "EUR");
  too_much.debit_shards = {k_shard_a, k_shard_b};
  EXPECT_EQ(plan_posting(too_much, s).outcome, error_code::insufficient_funds);
  auto enough = flows::transfer(k_payer, k_payee, k_payee, 50, "EUR");
  enough.debit_shards = {k_shard_a, k_shard_b};
  EXPECT_EQ(plan_posting(enough, s).outcome, error_code::ok);
}

TEST(hold_rules, debits_spend_only_the_balance_less_what_holds_keep) {
  auto s = accounts(1'000, 700);
  EXPECT_EQ(plan_posting(flows::transfer(k_payer, k_payee, k_payee, 301, "EUR"), s).outcome,
            error_code::insufficient_funds);
  EXPECT_EQ(s.at(k_payer).balance, 1'000);
  const auto plan = plan_posting(flows::transfer(k_payer, k_payee, k_payee, 300, "EUR"), s);
  EXPECT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(s.at(k_payer).balance, 700);
  EXPECT_EQ(s.at(k_payer).held, 700);  // the debit leaves the hold alone
}

TEST(hold_rules, a_capture_pays_the_payee_and_its_fee_out_of_the_hold_and_releases_all_of_it) {
  auto s = accounts(1'000, 800);
  // 500 of a hold of 800, with a fee of 10 + 1%: payer -500, payee +485, fee_revenue +15.
  auto p = flows::capture(k_payer, k_payee, k_payee, 500, "EUR", 800, flows::payee_fee{k_fees, {100, 10}});
  EXPECT_EQ(p.type, transaction_type::capture);
  const auto plan = plan_posting(p, s);
  ASSERT_EQ(plan.outcome, error_code::ok);
  ASSERT_EQ(plan.entries.size(), 3u);
  EXPECT_EQ(plan.entries[0].account, k_payer);
  EXPECT_EQ(plan.entries[0].amount, -500);
  EXPECT_EQ(plan.entries[1].account, k_payee);
  EXPECT_EQ(plan.entries[1].amount, 485);
  EXPECT_EQ(plan.entries[2].account, k_fees);
  EXPECT_EQ(plan.entries[2].amount, 15);
  EXPECT_TRUE(entries_balance(plan.entries));
  EXPECT_EQ(s.at(k_payer).balance, 500);
  EXPECT_EQ(s.at(k_payer).held, 0);  // the 300 not captured are released with it
  EXPECT_EQ(s.at(k_payer).held_version, 1);
}

TEST(hold_rules, a_capture_spends_its_own_hold_but_not_the_others) {
  // Two holds, 600 and 400, on a balance of 1,000: the first one's capture may take 600, not more.
  auto s = accounts(1'000, 1'000);
  EXPECT_EQ(plan_posting(flows::capture(k_payer, k_payee, k_payee, 601, "EUR", 600), s).outcome,
            error_code::insufficient_funds);
  EXPECT_EQ(s.at(k_payer).held, 1'000);
  EXPECT_EQ(plan_posting(flows::capture(k_payer, k_payee, k_payee, 600, "EUR", 600), s).outcome, error_code::ok);
  EXPECT_EQ(s.at(k_payer).held, 400);
  EXPECT_EQ(s.at(k_payer).balance, 400);
  // Releasing more than is held is a broken invariant, not a clamp.
  EXPECT_EQ(plan_posting(flows::capture(k_payer, k_payee, k_payee, 100, "EUR", 401), s).outcome,
            error_code::invalid_request);
}

TEST(hold_rules, a_void_or_an_expiry_releases_exactly_the_hold) {
  auto s = accounts(1'000, 300);
  EXPECT_EQ(holds::release(s, k_payer, 301), error_code::internal);
  EXPECT_EQ(holds::release(s, k_payer, 0), error_code::internal);
  EXPECT_EQ(s.at(k_payer).held, 300);
  EXPECT_EQ(holds::release(s, k_payer, 300), error_code::ok);
  EXPECT_EQ(s.at(k_payer).held, 0);
  EXPECT_EQ(s.at(k_payer).held_version, 1);
  EXPECT_EQ(holds::available(s, k_payer, {}), 1'000);
}

TEST(hold_rules, a_chargeback_takes_only_what_the_holds_leave_and_books_the_rest_as_loss) {
  // 1,000 held of 1,200: a chargeback of 500 takes 200 from the wallet and 300 from chargeback_loss.
  auto s = accounts(1'200, 1'000);
  const auto plan = plan_posting(flows::chargeback(k_payer, k_clearing, k_loss, 500, "EUR"), s);
  ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(plan.shortfall, 300);
  EXPECT_EQ(s.at(k_payer).balance, 1'000);
  EXPECT_EQ(s.at(k_payer).held, 1'000);
}

TEST(hold_rules, a_hold_reads_as_json_with_amounts_as_digits) {
  holds::hold_facts h{"0190c3a1-0000-7000-8000-000000000001",
                      "CAPTURED",
                      1,
                      2,
                      "EUR",
                      800,
                      500,
                      "2026-01-01T00:00:30.000000Z",
                      "2026-01-01T00:00:00.000000Z",
                      "0190c3a1-0000-7000-8000-000000000002"};
  EXPECT_EQ(holds::hold_json(h),
            "{\"id\":\"0190c3a1-0000-7000-8000-000000000001\",\"status\":\"CAPTURED\",\"fromAccountId\":1,"
            "\"toAccountId\":2,\"currency\":\"EUR\",\"amount\":\"800\",\"capturedAmount\":\"500\","
            "\"expiresAt\":\"2026-01-01T00:00:30.000000Z\",\"createdAt\":\"2026-01-01T00:00:00.000000Z\","
            "\"captureTransactionId\":\"0190c3a1-0000-7000-8000-000000000002\"}");
}

}  // namespace
}  // namespace ledger
