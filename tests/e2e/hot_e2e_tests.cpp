// End-to-end tests of hot accounts: credits fanned out over shard sub-accounts, debits
// serialized by one actor against main + shards, sweeps consolidating the shards.

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "tests/support/support.hpp"

namespace ts = test_support;
using test_support::concurrently;
using test_support::transfer_body;

namespace {

ts::server_process::options hot_options(const std::string& sweep_interval_ms) {
  ts::server_process::options o;
  o.env = ts::unlimited_rates();
  o.env["WALLET_LEDGER_SWEEP_INTERVAL_MS"] = sweep_interval_ms;
  return o;
}

struct payer {
  ts::principal who;
  std::int64_t account = 0;
};

std::vector<payer> make_payers(ts::http_client& c, const std::string& op, int count, std::int64_t funds) {
  std::vector<payer> payers(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    auto& p = payers[static_cast<std::size_t>(i)];
    p.who = ts::create_principal(c, op);
    p.account = ts::create_account(c, op, p.who.id);
    if (funds > 0) ts::deposit(c, op, p.account, funds);
  }
  return payers;
}

// `count` merchants, each with a hot account of two shards that `from` has paid 100 (its shards
// hold it, unswept); the accounts whose payment was not made are left out.
std::vector<std::int64_t> paid_merchants(ts::http_client& c, const std::string& op, const payer& from, int count) {
  std::vector<std::int64_t> shops;
  for (int i = 0; i < count; ++i) {
    auto merchant = ts::create_principal(c, op, "merchant");
    const auto shop = ts::create_account(c, op, merchant.id, "EUR", 2);
    const auto r = c.post("/v1/transfers", from.who.key, transfer_body(from.account, shop, 100), ts::unique_key("in"));
    EXPECT_EQ(r.status, 201) << r.body;
    if (r.status == 201) shops.push_back(shop);
  }
  return shops;
}

// Sweeps every 200 ms, so they run during the load.
class HotE2E : public ts::shared_server_test<HotE2E> {
 public:
  static ts::server_process::options options() { return hot_options("200"); }
};

// 2,000 concurrent payments from 200 payers into one hot merchant: every 201 is in the ledger
// exactly once and the merchant's balance is their sum; sweeps run meanwhile (every 200 ms).
TEST_F(HotE2E, ManyPayersIntoOneHotMerchant) {
  ts::http_client c(port());
  auto merchant = ts::create_principal(c, op(), "merchant");
  const auto shop = ts::create_account(c, op(), merchant.id, "EUR", 8);
  auto payers = make_payers(c, op(), 200, 100'000);

  std::mutex m;
  std::set<std::string> transactions;
  std::atomic<std::int64_t> paid{0};
  std::atomic<int> failures{0};
  concurrently(2000, 32, [&](int i, int) {
    thread_local std::unique_ptr<ts::http_client> client;
    if (!client) client = std::make_unique<ts::http_client>(port());
    const auto& p = payers[static_cast<std::size_t>(i % 200)];
    const std::int64_t amount = 100 + i % 37;
    auto r = client->post("/v1/transfers", p.who.key, transfer_body(p.account, shop, amount), ts::unique_key("pay"));
    if (r.status != 201) {
      ++failures;
      ADD_FAILURE() << r.status << " " << r.body;
      return;
    }
    paid += amount;
    std::lock_guard lock(m);
    EXPECT_TRUE(transactions.insert(std::string(r.json().as_object().at("transactionId").as_string())).second);
  });
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(transactions.size(), 2000u);
  EXPECT_EQ(ts::balance(c, merchant.key, shop), paid.load());
  // Each payment is one journal row with one credit on the merchant or one of its shards.
  EXPECT_EQ(
      ts::query_value(
          "SELECT count(*) FROM ledger_entry e JOIN account a ON a.id = e.account_id"
          " WHERE (a.id = " +
          std::to_string(shop) + " OR a.parent_id = " + std::to_string(shop) +
          ") AND e.amount > 0 AND e.transaction_id IN (SELECT id FROM journal_transaction WHERE type = 'TRANSFER')"),
      "2000");
  auto account = c.get("/v1/accounts/" + std::to_string(shop), merchant.key).json().as_object();
  EXPECT_TRUE(account.at("hot").as_bool());
  EXPECT_EQ(account.at("shards").as_array().size(), 8u);
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// Payday: one hot employer pays 2,000 salaries at once; exactly as many succeed as its balance
// covers, and it ends at zero.
TEST_F(HotE2E, PaydayPaysExactlyWhatTheBalanceCovers) {
  ts::http_client c(port());
  auto employer = ts::create_principal(c, op(), "merchant");
  const auto payroll = ts::create_account(c, op(), employer.id, "EUR", 4);
  ts::deposit(c, op(), payroll, 1'500 * 1'000);  // covers 1,500 salaries of 1,000
  auto staff = make_payers(c, op(), 50, 0);
  ts::transfer_tally salaries;
  concurrently(2000, 32, [&](int i, int) {
    thread_local std::unique_ptr<ts::http_client> client;
    if (!client) client = std::make_unique<ts::http_client>(port());
    const auto& to = staff[static_cast<std::size_t>(i % 50)];
    salaries.count(client->post("/v1/transfers", employer.key, transfer_body(payroll, to.account, 1000),
                                ts::unique_key("salary")));
  });
  EXPECT_EQ(salaries.created.load(), 1500);
  EXPECT_EQ(salaries.refused.load(), 500);
  EXPECT_EQ(salaries.other.load(), 0);
  EXPECT_EQ(ts::balance(c, employer.key, payroll), 0);
  std::int64_t staff_total = 0;
  for (const auto& s : staff) staff_total += ts::balance(c, s.who.key, s.account);
  EXPECT_EQ(staff_total, 1'500 * 1'000);
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// Payouts from a hot merchant while payments stream in: no payout overdraws, and the final
// balance is exactly payments minus successful payouts.
TEST_F(HotE2E, PayoutsWhilePaymentsStreamIn) {
  ts::http_client c(port());
  auto merchant = ts::create_principal(c, op(), "merchant");
  const auto shop = ts::create_account(c, op(), merchant.id, "EUR", 8);
  auto bank = ts::create_principal(c, op(), "user");
  const auto bank_account = ts::create_account(c, op(), bank.id);
  auto payers = make_payers(c, op(), 40, 50'000);

  std::atomic<std::int64_t> paid_in{0}, paid_out{0};
  std::atomic<int> other{0};
  concurrently(1200, 24, [&](int i, int) {
    thread_local std::unique_ptr<ts::http_client> client;
    if (!client) client = std::make_unique<ts::http_client>(port());
    if (i % 4 == 3) {
      const std::int64_t amount = 700;
      auto r = client->post("/v1/transfers", merchant.key, transfer_body(shop, bank_account, amount),
                            ts::unique_key("payout"));
      if (r.status == 201) {
        paid_out += amount;
        EXPECT_GE(std::stoll(std::string(r.json().as_object().at("fromBalanceAfter").as_string())), 0);
      } else if (!(r.status == 422 && r.json().as_object().at("code").as_string() == "insufficient_funds")) {
        ++other;
        ADD_FAILURE() << r.status << " " << r.body;
      }
    } else {
      const auto& p = payers[static_cast<std::size_t>(i % 40)];
      auto r = client->post("/v1/transfers", p.who.key, transfer_body(p.account, shop, 250), ts::unique_key("payin"));
      if (r.status == 201) {
        paid_in += 250;
      } else {
        ++other;
        ADD_FAILURE() << r.status << " " << r.body;
      }
    }
  });
  EXPECT_EQ(other.load(), 0);
  EXPECT_GT(paid_out.load(), 0);
  EXPECT_EQ(ts::balance(c, merchant.key, shop), paid_in.load() - paid_out.load());
  EXPECT_EQ(ts::balance(c, bank.key, bank_account), paid_out.load());
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM account WHERE balance < 0 AND NOT allow_negative"), "0");
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// A payout succeeds as soon as committed credits cover it, swept or not: with sweeping off,
// money paid onto the shards is spendable at once.
TEST(HotUnswept, PayoutDrawsOnUnsweptShards) {
  ts::server_process server(hot_options("86400000"));
  ts::http_client c(server.port());
  const auto& op = server.operator_key();
  auto merchant = ts::create_principal(c, op, "merchant");
  const auto shop = ts::create_account(c, op, merchant.id, "EUR", 4);
  auto payers = make_payers(c, op, 10, 1000);
  for (const auto& p : payers) {
    auto r = c.post("/v1/transfers", p.who.key, transfer_body(p.account, shop, 100), ts::unique_key("in"));
    ASSERT_EQ(r.status, 201) << r.body;
  }
  auto account = c.get("/v1/accounts/" + std::to_string(shop), merchant.key).json().as_object();
  EXPECT_EQ(account.at("mainBalance").as_string(), "0");
  EXPECT_EQ(account.at("balance").as_string(), "1000");
  auto bank = ts::create_principal(c, op);
  const auto bank_account = ts::create_account(c, op, bank.id);
  auto too_much = c.post("/v1/transfers", merchant.key, transfer_body(shop, bank_account, 1001), ts::unique_key("out"));
  EXPECT_EQ(too_much.status, 422) << too_much.body;
  auto all = c.post("/v1/transfers", merchant.key, transfer_body(shop, bank_account, 1000), ts::unique_key("out"));
  EXPECT_EQ(all.status, 201) << all.body;
  EXPECT_EQ(ts::balance(c, merchant.key, shop), 0);
  EXPECT_EQ(ts::balance(c, bank.key, bank_account), 1000);
  EXPECT_TRUE(ts::reconciliation_ok(c, op));
}

// POST /v1/admin/sweeps, asked again (at most 10 times) while it answers 503: on a busy machine
// the sweeper's candidate read may wait past database.connection_wait_ms, or a sweep may fail
// (sweeping again is harmless). The answer's "sweeps" is the sum over the attempts.
ts::response sweep_now(ts::http_client& c, const std::string& op) {
  ts::response r;
  std::int64_t committed_before = 0;
  for (int attempt = 0; attempt < 10; ++attempt) {
    r = c.post("/v1/admin/sweeps", op, "");
    if (r.status != 503) break;
    const auto detail = std::string(r.json().as_object().at("detail").as_string());
    if (const auto were = detail.find(" were)"); were != std::string::npos) {
      committed_before += std::stoll(detail.substr(detail.rfind('(', were) + 1));
    }
    std::this_thread::sleep_for(std::chrono::seconds(std::stoi(r.header("Retry-After"))));
  }
  if (r.status == 200 && committed_before > 0) {
    auto body = r.json().as_object();
    body["sweeps"] = body.at("sweeps").as_int64() + committed_before;
    r.body = boost::json::serialize(body);
  }
  return r;
}

// A sweep moves every shard's balance into the main row as a SWEEP transaction; the total
// is unchanged, shards with nothing to move are skipped, and entries list the shards' entries.
TEST(HotUnswept, SweepConsolidatesShards) {
  ts::server_process server(hot_options("86400000"));
  ts::http_client c(server.port());
  const auto& op = server.operator_key();
  auto merchant = ts::create_principal(c, op, "merchant");
  const auto shop = ts::create_account(c, op, merchant.id, "EUR", 4);
  auto payers = make_payers(c, op, 6, 1000);
  for (const auto& p : payers) {
    ASSERT_EQ(c.post("/v1/transfers", p.who.key, transfer_body(p.account, shop, 300), ts::unique_key("in")).status,
              201);
  }
  const auto sweeps_before =
      std::stoll(ts::query_value("SELECT count(*) FROM journal_transaction WHERE type = 'SWEEP'"));
  auto sweep = sweep_now(c, op);
  ASSERT_EQ(sweep.status, 200) << sweep.body;
  const auto shards_with_money =
      std::stoll(ts::query_value("SELECT count(DISTINCT e.account_id) FROM ledger_entry e JOIN account a ON a.id = "
                                 "e.account_id WHERE a.parent_id = " +
                                 std::to_string(shop)));
  EXPECT_GE(sweep.json().as_object().at("sweeps").as_int64(), shards_with_money);
  EXPECT_GE(
      std::stoll(ts::query_value("SELECT count(*) FROM journal_transaction WHERE type = 'SWEEP'")) - sweeps_before,
      shards_with_money);
  // Exactly one sweep per shard of this account that held money, none for the empty ones.
  EXPECT_EQ(
      std::stoll(ts::query_value(
          "SELECT count(*) FROM journal_transaction j WHERE j.type = 'SWEEP' AND EXISTS (SELECT 1 FROM ledger_entry e"
          " JOIN account a ON a.id = e.account_id WHERE e.transaction_id = j.id AND a.parent_id = " +
          std::to_string(shop) + ")")),
      shards_with_money);
  auto account = c.get("/v1/accounts/" + std::to_string(shop), merchant.key).json().as_object();
  EXPECT_EQ(account.at("mainBalance").as_string(), "1800");
  EXPECT_EQ(account.at("balance").as_string(), "1800");
  for (const auto& s : account.at("shards").as_array()) EXPECT_EQ(s.as_object().at("balance").as_string(), "0");
  // A second sweep finds nothing to move.
  EXPECT_EQ(sweep_now(c, op).json().as_object().at("sweeps").as_int64(), 0);
  // The entries of a hot account include its shards' entries, in order.
  auto entries = c.get("/v1/accounts/" + std::to_string(shop) + "/entries?limit=500", merchant.key);
  ASSERT_EQ(entries.status, 200);
  const auto page = entries.json();
  const auto& list = page.as_object().at("entries").as_array();
  EXPECT_EQ(list.size(), static_cast<std::size_t>(6 + 2 * shards_with_money));
  std::int64_t previous = 0;
  for (const auto& e : list) {
    EXPECT_GT(e.as_object().at("id").as_int64(), previous);
    previous = e.as_object().at("id").as_int64();
  }
  EXPECT_TRUE(ts::reconciliation_ok(c, op));
}

// An operator's sweep sweeps every hot account with money on its shards, a page at a time from the
// lowest id, whatever the periodic sweeps reached: with two accounts a page, five merchants made
// after every other hot account of the database are all swept, and none is left deferred.
TEST(HotUnswept, AnOperatorsSweepReachesEveryPage) {
  auto options = hot_options("86400000");
  options.env["WALLET_LEDGER_SWEEP_ACCOUNTS_PER_PAGE"] = "2";
  ts::server_process server(options);
  ts::http_client c(server.port());
  const auto& op = server.operator_key();
  auto payers = make_payers(c, op, 1, 1000);
  const auto shops = paid_merchants(c, op, payers[0], 5);
  ASSERT_EQ(shops.size(), 5U);
  auto sweep = sweep_now(c, op);
  ASSERT_EQ(sweep.status, 200) << sweep.body;
  EXPECT_GE(sweep.json().as_object().at("sweeps").as_int64(), 5);
  EXPECT_EQ(sweep.json().as_object().at("deferred").as_int64(), 0);
  for (const auto shop : shops) {
    const auto id = std::to_string(shop);
    EXPECT_EQ(ts::query_value("SELECT sum(balance) FROM account WHERE parent_id = " + id), "0") << shop;
    EXPECT_EQ(ts::query_value("SELECT balance FROM account WHERE id = " + id), "100") << shop;
  }
  EXPECT_TRUE(ts::reconciliation_ok(c, op));
}

// A sweep the database refuses fails alone: the operator's sweep commits the others, answers 503
// saying how many failed, and its audit row (found by the request's id: other suites' servers
// sweep the same database) counts them. Asked again once the refusal is gone, it
// sweeps what was left.
TEST(HotUnswept, AFailedSweepIsReportedAndAudited) {
  ts::server_process server(hot_options("86400000"));
  ts::http_client c(server.port());
  const auto& op = server.operator_key();
  auto payers = make_payers(c, op, 1, 1000);
  const auto shops = paid_merchants(c, op, payers[0], 2);
  ASSERT_EQ(shops.size(), 2U);
  const auto refused_shard =
      ts::query_value("SELECT id FROM account WHERE balance > 0 AND parent_id = " + std::to_string(shops[0]));
  ASSERT_FALSE(refused_shard.empty());
  ts::test_trigger refuse("sweep_test_refuses_" + refused_shard, "account",
                          "OLD.id = " + refused_shard + " AND NEW.balance < OLD.balance",
                          "RAISE EXCEPTION 'refused by the test' USING ERRCODE = 'check_violation';");

  // A 503 that swept nothing (the candidates' read waited too long on a busy machine) is asked again.
  // Each attempt has a request id of its own, which its audit row carries.
  ts::response r;
  std::string request_id;
  for (int attempt = 0; attempt < 10; ++attempt) {
    request_id = ts::unique_key("sweep").substr(0, 60);
    r = c.request("POST", "/v1/admin/sweeps", "", {{"Authorization", "Bearer " + op}, {"X-Request-Id", request_id}});
    if (r.status != 503 || r.body.find("could not be committed") != std::string::npos) break;
  }
  ASSERT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("sweeps could not be committed"), std::string::npos) << r.body;
  const auto audited = "FROM audit_log WHERE action = 'sweep.run' AND request_id = " + ts::sql_literal(request_id);
  EXPECT_EQ(ts::query_value("SELECT count(*) " + audited), "1");
  EXPECT_GE(std::stoll(ts::query_value("SELECT detail->>'failed' " + audited)), 1);
  EXPECT_NE(ts::query_value("SELECT detail->>'error' " + audited).find("could not be committed"), std::string::npos);
  EXPECT_EQ(ts::query_value("SELECT balance FROM account WHERE id = " + std::to_string(shops[1])), "100");
  EXPECT_EQ(ts::query_value("SELECT balance FROM account WHERE id = " + refused_shard), "100");
  EXPECT_EQ(ts::query_value("SELECT balance FROM account WHERE id = " + std::to_string(shops[0])), "0");

  refuse.drop();
  r = sweep_now(c, op);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ts::query_value("SELECT balance FROM account WHERE id = " + std::to_string(shops[0])), "100");
  EXPECT_EQ(ts::query_value("SELECT balance FROM account WHERE id = " + refused_shard), "0");
  EXPECT_EQ(r.json().as_object().at("deferred").as_int64(), 0);
  EXPECT_TRUE(ts::reconciliation_ok(c, op));
}

// An account made hot after it was created gets its shards, and payments then land on them.
TEST(HotUnswept, MakeHotLater) {
  ts::server_process server(hot_options("86400000"));
  ts::http_client c(server.port());
  const auto& op = server.operator_key();
  auto merchant = ts::create_principal(c, op, "merchant");
  const auto shop = ts::create_account(c, op, merchant.id);
  auto r = c.post("/v1/accounts/" + std::to_string(shop) + "/hot", op, R"({"shards":3})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().as_object().at("shards").as_array().size(), 3u);
  auto too_many = c.post("/v1/accounts/" + std::to_string(shop) + "/hot", op, R"({"shards":100000})");
  EXPECT_EQ(too_many.status, 400) << too_many.body;
  auto payers = make_payers(c, op, 3, 500);
  for (const auto& p : payers) {
    ASSERT_EQ(c.post("/v1/transfers", p.who.key, transfer_body(p.account, shop, 200), ts::unique_key("in")).status,
              201);
  }
  EXPECT_EQ(ts::query_value("SELECT balance FROM account WHERE id = " + std::to_string(shop)), "0");
  EXPECT_EQ(ts::balance(c, merchant.key, shop), 600);
  EXPECT_TRUE(ts::reconciliation_ok(c, op));
}

// A frozen account made hot (or given more shards) takes no credit on its new shards: they are
// made in its status, and a payment to it is refused as before. A shard's id names no account to
// freeze or unfreeze (404), so a shard's status never parts from its account's.
TEST(HotUnswept, AFrozenAccountMadeHotStaysFrozen) {
  ts::server_process server(hot_options("86400000"));
  ts::http_client c(server.port());
  const auto& op = server.operator_key();
  auto merchant = ts::create_principal(c, op, "merchant");
  const auto shop = ts::create_account(c, op, merchant.id);
  auto r = c.post("/v1/accounts/" + std::to_string(shop) + "/freeze", op, "");
  ASSERT_EQ(r.status, 200) << r.body;
  r = c.post("/v1/accounts/" + std::to_string(shop) + "/hot", op, R"({"shards":3})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(
      ts::query_value("SELECT count(*) FROM account WHERE status = 'frozen' AND parent_id = " + std::to_string(shop)),
      "3");
  auto payers = make_payers(c, op, 3, 500);
  for (const auto& p : payers) {
    r = c.post("/v1/transfers", p.who.key, transfer_body(p.account, shop, 200), ts::unique_key("in"));
    EXPECT_EQ(r.status, 422) << r.body;
    EXPECT_EQ(ts::balance(c, p.who.key, p.account), 500);
  }
  EXPECT_EQ(ts::balance(c, merchant.key, shop), 0);

  const auto shard = ts::query_value("SELECT min(id) FROM account WHERE parent_id = " + std::to_string(shop));
  r = c.post("/v1/accounts/" + shard + "/unfreeze", op, "");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(ts::query_value("SELECT status FROM account WHERE id = " + shard), "frozen");
  r = c.post("/v1/accounts/" + std::to_string(shop) + "/unfreeze", op, "");
  ASSERT_EQ(r.status, 200) << r.body;
  r = c.post("/v1/transfers", payers[0].who.key, transfer_body(payers[0].account, shop, 200), ts::unique_key("in"));
  EXPECT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(ts::balance(c, merchant.key, shop), 200);
  EXPECT_TRUE(ts::reconciliation_ok(c, op));
}

}  // namespace
