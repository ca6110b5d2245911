// Posting rules (ledger/posting.hpp) against an in-memory map of account states: which entries
// each money event makes, which it refuses, and that a refusal changes nothing.

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ledger/posting.hpp"

namespace ledger {
namespace {

constexpr amount_minor k_max = std::numeric_limits<amount_minor>::max();
constexpr amount_minor k_min = std::numeric_limits<amount_minor>::min();

using entry_tuple = std::tuple<account_id, amount_minor, amount_minor>;

account_state account(account_id id, amount_minor balance, std::string currency = "EUR") {
  account_state s;
  s.id = id;
  s.currency = std::move(currency);
  s.balance = balance;
  return s;
}

account_state clearing(account_id id, amount_minor balance = 0, std::string currency = "EUR") {
  account_state s = account(id, balance, std::move(currency));
  s.allow_negative = true;
  return s;
}

account_state shard(account_id id, account_id parent, amount_minor balance) {
  account_state s = account(id, balance);
  s.parent_id = parent;
  return s;
}

account_state with_status(account_state s, account_status status) {
  s.status = status;
  return s;
}

account_states states_of(std::initializer_list<account_state> rows) {
  account_states out;
  for (const auto& row : rows) out.emplace(row.id, row);
  return out;
}

posting transfer(account_id from, account_id to, amount_minor amount, std::string currency = "EUR") {
  posting p;
  p.type = transaction_type::transfer;
  p.debit_account = from;
  p.credit_account = to;
  p.amount = amount;
  p.currency = std::move(currency);
  return p;
}

posting deposit(account_id clearing_account, account_id to, amount_minor amount) {
  posting p = transfer(clearing_account, to, amount);
  p.type = transaction_type::deposit;
  return p;
}

posting hot_debit(account_id main, std::vector<account_id> shards, account_id to, amount_minor amount) {
  posting p = transfer(main, to, amount);
  p.debit_shards = std::move(shards);
  return p;
}

posting to_shard(account_id from, account_id shard_id, account_id parent, amount_minor amount) {
  posting p = transfer(from, shard_id, amount);
  p.credit_parent = parent;
  return p;
}

posting sweep(account_id shard_id, account_id parent, amount_minor amount = 0) {
  posting p;
  p.type = transaction_type::sweep;
  p.debit_account = shard_id;
  p.credit_account = parent;
  p.credit_parent = parent;
  p.amount = amount;
  p.currency = "EUR";
  return p;
}

std::vector<entry_tuple> tuples(const std::vector<entry_line>& entries) {
  std::vector<entry_tuple> out;
  for (const auto& e : entries) out.emplace_back(e.account, e.amount, e.balance_after);
  return out;
}

// Every field of every row, so that "unchanged" means exactly unchanged.
std::map<account_id, std::tuple<std::string, account_status, bool, amount_minor, std::int64_t, account_id>> snapshot(
    const account_states& states) {
  std::map<account_id, std::tuple<std::string, account_status, bool, amount_minor, std::int64_t, account_id>> out;
  for (const auto& [id, s] : states) {
    out.emplace(id, std::make_tuple(s.currency, s.status, s.allow_negative, s.balance, s.version, s.parent_id));
  }
  return out;
}

// Plans one posting expected to be refused with `code`, and checks that nothing changed.
void expect_refused(const posting& p, account_states& states, error_code code) {
  const auto before = snapshot(states);
  const posting_plan plan = plan_posting(p, states);
  EXPECT_EQ(plan.outcome, code) << "got " << to_string(plan.outcome);
  EXPECT_TRUE(plan.entries.empty());
  EXPECT_EQ(plan.amount, 0);
  EXPECT_EQ(snapshot(states), before);
}

// For an accepted plan: entries sum to zero, each touched row moved by its entry amount, ends at
// the entry's balance_after, and its version rose by exactly one; untouched rows are unchanged.
void expect_applied(const account_states& before, const account_states& after, const posting_plan& plan) {
  ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_TRUE(entries_balance(plan.entries));
  std::map<account_id, int> touched;
  for (const auto& e : plan.entries) {
    ++touched[e.account];
    const account_state& was = before.at(e.account);
    const account_state& now = after.at(e.account);
    EXPECT_EQ(now.balance, was.balance + e.amount) << "account " << e.account;
    EXPECT_EQ(now.balance, e.balance_after) << "account " << e.account;
    EXPECT_EQ(now.version, was.version + 1) << "account " << e.account;
  }
  for (const auto& [id, count] : touched) EXPECT_EQ(count, 1) << "account " << id << " has one entry per posting";
  for (const auto& [id, s] : after) {
    if (touched.count(id) > 0) continue;
    EXPECT_EQ(s.balance, before.at(id).balance) << "account " << id;
    EXPECT_EQ(s.version, before.at(id).version) << "account " << id;
  }
}

TEST(posting, transfer_makes_two_entries_with_balance_after) {
  // A plain transfer debits the payer and credits the payee, each entry carrying the row's new balance.
  account_states states = states_of({account(1, 100), account(2, 5)});
  const account_states before = states;
  const posting_plan plan = plan_posting(transfer(1, 2, 30), states);
  expect_applied(before, states, plan);
  EXPECT_EQ(plan.amount, 30);
  EXPECT_EQ(tuples(plan.entries), (std::vector<entry_tuple>{{1, -30, 70}, {2, 30, 35}}));
  EXPECT_EQ(plan.debit_balance_after, 70);
  EXPECT_EQ(states.at(1).balance, 70);
  EXPECT_EQ(states.at(2).balance, 35);
}

TEST(posting, transfer_of_the_whole_balance_leaves_exactly_zero) {
  // The funds check is `balance >= amount`, so the last minor unit can be spent.
  account_states states = states_of({account(1, 100), account(2, 0)});
  const posting_plan plan = plan_posting(transfer(1, 2, 100), states);
  ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(tuples(plan.entries), (std::vector<entry_tuple>{{1, -100, 0}, {2, 100, 100}}));
  EXPECT_EQ(plan.debit_balance_after, 0);
}

TEST(posting, insufficient_funds_changes_nothing) {
  // One minor unit more than the balance is refused, and so is any debit of an empty account.
  account_states states = states_of({account(1, 100), account(2, 0)});
  expect_refused(transfer(1, 2, 101), states, error_code::insufficient_funds);
  expect_refused(transfer(2, 1, 1), states, error_code::insufficient_funds);
  expect_refused(transfer(1, 2, k_max), states, error_code::insufficient_funds);
}

TEST(posting, non_positive_amount_is_invalid) {
  // Zero and negative amounts never reach the entries, even from an account that may go negative.
  account_states states = states_of({account(1, 100), account(2, 0), clearing(3)});
  expect_refused(transfer(1, 2, 0), states, error_code::invalid_request);
  expect_refused(transfer(1, 2, -1), states, error_code::invalid_request);
  expect_refused(transfer(1, 2, k_min), states, error_code::invalid_request);
  expect_refused(deposit(3, 2, -5), states, error_code::invalid_request);
}

TEST(posting, allow_negative_debit_goes_below_zero) {
  // The clearing account deposits come from may go negative; every deposit takes it further down.
  account_states states = states_of({clearing(9), account(1, 0)});
  account_states before = states;
  posting_plan first = plan_posting(deposit(9, 1, 500), states);
  expect_applied(before, states, first);
  EXPECT_EQ(tuples(first.entries), (std::vector<entry_tuple>{{9, -500, -500}, {1, 500, 500}}));
  EXPECT_EQ(first.debit_balance_after, -500);
  before = states;
  posting_plan second = plan_posting(deposit(9, 1, 250), states);
  expect_applied(before, states, second);
  EXPECT_EQ(tuples(second.entries), (std::vector<entry_tuple>{{9, -250, -750}, {1, 250, 750}}));
  EXPECT_EQ(states.at(9).version, 2);
}

TEST(posting, allow_negative_debit_cannot_pass_int64_min) {
  // A debit that would take the clearing account below INT64_MIN is refused, not wrapped.
  account_states states = states_of({clearing(9, k_min + 10), account(1, 0)});
  expect_refused(deposit(9, 1, 11), states, error_code::invalid_request);
  const posting_plan plan = plan_posting(deposit(9, 1, 10), states);
  ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(states.at(9).balance, k_min);
}

TEST(posting, credit_cannot_pass_int64_max) {
  // A credit that would overflow the payee's balance is refused and the payer keeps its money.
  account_states states = states_of({account(1, 100), account(2, k_max - 5)});
  expect_refused(transfer(1, 2, 6), states, error_code::invalid_request);
  const posting_plan plan = plan_posting(transfer(1, 2, 5), states);
  ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(tuples(plan.entries), (std::vector<entry_tuple>{{1, -5, 95}, {2, 5, k_max}}));
}

TEST(posting, hot_debit_draws_main_first_then_shards_in_order) {
  // Main row 30, shards 50 and 20: a debit of 60 empties the main row, takes 30 from the first
  // shard and leaves the second one untouched.
  account_states states = states_of({account(10, 30), shard(11, 10, 50), shard(12, 10, 20), account(2, 0)});
  const account_states before = states;
  const posting_plan plan = plan_posting(hot_debit(10, {11, 12}, 2, 60), states);
  expect_applied(before, states, plan);
  EXPECT_EQ(tuples(plan.entries), (std::vector<entry_tuple>{{10, -30, 0}, {11, -30, 20}, {2, 60, 60}}));
  EXPECT_EQ(plan.debit_balance_after, 40);  // main 0 + 20 + 20
  EXPECT_EQ(states.at(12).version, 0);
}

TEST(posting, hot_debit_follows_the_given_shard_order_and_skips_empty_rows) {
  // The shards are drawn in the order the posting lists them; rows holding nothing get no entry.
  account_states states =
      states_of({account(10, 0), shard(11, 10, 50), shard(12, 10, 0), shard(13, 10, 40), account(2, 0)});
  const account_states before = states;
  const posting_plan plan = plan_posting(hot_debit(10, {13, 12, 11}, 2, 70), states);
  expect_applied(before, states, plan);
  EXPECT_EQ(tuples(plan.entries), (std::vector<entry_tuple>{{13, -40, 0}, {11, -30, 20}, {2, 70, 70}}));
  EXPECT_EQ(plan.debit_balance_after, 20);
}

TEST(posting, hot_debit_covered_by_the_main_row_touches_no_shard) {
  // When the main row holds enough, the shards are not written at all.
  account_states states = states_of({account(10, 100), shard(11, 10, 50), account(2, 0)});
  const posting_plan plan = plan_posting(hot_debit(10, {11}, 2, 100), states);
  ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(tuples(plan.entries), (std::vector<entry_tuple>{{10, -100, 0}, {2, 100, 100}}));
  EXPECT_EQ(plan.debit_balance_after, 50);
  EXPECT_EQ(states.at(11).version, 0);
}

TEST(posting, hot_debit_exactly_covering_the_total_empties_every_row) {
  // The funds check is against main + all shards: exactly that amount passes, one more does not.
  account_states states = states_of({account(10, 30), shard(11, 10, 50), shard(12, 10, 20), account(2, 0)});
  expect_refused(hot_debit(10, {11, 12}, 2, 101), states, error_code::insufficient_funds);
  const account_states before = states;
  const posting_plan plan = plan_posting(hot_debit(10, {11, 12}, 2, 100), states);
  expect_applied(before, states, plan);
  EXPECT_EQ(tuples(plan.entries), (std::vector<entry_tuple>{{10, -30, 0}, {11, -50, 0}, {12, -20, 0}, {2, 100, 100}}));
  EXPECT_EQ(plan.debit_balance_after, 0);
  expect_refused(hot_debit(10, {11, 12}, 2, 1), states, error_code::insufficient_funds);
}

TEST(posting, credit_to_a_hot_payee_lands_on_its_shard) {
  // A payment to a hot account writes the shard row, never the payee's main row.
  account_states states = states_of({account(1, 100), account(10, 7), shard(11, 10, 3)});
  const account_states before = states;
  const posting_plan plan = plan_posting(to_shard(1, 11, 10, 40), states);
  expect_applied(before, states, plan);
  EXPECT_EQ(tuples(plan.entries), (std::vector<entry_tuple>{{1, -40, 60}, {11, 40, 43}}));
  EXPECT_EQ(states.at(10).balance, 7);
  EXPECT_EQ(states.at(10).version, 0);
}

TEST(posting, same_account_is_refused) {
  // Paying oneself is refused: directly, and through a credit shard whose parent is the payer.
  account_states states = states_of({account(1, 100), account(10, 100), shard(11, 10, 5), account(2, 0)});
  expect_refused(transfer(1, 1, 10), states, error_code::same_account);
  expect_refused(to_shard(10, 11, 10, 10), states, error_code::same_account);
  expect_refused(hot_debit(10, {11}, 10, 10), states, error_code::same_account);
  // A credit row equal to the payer is refused even when a different parent is named.
  posting odd = to_shard(1, 1, 2, 10);
  expect_refused(odd, states, error_code::same_account);
  // same_account is decided before status and funds: it is the client's mistake whatever the state.
  states.at(1).status = account_status::frozen;
  expect_refused(transfer(1, 1, k_max), states, error_code::same_account);
}

TEST(posting, currency_mismatch_is_refused) {
  // Debit, credit, debited shards and the posting itself must all be in one currency.
  account_states states = states_of({account(1, 100), account(2, 0, "USD"), account(3, 0), account(4, 100, "USD"),
                                     account(10, 0), shard(11, 10, 50)});
  states.at(11).currency = "USD";
  expect_refused(transfer(1, 2, 10), states, error_code::currency_mismatch);
  expect_refused(transfer(1, 2, 10, "USD"), states, error_code::currency_mismatch);
  expect_refused(transfer(4, 3, 10, "USD"), states, error_code::currency_mismatch);
  expect_refused(transfer(1, 3, 10, "GBP"), states, error_code::currency_mismatch);
  expect_refused(hot_debit(10, {11}, 3, 10), states, error_code::currency_mismatch);
}

TEST(posting, inactive_debit_or_credit_is_refused) {
  // A frozen or closed account can neither pay nor be paid.
  for (account_status status : {account_status::frozen, account_status::closed}) {
    account_states debit_inactive = states_of({with_status(account(1, 100), status), account(2, 0)});
    expect_refused(transfer(1, 2, 10), debit_inactive, error_code::account_inactive);
    account_states credit_inactive = states_of({account(1, 100), with_status(account(2, 0), status)});
    expect_refused(transfer(1, 2, 10), credit_inactive, error_code::account_inactive);
    account_states clearing_to_inactive = states_of({clearing(9), with_status(account(2, 0), status)});
    expect_refused(deposit(9, 2, 10), clearing_to_inactive, error_code::account_inactive);
  }
  // Status is checked before funds: a frozen empty account answers account_inactive.
  account_states both = states_of({with_status(account(1, 0), account_status::frozen), account(2, 0)});
  expect_refused(transfer(1, 2, 10), both, error_code::account_inactive);
}

TEST(posting, an_inactive_refusal_names_the_account) {
  // The payer when it may not pay, else the payee: a credit shard is named by its hot parent.
  account_states states = states_of({with_status(account(1, 100), account_status::frozen),
                                     with_status(account(2, 0), account_status::closed), account(3, 100),
                                     with_status(account(10, 0), account_status::closed),
                                     with_status(shard(11, 10, 0), account_status::closed)});
  auto plan = plan_posting(transfer(1, 2, 10), states);
  EXPECT_EQ(plan.outcome, error_code::account_inactive);
  EXPECT_EQ(plan.inactive_account, 1);
  plan = plan_posting(transfer(3, 2, 10), states);
  EXPECT_EQ(plan.inactive_account, 2);
  plan = plan_posting(to_shard(3, 11, 10, 10), states);
  EXPECT_EQ(plan.outcome, error_code::account_inactive);
  EXPECT_EQ(plan.inactive_account, 10);
}

TEST(posting, unknown_accounts_are_not_found) {
  // A debit, credit or shard row missing from the locked states is not_found.
  account_states states = states_of({account(1, 100), account(2, 0), account(10, 0), shard(11, 10, 50)});
  expect_refused(transfer(99, 2, 10), states, error_code::not_found);
  expect_refused(transfer(1, 99, 10), states, error_code::not_found);
  expect_refused(hot_debit(10, {11, 99}, 2, 10), states, error_code::not_found);
  expect_refused(sweep(99, 10), states, error_code::not_found);
}

TEST(posting, sweep_moves_the_whole_shard_balance) {
  // A sweep with amount 0 resolves to the shard's balance under the lock and empties the shard.
  account_states states = states_of({account(10, 5), shard(11, 10, 70), shard(12, 10, 30)});
  const account_states before = states;
  const posting_plan plan = plan_posting(sweep(11, 10), states);
  expect_applied(before, states, plan);
  EXPECT_EQ(plan.amount, 70);
  EXPECT_EQ(tuples(plan.entries), (std::vector<entry_tuple>{{11, -70, 0}, {10, 70, 75}}));
  EXPECT_EQ(plan.debit_balance_after, 0);
  EXPECT_EQ(states.at(12).balance, 30);
}

TEST(posting, sweep_of_an_empty_shard_is_ok_without_entries) {
  // Nothing to move is not an error, and writes nothing: no entry, no version change.
  account_states states = states_of({account(10, 5), shard(11, 10, 0)});
  const auto before = snapshot(states);
  const posting_plan plan = plan_posting(sweep(11, 10), states);
  EXPECT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(plan.amount, 0);
  EXPECT_TRUE(plan.entries.empty());
  EXPECT_EQ(snapshot(states), before);
}

TEST(posting, sweep_of_a_named_amount_is_bounded_by_the_shard) {
  // An explicit sweep amount moves exactly that much and never more than the shard holds.
  account_states states = states_of({account(10, 0), shard(11, 10, 70)});
  expect_refused(sweep(11, 10, 71), states, error_code::insufficient_funds);
  const posting_plan plan = plan_posting(sweep(11, 10, 20), states);
  ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(tuples(plan.entries), (std::vector<entry_tuple>{{11, -20, 50}, {10, 20, 20}}));
}

TEST(posting, sweep_ignores_status_but_not_currency) {
  // Sweeping keeps a frozen hot account's total unchanged, so status does not stop it; a shard in
  // another currency still does.
  account_states states = states_of(
      {with_status(account(10, 0), account_status::frozen), with_status(shard(11, 10, 40), account_status::frozen)});
  const posting_plan plan = plan_posting(sweep(11, 10), states);
  ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(tuples(plan.entries), (std::vector<entry_tuple>{{11, -40, 0}, {10, 40, 40}}));
  account_states mixed = states_of({account(10, 0), shard(11, 10, 40)});
  mixed.at(11).currency = "USD";
  expect_refused(sweep(11, 10), mixed, error_code::currency_mismatch);
}

TEST(posting_batch, a_refused_posting_does_not_change_what_later_postings_see) {
  // Postings apply in order, each fully or not at all: refusals in the middle leave the balances
  // the later postings are planned against exactly as the accepted ones left them.
  account_states states = states_of({account(1, 100), account(2, 0), account(3, 0), account(4, k_max - 10),
                                     account(5, 0, "USD"), account(10, 30), shard(11, 10, 50)});
  const std::vector<posting> batch = {
      transfer(1, 2, 80),          // ok: 1 -> 20
      transfer(1, 3, 50),          // insufficient: 1 still 20
      transfer(1, 5, 10),          // currency mismatch
      transfer(1, 3, 20),          // ok: 1 -> 0
      transfer(2, 3, 81),          // insufficient: 2 holds 80
      transfer(2, 3, 80),          // ok
      hot_debit(10, {11}, 4, 60),  // credit overflow, refused after the funds check
      hot_debit(10, {11}, 3, 80),  // ok: the main row and the shard were untouched by the refusal
  };
  const std::vector<posting_plan> plans = plan_postings(batch, states);
  ASSERT_EQ(plans.size(), batch.size());
  const std::vector<error_code> outcomes = {error_code::ok,
                                            error_code::insufficient_funds,
                                            error_code::currency_mismatch,
                                            error_code::ok,
                                            error_code::insufficient_funds,
                                            error_code::ok,
                                            error_code::invalid_request,
                                            error_code::ok};
  for (std::size_t i = 0; i < plans.size(); ++i) {
    EXPECT_EQ(plans[i].outcome, outcomes[i]) << "posting " << i;
    EXPECT_EQ(plans[i].entries.empty(), outcomes[i] != error_code::ok) << "posting " << i;
  }
  EXPECT_EQ(tuples(plans[3].entries), (std::vector<entry_tuple>{{1, -20, 0}, {3, 20, 20}}));
  EXPECT_EQ(tuples(plans[5].entries), (std::vector<entry_tuple>{{2, -80, 0}, {3, 80, 100}}));
  EXPECT_EQ(tuples(plans[7].entries), (std::vector<entry_tuple>{{10, -30, 0}, {11, -50, 0}, {3, 80, 180}}));
  EXPECT_EQ(states.at(1).balance, 0);
  EXPECT_EQ(states.at(2).balance, 0);
  EXPECT_EQ(states.at(3).balance, 180);
  EXPECT_EQ(states.at(4).balance, k_max - 10);
  // Versions count entries: 1 and 2 were written twice, 3 three times, 10 and 11 once, 4 and 5 never.
  EXPECT_EQ(states.at(1).version, 2);
  EXPECT_EQ(states.at(2).version, 2);
  EXPECT_EQ(states.at(3).version, 3);
  EXPECT_EQ(states.at(10).version, 1);
  EXPECT_EQ(states.at(11).version, 1);
  EXPECT_EQ(states.at(4).version, 0);
  EXPECT_EQ(states.at(5).version, 0);
}

TEST(posting_batch, versions_increase_by_one_per_entry) {
  // Three postings touching account 1 raise its version from 7 to 10, one per entry, in order.
  account_states states = states_of({account(1, 100), account(2, 0), clearing(9)});
  states.at(1).version = 7;
  const std::vector<posting_plan> plans =
      plan_postings({transfer(1, 2, 10), deposit(9, 1, 5), transfer(2, 1, 3)}, states);
  for (const auto& plan : plans) ASSERT_EQ(plan.outcome, error_code::ok);
  EXPECT_EQ(tuples(plans[0].entries), (std::vector<entry_tuple>{{1, -10, 90}, {2, 10, 10}}));
  EXPECT_EQ(tuples(plans[1].entries), (std::vector<entry_tuple>{{9, -5, -5}, {1, 5, 95}}));
  EXPECT_EQ(tuples(plans[2].entries), (std::vector<entry_tuple>{{2, -3, 7}, {1, 3, 98}}));
  EXPECT_EQ(states.at(1).version, 10);
  EXPECT_EQ(states.at(2).version, 2);
  EXPECT_EQ(states.at(9).version, 1);
}

TEST(posting_batch, entries_always_sum_to_zero_over_a_long_seeded_run) {
  // Thousands of postings of every kind, drawn from a fixed-seed generator: each accepted plan's
  // entries sum to zero, money is conserved overall, every row's balance equals the sum of its
  // entries and its version their count, and no row but the clearing one is ever negative.
  account_states states = states_of({clearing(9), account(1, 0), account(2, 0), account(3, 0),
                                     with_status(account(4, 0), account_status::frozen), account(10, 0),
                                     shard(11, 10, 0), shard(12, 10, 0), shard(13, 10, 0)});
  std::map<account_id, amount_minor> entry_sums;
  std::map<account_id, std::int64_t> entry_counts;
  std::map<error_code, int> seen;
  std::mt19937_64 random(20240601);
  auto pick = [&](std::uint64_t n) { return static_cast<std::int64_t>(random() % n); };
  const std::vector<account_id> users = {1, 2, 3, 4, 10};
  const std::vector<account_id> shards = {11, 12, 13};
  for (int i = 0; i < 5000; ++i) {
    posting p;
    const amount_minor amount = pick(200);
    switch (pick(5)) {
      case 0: p = deposit(9, users[pick(users.size())], amount); break;
      case 1: p = transfer(users[pick(users.size())], users[pick(users.size())], amount); break;
      case 2: p = to_shard(users[pick(users.size())], shards[pick(shards.size())], 10, amount); break;
      case 3: p = hot_debit(10, {11, 12, 13}, users[pick(users.size())], amount); break;
      default: p = sweep(shards[pick(shards.size())], 10); break;
    }
    const account_states before = states;
    const posting_plan plan = plan_posting(p, states);
    ++seen[plan.outcome];
    if (plan.outcome != error_code::ok) {
      ASSERT_EQ(snapshot(states), snapshot(before)) << "posting " << i;
      continue;
    }
    expect_applied(before, states, plan);
    ASSERT_TRUE(entries_balance(plan.entries)) << "posting " << i;
    for (const auto& e : plan.entries) {
      entry_sums[e.account] += e.amount;
      ++entry_counts[e.account];
    }
  }
  amount_minor total = 0;
  for (const auto& [id, s] : states) {
    total += s.balance;
    EXPECT_EQ(s.balance, entry_sums[id]) << "account " << id;
    EXPECT_EQ(s.version, entry_counts[id]) << "account " << id;
    if (!s.allow_negative) {
      EXPECT_GE(s.balance, 0) << "account " << id;
    }
  }
  EXPECT_EQ(total, 0);
  // The run exercised every outcome it can reach, so the checks above were not vacuous.
  EXPECT_GT(seen[error_code::ok], 1000);
  EXPECT_GT(seen[error_code::insufficient_funds], 0);
  EXPECT_GT(seen[error_code::same_account], 0);
  EXPECT_GT(seen[error_code::account_inactive], 0);
  EXPECT_GT(seen[error_code::invalid_request], 0);
  EXPECT_GT(entry_counts[11] + entry_counts[12] + entry_counts[13], 0);
}

TEST(entries_balance, sums_exactly_and_refuses_overflow) {
  // Zero-sum is checked with checked arithmetic: an overflowing list is not balanced even if it
  // would wrap to zero.
  EXPECT_TRUE(entries_balance({}));
  EXPECT_TRUE(entries_balance({{1, -5, 0}, {2, 5, 0}}));
  EXPECT_TRUE(entries_balance({{1, -5, 0}, {2, 3, 0}, {3, 2, 0}}));
  EXPECT_FALSE(entries_balance({{1, -5, 0}, {2, 4, 0}}));
  EXPECT_FALSE(entries_balance({{1, 1, 0}}));
  EXPECT_TRUE(entries_balance({{1, k_max, 0}, {2, -k_max, 0}}));
  EXPECT_FALSE(entries_balance({{1, k_max, 0}, {2, 1, 0}, {3, k_min, 0}, {4, -1, 0}}));
}

}  // namespace
}  // namespace ledger
