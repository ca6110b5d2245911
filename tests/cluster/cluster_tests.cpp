// Two server nodes on one ledger (docs/scaling.md), as real processes over the private PostgreSQL
// and Redis: they split the partitions; a debit sent to the node that does not hold its account's
// partition is forwarded to the holder through CAF's middleman and answered as if served there
// (replays included); concurrent debits of one account through both nodes spend exactly what it
// holds; and when a node is killed, the other takes its partitions over and serves their debits.

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include <csignal>
#include <memory>
#include <string>

#include "cluster/ownership.hpp"
#include "persistence/database.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/net.hpp"
#include "tests/support/server_process.hpp"
#include "tests/support/support.hpp"

namespace {

using namespace std::chrono_literals;
using namespace test_support;

// The partition count every test of this build uses (tests/cluster/lease_tests.cpp).
constexpr int k_partitions = 16;

server_process::options node_options(const std::string& node_id) {
  server_process::options o;
  o.env = unlimited_rates();
  o.env["WALLET_CLUSTER_ENABLED"] = "true";
  o.env["WALLET_CLUSTER_NODE_ID"] = node_id;
  o.env["WALLET_CLUSTER_PARTITIONS"] = std::to_string(k_partitions);
  o.env["WALLET_CLUSTER_LEASE_TTL_MS"] = "1500";
  o.env["WALLET_CLUSTER_LEASE_RENEW_MS"] = "300";
  o.env["WALLET_CLUSTER_ADVERTISE_ADDRESS"] = "127.0.0.1:" + std::to_string(free_port());
  return o;
}

class two_nodes : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      // Nobody holds anything: leases another suite left (a killed node's) are cleared first.
      persistence::connection_options o;
      o.url = owner_database_url();
      auto owner = persistence::connect(o);
      pqxx::work txn(*owner);
      txn.exec("UPDATE partition_lease SET node_id = NULL, expires_at = '-infinity'");
      txn.exec("DELETE FROM cluster_node");
      txn.commit();
    }
    a_ = std::make_unique<server_process>(node_options(unique_key("a")));
    b_ = std::make_unique<server_process>(node_options(unique_key("b")));
    // Each ends with half the partitions: wait for that, not for time.
    ASSERT_TRUE(eventually(
        [&] {
          return metric_value(a_->port(), "wallet_cluster_partitions_held") == k_partitions / 2 &&
                 metric_value(b_->port(), "wallet_cluster_partitions_held") == k_partitions / 2;
        },
        30s, 50ms))
        << "a holds " << metric_value(a_->port(), "wallet_cluster_partitions_held") << ", b holds "
        << metric_value(b_->port(), "wallet_cluster_partitions_held");
  }

  // The node id holding the partition of `account`, from the lease table.
  std::string holder_of(std::int64_t account) {
    persistence::connection_options o;
    o.url = owner_database_url();
    auto conn = persistence::connect(o);
    pqxx::nontransaction txn(*conn);
    return txn
        .exec1("SELECT COALESCE(node_id, '') FROM partition_lease WHERE partition = " +
               std::to_string(cluster::partition_of(account, k_partitions)))[0]
        .as<std::string>();
  }

  std::unique_ptr<server_process> a_;
  std::unique_ptr<server_process> b_;
};

TEST_F(two_nodes, a_debit_reaches_the_holder_of_its_partition_from_either_node) {
  http_client ca(a_->port()), cb(b_->port());
  const auto op = a_->operator_key();
  const auto user = create_principal(ca, op);
  const auto payee = create_account(ca, op, user.id);
  // A payer whose partition b holds, so that a must forward its debits.
  std::int64_t payer = 0;
  for (int i = 0; i < 64 && payer == 0; ++i) {
    const auto candidate = create_account(ca, op, user.id);
    if (holder_of(candidate).rfind("b-", 0) == 0) payer = candidate;
  }
  ASSERT_NE(payer, 0) << "no account of 64 fell in one of b's 8 partitions";
  deposit(ca, op, payer, 1'000);

  const auto key = unique_key("fwd");
  auto first = ca.post("/v1/transfers", user.key, transfer_body(payer, payee, 300), key);
  ASSERT_EQ(first.status, 201) << first.body;
  EXPECT_GE(metric_value(a_->port(), "wallet_cluster_forwarded_requests_total"), 1);
  // A replay through either node answers the stored receipt.
  auto again = ca.post("/v1/transfers", user.key, transfer_body(payer, payee, 300), key);
  EXPECT_EQ(again.status, 201);
  EXPECT_EQ(again.body, first.body);
  EXPECT_EQ(again.header("Idempotent-Replayed"), "true");
  auto direct = cb.post("/v1/transfers", user.key, transfer_body(payer, payee, 300), key);
  EXPECT_EQ(direct.body, first.body);
  EXPECT_EQ(balance(ca, user.key, payer), 700);
  EXPECT_EQ(balance(cb, user.key, payee), 300);
}

TEST_F(two_nodes, concurrent_debits_through_both_nodes_spend_exactly_what_the_account_holds) {
  http_client setup(a_->port());
  const auto op = a_->operator_key();
  const auto user = create_principal(setup, op);
  const auto payer = create_account(setup, op, user.id);
  const auto payee = create_account(setup, op, user.id);
  deposit(setup, op, payer, 1'000);
  transfer_tally tally;
  concurrently(40, 8, [&](int i, int) {
    http_client c(i % 2 == 0 ? a_->port() : b_->port());
    tally.count(c.post("/v1/transfers", user.key, transfer_body(payer, payee, 100), unique_key("race")));
  });
  EXPECT_EQ(tally.created.load(), 10);
  EXPECT_EQ(tally.refused.load(), 30);
  EXPECT_EQ(tally.other.load(), 0);
  EXPECT_EQ(balance(setup, user.key, payer), 0);
  EXPECT_EQ(balance(setup, user.key, payee), 1'000);
}

TEST_F(two_nodes, a_killed_nodes_partitions_are_taken_over_and_served) {
  http_client ca(a_->port());
  const auto op = a_->operator_key();
  const auto user = create_principal(ca, op);
  const auto payee = create_account(ca, op, user.id);
  std::int64_t payer = 0;
  for (int i = 0; i < 64 && payer == 0; ++i) {
    const auto candidate = create_account(ca, op, user.id);
    if (holder_of(candidate).rfind("b-", 0) == 0) payer = candidate;
  }
  ASSERT_NE(payer, 0);
  deposit(ca, op, payer, 500);

  b_->kill();
  // Within the TTL plus a renewal interval (1.8 s here); bounded generously, never timed.
  ASSERT_TRUE(eventually([&] { return metric_value(a_->port(), "wallet_cluster_partitions_held") == k_partitions; },
                         30s, 50ms));
  auto r = ca.post("/v1/transfers", user.key, transfer_body(payer, payee, 200), unique_key("after"));
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(balance(ca, user.key, payer), 300);
  EXPECT_TRUE(reconciliation_ok(ca, op));
}

}  // namespace
