// The merchant flows' part of the posting path against a real PostgreSQL (migration 007): the
// ledger writer prices a payment's fee from the schedule it reads with the credit row (a hot
// payee's shard reads its parent's), refuses a payment built without a fee leg for a payee that
// charges one, and holds refunds of a payment to its amount under the lock of its
// payment_refund_total row, within one batch and across batches; the database's CHECK holds the
// same limit for any role.

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include <memory>
#include <string>
#include <vector>

#include "ledger/flows.hpp"
#include "ledger/receipt.hpp"
#include "persistence/accounts.hpp"
#include "persistence/batch.hpp"
#include "persistence/database.hpp"
#include "persistence/flows.hpp"
#include "persistence/migrations.hpp"
#include "persistence/payments.hpp"
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

const std::string k_application_name = "payment-rows-tests";

// Fixture: a fresh principal, the XTS clearing and fee_revenue accounts, a funded payer and a payee.
class payment_rows : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    apply_migrations(options_for(test_support::owner_database_url(), k_application_name));
  }

  void SetUp() override {
    owner_ = connect(options_for(test_support::owner_database_url(), k_application_name));
    app_ = connect(options_for(test_support::database_url(), k_application_name));
    prepare_posting_statements(*app_);
    principal_ = int_of(*owner_, "INSERT INTO principal (name, role) VALUES (" + sql_literal(unique_key("payments")) +
                                     ", 'merchant') RETURNING id");
    clearing_ = ensure_clearing_account(*app_, k_currency);
    fee_revenue_ = ensure_system_account(*app_, k_currency, "fee_revenue", false);
    payer_ = new_account();
    payee_ = new_account();
    commit_one(with_key(ledger::flows::deposit(clearing_, payer_, payer_, 10'000, k_currency)));
  }

  std::int64_t new_account(std::int64_t parent = 0) {
    const std::string shard = parent == 0 ? "'user', NULL, NULL" : "'shard', " + std::to_string(parent) + ", 0";
    return int_of(*owner_, "INSERT INTO account (owner_id, currency, kind, parent_id, shard_no) VALUES (" +
                               std::to_string(principal_) + ", " + sql_literal(k_currency) + ", " + shard +
                               ") RETURNING id");
  }

  void set_schedule(std::int64_t account, int bps, std::int64_t fixed) {
    pqxx::work txn(*owner_);
    txn.exec("UPDATE account SET fee_bps = " + std::to_string(bps) + ", fee_fixed = " + std::to_string(fixed) +
             " WHERE id = " + std::to_string(account));
    txn.commit();
  }

  posting_request with_key(ledger::posting p) {
    posting_request r;
    r.posting = std::move(p);
    r.transaction_id = text_of(*owner_, "SELECT gen_random_uuid()::text");
    r.principal = principal_;
    r.idempotency_key = unique_key("k");
    r.request_hash = r.idempotency_key;
    return r;
  }

  posting_request refund_of(const std::string& payment, ledger::amount_minor amount) {
    auto r = with_key(ledger::flows::refund(payee_, payer_, payer_, amount, k_currency));
    auto rows = std::make_shared<flow_rows>();
    rows->refund = flow_rows::payment_refund{payment, payee_, payer_, 1'000};
    r.rows = std::move(rows);
    return r;
  }

  posting_outcome commit_one(const posting_request& r) {
    const auto result = commit_batch(*app_, {r});
    return result.outcomes.at(0);
  }

  std::int64_t balance(std::int64_t account) {
    return int_of(*owner_, "SELECT balance FROM account WHERE id = " + std::to_string(account));
  }
  std::int64_t journal_rows(const std::string& transaction_id) {
    return int_of(*owner_, "SELECT count(*) FROM journal_transaction WHERE id = " + sql_literal(transaction_id));
  }

  std::unique_ptr<pqxx::connection> owner_;
  std::unique_ptr<pqxx::connection> app_;
  std::int64_t principal_ = 0;
  std::int64_t clearing_ = 0;
  std::int64_t fee_revenue_ = 0;
  std::int64_t payer_ = 0;
  std::int64_t payee_ = 0;
};

TEST_F(payment_rows, the_writer_prices_a_payment_by_the_schedule_it_locked) {
  // The flow priced the fee leg by no schedule (fee 0); the writer finds 10 % + 5 on the payee's
  // row and books that, with the receipt naming it.
  set_schedule(payee_, 1'000, 5);
  const auto payment = with_key(
      ledger::flows::transfer(payer_, payee_, payee_, 1'000, k_currency, ledger::flows::payee_fee{fee_revenue_, {}}));
  const auto fees_before = balance(fee_revenue_);
  const auto out = commit_one(payment);
  ASSERT_EQ(out.outcome, ledger::error_code::ok);
  EXPECT_EQ(out.response_body, ledger::receipt_json(ledger::transaction_type::transfer, payment.transaction_id, 9'000,
                                                    ledger::payment_receipt_fields(105, 895)));
  EXPECT_EQ(balance(payee_), 895);
  EXPECT_EQ(balance(fee_revenue_) - fees_before, 105);
  const auto found = find_payment(*app_, payment.transaction_id);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->payer, payer_);
  EXPECT_EQ(found->payee, payee_);
  EXPECT_EQ(found->amount, 1'000);
  EXPECT_EQ(found->fee, 105);
  EXPECT_EQ(found->refunded, 0);
}

TEST_F(payment_rows, a_payment_without_a_fee_leg_to_a_payee_that_charges_is_refused_whole) {
  // Its flow knew of no schedule: fees_changed, and nothing of it is written. A schedule that
  // charges nothing for this amount lets it through unchanged.
  set_schedule(payee_, 1, 0);
  const auto small = with_key(ledger::flows::transfer(payer_, payee_, payee_, 500, k_currency));
  ASSERT_EQ(commit_one(small).outcome, ledger::error_code::ok);  // floor(500 × 1 / 10000) = 0
  set_schedule(payee_, 0, 1);
  const auto stale = with_key(ledger::flows::transfer(payer_, payee_, payee_, 500, k_currency));
  EXPECT_EQ(commit_one(stale).outcome, ledger::error_code::fees_changed);
  EXPECT_EQ(journal_rows(stale.transaction_id), 0);
  EXPECT_EQ(balance(payer_), 9'500);
  EXPECT_EQ(balance(payee_), 500);
}

TEST_F(payment_rows, a_hot_payees_shard_pays_its_parents_schedule) {
  // Credits land on a shard, which has no schedule of its own: the parent's applies, read without
  // locking the parent's row.
  const auto shard = new_account(payee_);
  set_schedule(payee_, 2'000, 0);
  const auto fees_before = balance(fee_revenue_);
  const auto out = commit_one(with_key(
      ledger::flows::transfer(payer_, shard, payee_, 1'000, k_currency, ledger::flows::payee_fee{fee_revenue_, {}})));
  ASSERT_EQ(out.outcome, ledger::error_code::ok);
  EXPECT_EQ(balance(shard), 800);
  EXPECT_EQ(balance(payee_), 0);
  EXPECT_EQ(balance(fee_revenue_) - fees_before, 200);
  const auto stale = with_key(ledger::flows::transfer(payer_, shard, payee_, 1'000, k_currency));
  EXPECT_EQ(commit_one(stale).outcome, ledger::error_code::fees_changed);
}

TEST_F(payment_rows, refunds_of_a_payment_never_exceed_it_in_one_batch_or_across_batches) {
  // Two refunds of 600 of a payment of 1,000 in one batch: the first makes the payment's row, the
  // second is refused under its lock. A later refund of 400 adds to the row; one of 1 more is
  // refused. The database's CHECK refuses the owner role too.
  commit_one(with_key(ledger::flows::deposit(clearing_, payee_, payee_, 5'000, k_currency)));
  const auto payment = with_key(ledger::flows::transfer(payer_, payee_, payee_, 1'000, k_currency));
  ASSERT_EQ(commit_one(payment).outcome, ledger::error_code::ok);

  const auto first = refund_of(payment.transaction_id, 600);
  const auto second = refund_of(payment.transaction_id, 600);
  const auto both = commit_batch(*app_, {first, second});
  EXPECT_EQ(both.outcomes.at(0).outcome, ledger::error_code::ok);
  EXPECT_EQ(both.outcomes.at(1).outcome, ledger::error_code::refund_exceeds_payment);
  EXPECT_EQ(journal_rows(second.transaction_id), 0);
  auto refunds = find_payment_refunds(*app_, payment.transaction_id);
  EXPECT_EQ(refunds.refunded, 600);
  EXPECT_EQ(refunds.refund_ids, (std::vector<std::string>{first.transaction_id}));

  const auto rest = refund_of(payment.transaction_id, 400);
  EXPECT_EQ(commit_one(rest).outcome, ledger::error_code::ok);
  EXPECT_EQ(commit_one(refund_of(payment.transaction_id, 1)).outcome, ledger::error_code::refund_exceeds_payment);
  refunds = find_payment_refunds(*app_, payment.transaction_id);
  EXPECT_EQ(refunds.refunded, 1'000);
  EXPECT_EQ(refunds.refund_ids.size(), 2u);
  EXPECT_EQ(find_refunded_payment(*app_, rest.transaction_id), payment.transaction_id);
  EXPECT_EQ(balance(payer_), 10'000);
  EXPECT_EQ(balance(payee_), 5'000);

  EXPECT_THROW(
      {
        pqxx::work txn(*owner_);
        txn.exec("UPDATE payment_refund_total SET refunded = refunded + 1 WHERE transaction_id = " +
                 sql_literal(payment.transaction_id));
        txn.commit();
      },
      pqxx::check_violation);
}

}  // namespace
}  // namespace persistence
