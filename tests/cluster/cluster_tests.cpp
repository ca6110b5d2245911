// Two server nodes on one ledger (docs/scaling.md), as real processes over the private PostgreSQL
// and Redis: they split the partitions; a debit sent to the node that does not hold its account's
// partition is forwarded to the holder through CAF's middleman and answered as if served there
// (replays included); concurrent debits of one account through both nodes spend exactly what it
// holds; and when a node is killed, the other takes its partitions over and serves their debits.

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include <atomic>
#include <chrono>
#include <csignal>
#include <future>
#include <map>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>
#include <memory>
#include <string>

#include "cluster/ownership.hpp"
#include "http/signature.hpp"
#include "persistence/database.hpp"
#include "tests/support/database.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/net.hpp"
#include "tests/support/process.hpp"
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
  // Ten renewals to a TTL: a node stalled for a second on a busy machine keeps its partitions, so
  // the tallies of the tests below do not move under them.
  o.env["WALLET_CLUSTER_LEASE_TTL_MS"] = "3000";
  o.env["WALLET_CLUSTER_LEASE_RENEW_MS"] = "300";
  o.env["WALLET_CLUSTER_ADVERTISE_ADDRESS"] = "127.0.0.1:" + std::to_string(free_port());
  return o;
}

// Starts `count` nodes and waits until they have split the partitions among them.
class cluster_test : public ::testing::Test {
 protected:
  void start_nodes(int count, const std::map<std::string, std::string>& env = {}) {
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
    for (int i = 0; i < count; ++i) {
      names_.push_back(unique_key(std::string(1, static_cast<char>('a' + i))));
      auto o = node_options(names_.back());
      for (const auto& [name, value] : env) o.env[name] = value;
      nodes_.push_back(std::make_unique<server_process>(std::move(o)));
    }
    // Every node ends with its share (ceil(P / count) at most): wait for that, not for time.
    ASSERT_TRUE(eventually([&] { return settled(); }, 30s, 50ms)) << held_text();
  }

