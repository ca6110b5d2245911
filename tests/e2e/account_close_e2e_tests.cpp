// End-to-end tests of closing an account (docs/money-flows.md, "Closing an account"): it closes
// only when it holds nothing and owes nothing, it stays closed, and afterwards it neither pays nor
// is paid. A close racing payments into the account either finds them all or refuses every one.

#include <gtest/gtest.h>

#include <boost/json/object.hpp>

#include <atomic>
#include <cstdio>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/database.hpp"
#include "tests/support/support.hpp"

namespace ts = test_support;
using test_support::transfer_body;

namespace {

std::string str(const boost::json::value& v) { return std::string(v.as_string()); }

std::string code_of(const ts::response& r) { return str(r.json().as_object().at("code")); }

class AccountCloseE2E : public ts::shared_server_test<AccountCloseE2E> {
 public:
  // A close or a payment waits at a row the test holds for as long as the test takes to line the
  // other one up behind it: a minute at most, not the default lock timeout of two seconds.
  static ts::server_process::options options() {
    auto o = ts::shared_server_test<AccountCloseE2E>::options();
    o.env["WALLET_DATABASE_LOCK_TIMEOUT_MS"] = "60000";
    return o;
  }

 protected:
  ts::response close(ts::http_client& c, const std::string& key, std::int64_t account) const {
    return c.post("/v1/accounts/" + std::to_string(account) + "/close", key, "");
  }

  // The statement fails on migration 023's trigger, whoever runs it.
  static void expect_refused_by_the_database(const std::string& sql) {
    try {
      ts::execute_sql(sql);
      ADD_FAILURE() << "the database took: " << sql;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("is closed; its status does not change"), std::string::npos) << e.what();
    }
  }

  // A close refused because the account still has something (409 account_not_empty), with a
  // detail that says what: `reason`.
  static void expect_not_empty(const ts::response& r, const std::string& reason) {
    ASSERT_EQ(r.status, 409) << r.body;
    EXPECT_EQ(code_of(r), "account_not_empty");
    EXPECT_NE(str(r.json().as_object().at("detail")).find(reason), std::string::npos) << r.body;
  }

  std::string status_of(ts::http_client& c, std::int64_t account) const {
    auto r = c.get("/v1/accounts/" + std::to_string(account), op());
    EXPECT_EQ(r.status, 200) << r.body;
    return str(r.json().as_object().at("status"));
  }
};

// An account with money is refused (and stays active); emptied, its owner closes it. Closed, it
// is neither paid nor pays, is never frozen or unfrozen, and closing it again answers it as it is.
TEST_F(AccountCloseE2E, AnEmptyAccountClosesForGoodAndThenNeitherPaysNorIsPaid) {
  ts::http_client c(port());
  auto alice = ts::create_principal(c, op());
  auto bob = ts::create_principal(c, op());
  const auto a = ts::create_account(c, op(), alice.id);
  const auto b = ts::create_account(c, op(), bob.id);
  ts::deposit(c, op(), a, 1'000);
  ts::deposit(c, op(), b, 1'000);

  auto r = close(c, alice.key, a);
  expect_not_empty(r, "holds 1000 EUR");
  EXPECT_EQ(status_of(c, a), "active");

  // Someone else's account is not found; an account's owner (or an operator) closes it.
  r = close(c, bob.key, a);
  EXPECT_EQ(r.status, 404) << r.body;
  ASSERT_EQ(c.post("/v1/transfers", alice.key, transfer_body(a, b, 1'000), ts::unique_key("out")).status, 201);
  r = close(c, alice.key, a);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("status")), "closed");
  EXPECT_EQ(str(r.json().as_object().at("balance")), "0");
  r = close(c, op(), a);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("status")), "closed");
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM audit_log WHERE action = 'account.close' AND target = 'account:" +
                            std::to_string(a) + "'"),
            "1");

  // Neither paid nor paying.
  r = c.post("/v1/transfers", bob.key, transfer_body(b, a, 10), ts::unique_key("in"));
  ASSERT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(code_of(r), "account_inactive");
  EXPECT_EQ(str(r.json().as_object().at("detail")),
            "account " + std::to_string(a) + " is frozen or closed: it cannot pay or be paid");
  r = c.post("/v1/deposits", op(), R"({"accountId":)" + std::to_string(a) + R"(,"amount":10})", ts::unique_key("dep"));
  ASSERT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(code_of(r), "account_inactive");
  r = c.post("/v1/transfers", alice.key, transfer_body(a, b, 1), ts::unique_key("out"));
  ASSERT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(code_of(r), "account_inactive");

  // Never frozen or unfrozen again, by the API or in the database.
  for (const char* action : {"freeze", "unfreeze"}) {
    r = c.post("/v1/accounts/" + std::to_string(a) + "/" + action, op(), "");
    ASSERT_EQ(r.status, 409) << action << " " << r.body;
    EXPECT_EQ(code_of(r), "account_closed");
  }
  expect_refused_by_the_database("UPDATE account SET status = 'active' WHERE id = " + std::to_string(a));
  r = c.post("/v1/accounts/" + std::to_string(a) + "/hot", op(), "{}");
  ASSERT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(code_of(r), "account_closed");
  EXPECT_EQ(status_of(c, a), "closed");
  EXPECT_EQ(ts::balance(c, alice.key, a), 0);
  EXPECT_EQ(ts::balance(c, bob.key, b), 2'000);
}

