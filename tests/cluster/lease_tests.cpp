// Partition leases against a real PostgreSQL (migration 014, docs/scaling.md): the partition
// count is fixed by the first node; nodes split the partitions evenly, hand them back when one
// leaves and take over a silent node's after its TTL, at a higher epoch; a takeover never takes a
// partition whose row a writer holds; the ledger writer commits a fenced debit only while its
// node holds the partition at the epoch it was decided under; and one process at a time speaks
// for a node id (migration 018).

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "actors/directory.hpp"
#include "cluster/lease_keeper.hpp"
#include "cluster/ownership.hpp"
#include "ledger/flows.hpp"
#include "persistence/accounts.hpp"
#include "persistence/batch.hpp"
#include "persistence/database.hpp"
#include "persistence/leases.hpp"
#include "persistence/migrations.hpp"
#include "persistence/transfer_batches.hpp"
#include "tests/support/connections.hpp"
#include "tests/support/support.hpp"

namespace {

using namespace std::chrono_literals;
using test_support::options_for;
using test_support::sql_literal;
using test_support::unique_key;

// Every test of this build that runs nodes uses this count: the first one stores it.
constexpr int k_partitions = 16;

const std::string k_application_name = "lease-tests";

class leases : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    persistence::apply_migrations(options_for(test_support::owner_database_url(), k_application_name));
  }

  void SetUp() override {
    owner_ = persistence::connect(options_for(test_support::owner_database_url(), k_application_name));
    app_ = persistence::connect(options_for(test_support::database_url(), k_application_name));
    ASSERT_EQ(persistence::ensure_partitions(*app_, k_partitions), k_partitions);
    // Nobody holds anything: what an earlier test left is cleared (as the owner role).
    exec_owner("UPDATE partition_lease SET node_id = NULL, expires_at = '-infinity'");
    exec_owner("DELETE FROM cluster_node");
  }

  void exec_owner(const std::string& sql) {
    pqxx::work txn(*owner_);
    txn.exec(sql);
    txn.commit();
  }
  std::string text_of(const std::string& sql) { return test_support::text_of(*owner_, sql); }
  std::int64_t int_of(const std::string& sql) { return test_support::int_of(*owner_, sql); }

  struct node {
    std::shared_ptr<cluster::ownership> owned;
    std::unique_ptr<cluster::lease_keeper> keeper;
  };
  node make_node(const std::string& name, std::chrono::milliseconds ttl = 60s) {
    node n;
    n.owned = std::make_shared<cluster::ownership>(name, k_partitions);
    cluster::keeper_config c;
    c.database = options_for(test_support::database_url(), k_application_name);
    c.address = "127.0.0.1:1";
    c.ttl = ttl;
    c.renew_interval = ttl / 4;
    n.keeper = std::make_unique<cluster::lease_keeper>(c, n.owned);
    return n;
  }

  // The epoch of each partition `n` holds.
  static std::map<int, std::int64_t> epochs_of(const node& n) {
    std::map<int, std::int64_t> out;
    for (const auto& l : n.owned->held()) out[l.partition] = l.epoch;
    return out;
  }

  static std::set<int> partitions_of(const node& n) {
    std::set<int> out;
    for (const auto& l : n.owned->held()) out.insert(l.partition);
    return out;
  }

  // A posting of `principal`'s under a key of its own.
  persistence::posting_request posting_of(std::int64_t principal, ledger::posting p) {
    persistence::posting_request r;
    r.posting = std::move(p);
    r.transaction_id = text_of("SELECT gen_random_uuid()::text");
    r.principal = principal;
    r.idempotency_key = unique_key("k");
    r.request_hash = r.idempotency_key;
    return r;
  }

  // A principal (named after `name`) with a payer holding 1,000 XTS and a payee, the deposit
  // committed through the writer's statements on app_.
  struct ledger_parties {
    std::int64_t principal = 0;
    std::int64_t clearing = 0;
    std::int64_t payer = 0;
    std::int64_t payee = 0;
  };
  ledger_parties funded_payer(const std::string& name) {
    ledger_parties p;
    p.principal = int_of("INSERT INTO principal (name, role) VALUES (" + sql_literal(unique_key(name)) +
                         ", 'user') RETURNING id");
    p.clearing = persistence::ensure_clearing_account(*app_, "XTS");
    auto new_account = [&] {
      return int_of("INSERT INTO account (owner_id, currency, kind) VALUES (" + std::to_string(p.principal) +
                    ", 'XTS', 'user') RETURNING id");
    };
    p.payer = new_account();
    p.payee = new_account();
    persistence::prepare_posting_statements(*app_);
    EXPECT_EQ(persistence::commit_batch(
                  *app_, {posting_of(p.principal, ledger::flows::deposit(p.clearing, p.payer, p.payer, 1'000, "XTS"))})
                  .outcomes.at(0)
                  .outcome,
              ledger::error_code::ok);
    return p;
  }

  std::unique_ptr<pqxx::connection> owner_;
  std::unique_ptr<pqxx::connection> app_;
};

TEST_F(leases, the_first_node_fixes_the_partition_count) {
  // A node configured with another count is told the stored one (and the server refuses to start).
  EXPECT_EQ(persistence::ensure_partitions(*app_, k_partitions * 2), k_partitions);
  EXPECT_EQ(int_of("SELECT count(*) FROM partition_lease"), k_partitions);
}

TEST_F(leases, partition_of_is_stable_and_spreads_ids) {
  // The mapping is part of the data's meaning: fixed values, and consecutive ids spread evenly.
  EXPECT_EQ(cluster::partition_of(1, 16), 1);
  EXPECT_EQ(cluster::partition_of(2, 16), 14);
  EXPECT_EQ(cluster::partition_of(3, 16), 13);
  EXPECT_EQ(cluster::partition_of(1'000, 16), 8);
  EXPECT_EQ(cluster::partition_of(42, 64), 21);
  EXPECT_EQ(cluster::partition_of(1'000'000'000'000, 64), 56);
  std::vector<int> counts(k_partitions, 0);
  for (ledger::account_id id = 1; id <= 16'000; ++id) ++counts[cluster::partition_of(id, k_partitions)];
  for (int c : counts) {
    EXPECT_GT(c, 800);
    EXPECT_LT(c, 1'200);
  }
}

TEST_F(leases, two_nodes_split_the_partitions_and_one_leaving_hands_them_back) {
  auto a = make_node(unique_key("a"));
  auto b = make_node(unique_key("b"));
  a.keeper->round();
  EXPECT_EQ(partitions_of(a).size(), static_cast<std::size_t>(k_partitions)) << "alone, a node takes every partition";
  const auto epoch_of_a = epochs_of(a);
  b.keeper->round();
  EXPECT_TRUE(partitions_of(b).empty()) << "nothing is free yet";
  a.keeper->round();  // a sees two nodes: stops debiting half of them ...
  EXPECT_EQ(partitions_of(a).size(), static_cast<std::size_t>(k_partitions / 2));
  a.keeper->round();  // ... and hands them back a round later
  b.keeper->round();
  const auto of_a = partitions_of(a), of_b = partitions_of(b);
  EXPECT_EQ(of_a.size(), static_cast<std::size_t>(k_partitions / 2));
  EXPECT_EQ(of_b.size(), static_cast<std::size_t>(k_partitions / 2));
  for (int p : of_a) EXPECT_EQ(of_b.count(p), 0u) << "partition " << p << " has one holder";
  // b took them one epoch above a's.
  for (const auto& l : b.owned->held())
    EXPECT_EQ(l.epoch, epoch_of_a.at(l.partition) + 1) << "partition " << l.partition;
  EXPECT_EQ(a.keeper->stats().released, static_cast<std::uint64_t>(k_partitions / 2));

  a.keeper->stop();
  EXPECT_TRUE(partitions_of(a).empty());
  b.keeper->round();
  EXPECT_EQ(partitions_of(b).size(), static_cast<std::size_t>(k_partitions))
      << "a's partitions at once, not after a TTL";
  b.keeper->stop();
}

TEST_F(leases, a_silent_node_loses_its_partitions_after_the_ttl) {
  // b holds half and then stops renewing (a pause): once its leases expire, a takes them over at
  // a higher epoch; when b wakes up, its next round learns it lost them. Its local deadline had
  // already stopped it deciding debits.
  auto a = make_node(unique_key("a"), 400ms);
  auto b = make_node(unique_key("b"), 400ms);
  b.keeper->round();
  a.keeper->round();
  b.keeper->round();
  b.keeper->round();  // b hands back half
  a.keeper->round();
  ASSERT_EQ(partitions_of(b).size(), static_cast<std::size_t>(k_partitions / 2));
  const auto epoch_of_b = epochs_of(b);
  const auto account_of_b = [&] {
    for (ledger::account_id id = 1;; ++id) {
      if (partitions_of(b).count(cluster::partition_of(id, k_partitions)) != 0) return id;
    }
  }();
  ASSERT_TRUE(b.owned->lease_for(account_of_b).has_value());

  // Wait for the outcome, not for time: a keeps its rounds until it holds everything.
  for (int i = 0; i < 400 && partitions_of(a).size() < static_cast<std::size_t>(k_partitions); ++i) {
    std::this_thread::sleep_for(25ms);
    a.keeper->round();
  }
  ASSERT_EQ(partitions_of(a).size(), static_cast<std::size_t>(k_partitions));
  EXPECT_FALSE(b.owned->lease_for(account_of_b).has_value()) << "b's own clock stopped it first";
  b.keeper->round();
  EXPECT_EQ(b.keeper->stats().lost, static_cast<std::uint64_t>(k_partitions / 2));
  for (const auto& l : a.owned->held()) {
    if (epoch_of_b.count(l.partition) != 0) {
      EXPECT_EQ(l.epoch, epoch_of_b.at(l.partition) + 1) << "partition " << l.partition;
    }
  }
  a.keeper->stop();
  b.keeper->stop();
}

TEST_F(leases, a_takeover_skips_a_partition_whose_row_a_writer_holds) {
  // A writer's transaction holds its partition's row FOR SHARE until it ends; a node taking over
  // meanwhile does not take that partition (SKIP LOCKED), and takes it once the writer is done.
  auto a = make_node(unique_key("a"));
  auto conn = persistence::connect(options_for(test_support::database_url(), k_application_name));
  auto writer = std::make_unique<pqxx::work>(*conn);
  writer->exec("SELECT 1 FROM partition_lease WHERE partition = 3 FOR SHARE");
  a.keeper->round();
  EXPECT_EQ(partitions_of(a).count(3), 0u);
  EXPECT_EQ(partitions_of(a).size(), static_cast<std::size_t>(k_partitions - 1));
  writer->commit();
  a.keeper->round();
  EXPECT_EQ(partitions_of(a).count(3), 1u);
  a.keeper->stop();
}

TEST_F(leases, a_renewal_takes_its_rows_in_the_order_writers_do) {
  // Writers lock lease rows FOR SHARE in ascending partition order. A renewal that waits for a low
  // partition a writer holds must hold no higher one meanwhile, or the writer's next lock would
  // wait for it: a deadlock. The node holds 9 and 2, 2's row written last (a scan meets 9 first).
  const std::string name = unique_key("r");
  for (const int p : {9, 2}) {
    exec_owner("UPDATE partition_lease SET node_id = " + sql_literal(name) +
               ", epoch = epoch + 1, expires_at = now() + interval '1 minute' WHERE partition = " + std::to_string(p));
  }
  const persistence::node_identity me{name, "6f1c2a4e-0b7d-4c1e-9a55-3d2e8f4b7c10"};
  exec_owner("INSERT INTO cluster_node (node_id, address, instance) VALUES (" + sql_literal(name) +
             ", '127.0.0.1:1', " + sql_literal(me.instance) + ")");
  auto conn = persistence::connect(options_for(test_support::database_url(), k_application_name));
  auto writer = std::make_unique<pqxx::work>(*conn);
  writer->exec("SET LOCAL lock_timeout = '20s'");
  writer->exec("SELECT 1 FROM partition_lease WHERE partition = 2 FOR SHARE");
  auto keeper = persistence::connect(options_for(test_support::database_url(), k_application_name));
  const int keeper_pid = keeper->backendpid();
  auto renewed = std::async(std::launch::async, [&] { return persistence::renew_leases(*keeper, me, 60'000); });
  ASSERT_TRUE(test_support::eventually(
      [&] {
        return int_of("SELECT count(*) FROM pg_locks WHERE NOT granted AND pid = " + std::to_string(keeper_pid)) > 0;
      },
      20s, 10ms))
      << "the renewal never waited for the writer's row";
  // Granted at once: the renewal holds nothing above the row it waits for.
  EXPECT_NO_THROW(writer->exec("SELECT 1 FROM partition_lease WHERE partition = 9 FOR SHARE"));
  writer->commit();
  const auto leases = renewed.get();
  std::set<int> partitions;
  for (const auto& l : leases) partitions.insert(l.partition);
  EXPECT_EQ(partitions, (std::set<int>{2, 9}));
}

// Two processes started with one node id (migration 018). While the first one's heartbeat is
// younger than the TTL, the second takes nothing and refuses to start; the first keeps its leases
// at their epochs, and the second's shutdown removes nothing of the first's.
TEST_F(leases, a_second_process_with_a_live_node_id_takes_nothing_and_refuses_to_start) {
  const std::string name = unique_key("same");
  auto first = make_node(name, 2s);
  first.keeper->round();
  ASSERT_EQ(partitions_of(first).size(), static_cast<std::size_t>(k_partitions));
  const auto epochs = epochs_of(first);

  // The first process stays alive: its rounds run until the second one's start has decided.
  std::atomic<bool> decided{false};
  std::thread alive([&] {
    while (!decided.load()) {
      first.keeper->round();
      std::this_thread::sleep_for(20ms);
    }
  });
  auto second = make_node(name, 2s);
  bool refused = false;
  try {
    second.keeper->start();
  } catch (const cluster::node_id_in_use& e) {
    refused = true;
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:1"), std::string::npos) << e.what();
  }
  decided = true;
  alive.join();
  EXPECT_TRUE(refused) << "a second process with a live node id started";
  EXPECT_TRUE(partitions_of(second).empty());
  EXPECT_TRUE(second.keeper->stats().in_use_elsewhere);

  second.keeper->stop();
  first.keeper->round();
  EXPECT_FALSE(first.keeper->stats().in_use_elsewhere);
  ASSERT_EQ(partitions_of(first).size(), static_cast<std::size_t>(k_partitions));
  for (const auto& l : first.owned->held()) EXPECT_EQ(l.epoch, epochs.at(l.partition)) << "partition " << l.partition;
  EXPECT_EQ(int_of("SELECT count(*) FROM cluster_node WHERE node_id = " + sql_literal(name)), 1);
  first.keeper->stop();
}

// A process restarted with the node id of one that went silent (killed, or paused past the TTL)
// takes the node id over once the silent one's heartbeat lapses, and takes its partitions again
// one epoch higher, so the silent one's writers are fenced. The silent one, awake again, holds
// nothing, and its shutdown hands back nothing of the new process's.
TEST_F(leases, a_process_that_takes_a_silent_node_id_over_fences_the_silent_one) {
  const std::string name = unique_key("silent");
  auto silent = make_node(name, 2s);
  silent.keeper->round();
  ASSERT_EQ(partitions_of(silent).size(), static_cast<std::size_t>(k_partitions));
  const auto epochs = epochs_of(silent);

  auto restarted = make_node(name, 2s);
  restarted.keeper->start();  // waits for the silent one's heartbeat to lapse
  ASSERT_EQ(partitions_of(restarted).size(), static_cast<std::size_t>(k_partitions));
  for (const auto& l : restarted.owned->held())
    EXPECT_EQ(l.epoch, epochs.at(l.partition) + 1) << "partition " << l.partition;

  restarted.keeper->round();  // a heartbeat just now, whatever its timer did meanwhile
  silent.keeper->round();
  EXPECT_TRUE(partitions_of(silent).empty());
  EXPECT_TRUE(silent.keeper->stats().in_use_elsewhere);
  EXPECT_EQ(silent.keeper->stats().lost, static_cast<std::uint64_t>(k_partitions));
  silent.keeper->stop();
  EXPECT_EQ(int_of("SELECT count(*) FROM partition_lease WHERE node_id = " + sql_literal(name)), k_partitions)
      << "the silent process handed back leases it no longer held";
  EXPECT_EQ(int_of("SELECT count(*) FROM cluster_node WHERE node_id = " + sql_literal(name)), 1);
  restarted.keeper->stop();
  EXPECT_EQ(int_of("SELECT count(*) FROM partition_lease WHERE node_id = " + sql_literal(name)), 0);
}

TEST_F(leases, the_writer_commits_a_fenced_debit_only_under_the_current_lease) {
  auto a = make_node(unique_key("a"));
  a.keeper->round();
  const auto [principal, clearing, payer, payee] = funded_payer("fence");
  auto request = [&](ledger::posting p) { return posting_of(principal, std::move(p)); };

  const auto lease = a.owned->lease_for(payer);
  ASSERT_TRUE(lease.has_value());
  auto fenced = [&](std::int64_t epoch) {
    auto r = request(ledger::flows::transfer(payer, payee, payee, 100, "XTS"));
    r.fence = persistence::lease_fence{lease->partition, epoch, a.owned->node_id()};
    return r;
  };
  auto current = persistence::commit_batch(*app_, {fenced(lease->epoch)});
  EXPECT_EQ(current.outcomes.at(0).outcome, ledger::error_code::ok);
  EXPECT_EQ(current.fenced, 0);
  // The journal names the lease the debit committed under.
  EXPECT_EQ(text_of("SELECT metadata->'lease'->>'node' || '@' || (metadata->'lease'->>'epoch') FROM journal_transaction"
                    " WHERE id = " +
                    sql_literal(current.outcomes.at(0).transaction_id)),
            a.owned->node_id() + "@" + std::to_string(lease->epoch));

  // The partition changes hands (b takes it at epoch + 1): a debit a decided under the old
  // epoch, mixed into a batch with an unfenced one, is refused alone.
  const std::string b = unique_key("b");
  exec_owner("UPDATE partition_lease SET node_id = " + sql_literal(b) +
             ", epoch = epoch + 1, expires_at = now() + interval '1 minute' WHERE partition = " +
             std::to_string(lease->partition));
  const auto stale = fenced(lease->epoch);
  const auto deposit = request(ledger::flows::deposit(clearing, payee, payee, 5, "XTS"));
  auto refused = persistence::commit_batch(*app_, {stale, deposit});
  EXPECT_EQ(refused.outcomes.at(0).outcome, ledger::error_code::outcome_unknown);
  EXPECT_EQ(refused.outcomes.at(1).outcome, ledger::error_code::ok);
  EXPECT_EQ(refused.fenced, 1);
  EXPECT_EQ(int_of("SELECT count(*) FROM journal_transaction WHERE id = " + sql_literal(stale.transaction_id)), 0);
  EXPECT_EQ(int_of("SELECT balance FROM account WHERE id = " + std::to_string(payer)), 900);

  // In an atomic batch (POST /v1/transfers/batch with atomic) the stale debit refuses the whole
  // batch: nothing of it commits, not even the items decided under a lease that still stands.
  const auto stale_again = fenced(lease->epoch);
  const auto other = request(ledger::flows::deposit(clearing, payee, payee, 7, "XTS"));
  auto atomic = persistence::commit_atomic(*app_, {other, stale_again});
  ASSERT_TRUE(atomic.refused_at.has_value());
  EXPECT_EQ(*atomic.refused_at, 1u);
  EXPECT_EQ(atomic.outcomes.at(1).outcome, ledger::error_code::not_partition_owner);
  EXPECT_EQ(int_of("SELECT count(*) FROM journal_transaction WHERE id IN (" + sql_literal(other.transaction_id) + ", " +
                   sql_literal(stale_again.transaction_id) + ")"),
            0);
  EXPECT_EQ(int_of("SELECT balance FROM account WHERE id = " + std::to_string(payee)), 105);

  // The same debit under b's name and epoch commits: the fence names node and epoch both.
  auto by_b = fenced(lease->epoch + 1);
  by_b.fence->node_id = b;
  EXPECT_EQ(persistence::commit_batch(*app_, {by_b}).outcomes.at(0).outcome, ledger::error_code::ok);
  EXPECT_EQ(int_of("SELECT balance FROM account WHERE id = " + std::to_string(payer)), 800);
  a.keeper->stop();
}

// Every writer attempt locks its leases before any account row, as the unlocked attempt's write
// does, so that no writer holds an account row while it waits for a lease a renewal has locked
// (a renewal, a writer holding a lease and waiting for a row, and a writer holding that row and
// waiting for the lease would deadlock). A locked attempt (an atomic batch) that waits for its
// lease holds no row of the payer meanwhile.
TEST_F(leases, a_writer_waiting_for_its_lease_holds_no_account_row) {
  auto a = make_node(unique_key("a"));
  a.keeper->round();
  const auto [principal, clearing, payer, payee] = funded_payer("order");
  auto request = [&](ledger::posting p) { return posting_of(principal, std::move(p)); };
  const auto lease = a.owned->lease_for(payer);
  ASSERT_TRUE(lease.has_value());
  auto debit = request(ledger::flows::transfer(payer, payee, payee, 100, "XTS"));
  debit.fence = persistence::lease_fence{lease->partition, lease->epoch, a.owned->node_id()};

  // The lease row locked as a renewal locks it.
  auto renewal_connection = persistence::connect(options_for(test_support::owner_database_url(), k_application_name));
  pqxx::work renewal(*renewal_connection);
  renewal.exec("SELECT 1 FROM partition_lease WHERE partition = " + std::to_string(lease->partition) + " FOR UPDATE");
  const auto renewal_pid = renewal_connection->backendpid();
  auto committed = std::async(std::launch::async, [&] { return persistence::commit_atomic(*app_, {debit}); });
  ASSERT_TRUE(test_support::eventually([&] {
    return int_of("SELECT count(*) FROM pg_stat_activity WHERE " + std::to_string(renewal_pid) +
                  " = ANY(pg_blocking_pids(pid))") > 0;
  })) << "the writer never waited for the lease";
  // While the writer waits, the payer's row is free.
  {
    pqxx::work other(*owner_);
    EXPECT_NO_THROW(other.exec("SELECT id FROM account WHERE id = " + std::to_string(payer) + " FOR UPDATE NOWAIT"));
    other.abort();
  }
  renewal.abort();
  const auto result = committed.get();
  EXPECT_FALSE(result.refused_at.has_value());
  EXPECT_EQ(result.outcomes.at(0).outcome, ledger::error_code::ok);
  EXPECT_EQ(int_of("SELECT balance FROM account WHERE id = " + std::to_string(payer)), 900);
  a.keeper->stop();
}

// A batch's stored answer holds refusals that the payer's partition holder decided; once the
// partition changed hands, the new holder may have committed them since, so the old holder stores
// nothing (docs/money-flows.md, batches; docs/scaling.md).
TEST_F(leases, a_batch_answer_is_stored_only_under_the_leases_of_its_refusals) {
  auto a = make_node(unique_key("a"));
  a.keeper->round();
  const auto principal = int_of("INSERT INTO principal (name, role) VALUES (" + sql_literal(unique_key("store")) +
                                ", 'user') RETURNING id");
  const auto account = int_of("INSERT INTO account (owner_id, currency, kind) VALUES (" + std::to_string(principal) +
                              ", 'XTS', 'user') RETURNING id");
  const auto lease = a.owned->lease_for(account);
  ASSERT_TRUE(lease.has_value());
  const persistence::lease_fence current{lease->partition, lease->epoch, a.owned->node_id()};
  const persistence::stored_batch answer{"hash", 201, R"({"results":[]})"};
  auto stored = [&](const std::string& key) {
    return int_of("SELECT count(*) FROM transfer_batch WHERE principal_id = " + std::to_string(principal) +
                  " AND idempotency_key = " + sql_literal(key));
  };

  const auto kept = unique_key("kept");
  const auto under_current = persistence::store_transfer_batch(*app_, principal, kept, answer, 2, {current});
  ASSERT_TRUE(under_current.has_value());
  EXPECT_EQ(under_current->body, answer.body);
  EXPECT_EQ(stored(kept), 1);

  // The partition changes hands (b at epoch + 1): a's answer decided under the old epoch is not
  // stored, nor one naming the right epoch under another node's name.
  const std::string b = unique_key("b");
  exec_owner("UPDATE partition_lease SET node_id = " + sql_literal(b) +
             ", epoch = epoch + 1, expires_at = now() + interval '1 minute' WHERE partition = " +
             std::to_string(lease->partition));
  const auto late = unique_key("late");
  EXPECT_FALSE(persistence::store_transfer_batch(*app_, principal, late, answer, 2, {current}).has_value());
  persistence::lease_fence wrong_node = current;
  wrong_node.epoch = lease->epoch + 1;
  EXPECT_FALSE(persistence::store_transfer_batch(*app_, principal, late, answer, 2, {wrong_node}).has_value());
  EXPECT_EQ(stored(late), 0);
  // b's own answer, and one with no refusal to fence, are stored.
  persistence::lease_fence by_b = wrong_node;
  by_b.node_id = b;
  EXPECT_TRUE(persistence::store_transfer_batch(*app_, principal, late, answer, 2, {by_b}).has_value());
  EXPECT_EQ(stored(late), 1);
  const auto unfenced = unique_key("unfenced");
  EXPECT_TRUE(persistence::store_transfer_batch(*app_, principal, unfenced, answer, 2).has_value());
  EXPECT_EQ(stored(unfenced), 1);
  a.keeper->stop();
}

// A node credits a hot account only on the shards whose own partition it holds, spread over its
// writers as before; holding none of them, it credits any (docs/scaling.md).
TEST(shard_rows, a_node_credits_only_the_shards_of_partitions_it_holds) {
  cluster::ownership owned("n", k_partitions);
  actors::account_facts facts;
  facts.id = 5'000;
  for (ledger::account_id shard = 5'001; shard <= 5'016; ++shard) facts.shards.push_back(shard);
  std::set<ledger::account_id> anywhere;
  for (std::uint64_t spread = 0; spread < 64; ++spread)
    anywhere.insert(actors::account_directory::credit_row(facts, 0, 2, spread, &owned));
  EXPECT_EQ(anywhere.size(), 8u) << "holding nothing: writer 0's half of all shards";

  std::set<ledger::account_id> held;
  for (auto shard : facts.shards) {
    const int p = cluster::partition_of(shard, k_partitions);
    if (p % 2 == 0) {
      owned.hold(p, 1, cluster::ownership::clock::now() + 1h);
    }
  }
  owned.hold(0, 1, cluster::ownership::clock::now() + 1h);
  for (auto shard : facts.shards) {
    if (owned.lease_for(shard)) held.insert(shard);
  }
  ASSERT_FALSE(held.empty());
  EXPECT_TRUE(owned.holds(0));
  EXPECT_FALSE(owned.holds(1));
  std::set<ledger::account_id> chosen;
  for (std::size_t writer = 0; writer < 2; ++writer) {
    for (std::uint64_t spread = 0; spread < 64; ++spread) {
      chosen.insert(actors::account_directory::credit_row(facts, writer, 2, spread, &owned));
    }
  }
  EXPECT_EQ(chosen, held) << "every held shard, and only those";
}

}  // namespace
