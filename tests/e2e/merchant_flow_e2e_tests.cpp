// End-to-end tests of the merchant flows (docs/money-flows.md) over HTTP: a real wallet-server,
// PostgreSQL and Redis. Fee schedules of payees and the fee entries of payments; refunds of
// payments that race each other, that a hot merchant cannot cover, that do not return the fee,
// and that only the payee's owner or an operator may make.

#include <gtest/gtest.h>

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <atomic>
#include <cctype>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tests/support/database.hpp"
#include "tests/support/support.hpp"

namespace ts = test_support;

namespace {

std::string str(const boost::json::value& v) { return std::string(v.as_string()); }

std::string fees_body(std::int64_t bps, std::int64_t fixed) {
  return R"({"feeBps":)" + std::to_string(bps) + R"(,"feeFixed":)" + std::to_string(fixed) + "}";
}

class MerchantFlowE2E : public ts::shared_server_test<MerchantFlowE2E> {
 public:
  // A test holds a merchant's row from its own connection while requests queue behind it: the
  // writer waits for it as long as the test needs on a slow machine.
  static ts::server_process::options options() {
    auto o = ts::shared_server_test<MerchantFlowE2E>::options();
    o.env["WALLET_DATABASE_LOCK_TIMEOUT_MS"] = "60000";
    return o;
  }

 protected:
  // A principal with one empty EUR account (hot with `shards` > 0).
  std::pair<ts::principal, std::int64_t> account_of(ts::http_client& c, const std::string& role = "user",
                                                    int shards = 0) const {
    auto who = ts::create_principal(c, op(), role);
    return {who, ts::create_account(c, op(), who.id, "EUR", shards)};
  }

  ts::response put_fees(ts::http_client& c, const std::string& key, std::int64_t account,
                        const std::string& body) const {
    return c.request("PUT", "/v1/accounts/" + std::to_string(account) + "/fees", body,
                     {{"Authorization", "Bearer " + key}, {"Content-Type", "application/json"}});
  }

  void set_fees(ts::http_client& c, std::int64_t account, std::int64_t bps, std::int64_t fixed) const {
    auto r = put_fees(c, op(), account, fees_body(bps, fixed));
    ASSERT_EQ(r.status, 200) << r.body;
  }

  ts::response pay(ts::http_client& c, const std::string& key, std::int64_t from, std::int64_t to,
                   std::int64_t amount) const {
    return c.post("/v1/transfers", key, ts::transfer_body(from, to, amount), ts::unique_key("pay"));
  }

  // A payment that must succeed: its transaction id.
  std::string paid(ts::http_client& c, const std::string& key, std::int64_t from, std::int64_t to,
                   std::int64_t amount) const {
    auto r = pay(c, key, from, to, amount);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? str(r.json().as_object().at("transactionId")) : std::string();
  }

  ts::response refund(ts::http_client& c, const std::string& key, const std::string& payment, const std::string& body,
                      const std::string& idempotency_key = {}) const {
    return c.post("/v1/transfers/" + payment + "/refunds", key, body,
                  idempotency_key.empty() ? ts::unique_key("refund") : idempotency_key);
  }

  // The entries of a transaction as (account, amount), a shard's entry counted as its hot parent's.
  std::map<std::int64_t, std::int64_t> entries(ts::http_client& c, const std::string& transaction_id) const {
    auto r = c.get("/v1/transactions/" + transaction_id, op());
    EXPECT_EQ(r.status, 200) << r.body;
    std::map<std::int64_t, std::int64_t> out;
    if (r.status != 200) return out;
    const auto j = r.json();
    for (const auto& e : j.as_object().at("entries").as_array()) {
      const auto id = e.as_object().at("accountId").as_int64();
      const auto parent =
          ts::query_value("SELECT COALESCE(parent_id, id) FROM account WHERE id = " + std::to_string(id));
      out[std::stoll(parent)] += std::stoll(str(e.as_object().at("amount")));
    }
    return out;
  }

  // fee_revenue is hot: what it holds is its main row and its shards (the sweeper moves between them).
  static std::string fee_revenue_held_sql() {
    const auto id = std::to_string(fee_revenue());
    return "SELECT COALESCE(sum(balance), 0) FROM account WHERE id = " + id + " OR parent_id = " + id;
  }