// A withdrawal still PENDING keeps the account open even when it holds nothing: a failed payout
// would pay it back. Once the payout is confirmed it closes.
TEST_F(AccountCloseE2E, APendingWithdrawalKeepsItOpenUntilItSettles) {
  ts::http_client c(port());
  auto alice = ts::create_principal(c, op());
  const auto a = ts::create_account(c, op(), alice.id);
  ts::deposit(c, op(), a, 700);
  auto r = c.post("/v1/withdrawals", alice.key, R"({"accountId":)" + std::to_string(a) + R"(,"amount":700})",
                  ts::unique_key("w"));
  ASSERT_EQ(r.status, 201) << r.body;
  const auto withdrawal = str(r.json().as_object().at("id"));
  ASSERT_EQ(ts::balance(c, alice.key, a), 0);

  r = close(c, alice.key, a);
  expect_not_empty(r, "PENDING");
  EXPECT_EQ(status_of(c, a), "active");

  r = c.post("/v1/withdrawals/" + withdrawal + "/confirm", op(), "", ts::unique_key("paid"));
  ASSERT_EQ(r.status, 201) << r.body;
  r = close(c, alice.key, a);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("status")), "closed");
}

// An adjustment awaiting approval keeps the account open: its approval would credit it. Once an
// operator rejects it, the account closes.
TEST_F(AccountCloseE2E, AnAdjustmentAwaitingApprovalKeepsItOpenUntilDecided) {
  ts::http_client c(port());
  auto alice = ts::create_principal(c, op());
  const auto a = ts::create_account(c, op(), alice.id);
  auto r =
      c.post("/v1/adjustments", op(), R"({"accountId":)" + std::to_string(a) + R"(,"amount":500,"reason":"goodwill"})",
             ts::unique_key("adj"));
  ASSERT_EQ(r.status, 201) << r.body;
  const auto adjustment = str(r.json().as_object().at("id"));

  r = close(c, alice.key, a);
  expect_not_empty(r, "awaiting approval");

  const auto second = ts::create_operator();
  r = c.post("/v1/adjustments/" + adjustment + "/reject", second.key, "");
  ASSERT_EQ(r.status, 200) << r.body;
  r = close(c, alice.key, a);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("status")), "closed");
}

// A freeze is an operator's decision: the owner of a frozen account cannot end it by closing the
// account (403, nothing changes); an operator can.
TEST_F(AccountCloseE2E, AFrozenAccountIsClosedByAnOperatorOnly) {
  ts::http_client c(port());
  auto alice = ts::create_principal(c, op());
  const auto a = ts::create_account(c, op(), alice.id);
  ASSERT_EQ(c.post("/v1/accounts/" + std::to_string(a) + "/freeze", op(), "").status, 200);

  auto r = close(c, alice.key, a);
  ASSERT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(code_of(r), "forbidden");
  EXPECT_NE(str(r.json().as_object().at("detail")).find("is frozen: only an operator can close it"), std::string::npos)
      << r.body;
  EXPECT_EQ(status_of(c, a), "frozen");
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM audit_log WHERE action = 'account.close' AND target = 'account:" +
                            std::to_string(a) + "'"),
            "0");

  r = close(c, op(), a);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("status")), "closed");
  // Closed, it answers its owner as it is.
  r = close(c, alice.key, a);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("status")), "closed");
}

