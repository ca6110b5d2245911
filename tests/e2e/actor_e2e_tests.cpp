// End-to-end tests of the account actors' lifecycle: idle actors passivate, and the number of
// live actors is bounded.

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "tests/support/support.hpp"

namespace ts = test_support;
using test_support::transfer_body;
using namespace std::chrono_literals;

namespace {

std::int64_t metric(ts::http_client& c, const std::string& name) {
  return static_cast<std::int64_t>(ts::metric_value(c, name));
}

std::int64_t live_actors(ts::http_client& c) { return metric(c, "wallet_account_actors_live"); }

// Actors idle longer than actors.account_idle_ms stop (the live gauge returns to zero), and a
// later debit of the same account spawns a fresh actor that reloads the committed balance.
TEST(AccountActors, IdleActorsPassivateAndComeBack) {
  ts::server_process::options o;
  // Long enough that the five payments below, one after the other, finish before the first
  // payer's actor is idle that long, even on a busy machine.
  o.env["WALLET_ACTORS_ACCOUNT_IDLE_MS"] = "3000";
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
  EXPECT_TRUE(
      ts::eventually([&] { return live_actors(c) == 0; }, std::chrono::seconds(60), std::chrono::milliseconds(50)));
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
    auto r = c.post("/v1/transfers", alice.key, transfer_body(accounts[static_cast<std::size_t>(i)], payee, 10),
                    ts::unique_key("b"));
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
  // No background reads (sweeps, reconciliation, hold expiry) during the measurement: on a busy
  // machine the measurement can span one of their ticks.
  o.env["WALLET_LEDGER_SWEEP_INTERVAL_MS"] = "3600000";
  o.env["WALLET_LEDGER_RECONCILE_INTERVAL_S"] = "0";
  o.env["WALLET_LEDGER_HOLD_EXPIRY_INTERVAL_MS"] = "600000";
  o.env["WALLET_LEDGER_REPLAY_PRUNE_INTERVAL_MS"] = "3600000";
  // Nor the check for revoked keys (every third of the key cache's TTL).
  o.env["WALLET_AUTH_KEY_CACHE_TTL_MS"] = "600000";
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

namespace {

// Freeze and unfreeze reach a live account actor at once, with payments streaming from the
// account on four threads. Each payment records the phase in which it was sent and answered:
// every payment sent after a freeze was answered (and answered before the next change began) is
// refused (422 account_inactive), every such payment after an unfreeze goes through (201);
// payments that overlap a change may get either. The payer is hot, so its actor reads its state (status included) from the database when
// it starts: the account is frozen then, and only the unfreeze's message can tell the actor.
TEST(AccountActors, FreezeAndUnfreezeReachALiveActorUnderLoad) {
  ts::server_process::options o;
  o.env = ts::unlimited_rates();
  o.env["WALLET_ACTORS_ACCOUNT_IDLE_MS"] = "600000";
  ts::server_process server(o);
  ts::http_client c(server.port());
  const auto& op = server.operator_key();
  auto alice = ts::create_principal(c, op);
  auto bob = ts::create_principal(c, op);
  const auto a = ts::create_account(c, op, alice.id, "EUR", 2);
  const auto b = ts::create_account(c, op, bob.id);
  ts::deposit(c, op, a, 10'000'000);

  // Phases: even = settled (0 frozen, 2 active, 4 frozen, 6 active), odd = a change in flight.
  constexpr int k_spanning = 100;
  std::atomic<int> phase{-1};
  std::atomic<bool> stop{false};
  std::mutex results_mutex;
  std::map<int, std::map<std::string, int>> results;  // phase -> "status code" -> count
  auto finished_in = [&](int p) {
    std::lock_guard lock(results_mutex);
    int n = 0;
    for (const auto& [outcome, count] : results[p]) n += count;
    return n;
  };
  auto set_status = [&](const char* action, int before, int after) {
    phase = before;
    auto r = c.post("/v1/accounts/" + std::to_string(a) + "/" + action, op, "{}");
    ASSERT_EQ(r.status, 200) << r.body;
    phase = after;
  };
  set_status("freeze", -1, 0);
  std::vector<std::thread> payers;
  for (int t = 0; t < 4; ++t) {
    payers.emplace_back([&] {
      ts::http_client client(server.port());
      while (!stop) {
        const int sent_in = phase.load();
        auto r = client.post("/v1/transfers", alice.key, transfer_body(a, b, 1), ts::unique_key("load"));
        const int answered_in = phase.load();
        std::string outcome = std::to_string(r.status);
        if (r.status != 201) outcome += " " + std::string(r.json().as_object().at("code").as_string());
        std::lock_guard lock(results_mutex);
        // A payment still in flight when the next change began belongs to no settled phase.
        ++results[sent_in == answered_in ? sent_in : k_spanning][outcome];
      }
    });
  }
  const auto enough = [&](int p) { return ts::eventually([&] { return finished_in(p) >= 40; }, 60s); };
  EXPECT_TRUE(enough(0));
  set_status("unfreeze", 1, 2);
  EXPECT_TRUE(enough(2));
  set_status("freeze", 3, 4);
  EXPECT_TRUE(enough(4));
  set_status("unfreeze", 5, 6);
  EXPECT_TRUE(enough(6));
  stop = true;
  for (auto& t : payers) t.join();

  for (int p : {0, 4})
    EXPECT_EQ(results[p], (std::map<std::string, int>{{"422 account_inactive", finished_in(p)}})) << p;
  for (int p : {2, 6}) EXPECT_EQ(results[p], (std::map<std::string, int>{{"201", finished_in(p)}})) << p;
  for (int p : {1, 3, 5, k_spanning}) {
    for (const auto& [outcome, count] : results[p]) {
      EXPECT_TRUE(outcome == "201" || outcome == "422 account_inactive") << outcome;
    }
  }
  int paid = 0;
  for (auto& [p, outcomes] : results) paid += outcomes["201"];
  EXPECT_EQ(ts::balance(c, bob.key, b), paid);
  EXPECT_EQ(ts::balance(c, alice.key, a), 10'000'000 - paid);
}

// A freeze takes the rows of a hot account in the order every writer and sweep takes them
// (ascending id: the main row, then its shards), so it queues behind a sweep instead of
// deadlocking with it. A sweep holding a row Y and waiting for a row X of higher id deadlocks
// with any locker that took X first: a freeze that locked the rows in the order it found them on
// disk did, wherever X lay before Y (a rewritten row moves). The test makes such a pair, holds Y
// as the sweep does, waits until the freeze is queued behind it, then takes X; PostgreSQL would
// break that deadlock by failing the freeze.
TEST(AccountActors, AFreezeQueuesBehindASweepWithoutDeadlock) {
  ts::server_process server;
  ts::http_client c(server.port());
  const auto& op = server.operator_key();
  auto alice = ts::create_principal(c, op);
  auto bob = ts::create_principal(c, op);
  const auto a = ts::create_account(c, op, alice.id, "EUR", 2);
  const auto m = std::to_string(a);
  // The account's rows, as a condition on the table alias `t`.
  const auto rows_of_a = [&](const std::string& t) {
    return "(" + t + ".id = " + m + " OR " + t + ".parent_id = " + m + ")";
  };
  // Lay the rows out against their id order: rewrite them highest id first, each as a new row
  // version that the indexes point to (an indexed column changed and changed back: no HOT
  // update, whose version a scan through an index would still find at the row's old place). Each
  // new version takes its page's lowest free slot or a new one at the page's end: a later slot
  // than the rewrite before took, unless a full page sends it to another page (then a later round
  // does it).
  std::vector<std::string> rows;
  for (const char* n : {"0", "1"}) {
    rows.push_back(ts::query_value("SELECT id FROM account WHERE parent_id = " + m + " ORDER BY id DESC OFFSET " + n));
  }
  rows.push_back(m);
  // "Y,X": a row Y and a row X of higher id that lies before Y on disk.
  const auto inverted_pair = [&] {
    return ts::query_value(
        "SELECT y.id || ',' || x.id FROM account x JOIN account y ON y.id < x.id AND x.ctid < y.ctid"
        " WHERE " +
        rows_of_a("x") + " AND " + rows_of_a("y") + " LIMIT 1");
  };
  std::string pair;
  for (int round = 0; round < 10 && pair.empty(); ++round) {
    for (const auto& row : rows) {
      ts::execute_sql("UPDATE account SET owner_id = " + std::to_string(bob.id) + " WHERE id = " + row +
                      "; UPDATE account SET owner_id = " + std::to_string(alice.id) + " WHERE id = " + row);
    }
    pair = inverted_pair();
  }
  ASSERT_FALSE(pair.empty()) << "the rows of the account never lay out of id order";
  const auto comma = pair.find(',');
  const auto y = std::stoll(pair.substr(0, comma));
  const auto x = std::stoll(pair.substr(comma + 1));

  ts::account_lock sweep({y});
  ts::response frozen;
  std::thread freezer([&] {
    ts::http_client client(server.port());
    frozen = client.post("/v1/accounts/" + m + "/freeze", op, "{}");
  });
  const bool queued = ts::eventually([&] { return sweep.waiters() >= 1; });
  EXPECT_TRUE(queued) << "the freeze never waited for row " << y;
  if (queued) {
    EXPECT_NO_THROW(sweep.also_lock({x}));
  }
  sweep.release();
  freezer.join();
  EXPECT_EQ(frozen.status, 200) << frozen.body;
  EXPECT_EQ(ts::query_value("SELECT string_agg(DISTINCT status, ',') FROM account a WHERE " + rows_of_a("a")),
            "frozen");
}

// The sweeper never piles sweeps up in front of payments. With the hot account's writer stalled
// (a row lock held here on its main row) the sweeper keeps ticking every 20 ms, yet at most one
// sweep of the account (one posting per shard) is queued; the other ticks defer it. Two writers:
// the payer's debits go to the other one (account id parity), so payments keep landing on the
// shards and keep giving the sweeper something to sweep.
TEST(AccountActors, TheSweeperKeepsOneSweepPerAccountInFlight) {
  ts::server_process::options o;
  o.env = ts::unlimited_rates();
  o.env["WALLET_WRITER_COUNT"] = "2";
  o.env["WALLET_LEDGER_SWEEP_INTERVAL_MS"] = "20";
  o.env["WALLET_DATABASE_LOCK_TIMEOUT_MS"] = "60000";
  o.env["WALLET_DATABASE_STATEMENT_TIMEOUT_MS"] = "60000";
  ts::server_process server(o);
  ts::http_client c(server.port());
  const auto& op = server.operator_key();
  auto payer = ts::create_principal(c, op);
  auto merchant = ts::create_principal(c, op);
  const int shards = 4;
  const auto m = ts::create_account(c, op, merchant.id, "EUR", shards);
  auto p = ts::create_account(c, op, payer.id);
  if (p % 2 == m % 2) p = ts::create_account(c, op, payer.id);
  ASSERT_NE(p % 2, m % 2);
  ts::deposit(c, op, p, 1000);

  ts::account_lock lock({m});
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(c.post("/v1/transfers", payer.key, transfer_body(p, m, 10), ts::unique_key("pay")).status, 201);
  }
  ASSERT_TRUE(ts::eventually([&] { return lock.waiters() >= 1; })) << "no sweep reached the lock";
  const auto ticks = metric(c, "wallet_sweeper_ticks_total");
  ASSERT_TRUE(ts::eventually([&] { return metric(c, "wallet_sweeper_ticks_total") >= ticks + 25; }));
  EXPECT_LE(metric(c, "wallet_writer_postings_queued"), shards);
  EXPECT_GE(metric(c, "wallet_sweeps_deferred_total"), 20);
  // Payments still go through while the sweep waits.
  EXPECT_EQ(c.post("/v1/transfers", payer.key, transfer_body(p, m, 10), ts::unique_key("pay")).status, 201);

  lock.release();
  ASSERT_TRUE(ts::eventually([&] { return metric(c, "wallet_writer_postings_queued") == 0; }));
  EXPECT_EQ(ts::balance(c, merchant.key, m), 210);
  EXPECT_EQ(ts::balance(c, payer.key, p), 790);
}

}  // namespace