  bool settled() const {
    const int share = (k_partitions + static_cast<int>(nodes_.size()) - 1) / static_cast<int>(nodes_.size());
    int total = 0;
    for (const auto& n : nodes_) {
      const auto held = static_cast<int>(metric_value(n->port(), "wallet_cluster_partitions_held"));
      if (held <= 0 || held > share) return false;
      total += held;
    }
    return total == k_partitions;
  }
  std::string held_text() const {
    std::string text = "partitions held:";
    for (const auto& n : nodes_)
      text += " " + std::to_string(metric_value(n->port(), "wallet_cluster_partitions_held"));
    return text;
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

  // A new account of `owner` whose partition node `i` holds.
  std::int64_t account_held_by(http_client& c, std::int64_t owner, std::size_t i) {
    for (int tries = 0; tries < 200; ++tries) {
      const auto candidate = create_account(c, nodes_[0]->operator_key(), owner);
      if (holder_of(candidate) == names_[i]) return candidate;
    }
    ADD_FAILURE() << "no account of 200 fell in a partition of node " << names_[i];
    return 0;
  }

  // A new principal with a payee account and a payer account (holding `deposited`) whose partition
  // node `i` holds, made through `c`.
  struct payer_and_payee {
    principal user;
    std::int64_t payee = 0;
    std::int64_t payer = 0;
  };
  payer_and_payee payer_held_by(http_client& c, std::size_t i, std::int64_t deposited) {
    const auto op = nodes_[0]->operator_key();
    payer_and_payee out;
    out.user = create_principal(c, op);
    out.payee = create_account(c, op, out.user.id);
    out.payer = account_held_by(c, out.user.id, i);
    if (out.payer != 0) deposit(c, op, out.payer, deposited);
    return out;
  }

  server_process& node(std::size_t i) { return *nodes_.at(i); }

  std::vector<std::string> names_;
  std::vector<std::unique_ptr<server_process>> nodes_;
};

class two_nodes : public cluster_test {
 protected:
  void SetUp() override { start_nodes(2); }
  server_process& a() { return node(0); }
  server_process& b() { return node(1); }
};

// Two nodes that allow requests whose key they must read at 1 a second (burst 2) per client address.
class two_nodes_with_a_small_allowance : public cluster_test {
 protected:
  void SetUp() override {
    start_nodes(2, {{"WALLET_AUTH_UNAUTHENTICATED_PER_SECOND", "1"}, {"WALLET_AUTH_UNAUTHENTICATED_BURST", "2"}});
  }
};

// Two nodes whose requests have 2 s (but a batch's 30 s), and whose writers wait for a row up to a
// minute.
class two_nodes_with_short_deadlines : public cluster_test {
 protected:
  void SetUp() override {
    start_nodes(2, {{"WALLET_HTTP_REQUEST_DEADLINE_MS", "2000"}, {"WALLET_DATABASE_LOCK_TIMEOUT_MS", "60000"}});
  }
};

class three_nodes : public cluster_test {
 protected:
  void SetUp() override { start_nodes(3); }
};

TEST_F(two_nodes, a_debit_reaches_the_holder_of_its_partition_from_either_node) {
  http_client ca(a().port()), cb(b().port());
  // A payer whose partition b holds, so that a must forward its debits.
  const auto [user, payee, payer] = payer_held_by(ca, 1, 1'000);
  ASSERT_NE(payer, 0);

  const auto key = unique_key("fwd");
  auto first = ca.post("/v1/transfers", user.key, transfer_body(payer, payee, 300), key);
  ASSERT_EQ(first.status, 201) << first.body;
  EXPECT_GE(metric_value(a().port(), "wallet_cluster_forwarded_requests_total"), 1);
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

// Credits are committed by whichever node receives them, and that node's writer tells only its own
// actors. The holder's actor, which learnt a balance of 0, must not refuse a debit that a deposit
// made through the other node pays for: its writer decides funds under the row lock.
TEST_F(two_nodes, credits_made_through_another_node_are_spent_by_the_holder) {
  http_client ca(a().port()), cb(b().port());
  const auto op = a().operator_key();
  const auto [user, payee, payer] = payer_held_by(ca, 1, 100);
  ASSERT_NE(payer, 0);
  auto first = cb.post("/v1/transfers", user.key, transfer_body(payer, payee, 100), unique_key("all"));
  ASSERT_EQ(first.status, 201) << first.body;  // b's actor now knows the payer holds 0
  deposit(ca, op, payer, 500);
  auto second = cb.post("/v1/transfers", user.key, transfer_body(payer, payee, 300), unique_key("after"));
  EXPECT_EQ(second.status, 201) << second.body;
  auto third = cb.post("/v1/transfers", user.key, transfer_body(payer, payee, 300), unique_key("beyond"));
  EXPECT_EQ(third.status, 422) << third.body;
  EXPECT_EQ(balance(cb, user.key, payer), 200);
  EXPECT_EQ(balance(ca, user.key, payee), 400);
}

// A node forwards a debit only after it checked the key. The holder, whose key cache is cold (the
// principals were made through the other node), must not count those keys against one allowance
// for all forwarded requests (their address is "cluster"): ten new payers' debits all pass.
TEST_F(two_nodes_with_a_small_allowance, forwarded_requests_do_not_share_one_allowance_for_new_keys) {
  http_client ca(node(0).port());
  // Every debit here reaches node 1 forwarded: each answer counts in node 1's capacity (which
  // bounds the requests it admits, forwarded ones included), as its own clients' answers do.
  const auto answered_before = metric_value(node(1).port(), "wallet_http_answers_total");
  for (int i = 0; i < 10; ++i) {
    const auto [user, payee, payer] = payer_held_by(ca, 1, 10);
    ASSERT_NE(payer, 0);
    auto r = ca.post("/v1/transfers", user.key, transfer_body(payer, payee, 10), unique_key("cold"));
    EXPECT_EQ(r.status, 201) << "payer " << i << ": " << r.body;
  }
  EXPECT_GE(metric_value(node(0).port(), "wallet_cluster_forwarded_requests_total"), 10);
  EXPECT_GE(metric_value(node(1).port(), "wallet_http_answers_total"), answered_before + 10);
}

// A batch whose payer's partition the other node holds is forwarded there, atomic or not, and
// answered as the holder answers it; a replay through either node is the same answer.
TEST_F(two_nodes, a_batch_reaches_the_holder_of_its_payers_partition) {
  http_client ca(a().port()), cb(b().port());
  const auto [user, payee, payer] = payer_held_by(ca, 1, 1'000);
  ASSERT_NE(payer, 0);
  const auto items = "[" + transfer_body(payer, payee, 100) + "," + transfer_body(payer, payee, 200) + "]";
  for (const bool atomic : {true, false}) {
    const auto key = unique_key(atomic ? "atomic" : "plain");
    const auto body = std::string(R"({"atomic":)") + (atomic ? "true" : "false") + R"(,"transfers":)" + items + "}";
    const auto forwarded_before = metric_value(a().port(), "wallet_cluster_forwarded_requests_total");
    auto first = ca.post("/v1/transfers/batch", user.key, body, key);
    ASSERT_EQ(first.status, 201) << "atomic " << atomic << ": " << first.body;
    EXPECT_GT(metric_value(a().port(), "wallet_cluster_forwarded_requests_total"), forwarded_before);
    const auto results = first.json().as_object().at("results").as_array();
    ASSERT_EQ(results.size(), 2u);
    for (const auto& item : results) EXPECT_EQ(item.as_object().at("status").as_int64(), 201) << first.body;
    auto again = cb.post("/v1/transfers/batch", user.key, body, key);
    EXPECT_EQ(again.status, 201) << again.body;
    EXPECT_EQ(again.body, first.body);
  }
  EXPECT_EQ(balance(ca, user.key, payer), 400);
  EXPECT_EQ(balance(cb, user.key, payee), 600);
}

// A forward waits for what is left of its own route's deadline, not for three quarters of the
// default one: a batch (whose route allows 30 s) that the holder's writer takes longer than the
// default deadline to commit is answered by the holder, through the node that forwarded it. The
// payer's row is held until the holder's writer has waited longer than that deadline.
TEST_F(two_nodes_with_short_deadlines, a_forwarded_batch_has_its_routes_deadline) {
  http_client ca(node(0).port());
  const auto [user, payee, payer] = payer_held_by(ca, 1, 1'000);
  ASSERT_NE(payer, 0);
  const auto body = R"({"atomic":false,"transfers":[)" + transfer_body(payer, payee, 100) + "]}";
  account_lock lock({payer});
  auto answer = std::async(std::launch::async, [&] {
    http_client c(node(0).port());
    return c.post("/v1/transfers/batch", user.key, body, unique_key("slow"));
  });
  ASSERT_TRUE(eventually([&] { return lock.longest_wait() > 2'500ms; }, 20s, 50ms))
      << "the holder's writer never waited for the payer's row";
  lock.release();
  const auto r = answer.get();
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.json().as_object().at("results").as_array().at(0).as_object().at("status").as_int64(), 201);
  EXPECT_GE(metric_value(node(0).port(), "wallet_cluster_forwarded_requests_total"), 1);
  EXPECT_EQ(balance(ca, user.key, payer), 900);
}

TEST_F(two_nodes, concurrent_debits_through_both_nodes_spend_exactly_what_the_account_holds) {
  http_client setup(a().port());
  const auto op = a().operator_key();
  const auto user = create_principal(setup, op);
  const auto payer = create_account(setup, op, user.id);
  const auto payee = create_account(setup, op, user.id);
  deposit(setup, op, payer, 1'000);
  transfer_tally tally;
  concurrently(40, 8, [&](int i, int) {
    http_client c(i % 2 == 0 ? a().port() : b().port());
    tally.count(c.post("/v1/transfers", user.key, transfer_body(payer, payee, 100), unique_key("race")));
  });
  EXPECT_EQ(tally.created.load(), 10);
  EXPECT_EQ(tally.refused.load(), 30);
  EXPECT_EQ(tally.other.load(), 0);
  EXPECT_EQ(balance(setup, user.key, payer), 0);
  EXPECT_EQ(balance(setup, user.key, payee), 1'000);
}

// A server started with the node id of a running node (a configuration copied without changing
// it) waits once for that node's heartbeat to lapse, then refuses to start. The running node keeps
// its partitions and serves on: two processes never pass one node's fence.
TEST_F(two_nodes, a_server_with_a_running_nodes_id_refuses_to_start) {
  const auto held = metric_value(a().port(), "wallet_cluster_partitions_held");
  auto env = current_environment();
  env["WALLET_HTTP_PORT"] = std::to_string(free_port());
  env["WALLET_AUTH_BOOTSTRAP_KEY"] = a().operator_key();
  env["WALLET_DATABASE_URL"] = database_url();
  env["WALLET_DATABASE_OWNER_URL"] = owner_database_url();
  env["WALLET_REDIS_URL"] = redis_url();
  for (const auto& [name, value] : node_options(names_[0]).env) env[name] = value;
  const auto r = run_program(server_binary(), {}, env, 60s);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("node id " + names_[0] + " is in use by a running server"), std::string::npos) << r.output;

  EXPECT_EQ(metric_value(a().port(), "wallet_cluster_partitions_held"), held);
  EXPECT_EQ(metric_value(a().port(), "wallet_cluster_node_id_in_use_elsewhere"), 0);
  http_client ca(a().port());
  const auto [user, payee, payer] = payer_held_by(ca, 0, 500);
  ASSERT_NE(payer, 0);
  auto paid = ca.post("/v1/transfers", user.key, transfer_body(payer, payee, 200), unique_key("same-id"));
  EXPECT_EQ(paid.status, 201) << paid.body;
}

TEST_F(two_nodes, a_killed_nodes_partitions_are_taken_over_and_served) {
  http_client ca(a().port());
  const auto op = a().operator_key();
  const auto user = create_principal(ca, op);
  const auto payee = create_account(ca, op, user.id);
  const auto payer = account_held_by(ca, user.id, 1);
  ASSERT_NE(payer, 0);
  deposit(ca, op, payer, 500);

  b().kill();
  nodes_.erase(nodes_.begin() + 1);
  // Within the TTL plus a renewal interval (3.3 s here); bounded generously, never timed.
  ASSERT_TRUE(eventually([&] { return metric_value(a().port(), "wallet_cluster_partitions_held") == k_partitions; },
                         30s, 50ms));
  auto r = ca.post("/v1/transfers", user.key, transfer_body(payer, payee, 200), unique_key("after"));
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(balance(ca, user.key, payer), 300);
  EXPECT_TRUE(reconciliation_ok(ca, op));
}

TEST_F(two_nodes, a_paused_node_commits_no_debit_under_the_lease_it_lost) {
  // b debits its account from several clients; it is paused (SIGSTOP) past its lease, a takes the
  // partition over and debits the account too; b resumes. Every answer is a 201 or a 503 with
  // Retry-After; each 503 is retried with its key until it is decided; and in the account's
  // entries, in commit order, no debit committed under an epoch older than one before it.
  http_client setup(a().port());
  const auto op = a().operator_key();
  const auto user = create_principal(setup, op);
  const auto payee = create_account(setup, op, user.id);
  const auto payer = account_held_by(setup, user.id, 1);
  ASSERT_NE(payer, 0);
  deposit(setup, op, payer, 1'000'000);

  struct sent {
    std::string key;
    int status = 0;
    std::string retry_after;
  };
  std::mutex answers_mutex;
  std::vector<sent> answers;
  std::map<std::string, int> codes;  // of the 503 answers
  std::atomic<bool> stop{false};
  std::atomic<int> created{0};
  std::vector<std::string> client_errors;  // a client that could not reach b, and when
  std::vector<std::thread> clients;
  // Should this thread leave the test early (a failed ASSERT, an exception), the clients stop, b
  // resumes, and they are joined: a thread left joinable would abort the whole suite.
  struct resume_and_join {
    server_process& paused;
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~resume_and_join() {
      stop = true;
      paused.send_signal(SIGCONT);
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
  } guard{b(), stop, clients};
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      try {
        http_client c(b().port(), 120s);
        while (!stop.load()) {
          const auto key = unique_key("paused");
          auto r = c.post("/v1/transfers", user.key, transfer_body(payer, payee, 10), key);
          if (r.status == 201) ++created;
          std::lock_guard lock(answers_mutex);
          if (r.status == 503) {
            const auto problem = r.json();
            ++codes[std::string(problem.as_object().at("code").as_string())];
          }
          answers.push_back({key, r.status, r.header("Retry-After")});
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(answers_mutex);
        client_errors.push_back(std::string(e.what()) + " (b running: " + (b().running() ? "yes" : "no") +
                                ", answers so far: " + std::to_string(answers.size()) + ")");
      }
    });
  }
  ASSERT_TRUE(eventually([&] { return created.load() >= 20; }, 60s, 10ms));
  b().send_signal(SIGSTOP);
  // Past b's lease: a holds every partition. (b's connections may hold a partition's row until
  // PostgreSQL ends b's idle transaction: the bound is generous, the wait is for the outcome.)
  const bool taken =
      eventually([&] { return metric_value(a().port(), "wallet_cluster_partitions_held") == k_partitions; }, 60s, 50ms);
  http_client ca(a().port());
  int created_by_a = 0;
  if (taken) {
    // The new holder serves the account, but a debit b's writer was committing when it stopped
    // may still hold the account's row until PostgreSQL ends b's idle transaction: until then a's
    // debits answer 503 with Retry-After, and each is retried with its key until it is decided.
    for (int i = 0; i < 10; ++i) {
      const auto key = unique_key("new-holder");
      int status = 0;
      EXPECT_TRUE(eventually(
          [&] {
            auto r = ca.post("/v1/transfers", user.key, transfer_body(payer, payee, 10), key);
            status = r.status;
            if (r.status == 503) {
              EXPECT_FALSE(r.header("Retry-After").empty()) << r.body;
            }
            return r.status != 503;
          },
          60s, 50ms));
      EXPECT_EQ(status, 201);
      if (status == 201) ++created_by_a;
    }
  }
  b().send_signal(SIGCONT);
  ASSERT_TRUE(taken) << held_text();
  EXPECT_EQ(created_by_a, 10);
  // b resumes, learns it lost its leases, and takes its share back; its clients go on meanwhile.
  ASSERT_TRUE(eventually([&] { return settled(); }, 60s, 50ms)) << held_text();
  stop = true;
  for (auto& t : clients) t.join();
  for (const auto& e : client_errors) ADD_FAILURE() << "a client of b: " << e << "\nb's log:\n" << b().log();

  int retried = 0;
  for (const auto& a : answers) {
    ASSERT_TRUE(a.status == 201 || a.status == 503) << a.status;
    if (a.status != 503) continue;
    EXPECT_FALSE(a.retry_after.empty()) << "a 503 tells when to retry";
    // Decided by a retry with the same key, through whichever node.
    auto r = ca.post("/v1/transfers", user.key, transfer_body(payer, payee, 10), a.key);
    EXPECT_EQ(r.status, 201) << r.body;
    ++retried;
  }
  std::string code_counts;
  for (const auto& [code, count] : codes) code_counts += " " + code + "=" + std::to_string(count);
  std::printf("b answered %zu debits, %d of them 503 (%s) and retried; b's writer refused %.0f at the fence\n",
              answers.size(), retried, code_counts.c_str(),
              metric_value(b().port(), "wallet_writer_fenced_postings_total"));

  persistence::connection_options o;
  o.url = owner_database_url();
  auto conn = persistence::connect(o);
  pqxx::nontransaction txn(*conn);
  // The account's debits in commit order (entries of one row are written under its lock, so
  // their ids follow the commits), each with the epoch it was decided under.
  auto rows = txn.exec(
      "SELECT (j.metadata->'lease'->>'epoch')::bigint FROM ledger_entry e"
      "  JOIN journal_transaction j ON j.id = e.transaction_id"
      " WHERE e.account_id = " +
      std::to_string(payer) + " AND e.amount < 0 ORDER BY e.id");
  std::int64_t highest = 0;
  int stale = 0;
  for (const auto& row : rows) {
    ASSERT_FALSE(row[0].is_null()) << "every debit names its lease";
    const auto epoch = row[0].as<std::int64_t>();
    if (epoch < highest) ++stale;
    highest = std::max(highest, epoch);
  }
  EXPECT_EQ(stale, 0) << "debits committed under a lost lease";
  const auto debits = static_cast<std::int64_t>(rows.size());
  EXPECT_EQ(debits, static_cast<std::int64_t>(answers.size()) + created_by_a) << "every request exactly once";
  EXPECT_EQ(balance(ca, user.key, payer), 1'000'000 - 10 * debits);
  EXPECT_TRUE(reconciliation_ok(ca, op));
}

TEST_F(three_nodes, one_hundred_debits_of_a_thousand_on_fifty_thousand_make_exactly_fifty) {
  // The seed's race, its requests spread over three nodes: whichever node receives a debit, the
  // account's holder decides it.
  http_client setup(node(0).port());
  const auto op = node(0).operator_key();
  const auto user = create_principal(setup, op);
  const auto payer = create_account(setup, op, user.id);
  const auto payee = create_account(setup, op, user.id);
  deposit(setup, op, payer, 50'000);
  transfer_tally tally;
  concurrently(100, 12, [&](int i, int) {
    http_client c(node(static_cast<std::size_t>(i % 3)).port());
    tally.count(c.post("/v1/transfers", user.key, transfer_body(payer, payee, 1'000), unique_key("seed")));
  });
  EXPECT_EQ(tally.created.load(), 50);
  EXPECT_EQ(tally.refused.load(), 50);
  EXPECT_EQ(tally.other.load(), 0);
  EXPECT_EQ(balance(setup, user.key, payer), 0);
  EXPECT_EQ(balance(setup, user.key, payee), 50'000);
}

// A provider's event that debits a wallet (here a chargeback) is decided by the node holding the
// wallet's partition, whichever node the provider's delivery reaches: the other node forwards it,
// signed as it came, and the holder verifies the signature again. Delivered again through the
// holder, it is the same transaction (duplicate), not a second chargeback.
TEST_F(two_nodes, a_providers_debit_event_reaches_the_holder_of_the_wallets_partition) {
  http_client ca(a().port()), cb(b().port());
  const auto op = a().operator_key();
  const auto name = "p" + unique_key("c");
  auto r = ca.post("/v1/providers", op, R"({"name":")" + name + R"("})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string secret(r.json().as_object().at("signingSecret").as_string());
  const auto user = create_principal(ca, op);
  const auto wallet = account_held_by(ca, user.id, 1);
  ASSERT_NE(wallet, 0);
  const auto signed_event = [&](http_client& c, const std::string& body) {
    const auto now =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    return c.request("POST", "/v1/provider-events", body,
                     {{"Content-Type", "application/json"}, {"Wallet-Signature", api::sign(secret, now, body)}});
  };
  const auto event = [&](const std::string& id, const std::string& type, const std::string& fields) {
    return R"({"provider":")" + name + R"(","eventId":")" + id + R"(","type":")" + type + R"(",)" + fields + "}";
  };

  r = signed_event(
      ca, event("e-pay", "payment.succeeded",
                R"("paymentId":"pay-1","accountId":)" + std::to_string(wallet) + R"(,"amount":700,"currency":"EUR")"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(balance(cb, user.key, wallet), 700);

  const auto forwarded_before = metric_value(a().port(), "wallet_cluster_forwarded_requests_total");
  const auto chargeback = event("e-cb", "chargeback.created", R"("paymentId":"pay-1")");
  r = signed_event(ca, chargeback);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(r.json().as_object().at("duplicate").as_bool());
  EXPECT_GT(metric_value(a().port(), "wallet_cluster_forwarded_requests_total"), forwarded_before);
  const auto again = signed_event(cb, chargeback);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_TRUE(again.json().as_object().at("duplicate").as_bool());
  EXPECT_EQ(again.json().as_object().at("transactionId"), r.json().as_object().at("transactionId"));
  EXPECT_EQ(balance(ca, user.key, wallet), 0);
  EXPECT_TRUE(reconciliation_ok(ca, op));
}

TEST_F(two_nodes, payments_into_a_hot_merchant_through_both_nodes_add_up) {
  // Each node credits the merchant's shards whose partitions it holds and sweeps those: the
  // merchant receives exactly what was paid, before and after both nodes swept, and
  // reconciliation is clean.
  http_client setup(a().port());
  const auto op = a().operator_key();
  const auto merchant = create_principal(setup, op, "merchant");
  const auto shop = create_account(setup, op, merchant.id, "EUR", 8);
  const auto user = create_principal(setup, op);
  std::vector<std::int64_t> payers;
  for (int i = 0; i < 8; ++i) {
    payers.push_back(create_account(setup, op, user.id));
    deposit(setup, op, payers.back(), 1'000);
  }
  transfer_tally tally;
  concurrently(80, 8, [&](int i, int) {
    http_client c(i % 2 == 0 ? a().port() : b().port());
    tally.count(c.post("/v1/transfers", user.key, transfer_body(payers[static_cast<std::size_t>(i % 8)], shop, 100),
                       unique_key("shop")));
  });
  EXPECT_EQ(tally.created.load(), 80);
  EXPECT_EQ(balance(setup, merchant.key, shop), 8'000);
  for (auto* n : {&a(), &b()}) {
    http_client c(n->port());
    auto r = c.post("/v1/admin/sweeps", op, "");
    EXPECT_EQ(r.status, 200) << r.body;
  }
  EXPECT_EQ(balance(setup, merchant.key, shop), 8'000);
  EXPECT_TRUE(reconciliation_ok(setup, op));
}

TEST_F(two_nodes, holds_expire_once_whichever_node_placed_them) {
  // Hold expiry runs on the holder of partition 0 only; holds placed through either node expire,
  // each once, and the payer may spend all of its money again.
  http_client ca(a().port()), cb(b().port());
  const auto op = a().operator_key();
  const auto user = create_principal(ca, op);
  const auto payee = create_account(ca, op, user.id);
  std::vector<std::string> holds;
  std::vector<std::int64_t> payers;
  for (int i = 0; i < 4; ++i) {
    const auto payer = create_account(ca, op, user.id);
    deposit(ca, op, payer, 100);
    payers.push_back(payer);
    auto& c = i % 2 == 0 ? ca : cb;
    auto r = c.post("/v1/holds", user.key,
                    R"({"fromAccountId":)" + std::to_string(payer) + R"(,"toAccountId":)" + std::to_string(payee) +
                        R"(,"amount":60,"expiresInSeconds":1})",
                    unique_key("hold"));
    ASSERT_EQ(r.status, 201) << r.body;
    const auto hold = r.json();
    holds.emplace_back(hold.as_object().at("id").as_string());
  }
  for (const auto& id : holds) {
    ASSERT_TRUE(eventually(
        [&] {
          const auto r = cb.get("/v1/holds/" + id, user.key);
          const auto hold = r.json();
          return r.status == 200 && hold.as_object().at("status").as_string() == "EXPIRED";
        },
        30s, 50ms))
        << id;
  }
  for (const auto payer : payers) {
    auto r = cb.post("/v1/transfers", user.key, transfer_body(payer, payee, 100), unique_key("after-expiry"));
    EXPECT_EQ(r.status, 201) << r.body;
  }
  EXPECT_TRUE(reconciliation_ok(ca, op));
}

}  // namespace