// A chargeback of a deposit the account received before it closed still posts: the account holds
// nothing, so chargeback_loss takes all of it, and the closed account stays at zero.
TEST_F(AccountCloseE2E, AChargebackOfAnEarlierDepositPostsToTheShortfallAccount) {
  ts::http_client c(port());
  auto alice = ts::create_principal(c, op());
  auto bob = ts::create_principal(c, op());
  const auto a = ts::create_account(c, op(), alice.id);
  const auto b = ts::create_account(c, op(), bob.id);
  const auto deposit = ts::deposit(c, op(), a, 400);
  ASSERT_EQ(c.post("/v1/transfers", alice.key, transfer_body(a, b, 400), ts::unique_key("out")).status, 201);
  ASSERT_EQ(close(c, alice.key, a).status, 200);

  auto r =
      c.post("/v1/deposits/" + deposit + "/chargebacks", op(), R"({"reason":"card disputed"})", ts::unique_key("cb"));
  ASSERT_EQ(r.status, 201) << r.body;
  const auto tx = str(r.json().as_object().at("transactionId"));
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM ledger_entry WHERE transaction_id = " + ts::sql_literal(tx) +
                            "::uuid AND account_id = " + std::to_string(a)),
            "0");
  EXPECT_EQ(ts::query_value("SELECT a.system_role FROM ledger_entry e JOIN account a ON a.id = e.account_id"
                            " WHERE e.transaction_id = " +
                            ts::sql_literal(tx) + "::uuid AND e.amount < 0"),
            "chargeback_loss");
  EXPECT_EQ(ts::balance(c, alice.key, a), 0);
  EXPECT_EQ(status_of(c, a), "closed");
}

// A hot account counts its shards: money on a shard keeps it open. Closed, its shards are closed
// with it, so a payment that would credit one is refused too.
TEST_F(AccountCloseE2E, AHotAccountClosesWithItsShardsOnlyWhenTheyAreEmpty) {
  ts::http_client c(port());
  auto merchant = ts::create_principal(c, op(), "merchant");
  auto payer = ts::create_principal(c, op());
  const auto m = ts::create_account(c, op(), merchant.id, "EUR", 4);
  const auto p = ts::create_account(c, op(), payer.id);
  ts::deposit(c, op(), p, 1'000);
  ASSERT_EQ(c.post("/v1/transfers", payer.key, transfer_body(p, m, 300), ts::unique_key("pay")).status, 201);

  auto r = close(c, merchant.key, m);
  expect_not_empty(r, "holds 300 EUR");

  ASSERT_EQ(c.post("/v1/transfers", merchant.key, transfer_body(m, p, 300), ts::unique_key("back")).status, 201);
  r = close(c, merchant.key, m);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM account WHERE parent_id = " + std::to_string(m) +
                            " AND status <> 'closed'"),
            "0");
  expect_refused_by_the_database("UPDATE account SET status = 'frozen' WHERE parent_id = " + std::to_string(m));
  r = c.post("/v1/transfers", payer.key, transfer_body(p, m, 1), ts::unique_key("pay"));
  ASSERT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(code_of(r), "account_inactive");
  // The refusal names the account the payer named, not the shard that would have been credited.
  EXPECT_EQ(str(r.json().as_object().at("detail")),
            "account " + std::to_string(m) + " is frozen or closed: it cannot pay or be paid");
  EXPECT_EQ(ts::balance(c, payer.key, p), 1'000);
}

