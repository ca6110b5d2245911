// End-to-end tests of the account actors' lifecycle: idle actors passivate, and the number of
// live actors is bounded.

#include <gtest/gtest.h>

#include <thread>

#include "tests/support/support.hpp"

namespace ts = test_support;
using test_support::transfer_body;
using test_support::concurrently;

namespace {

// A metric's value from /metrics; -1 when it is missing.
std::int64_t metric(ts::http_client& c, const std::string& name) {
  auto r = c.request("GET", "/metrics");
  const std::string needle = "\n" + name + " ";
  auto at = r.body.find(needle);
  if (at == std::string::npos) return -1;
  return std::stoll(r.body.substr(at + needle.size()));
}

std::int64_t live_actors(ts::http_client& c) { return metric(c, "wallet_account_actors_live"); }

// Actors idle longer than actors.account_idle_ms stop (the live gauge returns to zero), and a
// later debit of the same account spawns a fresh actor that reloads the committed balance.
TEST(AccountActors, IdleActorsPassivateAndComeBack) {
  ts::server_process::options o;
  o.env["WALLET_ACTORS_ACCOUNT_IDLE_MS"] = "200";
  ts::server_process server(o);
  ts::http_client c(server.port());
  const auto& op = server.operator_key();
  auto alice = ts::create_principal(c, op);
  auto bob = ts::create_principal(c, op);
  std::vector<std::int64_t> accounts;
  for (int i = 0; i < 5; ++i) {
    accounts.push_back(ts::create_account(c, op, alice.id));
    ts::deposit(c, op, accounts.back(), 1000);
  }
  const auto payee = ts::create_account(c, op, bob.id);
  for (auto a : accounts) {
    ASSERT_EQ(c.post("/v1/transfers", alice.key, transfer_body(a, payee, 100), ts::unique_key("p")).status, 201);
  }
  EXPECT_EQ(live_actors(c), 5);
  std::int64_t live = -1;
  for (int i = 0; i < 100 && live != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    live = live_actors(c);
  }
  EXPECT_EQ(live, 0);
  auto again = c.post("/v1/transfers", alice.key, transfer_body(accounts[0], payee, 900), ts::unique_key("p"));
  EXPECT_EQ(again.status, 201) << again.body;
  auto over = c.post("/v1/transfers", alice.key, transfer_body(accounts[0], payee, 1), ts::unique_key("p"));
  EXPECT_EQ(over.status, 422) << over.body;
  EXPECT_EQ(ts::balance(c, bob.key, payee), 1400);
}

// With room for 16 live actors, debits of a 17th account are shed with 503 server_busy and a
// Retry-After, and nothing is written for them.
TEST(AccountActors, LiveActorsAreBounded) {
  ts::server_process::options o;
  o.env["WALLET_ACTORS_ACCOUNTS_LIVE_MAX"] = "16";
  o.env["WALLET_ACTORS_REGISTRY_SHARDS"] = "1";
  ts::server_process server(o);
  ts::http_client c(server.port());
  const auto& op = server.operator_key();
  auto alice = ts::create_principal(c, op);
  auto bob = ts::create_principal(c, op);
  const auto payee = ts::create_account(c, op, bob.id);
  std::vector<std::int64_t> accounts;
  for (int i = 0; i < 17; ++i) {
    accounts.push_back(ts::create_account(c, op, alice.id));
    ts::deposit(c, op, accounts.back(), 100);
  }
  for (int i = 0; i < 16; ++i) {
    auto r = c.post("/v1/transfers", alice.key, transfer_body(accounts[static_cast<std::size_t>(i)], payee, 10), ts::unique_key("b"));
    ASSERT_EQ(r.status, 201) << r.body;
  }
  auto shed = c.post("/v1/transfers", alice.key, transfer_body(accounts[16], payee, 10), ts::unique_key("b"));
  EXPECT_EQ(shed.status, 503) << shed.body;
  EXPECT_EQ(shed.json().as_object().at("code").as_string(), "server_busy");
  EXPECT_FALSE(shed.header("Retry-After").empty());
  EXPECT_EQ(live_actors(c), 16);
  EXPECT_EQ(ts::balance(c, alice.key, accounts[16]), 100);
  EXPECT_EQ(ts::balance(c, bob.key, payee), 160);
}

}  // namespace

// A restarted server preloads API keys and account facts: a returning client's first payment
// after the restart is served without a single database read (the writer still checks funds
// under its row lock), and its balance stays exact.
TEST(AccountActors, RestartedServerServesReturningClientsWithoutReads) {
  ts::server_process::options o;
  // No background reads (sweeps, reconciliation) during the measurement.
  o.env["WALLET_LEDGER_SWEEP_INTERVAL_MS"] = "3600000";
  o.env["WALLET_LEDGER_RECONCILE_INTERVAL_S"] = "0";
  ts::principal alice, bob;
  std::int64_t from = 0, to = 0;
  {
    ts::server_process first(o);
    ts::http_client c(first.port());
    alice = ts::create_principal(c, first.operator_key());
    bob = ts::create_principal(c, first.operator_key());
    from = ts::create_account(c, first.operator_key(), alice.id);
    to = ts::create_account(c, first.operator_key(), bob.id);
    ts::deposit(c, first.operator_key(), from, 1000);
    ASSERT_EQ(first.terminate(), 0);
  }
  ts::server_process second(o);
  ts::http_client c(second.port());
  EXPECT_GE(metric(c, "wallet_preloaded_api_keys"), 3);  // the operator, alice and bob at least
  EXPECT_GE(metric(c, "wallet_preloaded_accounts"), 2);
  const auto reads_before = metric(c, "wallet_reader_jobs_total");
  ASSERT_GE(reads_before, 0);
  auto paid = c.post("/v1/transfers", alice.key, transfer_body(from, to, 300), ts::unique_key("p"));
  ASSERT_EQ(paid.status, 201) << paid.body;
  EXPECT_EQ(metric(c, "wallet_reader_jobs_total"), reads_before);
  auto over = c.post("/v1/transfers", alice.key, transfer_body(from, to, 701), ts::unique_key("p"));
  EXPECT_EQ(over.status, 422) << over.body;
  EXPECT_EQ(ts::balance(c, bob.key, to), 300);
  EXPECT_EQ(ts::balance(c, alice.key, from), 700);
}
