// End-to-end tests of corrections and currencies (docs/corrections.md) over HTTP: a real
// wallet-server, PostgreSQL and Redis. Reversals of each reversible type, once, never overdrawing,
// against a hot account's main row and shards; two-person adjustments, refused to the requester by
// the API and by the database itself, decided once under a race; exact exchanges across
// minor-unit scales, quotes used once and refused once expired, each currency summing to zero and
// the ledger reconciling.

#include <gtest/gtest.h>

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <atomic>
#include <map>
#include <sstream>
#include <set>
#include <thread>

#include "tests/support/database.hpp"
#include "tests/support/support.hpp"

namespace ts = test_support;

namespace {

std::string str(const boost::json::value& v) { return std::string(v.as_string()); }
std::string field(const ts::response& r, const char* name) { return str(r.json().as_object().at(name)); }
std::string code(const ts::response& r) { return field(r, "code"); }

// The database's refusal of `sql`, run as the owner role (empty when it was not refused).
std::string refusal_of(const std::string& sql) {
  try {
    ts::execute_sql(sql);
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

class CorrectionsE2E : public ts::shared_server_test<CorrectionsE2E> {
 protected:
  ts::response post_money(ts::http_client& c, const std::string& path, const std::string& key,
                          const std::string& body) const {
    return c.post(path, key, body, ts::unique_key("corr"));
  }
  ts::response put(ts::http_client& c, const std::string& path, const std::string& key, const std::string& body) const {
    return c.request("PUT", path, body, {{"Authorization", "Bearer " + key}, {"Content-Type", "application/json"}});
  }
  // A second (and third) operator: an adjustment needs two people.
  static ts::principal new_operator(ts::http_client&) { return ts::create_operator(); }

  std::string reverse(ts::http_client& c, const std::string& id, int expected = 201) const {
    auto r = post_money(c, "/v1/transactions/" + id + "/reversal", op(), R"({"reason":"booked in error"})");
    EXPECT_EQ(r.status, expected) << r.body;
    return r.status == 201 ? field(r, "transactionId") : code(r);
  }
  // A transaction's entries per account (shard rows counted as their hot parent), as an operator sees them.
  std::map<std::int64_t, std::int64_t> entries(ts::http_client& c, const std::string& id) const {
    auto r = c.get("/v1/transactions/" + id, op());
    EXPECT_EQ(r.status, 200) << r.body;
    std::map<std::int64_t, std::int64_t> out;
    const auto j = r.json();
    for (const auto& e : j.as_object().at("entries").as_array()) {
      const auto row = e.as_object().at("accountId").as_int64();
      const auto parent =
          ts::query_value("SELECT COALESCE(parent_id, id) FROM account WHERE id = " + std::to_string(row));
      out[std::stoll(parent)] += std::stoll(str(e.as_object().at("amount")));
    }
    return out;
  }
  static std::map<std::int64_t, std::int64_t> negated(std::map<std::int64_t, std::int64_t> m) {
    for (auto& [account, amount] : m) amount = -amount;
    return m;
  }
  static std::int64_t system_balance(const std::string& role, const std::string& currency) {
    return std::stoll(ts::query_value(
        "SELECT COALESCE(sum(a.balance), 0) FROM account a WHERE a.id = (SELECT id FROM account WHERE currency = '" +
        currency + "' AND system_role = '" + role + "') OR a.parent_id = (SELECT id FROM account WHERE currency = '" +
        currency + "' AND system_role = '" + role + "')"));
  }
  static int audit_rows(const std::string& action, const std::string& target) {
    return std::stoi(ts::query_value("SELECT count(*) FROM audit_log WHERE action = " + ts::sql_literal(action) +
                                     " AND target = " + ts::sql_literal(target)));
  }
  // The signed entries the audit row (action, target) records, by account (shards with their parent).
  static std::map<std::int64_t, std::int64_t> audited_entries(const std::string& action, const std::string& target) {
    const auto listed = ts::query_value(
        "SELECT string_agg(COALESCE(a.parent_id, a.id)::text || '=' || (e->>'amount'), ',')"
        " FROM audit_log l CROSS JOIN jsonb_array_elements(l.detail->'entries') e"
        " JOIN account a ON a.id = (e->>'accountId')::bigint WHERE l.action = " +
        ts::sql_literal(action) + " AND l.target = " + ts::sql_literal(target));
    std::map<std::int64_t, std::int64_t> out;
    std::stringstream in(listed);
    for (std::string item; std::getline(in, item, ',');) {
      const auto eq = item.find('=');
      out[std::stoll(item.substr(0, eq))] += std::stoll(item.substr(eq + 1));
    }
    return out;
  }
  static std::string audited(const std::string& action, const std::string& target, const std::string& member) {
    return ts::query_value("SELECT COALESCE(detail->>" + ts::sql_literal(member) +
                           ", '') FROM audit_log WHERE action = " + ts::sql_literal(action) +
                           " AND target = " + ts::sql_literal(target));
  }
  std::string transfer(ts::http_client& c, const ts::principal& payer, std::int64_t from, std::int64_t to,
                       std::int64_t amount) const {
    auto r = post_money(c, "/v1/transfers", payer.key, ts::transfer_body(from, to, amount));
    EXPECT_EQ(r.status, 201) << r.body;
    return field(r, "transactionId");
  }
  std::string deposit(ts::http_client& c, std::int64_t account, std::int64_t amount) const {
    auto r = post_money(c, "/v1/deposits", op(),
                        R"({"accountId":)" + std::to_string(account) + R"(,"amount":)" + std::to_string(amount) + "}");
    EXPECT_EQ(r.status, 201) << r.body;
    return field(r, "transactionId");
  }
  std::string request_adjustment(ts::http_client& c, const std::string& key, std::int64_t account,
                                 const std::string& amount) const {
    auto r = post_money(c, "/v1/adjustments", key,
                        R"({"accountId":)" + std::to_string(account) + R"(,"amount":")" + amount +
                            R"(","reason":"goodwill for ticket 42"})");
    EXPECT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(field(r, "status"), "PENDING_APPROVAL");
    return field(r, "id");
  }
  void set_rate(ts::http_client& c, const std::string& base, const std::string& quote, const std::string& rate) const {
    auto r = put(c, "/v1/fx/rates/" + base + "/" + quote, op(), R"({"rate":")" + rate + R"(","source":"test desk"})");
    ASSERT_EQ(r.status, 200) << r.body;
  }
  ts::response quote(ts::http_client& c, const ts::principal& who, std::int64_t from, std::int64_t to,
                     std::int64_t amount) const {
    return c.post("/v1/fx/quotes", who.key,
                  R"({"fromAccountId":)" + std::to_string(from) + R"(,"toAccountId":)" + std::to_string(to) +
                      R"(,"amount":)" + std::to_string(amount) + "}");
  }
  ts::response exchange(ts::http_client& c, const ts::principal& who, const std::string& quote_id,
                        const std::string& key = {}) const {
    return c.post("/v1/exchanges", who.key, R"({"quoteId":")" + quote_id + R"("})",
                  key.empty() ? ts::unique_key("exchange") : key);
  }
  // The event of transaction `tx` in the feed, as `who` reads it for `account`: waited for (the
  // relay gives it its feed position), following the feed's pages; empty when it never came.
  boost::json::object feed_event(ts::http_client& c, const ts::principal& who, std::int64_t account,
                                 const std::string& tx) const {
    boost::json::object found;
    std::string after = "0";
    const bool seen = ts::eventually([&] {
      for (int pages = 0; pages < 1'000; ++pages) {
        auto r = c.get("/v1/events?accountId=" + std::to_string(account) + "&after=" + after, who.key);
        if (r.status != 200) return false;
        const auto page = r.json();
        const auto& o = page.as_object();
        for (const auto& e : o.at("events").as_array()) {
          if (str(e.as_object().at("transactionId")) == tx) {
            found = e.as_object();
            return true;
          }
        }
        after = str(o.at("next"));
        if (!o.at("hasMore").as_bool()) return false;
      }
      return false;
    });
    EXPECT_TRUE(seen) << "no event of " << tx << " in the feed";
    return found;
  }
  // Sums of the entries of a transaction per currency (all zero for a balanced one).
  static std::string currency_sums(const std::string& transaction_id) {
    return ts::query_value(
        "SELECT string_agg(currency || ':' || total, ',' ORDER BY currency) FROM (SELECT currency, sum(amount) AS "
        "total FROM ledger_entry WHERE transaction_id = " +
        ts::sql_literal(transaction_id) + "::uuid GROUP BY currency) s");
  }
};

// --- Reversals ---------------------------------------------------------------------------------

// A payment with a fee, a deposit and an exchange are each reversed by one REVERSAL whose entries
// mirror theirs account by account; balances return to where they were, both transactions name
// each other, an audit row records each reversal, and the ledger reconciles. An approved adjustment
// is not reversed (422 not_reversible): one operator would undo what two decided.
TEST_F(CorrectionsE2E, ReversesEachReversibleType) {
  ts::http_client c(port());
  const auto alice = ts::create_principal(c, op());
  const auto shop = ts::create_principal(c, op(), "merchant");
  const auto a = ts::create_account(c, op(), alice.id);
  const auto m = ts::create_account(c, op(), shop.id);
  auto r = put(c, "/v1/accounts/" + std::to_string(m) + "/fees", op(), R"({"feeBps":300,"feeFixed":0})");
  ASSERT_EQ(r.status, 200) << r.body;

  std::vector<std::string> originals;
  originals.push_back(deposit(c, a, 10'000));
  originals.push_back(transfer(c, alice, a, m, 1'000));  // fee 30
  const auto b = new_operator(c);
  const auto adj = request_adjustment(c, op(), a, "250");
  r = post_money(c, "/v1/adjustments/" + adj + "/approve", b.key, "");
  ASSERT_EQ(r.status, 201) << r.body;
  const auto adjustment = field(r, "transactionId");
  EXPECT_EQ(reverse(c, adjustment, 422), "not_reversible");
  const auto usd = ts::create_account(c, op(), alice.id, "USD");
  set_rate(c, "EUR", "USD", "1.0842");
  r = quote(c, alice, a, usd, 2'000);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(field(r, "toAmount"), "2168");  // 20.00 EUR × 1.0842 = 21.684 USD → 21.68
  r = exchange(c, alice, field(r, "id"));
  ASSERT_EQ(r.status, 201) << r.body;
  originals.push_back(field(r, "transactionId"));

  const auto a_before = ts::balance(c, op(), a);
  const auto m_before = ts::balance(c, op(), m);
  // Newest first, so that each reversal finds the money its original left.
  for (auto it = originals.rbegin(); it != originals.rend(); ++it) {
    const auto& original = *it;
    const auto reversal = reverse(c, original);
    EXPECT_EQ(entries(c, reversal), negated(entries(c, original))) << original;
    EXPECT_EQ(currency_sums(reversal), currency_sums(original));
    r = c.get("/v1/transactions/" + original, op());
    EXPECT_EQ(field(r, "reversedBy"), reversal);
    r = c.get("/v1/transactions/" + reversal, op());
    EXPECT_EQ(field(r, "reverses"), original);
    EXPECT_EQ(field(r, "type"), "REVERSAL");
    EXPECT_EQ(audit_rows("transaction.reverse", "transaction:" + original), 1);
    // The audit row names every entry with its sign (a payment's reversal moves 1,000 back to the
    // payer out of the merchant's 970 and the fee's 30, not just "970").
    EXPECT_EQ(audited_entries("transaction.reverse", "transaction:" + original), entries(c, reversal)) << original;
    EXPECT_EQ(ts::query_value("SELECT metadata->>'reason' FROM journal_transaction WHERE id = " +
                              ts::sql_literal(reversal) + "::uuid"),
              "booked in error");
    // A deposit's provider and payment carry over to its reversal; the other types name none.
    const auto provider_of = [](const std::string& tx) {
      return ts::query_value(
          "SELECT COALESCE(metadata->>'provider', '') || '/' || COALESCE(metadata->>'paymentId', '')"
          " FROM journal_transaction WHERE id = " +
          ts::sql_literal(tx) + "::uuid");
    };
    EXPECT_EQ(provider_of(reversal), provider_of(original)) << original;
  }
  EXPECT_NE(ts::query_value("SELECT COALESCE(metadata->>'provider', '') FROM journal_transaction WHERE id = " +
                            ts::sql_literal(originals.front()) + "::uuid"),
            "")
      << "the deposit names its provider";
  EXPECT_NE(a_before, 0);
  EXPECT_NE(m_before, 0);
  EXPECT_EQ(ts::balance(c, op(), a), 250);  // the adjustment's
  EXPECT_EQ(ts::balance(c, op(), m), 0);
  EXPECT_EQ(ts::balance(c, op(), usd), 0);
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// A transaction is reversed once: the same request again replays its answer, another request is
// 409 already_reversed, eight racing requests make exactly one reversal, and the database's
// primary key refuses a second transaction_reversal row even from the owner role.
TEST_F(CorrectionsE2E, ReversedOnce) {
  ts::http_client c(port());
  const auto alice = ts::create_principal(c, op());
  const auto a = ts::create_account(c, op(), alice.id);
  const auto d = deposit(c, a, 5'000);
  const std::string body = R"({"reason":"duplicate booking"})";
  const auto key = ts::unique_key("rev");
  auto first = c.post("/v1/transactions/" + d + "/reversal", op(), body, key);
  ASSERT_EQ(first.status, 201) << first.body;
  auto again = c.post("/v1/transactions/" + d + "/reversal", op(), body, key);
  EXPECT_EQ(again.status, 201);
  EXPECT_EQ(again.body, first.body);
  EXPECT_EQ(again.header("Idempotent-Replayed"), "true");
  auto other = post_money(c, "/v1/transactions/" + d + "/reversal", op(), body);
  EXPECT_EQ(other.status, 409) << other.body;
  EXPECT_EQ(code(other), "already_reversed");

  const auto d2 = deposit(c, a, 700);
  std::atomic<int> created{0}, conflicts{0}, others{0};
  ts::concurrently(8, 8, [&](int, int) {
    ts::http_client own(port());
    auto r = own.post("/v1/transactions/" + d2 + "/reversal", op(), body, ts::unique_key("race"));
    if (r.status == 201) {
      ++created;
    } else if (r.status == 409 && code(r) == "already_reversed") {
      ++conflicts;
    } else {
      ++others;
      ADD_FAILURE() << r.status << " " << r.body;
    }
  });
  EXPECT_EQ(created.load(), 1);
  EXPECT_EQ(conflicts.load(), 7);
  EXPECT_EQ(others.load(), 0);
  EXPECT_EQ(
      ts::query_value("SELECT count(*) FROM journal_transaction WHERE type = 'REVERSAL' AND metadata->>'reverses' = " +
                      ts::sql_literal(d2)),
      "1");
  EXPECT_EQ(ts::balance(c, op(), a), 0);
  const auto reversal = field(first, "transactionId");
  EXPECT_NE(refusal_of("INSERT INTO transaction_reversal (transaction_id, reversal_id, principal_id, reason)"
                       " SELECT transaction_id, " +
                       ts::sql_literal(d2) +
                       "::uuid, principal_id, 'again'"
                       " FROM transaction_reversal WHERE reversal_id = " +
                       ts::sql_literal(reversal) + "::uuid")
                .find("transaction_reversal_pkey"),
            std::string::npos);
  // A reversal and a sweep are not reversed.
  EXPECT_EQ(reverse(c, reversal, 422), "not_reversible");
}

// A reversal that would overdraw the account it takes a credit back from is 422
// insufficient_funds and changes nothing; once the account holds the money, it goes through.
TEST_F(CorrectionsE2E, ReversalThatWouldOverdrawIsRefused) {
  ts::http_client c(port());
  const auto alice = ts::create_principal(c, op());
  const auto bob = ts::create_principal(c, op());
  const auto a = ts::create_account(c, op(), alice.id);
  const auto b = ts::create_account(c, op(), bob.id);
  const auto d = deposit(c, a, 1'000);
  transfer(c, alice, a, b, 600);
  const auto clearing_before = system_balance("clearing:manual", "EUR");
  EXPECT_EQ(reverse(c, d, 422), "insufficient_funds");
  EXPECT_EQ(ts::balance(c, op(), a), 400);
  EXPECT_EQ(system_balance("clearing:manual", "EUR"), clearing_before);
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM transaction_reversal WHERE transaction_id = " + ts::sql_literal(d) +
                            "::uuid"),
            "0");
  auto r = c.get("/v1/transactions/" + d, op());
  EXPECT_FALSE(r.json().as_object().contains("reversedBy"));
  transfer(c, bob, b, a, 600);
  reverse(c, d);
  EXPECT_EQ(ts::balance(c, op(), a), 0);
}

// Payments to a hot merchant land on its shards; after a sweep moved them to the main row, and
// with more payments on the shards since, reversing one takes the money back from main + shards
// exactly as a debit does. A refunded payment is not reversed (409 already_refunded), and a
// reversed one has nothing left to refund (422 refund_exceeds_payment).
TEST_F(CorrectionsE2E, ReversalOfAPaymentToAHotAccount) {
  ts::http_client c(port());
  const auto alice = ts::create_principal(c, op());
  const auto shop = ts::create_principal(c, op(), "merchant");
  const auto a = ts::create_account(c, op(), alice.id);
  const auto m = ts::create_account(c, op(), shop.id, "EUR", 4);
  deposit(c, a, 10'000);
  std::vector<std::string> payments;
  for (int i = 0; i < 6; ++i) payments.push_back(transfer(c, alice, a, m, 1'000));
  auto r = c.post("/v1/admin/sweeps", op(), "");
  ASSERT_TRUE(r.status == 200 || r.status == 503) << r.body;
  for (int i = 0; i < 3; ++i) payments.push_back(transfer(c, alice, a, m, 100));
  EXPECT_EQ(ts::balance(c, op(), m), 6'300);

  // A payment of 1000 while the main row may hold less: main + shards pay it back.
  const auto reversal = reverse(c, payments[0]);
  EXPECT_EQ(entries(c, reversal), negated(entries(c, payments[0])));
  EXPECT_EQ(ts::balance(c, op(), m), 5'300);
  EXPECT_EQ(ts::balance(c, op(), a), 10'000 - 6'300 + 1'000);

  r = post_money(c, "/v1/transfers/" + payments[0] + "/refunds", shop.key, R"({"amount":1})");
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(code(r), "refund_exceeds_payment");
  r = post_money(c, "/v1/transfers/" + payments[1] + "/refunds", shop.key, R"({"amount":10})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(reverse(c, payments[1], 409), "already_refunded");

  // The merchant spends down to less than a payment: its reversal would overdraw main + shards.
  const auto bank = ts::create_principal(c, op());
  const auto k = ts::create_account(c, op(), bank.id);
  r = post_money(c, "/v1/transfers", shop.key, ts::transfer_body(m, k, ts::balance(c, op(), m) - 50));
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(reverse(c, payments[7], 422), "insufficient_funds");
  EXPECT_EQ(ts::balance(c, op(), m), 50);
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// --- Adjustments -------------------------------------------------------------------------------

// Operator A requests, operator B approves: ADJUSTMENT posts against the currency's adjustment
// account (which goes negative), metadata names requester, approver and reason, each step has its
// audit row, and a second decision is 409 already_decided. A negative adjustment goes through
// the account's actor and never overdraws it.
TEST_F(CorrectionsE2E, TwoPersonApproval) {
  ts::http_client c(port());
  const auto alice = ts::create_principal(c, op());
  const auto a = ts::create_account(c, op(), alice.id);
  const auto b = new_operator(c);
  const auto third = new_operator(c);
  const auto adjustment_before = system_balance("adjustment", "EUR");

  const auto key = ts::unique_key("adj");
  const std::string body = R"({"accountId":)" + std::to_string(a) + R"(,"amount":500,"reason":"goodwill"})";
  auto r = c.post("/v1/adjustments", op(), body, key);
  ASSERT_EQ(r.status, 201) << r.body;
  const auto id = field(r, "id");
  auto again = c.post("/v1/adjustments", op(), body, key);
  EXPECT_EQ(again.status, 201);
  EXPECT_EQ(field(again, "id"), id);
  EXPECT_EQ(again.header("Idempotent-Replayed"), "true");
  r = c.get("/v1/adjustments/" + id, op());
  EXPECT_EQ(field(r, "status"), "PENDING_APPROVAL");
  EXPECT_EQ(ts::balance(c, op(), a), 0);

  r = post_money(c, "/v1/adjustments/" + id + "/approve", b.key, "");
  ASSERT_EQ(r.status, 201) << r.body;
  const auto tx = field(r, "transactionId");
  EXPECT_EQ(ts::balance(c, op(), a), 500);
  EXPECT_EQ(system_balance("adjustment", "EUR"), adjustment_before - 500);
  r = c.get("/v1/adjustments/" + id, op());
  EXPECT_EQ(field(r, "status"), "APPROVED");
  EXPECT_EQ(field(r, "transactionId"), tx);
  EXPECT_EQ(r.json().as_object().at("decidedBy").as_int64(), b.id);
  EXPECT_EQ(ts::query_value("SELECT metadata->>'requestedBy' || '/' || (metadata->>'approvedBy') || '/' || "
                            "(metadata->>'reason') FROM journal_transaction WHERE id = " +
                            ts::sql_literal(tx) + "::uuid"),
            ts::query_value("SELECT requested_by FROM adjustment WHERE id = " + ts::sql_literal(id) + "::uuid") + "/" +
                std::to_string(b.id) + "/goodwill");
  EXPECT_EQ(audit_rows("adjustment.request", "adjustment:" + id), 1);
  EXPECT_EQ(audit_rows("adjustment.approve", "adjustment:" + id), 1);

  r = post_money(c, "/v1/adjustments/" + id + "/approve", third.key, "");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(code(r), "already_decided");
  r = c.post("/v1/adjustments/" + id + "/reject", third.key, "");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(code(r), "already_decided");

  // -600 from 500: refused, and still pending; -500: the account pays adjustment back.
  const auto too_much = request_adjustment(c, op(), a, "-600");
  r = post_money(c, "/v1/adjustments/" + too_much + "/approve", b.key, "");
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(code(r), "insufficient_funds");
  EXPECT_EQ(field(c.get("/v1/adjustments/" + too_much, op()), "status"), "PENDING_APPROVAL");
  r = c.post("/v1/adjustments/" + too_much + "/reject", b.key, "");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(field(r, "status"), "REJECTED");
  EXPECT_EQ(audit_rows("adjustment.reject", "adjustment:" + too_much), 1);
  const auto back = request_adjustment(c, b.key, a, "-500");
  r = post_money(c, "/v1/adjustments/" + back + "/approve", op(), "");
  ASSERT_EQ(r.status, 201) << r.body;
  // Each approval's audit row says which account, with the sign: +500 and then -500.
  EXPECT_EQ(audited("adjustment.approve", "adjustment:" + id, "amount"), "500");
  EXPECT_EQ(audited("adjustment.approve", "adjustment:" + back, "amount"), "-500");
  EXPECT_EQ(audited("adjustment.approve", "adjustment:" + back, "accountId"), std::to_string(a));
  EXPECT_EQ(audited_entries("adjustment.approve", "adjustment:" + back),
            (std::map<std::int64_t, std::int64_t>{
                {a, -500},
                {std::stoll(ts::query_value("SELECT id FROM account WHERE currency = 'EUR' AND "
                                            "system_role = 'adjustment'")),
                 500}}));
  EXPECT_EQ(ts::balance(c, op(), a), 0);
  EXPECT_EQ(system_balance("adjustment", "EUR"), adjustment_before);

  // Not a user account, a zero amount, no reason: refused before anything is stored.
  r = post_money(c, "/v1/adjustments", op(), R"({"accountId":999999999,"amount":5,"reason":"x"})");
  EXPECT_EQ(r.status, 404) << r.body;
  r = post_money(c, "/v1/adjustments", op(), R"({"accountId":)" + std::to_string(a) + R"(,"amount":"0","reason":"x"})");
  EXPECT_EQ(r.status, 400) << r.body;
  r = post_money(c, "/v1/adjustments", op(), R"({"accountId":)" + std::to_string(a) + R"(,"amount":5})");
  EXPECT_EQ(r.status, 400) << r.body;
  r = post_money(c, "/v1/adjustments", alice.key,
                 R"({"accountId":)" + std::to_string(a) + R"(,"amount":5,"reason":"x"})");
  EXPECT_EQ(r.status, 403) << r.body;
}

// Two-person approval needs two people: an operator makes no operator (403 forbidden) and no key of
// another operator (403), so it cannot approve its own adjustment in another's name. It makes keys
// of its own and of users; an adjustment it requested waits for another operator.
TEST_F(CorrectionsE2E, AnOperatorCannotActAsAnother) {
  ts::http_client c(port());
  const auto a = new_operator(c);
  const auto b = new_operator(c);
  auto r = c.post("/v1/principals", a.key, R"({"name":"a second self","role":"operator"})");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(code(r), "forbidden");
  r = c.post("/v1/principals/" + std::to_string(b.id) + "/keys", a.key, "");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(code(r), "forbidden");
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM api_key WHERE principal_id = " + std::to_string(b.id)), "1");
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM audit_log WHERE action = 'key.create' AND principal_id = " +
                            std::to_string(a.id)),
            "0");

  r = c.post("/v1/principals/" + std::to_string(a.id) + "/keys", a.key, "");
  EXPECT_EQ(r.status, 201) << r.body;
  const auto alice = ts::create_principal(c, a.key);
  r = c.post("/v1/principals/" + std::to_string(alice.id) + "/keys", a.key, "");
  EXPECT_EQ(r.status, 201) << r.body;
  const auto account = ts::create_account(c, a.key, alice.id);
  const auto adjustment = request_adjustment(c, a.key, account, "100");
  r = post_money(c, "/v1/adjustments/" + adjustment + "/approve", a.key, "");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(code(r), "same_approver");
  r = post_money(c, "/v1/adjustments/" + adjustment + "/approve", b.key, "");
  EXPECT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(ts::balance(c, alice.key, account), 100);
}

// The requester cannot approve or reject its own adjustment: 403 same_approver over the API, and
// the database refuses it too, even to the owner role writing in psql.
TEST_F(CorrectionsE2E, RequesterCannotDecide) {
  ts::http_client c(port());
  const auto alice = ts::create_principal(c, op());
  const auto a = ts::create_account(c, op(), alice.id);
  const auto id = request_adjustment(c, op(), a, "100");
  auto r = post_money(c, "/v1/adjustments/" + id + "/approve", op(), "");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(code(r), "same_approver");
  r = c.post("/v1/adjustments/" + id + "/reject", op(), "");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(code(r), "same_approver");
  EXPECT_EQ(field(c.get("/v1/adjustments/" + id, op()), "status"), "PENDING_APPROVAL");
  EXPECT_EQ(ts::balance(c, op(), a), 0);

  const auto where = " WHERE id = " + ts::sql_literal(id) + "::uuid";
  EXPECT_NE(
      refusal_of("UPDATE adjustment SET status = 'REJECTED', decided_by = requested_by, decided_at = now()" + where)
          .find("adjustment_two_people"),
      std::string::npos);
  EXPECT_NE(refusal_of("INSERT INTO adjustment (id, account_id, currency, amount, reason, requested_by, "
                       "idempotency_key, request_hash,"
                       " status, decided_by, decided_at) SELECT gen_random_uuid(), account_id, currency, amount, "
                       "reason, requested_by,"
                       " 'manual', 'manual', 'REJECTED', requested_by, now() FROM adjustment" +
                       where)
                .find("adjustment_two_people"),
            std::string::npos);
  EXPECT_EQ(ts::query_value("SELECT status FROM adjustment" + where), "PENDING_APPROVAL");
}

// An approval and a rejection of the same adjustment, sent at once: exactly one wins, the other is
// 409 already_decided, and the account moved only when the approval won.
TEST_F(CorrectionsE2E, ConcurrentApproveAndRejectOneWins) {
  ts::http_client c(port());
  const auto alice = ts::create_principal(c, op());
  const auto a = ts::create_account(c, op(), alice.id);
  const auto b = new_operator(c);
  const auto third = new_operator(c);
  std::int64_t approved_total = 0;
  for (int round = 0; round < 10; ++round) {
    const auto id = request_adjustment(c, op(), a, "10");
    ts::response approve, reject;
    std::thread t1([&] {
      ts::http_client own(port());
      approve = own.post("/v1/adjustments/" + id + "/approve", b.key, "", ts::unique_key("approve"));
    });
    std::thread t2([&] {
      ts::http_client own(port());
      reject = own.post("/v1/adjustments/" + id + "/reject", third.key, "");
    });
    t1.join();
    t2.join();
    const bool approved = approve.status == 201;
    const bool rejected = reject.status == 200;
    EXPECT_NE(approved, rejected) << approve.body << " / " << reject.body;
    if (approved) {
      EXPECT_EQ(reject.status, 409) << reject.body;
      EXPECT_EQ(code(reject), "already_decided");
      approved_total += 10;
    } else {
      EXPECT_EQ(approve.status, 409) << approve.body;
      EXPECT_EQ(code(approve), "already_decided");
    }
    const auto status = field(c.get("/v1/adjustments/" + id, op()), "status");
    EXPECT_EQ(status, approved ? "APPROVED" : "REJECTED");
  }
  EXPECT_EQ(ts::balance(c, op(), a), approved_total);
}

// --- Currencies --------------------------------------------------------------------------------

// Rates are exact decimal strings, set by operators only; anything else is 400 and stores nothing.
TEST_F(CorrectionsE2E, RatesAreExactDecimals) {
  ts::http_client c(port());
  const auto audited = audit_rows("fx.rate_set", "fx_rate:GBP/CHF");
  auto r = put(c, "/v1/fx/rates/GBP/CHF", op(), R"({"rate":"001.1300","source":"ECB"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(field(r, "rate"), "1.13");
  EXPECT_EQ(ts::query_value("SELECT rate FROM fx_rate WHERE base = 'GBP' AND quote = 'CHF'"), "1.13");
  for (const char* body :
       {R"({"rate":1.13,"source":"x"})", R"({"rate":"1e3","source":"x"})", R"({"rate":"-1","source":"x"})",
        R"({"rate":"0","source":"x"})", R"({"rate":"1234567890123","source":"x"})", R"({"rate":"1.5"})"}) {
    r = put(c, "/v1/fx/rates/GBP/CHF", op(), body);
    EXPECT_EQ(r.status, 400) << body << " " << r.body;
  }
  r = put(c, "/v1/fx/rates/GBP/GBP", op(), R"({"rate":"1","source":"x"})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(ts::query_value("SELECT rate FROM fx_rate WHERE base = 'GBP' AND quote = 'CHF'"), "1.13");
  const auto alice = ts::create_principal(c, op());
  r = put(c, "/v1/fx/rates/GBP/CHF", alice.key, R"({"rate":"2","source":"x"})");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(audit_rows("fx.rate_set", "fx_rate:GBP/CHF"), audited + 1);
}

// A rate written around the API (by hand in the database, which takes any positive decimal) that
// the rate route would refuse makes a quote of its pair fail with 500, not the server; set again
// through the API, it quotes.
TEST_F(CorrectionsE2E, AStoredRateTheApiWouldRefuseIsNotTrusted) {
  ts::http_client c(port());
  set_rate(c, "SEK", "NOK", "1.05");
  ts::execute_sql("UPDATE fx_rate SET rate = '1234567890123' WHERE base = 'SEK' AND quote = 'NOK'");
  const auto who = ts::create_principal(c, op());
  const auto sek = ts::create_account(c, op(), who.id, "SEK");
  const auto nok = ts::create_account(c, op(), who.id, "NOK");
  auto r = quote(c, who, sek, nok, 100);
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_EQ(field(r, "code"), "internal") << r.body;
  EXPECT_EQ(c.request("GET", "/healthz", {}, {}).status, 200);
  set_rate(c, "SEK", "NOK", "1.05");
  r = quote(c, who, sek, nok, 100);
  EXPECT_EQ(r.status, 201) << r.body;
}

// USD → JPY → KWD: each quote converts exactly, rounded down across minor-unit scales; each
// exchange posts four entries that sum to zero per currency, with rate, source and quote in its
// metadata, and its event names the currency of each leg; a quote too small to convert, and a
// pair without a rate, are refused; the ledger reconciles after the exchanges.
TEST_F(CorrectionsE2E, ExchangesAcrossMinorUnitScales) {
  ts::http_client c(port());
  const auto alice = ts::create_principal(c, op());
  const auto usd = ts::create_account(c, op(), alice.id, "USD");
  const auto jpy = ts::create_account(c, op(), alice.id, "JPY");
  const auto kwd = ts::create_account(c, op(), alice.id, "KWD");
  deposit(c, usd, 10'001);
  set_rate(c, "USD", "JPY", "151.37");
  set_rate(c, "JPY", "KWD", "0.002035");
  set_rate(c, "KWD", "USD", "3.2519");
  const auto fx_usd = system_balance("fx", "USD");
  const auto fx_jpy = system_balance("fx", "JPY");

  auto q = quote(c, alice, usd, jpy, 10'001);  // 100.01 USD × 151.37 = 15138.5137 JPY → 15138
  ASSERT_EQ(q.status, 201) << q.body;
  EXPECT_EQ(field(q, "toAmount"), "15138");
  EXPECT_EQ(field(q, "rate"), "151.37");
  auto r = exchange(c, alice, field(q, "id"));
  ASSERT_EQ(r.status, 201) << r.body;
  const auto tx = field(r, "transactionId");
  EXPECT_EQ(currency_sums(tx), "JPY:0,USD:0");
  EXPECT_EQ(
      ts::query_value("SELECT count(*) FROM ledger_entry WHERE transaction_id = " + ts::sql_literal(tx) + "::uuid"),
      "4");
  EXPECT_EQ(
      ts::query_value("SELECT (metadata->>'rate') || '/' || (metadata->>'source') || '/' || (metadata->>'quoteId')"
                      " FROM journal_transaction WHERE id = " +
                      ts::sql_literal(tx) + "::uuid"),
      "151.37/test desk/" + field(q, "id"));
  EXPECT_EQ(ts::balance(c, alice.key, usd), 0);
  EXPECT_EQ(ts::balance(c, alice.key, jpy), 15'138);
  EXPECT_EQ(system_balance("fx", "USD"), fx_usd + 10'001);
  EXPECT_EQ(system_balance("fx", "JPY"), fx_jpy - 15'138);
  // Its event in the feed names each leg's currency; the event's own is the debited account's.
  const auto event = feed_event(c, alice, usd, tx);
  ASSERT_TRUE(event.contains("currencies")) << boost::json::serialize(event);
  EXPECT_EQ(str(event.at("currency")), "USD");
  const auto& accounts = event.at("accounts").as_array();
  const auto& amounts = event.at("amounts").as_array();
  const auto& currencies = event.at("currencies").as_array();
  ASSERT_EQ(accounts.size(), 4u);
  ASSERT_EQ(currencies.size(), 4u);
  std::map<std::string, int> legs_per_currency;
  for (std::size_t i = 0; i < accounts.size(); ++i) {
    ++legs_per_currency[str(currencies[i])];
    if (accounts[i].as_int64() == usd) {
      EXPECT_EQ(str(currencies[i]), "USD");
      EXPECT_EQ(str(amounts[i]), "-10001");
    }
    if (accounts[i].as_int64() == jpy) {
      EXPECT_EQ(str(currencies[i]), "JPY");
      EXPECT_EQ(str(amounts[i]), "15138");
    }
  }
  EXPECT_EQ(legs_per_currency, (std::map<std::string, int>{{"JPY", 2}, {"USD", 2}}));

  q = quote(c, alice, jpy, kwd, 15'138);  // 15138 × 0.002035 = 30.80583 KWD → 30.805 = 30805 fils
  ASSERT_EQ(q.status, 201) << q.body;
  EXPECT_EQ(field(q, "toAmount"), "30805");
  r = exchange(c, alice, field(q, "id"));
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(currency_sums(field(r, "transactionId")), "JPY:0,KWD:0");
  EXPECT_EQ(ts::balance(c, alice.key, kwd), 30'805);

  const auto small = quote(c, alice, kwd, usd, 1);  // 0.001 KWD = 0.0032519 USD → 0 cents
  EXPECT_EQ(small.status, 422) << small.body;
  EXPECT_EQ(code(small), "amount_too_small");
  const auto none = quote(c, alice, kwd, jpy, 100);
  EXPECT_EQ(none.status, 422) << none.body;
  EXPECT_EQ(code(none), "rate_not_found");
  // The database's zero-sum check is per currency: +5 USD and -5 JPY sum to zero only in total,
  // and are refused even to the owner role.
  EXPECT_NE(refusal_of("INSERT INTO ledger_entry (transaction_id, account_id, currency, amount, balance_after) VALUES"
                       " ('00000000-0000-7000-8000-000000000001', " +
                       std::to_string(usd) + ", 'USD', 5, 5), ('00000000-0000-7000-8000-000000000001', " +
                       std::to_string(jpy) + ", 'JPY', -5, 0)")
                .find("does not sum to zero in"),
            std::string::npos);
  const auto bob = ts::create_principal(c, op());
  const auto not_mine = quote(c, bob, kwd, usd, 100);
  EXPECT_EQ(not_mine.status, 404) << not_mine.body;
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// A quote is used once: the same request replays, another request (even six at once) gets the
// receipt of the one exchange that used it; another principal's request does not find it, and a
// request under a key that another exchange used is 422.
TEST_F(CorrectionsE2E, AQuoteIsUsedOnce) {
  ts::http_client c(port());
  const auto alice = ts::create_principal(c, op());
  const auto eur = ts::create_account(c, op(), alice.id, "EUR");
  const auto gbp = ts::create_account(c, op(), alice.id, "GBP");
  deposit(c, eur, 5'000);
  set_rate(c, "EUR", "GBP", "0.8571");
  auto q = quote(c, alice, eur, gbp, 1'000);
  ASSERT_EQ(q.status, 201) << q.body;
  const auto id = field(q, "id");
  std::vector<ts::response> answers(6);
  ts::concurrently(6, 6, [&](int i, int) {
    ts::http_client own(port());
    answers[i] = exchange(own, alice, id);
  });
  for (const auto& r : answers) {
    EXPECT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(r.body, answers[0].body);
  }
  EXPECT_EQ(
      ts::query_value("SELECT count(*) FROM journal_transaction WHERE type = 'EXCHANGE' AND metadata->>'quoteId' = " +
                      ts::sql_literal(id)),
      "1");
  EXPECT_EQ(ts::balance(c, alice.key, eur), 4'000);
  EXPECT_EQ(ts::balance(c, alice.key, gbp), 857);
  const auto bob = ts::create_principal(c, op());
  auto r = exchange(c, bob, id);
  EXPECT_EQ(r.status, 404) << r.body;

  // A key that another exchange used is that exchange's, even when it names the used quote.
  auto other = quote(c, alice, eur, gbp, 100);
  ASSERT_EQ(other.status, 201) << other.body;
  const auto key = ts::unique_key("exchange");
  ASSERT_EQ(exchange(c, alice, field(other, "id"), key).status, 201);
  r = exchange(c, alice, id, key);
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(field(r, "code"), "idempotency_key_reused");
  EXPECT_EQ(ts::balance(c, alice.key, eur), 3'900);
}

// Nothing is prepared that could never post: no quote names a frozen or closed account (422
// account_inactive, naming which), and no adjustment is requested for a closed one (409
// account_closed). A frozen account may still have an adjustment requested: it posts once unfrozen.
TEST_F(CorrectionsE2E, NoQuoteOrAdjustmentIsMadeForAnAccountThatCannotBePaid) {
  ts::http_client c(port());
  const auto alice = ts::create_principal(c, op());
  const auto eur = ts::create_account(c, op(), alice.id, "EUR");
  const auto usd = ts::create_account(c, op(), alice.id, "USD");
  set_rate(c, "EUR", "USD", "1.0825");
  const auto quotes = [&] {
    return ts::query_value("SELECT count(*) FROM fx_quote WHERE principal_id = " + std::to_string(alice.id));
  };
  const auto expect_refused = [&](const ts::response& r, const std::string& what) {
    EXPECT_EQ(r.status, 422) << r.body;
    EXPECT_EQ(code(r), "account_inactive") << r.body;
    EXPECT_NE(field(r, "detail").find(what), std::string::npos) << r.body;
  };

  ASSERT_EQ(c.post("/v1/accounts/" + std::to_string(usd) + "/freeze", op(), "").status, 200);
  expect_refused(quote(c, alice, eur, usd, 1'000), std::to_string(usd) + " (toAccountId) is frozen");
  expect_refused(quote(c, alice, usd, eur, 1'000), std::to_string(usd) + " (fromAccountId) is frozen");
  EXPECT_EQ(quotes(), "0");
  const auto adjustment = request_adjustment(c, op(), usd, "250");

  ASSERT_EQ(c.post("/v1/accounts/" + std::to_string(usd) + "/unfreeze", op(), "").status, 200);
  ASSERT_EQ(c.post("/v1/accounts/" + std::to_string(eur) + "/close", alice.key, "").status, 200);
  expect_refused(quote(c, alice, eur, usd, 1'000), std::to_string(eur) + " (fromAccountId) is closed");
  EXPECT_EQ(quotes(), "0");
  auto r = post_money(c, "/v1/adjustments", op(),
                      R"({"accountId":)" + std::to_string(eur) + R"(,"amount":"100","reason":"goodwill"})");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(code(r), "account_closed");
  EXPECT_NE(field(r, "detail").find(std::to_string(eur) + " (accountId) is closed"), std::string::npos) << r.body;
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM adjustment WHERE account_id = " + std::to_string(eur)), "0");

  // The frozen account's adjustment, requested while it was frozen, posts now that it is not.
  const auto second = new_operator(c);
  r = post_money(c, "/v1/adjustments/" + adjustment + "/approve", second.key, "");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(ts::balance(c, alice.key, usd), 250);
}

// A fixture whose quotes expire after 50 ms.
class ExpiringQuotesE2E : public ts::shared_server_test<ExpiringQuotesE2E> {
 public:
  static ts::server_process::options options() {
    auto o = ts::shared_server_test<ExpiringQuotesE2E>::options();
    o.env["WALLET_LEDGER_FX_QUOTE_TTL_MS"] = "50";
    return o;
  }
};

// A principal with an EUR account holding 1,000 and an empty CHF one; the rate EUR/CHF is 0.93.
struct eur_and_chf_accounts {
  ts::principal who;
  std::int64_t eur = 0;
  std::int64_t chf = 0;
};
eur_and_chf_accounts eur_and_chf(ts::http_client& c, const std::string& op) {
  eur_and_chf_accounts out;
  out.who = ts::create_principal(c, op);
  out.eur = ts::create_account(c, op, out.who.id, "EUR");
  out.chf = ts::create_account(c, op, out.who.id, "CHF");
  ts::deposit(c, op, out.eur, 1'000);
  const auto r = c.request("PUT", "/v1/fx/rates/EUR/CHF", R"({"rate":"0.93","source":"x"})",
                           {{"Authorization", "Bearer " + op}, {"Content-Type", "application/json"}});
  EXPECT_EQ(r.status, 200) << r.body;
  return out;
}

// A quote of 1,000 EUR in CHF: its id (empty, and a failure, when it is refused).
std::string quote_of(ts::http_client& c, const ts::principal& who, std::int64_t eur, std::int64_t chf) {
  const auto r = c.post(
      "/v1/fx/quotes", who.key,
      R"({"fromAccountId":)" + std::to_string(eur) + R"(,"toAccountId":)" + std::to_string(chf) + R"(,"amount":1000})");
  EXPECT_EQ(r.status, 201) << r.body;
  return r.status == 201 ? field(r, "id") : std::string();
}

// An expired quote is 422 quote_expired and moves nothing (waiting for the database's clock to
// pass the quote's expiry, not for a time).
TEST_F(ExpiringQuotesE2E, AnExpiredQuoteIsRefused) {
  ts::http_client c(port());
  const auto [alice, eur, chf] = eur_and_chf(c, op());
  const auto id = quote_of(c, alice, eur, chf);
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(ts::eventually([&] {
    return ts::query_value("SELECT expires_at <= now() FROM fx_quote WHERE id = " + ts::sql_literal(id) + "::uuid") ==
           "t";
  }));
  auto r = c.post("/v1/exchanges", alice.key, R"({"quoteId":")" + id + R"("})", ts::unique_key("late"));
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(code(r), "quote_expired");
  EXPECT_EQ(ts::balance(c, alice.key, eur), 1'000);
  EXPECT_EQ(ts::balance(c, alice.key, chf), 0);
  EXPECT_EQ(ts::query_value("SELECT transaction_id IS NULL FROM fx_quote WHERE id = " + ts::sql_literal(id) + "::uuid"),
            "t");
}

// A fixture whose quotes expire after 500 ms: long enough for an exchange to pass its flow's check
// and reach the writer before the quote expires, shorter than the writer's lock_timeout.
class SlowlyExpiringQuotesE2E : public ts::shared_server_test<SlowlyExpiringQuotesE2E> {
 public:
  static ts::server_process::options options() {
    auto o = ts::shared_server_test<SlowlyExpiringQuotesE2E>::options();
    o.env["WALLET_LEDGER_FX_QUOTE_TTL_MS"] = "500";
    return o;
  }
};

// The writer judges a quote's expiry when it holds the quote's lock, not when its transaction
// began: an exchange whose writer waited for a row past the quote's expiry is 422 quote_expired.
// The payer's row is held until the writer waits for it and the quote has expired by the
// database's clock. An exchange that is refused before it reaches the writer (a slow moment: the
// quote expired first) proves nothing, and is tried again with a new quote.
TEST_F(SlowlyExpiringQuotesE2E, TheWriterJudgesAQuotesExpiryUnderItsLock) {
  ts::http_client c(port());
  const auto [alice, eur, chf] = eur_and_chf(c, op());

  bool writer_waited = false;
  for (int attempt = 0; attempt < 10 && !writer_waited; ++attempt) {
    const auto id = quote_of(c, alice, eur, chf);
    ASSERT_FALSE(id.empty());
    ts::account_lock lock({eur});
    ts::response answer;
    std::atomic<bool> answered{false};
    std::thread exchange([&] {
      ts::http_client own(port());
      answer = own.post("/v1/exchanges", alice.key, R"({"quoteId":")" + id + R"("})", ts::unique_key("waits"));
      answered = true;
    });
    // Either the writer waits for the row, or the exchange was answered without it.
    ts::eventually([&] { return lock.waiters() > 0 || answered.load(); }, std::chrono::seconds(60),
                   std::chrono::milliseconds(5));
    writer_waited = lock.waiters() > 0;
    if (writer_waited) {
      EXPECT_TRUE(ts::eventually([&] {
        return ts::query_value("SELECT expires_at <= clock_timestamp() FROM fx_quote WHERE id = " +
                               ts::sql_literal(id) + "::uuid") == "t";
      }));
    }
    lock.release();
    exchange.join();
    ASSERT_EQ(answer.status, 422) << answer.body;
    EXPECT_EQ(code(answer), "quote_expired");
  }
  ASSERT_TRUE(writer_waited) << "no exchange reached the writer before its quote expired";
  EXPECT_EQ(ts::balance(c, alice.key, eur), 1'000);
  EXPECT_EQ(ts::balance(c, alice.key, chf), 0);
}

}  // namespace