// Payments into an empty account race its close, from several clients at once. Whichever order
// the database puts them in, the outcome is exact: a close that succeeds found no payment
// committed (every one is refused, and the account holds nothing); a close that is refused found
// at least one, and every payment went through. Each round uses a new account.
TEST_F(AccountCloseE2E, ACloseRacingPaymentsIntoTheAccountFindsAllOrRefusesAll) {
  ts::http_client c(port());
  auto owner = ts::create_principal(c, op());
  auto payer = ts::create_principal(c, op());
  constexpr int k_payers = 4;
  constexpr int k_payments_each = 5;
  std::vector<std::int64_t> payers;
  for (int i = 0; i < k_payers; ++i) {
    payers.push_back(ts::create_account(c, op(), payer.id));
    ts::deposit(c, op(), payers.back(), 1'000'000);
  }
  int closed_rounds = 0;
  int refused_rounds = 0;
  for (int round = 0; round < 6; ++round) {
    const auto target = ts::create_account(c, op(), owner.id);
    std::atomic<int> accepted{0};
    std::atomic<int> inactive{0};
    std::atomic<int> other{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < k_payers; ++i) {
      threads.emplace_back([&, from = payers[static_cast<std::size_t>(i)]] {
        ts::http_client client(port());
        while (!go) std::this_thread::yield();
        for (int n = 0; n < k_payments_each; ++n) {
          auto r = client.post("/v1/transfers", payer.key, transfer_body(from, target, 1), ts::unique_key("race"));
          if (r.status == 201) {
            ++accepted;
          } else if (r.status == 422 && code_of(r) == "account_inactive") {
            ++inactive;
          } else {
            ++other;
          }
        }
      });
    }
    ts::http_client closer(port());
    go = true;
    // Even rounds close as the payments start; odd ones once the first has gone through.
    if (round % 2 == 1) {
      EXPECT_TRUE(ts::eventually([&] { return accepted.load() > 0; }));
    }
    const auto r = close(closer, owner.key, target);
    for (auto& t : threads) t.join();
    ASSERT_EQ(other.load(), 0) << "round " << round;
    const auto balance = ts::balance(c, owner.key, target);
    if (r.status == 200) {
      ++closed_rounds;
      EXPECT_EQ(accepted.load(), 0) << "round " << round;
      EXPECT_EQ(inactive.load(), k_payers * k_payments_each) << "round " << round;
      EXPECT_EQ(balance, 0) << "round " << round;
      EXPECT_EQ(status_of(c, target), "closed");
    } else {
      ++refused_rounds;
      ASSERT_EQ(r.status, 409) << r.body;
      EXPECT_EQ(code_of(r), "account_not_empty");
      EXPECT_EQ(accepted.load(), k_payers * k_payments_each) << "round " << round;
      EXPECT_EQ(balance, accepted.load()) << "round " << round;
      EXPECT_EQ(status_of(c, target), "active");
    }
  }
  // Which rounds close depends on timing (odd ones are refused, as a payment committed first);
  // the next test forces both orders.
  std::printf("%d rounds closed, %d refused\n", closed_rounds, refused_rounds);
}

// The two orders in which a close and a payment into the account can meet at the account's row
// lock, each forced by holding the lock until both wait for it. The payment queued first commits,
// and the close behind it finds the money (409). The close queued first commits, and the
// payment's batch, which read the row before the close, finds the row's version changed, is
// decided again under the lock and refused (422 account_inactive). Nothing else moves.
TEST_F(AccountCloseE2E, AtTheRowLockACloseAndAPaymentAreDecidedInTheOrderTheyQueue) {
  ts::http_client c(port());
  auto owner = ts::create_principal(c, op());
  auto payer = ts::create_principal(c, op());
  const auto p = ts::create_account(c, op(), payer.id);
  ts::deposit(c, op(), p, 1'000);
  std::int64_t paid = 0;
  for (const bool close_first : {true, false}) {
    const auto target = ts::create_account(c, op(), owner.id);
    ts::account_lock lock({target});
    auto start_close = [&] {
      return std::async(std::launch::async, [&] {
        ts::http_client client(port());
        return close(client, owner.key, target);
      });
    };
    auto start_payment = [&] {
      return std::async(std::launch::async, [&] {
        ts::http_client client(port());
        return client.post("/v1/transfers", payer.key, transfer_body(p, target, 5), ts::unique_key("queued"));
      });
    };
    std::future<ts::response> closing;
    std::future<ts::response> paying;
    if (close_first) {
      closing = start_close();
      EXPECT_TRUE(ts::eventually([&] { return lock.waiters() >= 1; }));
      paying = start_payment();
    } else {
      paying = start_payment();
      EXPECT_TRUE(ts::eventually([&] { return lock.waiters() >= 1; }));
      closing = start_close();
    }
    EXPECT_TRUE(ts::eventually([&] { return lock.waiters() >= 2; }));
    lock.release();
    const auto closed = closing.get();
    const auto payment = paying.get();
    if (close_first) {
      EXPECT_EQ(closed.status, 200) << closed.body;
      ASSERT_EQ(payment.status, 422) << payment.body;
      EXPECT_EQ(code_of(payment), "account_inactive");
      EXPECT_EQ(status_of(c, target), "closed");
      EXPECT_EQ(ts::balance(c, owner.key, target), 0);
    } else {
      ASSERT_EQ(closed.status, 409) << closed.body;
      EXPECT_EQ(code_of(closed), "account_not_empty");
      EXPECT_EQ(payment.status, 201) << payment.body;
      paid += 5;
      EXPECT_EQ(status_of(c, target), "active");
      EXPECT_EQ(ts::balance(c, owner.key, target), 5);
    }
  }
  EXPECT_EQ(ts::balance(c, payer.key, p), 1'000 - paid);
}

}  // namespace
