// The posting path's rule for batches of transfers (POST /v1/transfers/batch) against a real
// PostgreSQL: an atomic batch commits every posting in one transaction or none of them, naming the
// first posting its plan refuses, and replays as a whole once committed; the same postings as a
// plain batch commit every one that can be, each refused one alone.

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "ledger/flows.hpp"
#include "persistence/accounts.hpp"
#include "persistence/batch.hpp"
#include "persistence/database.hpp"
#include "persistence/flows.hpp"
#include "persistence/migrations.hpp"
#include "tests/support/connections.hpp"
#include "tests/support/support.hpp"

namespace persistence {
namespace {

using test_support::int_of;
using test_support::options_for;
using test_support::sql_literal;
using test_support::text_of;
using test_support::unique_key;

const std::string k_currency = "XTS";

const std::string k_application_name = "batch-rule-tests";

// Fixture: a fresh principal with a payer holding 1,000 and three empty payees, and fee_revenue.
class batch_rule : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    apply_migrations(options_for(test_support::owner_database_url(), k_application_name));
  }

  void SetUp() override {
    owner_ = connect(options_for(test_support::owner_database_url(), k_application_name));
    app_ = connect(options_for(test_support::database_url(), k_application_name));
    prepare_posting_statements(*app_);
    principal_ = int_of(*owner_, "INSERT INTO principal (name, role) VALUES (" + sql_literal(unique_key("batch")) +
                                     ", 'user') RETURNING id");
    const auto clearing = ensure_clearing_account(*app_, k_currency);
    fee_revenue_ = ensure_system_account(*app_, k_currency, "fee_revenue", false);
    payer_ = new_account();
    for (auto& p : payees_) p = new_account();
    const auto funded =
        commit_batch(*app_, {keyed(ledger::flows::deposit(clearing, payer_, payer_, 1'000, k_currency))});
    ASSERT_EQ(funded.outcomes.at(0).outcome, ledger::error_code::ok);
  }

  std::int64_t new_account() {
    return int_of(*owner_, "INSERT INTO account (owner_id, currency, kind) VALUES (" + std::to_string(principal_) +
                               ", " + sql_literal(k_currency) + ", 'user') RETURNING id");
  }

  posting_request keyed(ledger::posting p) {
    posting_request r;
    r.posting = std::move(p);
    r.transaction_id = make_uuid();
    r.principal = principal_;
    r.idempotency_key = unique_key("item");
    r.request_hash = r.idempotency_key;
    return r;
  }

  std::string make_uuid() { return text_of(*owner_, "SELECT gen_random_uuid()::text"); }

  posting_request pay(std::size_t payee, ledger::amount_minor amount) {
    return keyed(ledger::flows::transfer(payer_, payees_.at(payee), payees_.at(payee), amount, k_currency,
                                         ledger::flows::payee_fee{fee_revenue_, {}}));
  }

  std::int64_t balance(std::int64_t account) {
    return int_of(*owner_, "SELECT balance FROM account WHERE id = " + std::to_string(account));
  }
  std::int64_t journal_rows(const std::vector<posting_request>& batch) {
    std::int64_t n = 0;
    for (const auto& r : batch) {
      n += int_of(*owner_, "SELECT count(*) FROM journal_transaction WHERE id = " + sql_literal(r.transaction_id));
    }
    return n;
  }

  std::unique_ptr<pqxx::connection> owner_;
  std::unique_ptr<pqxx::connection> app_;
  std::int64_t principal_ = 0;
  std::int64_t fee_revenue_ = 0;
  std::int64_t payer_ = 0;
  std::array<std::int64_t, 3> payees_{};
};

TEST_F(batch_rule, an_atomic_batch_with_one_refused_posting_commits_none_and_names_it) {
  // 400 + 700 exceed the 1,000 the payer holds: the second posting is refused by its plan.
  const std::vector<posting_request> batch = {pay(0, 400), pay(1, 700), pay(2, 100)};
  const auto result = commit_atomic(*app_, batch);
  ASSERT_TRUE(result.refused_at.has_value());
  EXPECT_EQ(*result.refused_at, 1U);
  EXPECT_EQ(result.outcomes.at(1).outcome, ledger::error_code::insufficient_funds);
  EXPECT_EQ(balance(payer_), 1'000);
  for (auto payee : payees_) EXPECT_EQ(balance(payee), 0);
  EXPECT_EQ(journal_rows(batch), 0);
}

TEST_F(batch_rule, an_atomic_batch_that_can_commit_commits_every_posting_in_one_transaction) {
  const std::vector<posting_request> batch = {pay(0, 400), pay(1, 500), pay(2, 100)};
  const auto result = commit_atomic(*app_, batch);
  ASSERT_FALSE(result.refused_at.has_value());
  EXPECT_EQ(result.attempts, 1);
  for (const auto& out : result.outcomes) EXPECT_EQ(out.outcome, ledger::error_code::ok);
  EXPECT_EQ(balance(payer_), 0);
  EXPECT_EQ(balance(payees_[0]), 400);
  EXPECT_EQ(balance(payees_[1]), 500);
  EXPECT_EQ(balance(payees_[2]), 100);
  EXPECT_EQ(journal_rows(batch), 3);
  // All of them in one transaction: their journal rows share the transaction's xmin.
  EXPECT_EQ(int_of(*owner_, "SELECT count(DISTINCT xmin::text) FROM journal_transaction WHERE id IN (" +
                                sql_literal(batch[0].transaction_id) + "," + sql_literal(batch[1].transaction_id) +
                                "," + sql_literal(batch[2].transaction_id) + ")"),
            1);

  // The same batch again: every posting replays its stored receipt, nothing moves twice.
  const auto again = commit_atomic(*app_, batch);
  ASSERT_FALSE(again.refused_at.has_value());
  for (const auto& out : again.outcomes) EXPECT_TRUE(out.replayed);
  EXPECT_EQ(balance(payer_), 0);
  EXPECT_EQ(balance(payees_[0]), 400);
}

TEST_F(batch_rule, a_plain_batch_commits_every_posting_that_can_be_and_refuses_the_others_alone) {
  const std::vector<posting_request> batch = {pay(0, 400), pay(1, 700), pay(2, 100)};
  const auto result = commit_batch(*app_, batch);
  EXPECT_FALSE(result.refused_at.has_value());
  EXPECT_EQ(result.outcomes.at(0).outcome, ledger::error_code::ok);
  EXPECT_EQ(result.outcomes.at(1).outcome, ledger::error_code::insufficient_funds);
  EXPECT_EQ(result.outcomes.at(2).outcome, ledger::error_code::ok);
  EXPECT_EQ(balance(payer_), 500);
  EXPECT_EQ(balance(payees_[0]), 400);
  EXPECT_EQ(balance(payees_[1]), 0);
  EXPECT_EQ(balance(payees_[2]), 100);
  EXPECT_EQ(journal_rows(batch), 2);
}

TEST_F(batch_rule, an_atomic_batch_with_a_key_used_for_another_request_commits_none) {
  auto first = pay(0, 100);
  ASSERT_EQ(commit_batch(*app_, {first}).outcomes.at(0).outcome, ledger::error_code::ok);
  auto reused = pay(1, 100);
  reused.idempotency_key = first.idempotency_key;
  reused.request_hash = "another request";
  const std::vector<posting_request> batch = {pay(2, 100), reused};
  const auto result = commit_atomic(*app_, batch);
  ASSERT_TRUE(result.refused_at.has_value());
  EXPECT_EQ(*result.refused_at, 1U);
  EXPECT_EQ(result.outcomes.at(1).outcome, ledger::error_code::idempotency_key_reused);
  EXPECT_EQ(balance(payer_), 900);
  EXPECT_EQ(balance(payees_[2]), 0);
}

TEST_F(batch_rule, two_postings_of_one_batch_with_one_key_are_answered_without_a_redo) {
  // A transfer sent with the key of a batch's item, in the writer's batch together with it: the
  // first is committed, the second answered as right after that commit (its stored receipt for
  // the same request, idempotency_key_reused for another), in one attempt.
  auto first = pay(0, 100);
  auto same = pay(0, 100);
  same.idempotency_key = first.idempotency_key;
  same.request_hash = first.request_hash;
  auto other = pay(1, 200);
  other.idempotency_key = first.idempotency_key;
  other.request_hash = "another request";
  const auto last = pay(2, 300);
  const auto result = commit_batch(*app_, {first, same, other, last});
  EXPECT_EQ(result.attempts, 1);
  ASSERT_EQ(result.outcomes.at(0).outcome, ledger::error_code::ok);
  EXPECT_FALSE(result.outcomes.at(0).replayed);
  EXPECT_EQ(result.outcomes.at(1).outcome, ledger::error_code::ok);
  EXPECT_TRUE(result.outcomes.at(1).replayed);
  EXPECT_EQ(result.outcomes.at(1).transaction_id, first.transaction_id);
  EXPECT_EQ(result.outcomes.at(1).response_body, result.outcomes.at(0).response_body);
  EXPECT_EQ(result.outcomes.at(2).outcome, ledger::error_code::idempotency_key_reused);
  EXPECT_EQ(result.outcomes.at(2).transaction_id, first.transaction_id);
  EXPECT_EQ(result.outcomes.at(3).outcome, ledger::error_code::ok);
  EXPECT_EQ(balance(payer_), 600);
  EXPECT_EQ(balance(payees_[0]), 100);
  EXPECT_EQ(balance(payees_[1]), 0);
  EXPECT_EQ(balance(payees_[2]), 300);
  EXPECT_EQ(journal_rows({first, same, other, last}), 2);

  // A posting refused by its plan takes no key: the next one with that key is planned on its own.
  auto refused = pay(0, 5'000);
  auto after = pay(1, 50);
  after.idempotency_key = refused.idempotency_key;
  const auto again = commit_batch(*app_, {refused, after});
  EXPECT_EQ(again.attempts - again.relocked, 1);  // a refusal is decided under the rows' locks
  EXPECT_EQ(again.outcomes.at(0).outcome, ledger::error_code::insufficient_funds);
  EXPECT_EQ(again.outcomes.at(1).outcome, ledger::error_code::ok);
  EXPECT_EQ(balance(payees_[1]), 50);
}

TEST_F(batch_rule, an_atomic_batch_with_one_key_on_two_requests_commits_none) {
  auto first = pay(0, 100);
  auto other = pay(1, 100);
  other.idempotency_key = first.idempotency_key;
  other.request_hash = "another request";
  const auto result = commit_atomic(*app_, {first, other});
  ASSERT_TRUE(result.refused_at.has_value());
  EXPECT_EQ(*result.refused_at, 1U);
  EXPECT_EQ(result.outcomes.at(1).outcome, ledger::error_code::idempotency_key_reused);
  EXPECT_EQ(result.attempts, 1);
  EXPECT_EQ(balance(payer_), 1'000);
}

}  // namespace
}  // namespace persistence