  static std::int64_t fee_revenue() {
    return std::stoll(ts::query_value("SELECT id FROM account WHERE currency = 'EUR' AND system_role = 'fee_revenue'"));
  }
};

// A payee's fee schedule is set by an operator and shown with the account; a payment to it posts
// payer −amount, payee +(amount − fee), fee_revenue +fee, and its receipt names the fee and the net
// amount. A fee as large as the payment leaves the payee no entry; a zero fee, or no schedule,
// makes no fee entry. The ledger reconciles.
TEST_F(MerchantFlowE2E, APaymentPaysItsPayeesFeeToFeeRevenue) {
  ts::http_client c(port());
  const auto [alice, a] = account_of(c);
  const auto [shop, m] = account_of(c, "merchant");
  ts::deposit(c, op(), a, 10'000);

  auto got = c.get("/v1/accounts/" + std::to_string(m), shop.key);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_TRUE(got.json().as_object().at("fees").is_null());
  auto r = put_fees(c, op(), m, fees_body(250, 30));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().as_object().at("fees").as_object().at("feeBps").as_int64(), 250);
  EXPECT_EQ(str(r.json().as_object().at("fees").as_object().at("feeFixed")), "30");
  got = c.get("/v1/accounts/" + std::to_string(m), shop.key);
  EXPECT_EQ(boost::json::serialize(got.json().as_object().at("fees")), R"({"feeBps":250,"feeFixed":"30"})");

  // 2.5 % of 1,000 is 25, plus 30.
  r = pay(c, alice.key, a, m, 1'000);
  ASSERT_EQ(r.status, 201) << r.body;
  auto receipt = r.json().as_object();
  EXPECT_EQ(str(receipt.at("fee")), "55");
  EXPECT_EQ(str(receipt.at("netAmount")), "945");
  EXPECT_EQ(str(receipt.at("fromBalanceAfter")), "9000");
  EXPECT_EQ(entries(c, str(receipt.at("transactionId"))),
            (std::map<std::int64_t, std::int64_t>{{a, -1'000}, {m, 945}, {fee_revenue(), 55}}));
  EXPECT_EQ(ts::balance(c, shop.key, m), 945);
  EXPECT_EQ(ts::balance(c, alice.key, a), 9'000);

  // The whole payment is the fee: the payee gets nothing and has no entry.
  set_fees(c, m, 0, 5'000);
  r = pay(c, alice.key, a, m, 100);
  ASSERT_EQ(r.status, 201) << r.body;
  receipt = r.json().as_object();
  EXPECT_EQ(str(receipt.at("fee")), "100");
  EXPECT_EQ(str(receipt.at("netAmount")), "0");
  EXPECT_EQ(entries(c, str(receipt.at("transactionId"))),
            (std::map<std::int64_t, std::int64_t>{{a, -100}, {fee_revenue(), 100}}));

  // A schedule that charges nothing, and a payee without one: two entries, fee 0.
  set_fees(c, m, 0, 0);
  r = pay(c, alice.key, a, m, 400);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("fee")), "0");
  EXPECT_EQ(str(r.json().as_object().at("netAmount")), "400");
  EXPECT_EQ(entries(c, str(r.json().as_object().at("transactionId"))),
            (std::map<std::int64_t, std::int64_t>{{a, -400}, {m, 400}}));
  const auto [bob, b] = account_of(c);
  r = pay(c, alice.key, a, b, 300);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("fee")), "0");
  EXPECT_EQ(str(r.json().as_object().at("netAmount")), "300");
  EXPECT_EQ(entries(c, str(r.json().as_object().at("transactionId"))),
            (std::map<std::int64_t, std::int64_t>{{a, -300}, {b, 300}}));

  EXPECT_EQ(ts::balance(c, shop.key, m), 945 + 400);
  EXPECT_EQ(ts::balance(c, alice.key, a), 10'000 - 1'000 - 100 - 400 - 300);
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// Bad fee schedules are 400 and change nothing; only an operator sets one (403), and only on a
// user account that exists (404: unknown, a shard, a system account).
TEST_F(MerchantFlowE2E, AFeeScheduleIsCheckedAndOnlyAnOperatorSetsIt) {
  ts::http_client c(port());
  const auto [shop, m] = account_of(c, "merchant", 2);
  set_fees(c, m, 100, 5);
  for (const auto* body : {R"({"feeBps":10001,"feeFixed":0})", R"({"feeBps":-1,"feeFixed":0})",
                           R"({"feeBps":100,"feeFixed":-1})", R"({"feeBps":100})", R"({"feeFixed":0})",
                           R"({"feeBps":1.5,"feeFixed":0})", R"({"feeBps":100,"feeFixed":0,"x":1})",
                           R"({"feeBps":100,"feeFixed":"1e3"})", R"({"feeBps":null,"feeFixed":100})"}) {
    auto r = put_fees(c, op(), m, body);
    EXPECT_EQ(r.status, 400) << body << ": " << r.body;
  }
  EXPECT_EQ(put_fees(c, shop.key, m, fees_body(0, 0)).status, 403);
  EXPECT_EQ(put_fees(c, op(), 9'000'000'000'000LL, fees_body(0, 0)).status, 404);
  const auto shard = std::stoll(
      ts::query_value("SELECT id FROM account WHERE parent_id = " + std::to_string(m) + " ORDER BY shard_no LIMIT 1"));
  EXPECT_EQ(put_fees(c, op(), shard, fees_body(0, 0)).status, 404);
  const auto [alice, a] = account_of(c);
  ts::deposit(c, op(), a, 1'000);
  set_fees(c, m, 100, 5);
  paid(c, alice.key, a, m, 1'000);  // makes fee_revenue EUR exist
  EXPECT_EQ(put_fees(c, op(), fee_revenue(), fees_body(0, 0)).status, 404);
  // A fixed fee may be sent as a string of digits.
  auto r = put_fees(c, op(), m, R"({"feeBps":0,"feeFixed":"12"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ts::query_value("SELECT fee_bps || '/' || fee_fixed FROM account WHERE id = " + std::to_string(m)), "0/12");
}

// The schedule a payment pays is the one in the database when its writer locks the payee, never
// one the server cached: a schedule changed behind the server's back (as another node would)
// applies to the next payment, both when the server knew of none and when it knew another. A hot
// payee's credits land on its shards, and pay the schedule of its main row.
TEST_F(MerchantFlowE2E, AStaleCachedScheduleIsNeverApplied) {
  ts::http_client c(port());
  const auto [alice, a] = account_of(c);
  ts::deposit(c, op(), a, 100'000);
  for (int shards : {0, 4}) {
    const auto [shop, m] = account_of(c, "merchant", shards);
    EXPECT_EQ(str(pay(c, alice.key, a, m, 1'000).json().as_object().at("fee")), "0");  // caches "no schedule"
    ts::execute_sql("UPDATE account SET fee_bps = 1000, fee_fixed = 1 WHERE id = " + std::to_string(m));
    auto r = pay(c, alice.key, a, m, 1'000);
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(str(r.json().as_object().at("fee")), "101") << "shards " << shards;
    EXPECT_EQ(entries(c, str(r.json().as_object().at("transactionId"))),
              (std::map<std::int64_t, std::int64_t>{{a, -1'000}, {m, 899}, {fee_revenue(), 101}}));
    ts::execute_sql("UPDATE account SET fee_bps = 2000, fee_fixed = 0 WHERE id = " + std::to_string(m));
    r = pay(c, alice.key, a, m, 1'000);
    ASSERT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(str(r.json().as_object().at("fee")), "200") << "shards " << shards;
    // Through the API, the next payment pays the new schedule at once.
    set_fees(c, m, 0, 7);
    EXPECT_EQ(str(pay(c, alice.key, a, m, 1'000).json().as_object().at("fee")), "7");
    EXPECT_EQ(ts::balance(c, shop.key, m), 1'000 + 899 + 800 + 993);
  }
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// A refund gives the payment's amount back from the merchant to the payer (REFUND: payee −amount,
// payer +amount); the fee stays with fee_revenue. The payment then shows what was refunded and
// its refunds, each refund the payment it gave back; a refund without an amount takes all that is
// left, and the same Idempotency-Key replays its receipt.
TEST_F(MerchantFlowE2E, ARefundDoesNotReturnTheFee) {
  ts::http_client c(port());
  const auto [alice, a] = account_of(c);
  const auto [shop, m] = account_of(c, "merchant");
  ts::deposit(c, op(), a, 1'000);
  ts::deposit(c, op(), m, 500);
  set_fees(c, m, 250, 30);
  const auto payment = paid(c, alice.key, a, m, 1'000);  // fee 55
  const auto fees_after_payment = std::stoll(ts::query_value(fee_revenue_held_sql()));

  auto r = refund(c, shop.key, payment, R"({"amount":400})");
  ASSERT_EQ(r.status, 201) << r.body;
  const auto first = r.json().as_object();
  EXPECT_EQ(str(first.at("status")), "COMPLETED");
  EXPECT_EQ(str(first.at("transferId")), payment);
  EXPECT_EQ(str(first.at("amount")), "400");
  EXPECT_EQ(entries(c, str(first.at("transactionId"))), (std::map<std::int64_t, std::int64_t>{{m, -400}, {a, 400}}));

  const std::string key = ts::unique_key("rest");
  r = refund(c, op(), payment, "", key);  // all that is left: 600
  ASSERT_EQ(r.status, 201) << r.body;
  const auto second = r.json().as_object();
  EXPECT_EQ(str(second.at("amount")), "600");
  auto again = refund(c, op(), payment, "", key);
  EXPECT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(again.body, r.body);
  EXPECT_EQ(again.header("idempotent-replayed"), "true");

  // The payer has all of it back; the merchant paid the whole amount, fee included.
  EXPECT_EQ(ts::balance(c, alice.key, a), 1'000);
  EXPECT_EQ(ts::balance(c, shop.key, m), 500 + 945 - 1'000);
  EXPECT_EQ(std::stoll(ts::query_value(fee_revenue_held_sql())), fees_after_payment);
  r = refund(c, shop.key, payment, R"({"amount":1})");
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("code")), "refund_exceeds_payment");

  auto tx = c.get("/v1/transactions/" + payment, shop.key);
  ASSERT_EQ(tx.status, 200) << tx.body;
  const auto shown = tx.json().as_object();
  EXPECT_EQ(str(shown.at("refundedAmount")), "1000");
  std::vector<std::string> refunds;
  for (const auto& id : shown.at("refunds").as_array()) refunds.push_back(str(id));
  EXPECT_EQ(refunds, (std::vector<std::string>{str(first.at("transactionId")), str(second.at("transactionId"))}));
  tx = c.get("/v1/transactions/" + str(first.at("transactionId")), alice.key);
  ASSERT_EQ(tx.status, 200) << tx.body;
  EXPECT_EQ(str(tx.json().as_object().at("type")), "REFUND");
  EXPECT_EQ(str(tx.json().as_object().at("transferId")), payment);
  // A payment never refunded shows nothing refunded.
  tx = c.get("/v1/transactions/" + paid(c, shop.key, m, a, 10), op());
  EXPECT_EQ(str(tx.json().as_object().at("refundedAmount")), "0");
  EXPECT_TRUE(tx.json().as_object().at("refunds").as_array().empty());

  // The database holds the limit on its own, for any role.
  EXPECT_THROW(ts::execute_sql("UPDATE payment_refund_total SET refunded = refunded + 1 WHERE transaction_id = '" +
                               payment + "'"),
               std::exception);
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// Only the owner of the credited account, or an operator, refunds a payment: the payer, another
// principal, an unknown or malformed id and a transaction that is no payment are 404; a missing
// Idempotency-Key and a bad amount are 400. None of them changes anything.
TEST_F(MerchantFlowE2E, OnlyThePayeesOwnerOrAnOperatorRefunds) {
  ts::http_client c(port());
  const auto [alice, a] = account_of(c);
  const auto [shop, m] = account_of(c, "merchant");
  const auto [eve, e] = account_of(c);
  ts::deposit(c, op(), a, 1'000);
  const auto payment = paid(c, alice.key, a, m, 1'000);
  auto deposit =
      c.post("/v1/deposits", op(), R"({"accountId":)" + std::to_string(a) + R"(,"amount":5})", ts::unique_key("d"));
  ASSERT_EQ(deposit.status, 201) << deposit.body;
  const auto deposit_tx = str(deposit.json().as_object().at("transactionId"));

  auto expect_404 = [&](const ts::response& r, const char* what) {
    EXPECT_EQ(r.status, 404) << what << ": " << r.body;
  };
  expect_404(refund(c, alice.key, payment, ""), "the payer");
  expect_404(refund(c, eve.key, payment, R"({"amount":1})"), "another principal");
  expect_404(refund(c, shop.key, "01234567-89ab-7def-8123-456789abcdef", ""), "an unknown payment");
  expect_404(refund(c, shop.key, "not-a-uuid", ""), "a malformed id");
  expect_404(refund(c, op(), deposit_tx, ""), "a deposit");
  auto r = c.post("/v1/transfers/" + payment + "/refunds", shop.key, R"({"amount":1})");
  EXPECT_EQ(r.status, 400) << r.body;
  for (const auto* body : {R"({"amount":0})", R"({"amount":-5})", R"({"amount":"x"})", R"({"reason":"x"})"}) {
    r = refund(c, shop.key, payment, body);
    EXPECT_EQ(r.status, 400) << body << ": " << r.body;
  }
  r = refund(c, shop.key, payment, R"({"amount":1001})");
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("code")), "refund_exceeds_payment");
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM payment_refund_total WHERE transaction_id = '" + payment + "'"), "0");
  EXPECT_EQ(ts::balance(c, shop.key, m), 1'000);
  EXPECT_EQ(ts::balance(c, alice.key, a), 5);
  EXPECT_EQ(ts::balance(c, eve.key, e), 0);

  r = refund(c, shop.key, payment, R"({"amount":300})");
  EXPECT_EQ(r.status, 201) << r.body;
  r = refund(c, op(), payment, R"({"amount":700})");
  EXPECT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(ts::balance(c, shop.key, m), 0);
  EXPECT_EQ(ts::balance(c, alice.key, a), 1'005);
}

// A payment's id is a UUID, whatever case it is written in: refunds naming it in upper case count
// against the same payment as those in lower case (one total, never past the payment), and the
// same Idempotency-Key with the id in either case replays the first answer.
TEST_F(MerchantFlowE2E, ARefundNamesItsPaymentInEitherCase) {
  ts::http_client c(port());
  const auto [alice, a] = account_of(c);
  const auto [shop, m] = account_of(c, "merchant");
  ts::deposit(c, op(), a, 1'000);
  const auto payment = paid(c, alice.key, a, m, 1'000);
  std::string upper = payment;
  for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  ASSERT_NE(upper, payment);

  auto r = refund(c, shop.key, payment, R"({"amount":300})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string key = ts::unique_key("upper");
  r = refund(c, shop.key, upper, R"({"amount":200})", key);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("transferId")), payment);
  auto again = refund(c, shop.key, payment, R"({"amount":200})", key);
  EXPECT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(again.body, r.body);
  r = refund(c, shop.key, upper, R"({"amount":501})");
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("code")), "refund_exceeds_payment");
  r = refund(c, shop.key, upper, "");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("amount")), "500");
  EXPECT_EQ(ts::query_value("SELECT refunded FROM payment_refund_total WHERE transaction_id = '" + payment + "'"),
            "1000");
  EXPECT_EQ(ts::balance(c, alice.key, a), 1'000);
  EXPECT_EQ(ts::balance(c, shop.key, m), 0);
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// Refunds racing for one payment never exceed it: of eight concurrent refunds of 300 of a payment
// of 1,000 (by a merchant that could pay them all), exactly three are made and five are 422
// refund_exceeds_payment, every round.
TEST_F(MerchantFlowE2E, RefundsRacingForOnePaymentNeverExceedIt) {
  ts::http_client c(port());
  for (int round = 0; round < 5; ++round) {
    const auto [alice, a] = account_of(c);
    const auto [shop, m] = account_of(c, "merchant");
    ts::deposit(c, op(), a, 1'000);
    ts::deposit(c, op(), m, 10'000);
    const auto payment = paid(c, alice.key, a, m, 1'000);
    std::atomic<int> made{0};
    std::atomic<int> exceeded{0};
    std::mutex mutex;
    std::set<std::string> refunds;
    ts::concurrently(8, 8, [&](int i, int) {
      ts::http_client client(port());
      const auto r = refund(client, i % 2 == 0 ? shop.key : op(), payment, R"({"amount":300})");
      if (r.status == 201) {
        ++made;
        std::lock_guard lock(mutex);
        refunds.insert(str(r.json().as_object().at("transactionId")));
      } else if (r.status == 422 && str(r.json().as_object().at("code")) == "refund_exceeds_payment") {
        ++exceeded;
      } else {
        ADD_FAILURE() << r.status << " " << r.body;
      }
    });
    EXPECT_EQ(made.load(), 3) << "round " << round;
    EXPECT_EQ(exceeded.load(), 5) << "round " << round;
    EXPECT_EQ(ts::balance(c, alice.key, a), 900);
    EXPECT_EQ(ts::balance(c, shop.key, m), 10'000 + 1'000 - 900);
    EXPECT_EQ(ts::query_value("SELECT refunded FROM payment_refund_total WHERE transaction_id = '" + payment + "'"),
              "900");
    const auto tx = c.get("/v1/transactions/" + payment, op()).json();
    std::set<std::string> shown;
    for (const auto& id : tx.as_object().at("refunds").as_array()) shown.insert(str(id));
    EXPECT_EQ(shown, refunds);
  }
}

// A refund without an amount is of all that is left when the writer locks the payment's total,
// not when its flow read it: with the merchant's row locked, a refund of 300 waits at the writer,
// a refund of the rest reads 1,000 left and queues behind it; once the lock goes, the first takes
// 300 and the second the 700 left (it was refused as exceeding the payment before). Its receipt
// says 700, and a retry with its key answers the same.
TEST_F(MerchantFlowE2E, ARefundOfTheRestTakesWhatIsLeftWhenItCommits) {
  ts::http_client c(port());
  const auto [alice, a] = account_of(c);
  const auto [shop, m] = account_of(c, "merchant");
  ts::deposit(c, op(), a, 1'000);
  ts::deposit(c, op(), m, 10'000);
  const auto payment = paid(c, alice.key, a, m, 1'000);
  ASSERT_FALSE(payment.empty());
  const auto queued = [&] { return ts::metric_value(c, "wallet_writer_postings_queued"); };

  ts::account_lock lock({m});
  auto part = std::async(std::launch::async, [&, key = shop.key] {
    ts::http_client client(port());
    return refund(client, key, payment, R"({"amount":300})");
  });
  ASSERT_TRUE(ts::eventually([&] { return lock.waiters() >= 1; })) << "the first refund never reached the lock";
  const auto queued_with_one = queued();
  const std::string rest_key = ts::unique_key("rest");
  auto rest = std::async(std::launch::async, [&, key = shop.key] {
    ts::http_client client(port());
    return refund(client, key, payment, "", rest_key);
  });
  ASSERT_TRUE(ts::eventually([&] { return queued() > queued_with_one; }))
      << "the refund of the rest never queued at the writer";
  lock.release();
  const auto first = part.get();
  const auto second = rest.get();
  ASSERT_EQ(first.status, 201) << first.body;
  ASSERT_EQ(second.status, 201) << second.body;
  EXPECT_EQ(str(second.json().as_object().at("amount")), "700") << second.body;
  const auto again = refund(c, shop.key, payment, "", rest_key);
  EXPECT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(again.body, second.body);
  EXPECT_EQ(ts::query_value("SELECT refunded FROM payment_refund_total WHERE transaction_id = '" + payment + "'"),
            "1000");
  EXPECT_EQ(ts::balance(c, alice.key, a), 1'000);
  EXPECT_EQ(ts::balance(c, shop.key, m), 10'000);
  auto none = refund(c, shop.key, payment, "");
  EXPECT_EQ(none.status, 422) << none.body;
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// A refund debits the merchant through its actor, against its main row and shards together: ten
// payments of 100 into a hot merchant charging 10 % leave it 900, and refunding all ten at once
// makes exactly nine refunds and refuses one (insufficient_funds), every round. The merchant ends
// at zero, no row of it below zero, and the fees stay with fee_revenue.
TEST_F(MerchantFlowE2E, ARefundFromAHotMerchantNeverOverdrawsIt) {
  ts::http_client c(port());
  for (int round = 0; round < 3; ++round) {
    const auto [shop, m] = account_of(c, "merchant", 4);
    set_fees(c, m, 1'000, 0);
    std::vector<std::pair<ts::principal, std::int64_t>> payers;
    std::vector<std::string> payments;
    for (int i = 0; i < 10; ++i) {
      payers.push_back(account_of(c));
      ts::deposit(c, op(), payers.back().second, 100);
      payments.push_back(paid(c, payers.back().first.key, payers.back().second, m, 100));
    }
    EXPECT_EQ(ts::balance(c, shop.key, m), 900);
    ts::transfer_tally tally;
    std::vector<int> refunded(10, 0);
    ts::concurrently(10, 10, [&](int i, int) {
      ts::http_client client(port());
      const auto r = refund(client, shop.key, payments[static_cast<std::size_t>(i)], "");
      tally.count(r);
      if (r.status == 201) refunded[static_cast<std::size_t>(i)] = 1;
    });
    EXPECT_EQ(tally.created.load(), 9) << "round " << round;
    EXPECT_EQ(tally.refused.load(), 1) << "round " << round;
    EXPECT_EQ(tally.other.load(), 0);
    EXPECT_EQ(ts::balance(c, shop.key, m), 0);
    EXPECT_EQ(ts::query_value("SELECT count(*) FROM account WHERE (id = " + std::to_string(m) +
                              " OR parent_id = " + std::to_string(m) + ") AND balance < 0"),
              "0");
    for (std::size_t i = 0; i < payers.size(); ++i) {
      EXPECT_EQ(ts::balance(c, payers[i].first.key, payers[i].second), refunded[i] * 100) << i;
    }
  }
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

}  // namespace
