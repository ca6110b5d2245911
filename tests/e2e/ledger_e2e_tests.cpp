// End-to-end tests of the ledger over HTTP: a real wallet-server, PostgreSQL and Redis.

#include <gtest/gtest.h>

#include <cstdio>
#include <future>
#include <set>

#include <atomic>
#include <mutex>
#include <thread>

#include "tests/support/support.hpp"

namespace ts = test_support;
using test_support::concurrently;
using test_support::transfer_body;

namespace {

// The fixture's default, unlimited rates: these tests are about the ledger, not about
// backpressure.
class LedgerE2E : public ts::shared_server_test<LedgerE2E> {
 protected:
  // Two users with one EUR account each (alice owns a, bob owns b), both empty.
  struct parties {
    ts::principal alice;
    ts::principal bob;
    std::int64_t a = 0;
    std::int64_t b = 0;
  };
  parties two_parties(ts::http_client& c) const {
    parties p;
    p.alice = ts::create_principal(c, op());
    p.bob = ts::create_principal(c, op());
    p.a = ts::create_account(c, op(), p.alice.id);
    p.b = ts::create_account(c, op(), p.bob.id);
    return p;
  }
};

// The classic race: 100 concurrent transfers of 1000 from an account holding 50000 must let
// exactly 50 through and refuse the other 50, leaving A at 0 and B at 50000.
TEST_F(LedgerE2E, ConcurrentTransfersNeverOverdraw) {
  ts::http_client c(port());
  const auto [alice, bob, a, b] = two_parties(c);
  ts::deposit(c, op(), a, 50000);

  ts::transfer_tally tally;
  concurrently(100, 50, [&](int, int) {
    ts::http_client client(port());
    tally.count(client.post("/v1/transfers", alice.key, transfer_body(a, b, 1000), ts::unique_key("race")));
  });
  EXPECT_EQ(tally.created.load(), 50);
  EXPECT_EQ(tally.refused.load(), 50);
  EXPECT_EQ(tally.other.load(), 0);
  EXPECT_EQ(ts::balance(c, alice.key, a), 0);
  EXPECT_EQ(ts::balance(c, bob.key, b), 50000);
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
  EXPECT_EQ(ts::query_value("SELECT COALESCE(sum(amount), 0) FROM ledger_entry"), "0");
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM ledger_entry WHERE account_id = " + std::to_string(a) +
                            " AND amount = -1000"),
            "50");
}

// While a debit is in flight (its batch stalled on a row lock held here), the payer's
// `available` excludes it and its `balance` does not; once it commits, both agree.
TEST_F(LedgerE2E, AvailableExcludesDebitsInFlight) {
  ts::http_client c(port());
  const auto [alice, bob, a, b] = two_parties(c);
  ts::deposit(c, op(), a, 1000);
  ts::account_lock lock({b});
  auto pending = std::async(std::launch::async, [&] {
    ts::http_client client(port());
    return client.post("/v1/transfers", alice.key, transfer_body(a, b, 300), ts::unique_key("inflight"));
  });
  std::string available;
  std::string balance;
  // The payment reaches its actor on another thread: waited for, a minute at most.
  EXPECT_TRUE(ts::eventually(
      [&] {
        auto account = c.get("/v1/accounts/" + std::to_string(a), alice.key).json();
        available = std::string(account.as_object().at("available").as_string());
        balance = std::string(account.as_object().at("balance").as_string());
        return available == "700";
      },
      std::chrono::seconds(60), std::chrono::milliseconds(20)));
  EXPECT_EQ(available, "700");
  EXPECT_EQ(balance, "1000");
  lock.release();
  auto done = pending.get();
  EXPECT_EQ(done.status, 201) << done.body;
  auto account = c.get("/v1/accounts/" + std::to_string(a), alice.key).json();
  EXPECT_EQ(account.as_object().at("available").as_string(), "700");
  EXPECT_EQ(account.as_object().at("balance").as_string(), "700");
}

// The same key twice returns the same transaction and moves money once.
TEST_F(LedgerE2E, IdempotentReplayReturnsTheStoredAnswer) {
  ts::http_client c(port());
  const auto [alice, bob, a, b] = two_parties(c);
  ts::deposit(c, op(), a, 10000);
  const auto key = ts::unique_key("replay");
  auto first = c.post("/v1/transfers", alice.key, transfer_body(a, b, 700), key);
  auto second = c.post("/v1/transfers", alice.key, transfer_body(a, b, 700), key);
  ASSERT_EQ(first.status, 201) << first.body;
  ASSERT_EQ(second.status, 201) << second.body;
  EXPECT_EQ(first.body, second.body);
  EXPECT_EQ(second.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(first.header("Idempotent-Replayed"), "");
  EXPECT_EQ(first.json().as_object().at("fromBalanceAfter").as_string(), "9300");
  EXPECT_EQ(ts::balance(c, alice.key, a), 9300);

  // The same key with another amount is refused and changes nothing.
  auto reused = c.post("/v1/transfers", alice.key, transfer_body(a, b, 701), key);
  EXPECT_EQ(reused.status, 422) << reused.body;
  EXPECT_EQ(reused.json().as_object().at("code").as_string(), "idempotency_key_reused");
  EXPECT_EQ(ts::balance(c, alice.key, a), 9300);
}

// A replay is answered from the journal even after the funds it spent are gone.
TEST_F(LedgerE2E, ReplayAfterFundsAreSpentStillReplays) {
  ts::http_client c(port());
  const auto [alice, bob, a, b] = two_parties(c);
  ts::deposit(c, op(), a, 1000);
  const auto key = ts::unique_key("spent");
  auto first = c.post("/v1/transfers", alice.key, transfer_body(a, b, 1000), key);
  ASSERT_EQ(first.status, 201) << first.body;
  auto again = c.post("/v1/transfers", alice.key, transfer_body(a, b, 1000), key);
  EXPECT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(again.body, first.body);
  EXPECT_EQ(again.header("Idempotent-Replayed"), "true");
}

// Twenty concurrent requests with one key make one transaction and get twenty identical answers.
TEST_F(LedgerE2E, ConcurrentDuplicatesShareOneTransaction) {
  ts::http_client c(port());
  const auto [alice, bob, a, b] = two_parties(c);
  ts::deposit(c, op(), a, 5000);
  const auto key = ts::unique_key("flight");
  std::mutex m;
  std::vector<ts::response> answers;
  concurrently(20, 20, [&](int, int) {
    ts::http_client client(port());
    auto r = client.post("/v1/transfers", alice.key, transfer_body(a, b, 1000), key);
    std::lock_guard lock(m);
    answers.push_back(r);
  });
  ASSERT_EQ(answers.size(), 20u);
  for (const auto& r : answers) {
    EXPECT_EQ(r.status, 201) << r.body;
    EXPECT_EQ(r.body, answers[0].body);
  }
  EXPECT_EQ(ts::balance(c, alice.key, a), 4000);
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM journal_transaction WHERE idempotency_key = '" + key + "'"), "1");
}

// A refused request leaves no trace: the same key may be retried once funds arrive.
// An account made under an Idempotency-Key is made once: the same request sent again (even several
// at once) gets the first answer, and another request under the key is 422.
TEST_F(LedgerE2E, AnAccountMadeUnderAnIdempotencyKeyIsMadeOnce) {
  ts::http_client c(port());
  const auto owner = ts::create_principal(c, op());
  const auto key = "open-" + std::to_string(owner.id);
  const auto body = R"({"ownerId":)" + std::to_string(owner.id) + R"(,"currency":"EUR"})";
  const auto open = [&](ts::http_client& client, const std::string& b) {
    return client.request(
        "POST", "/v1/accounts", b,
        {{"Authorization", "Bearer " + op()}, {"Content-Type", "application/json"}, {"Idempotency-Key", key}});
  };
  std::vector<ts::response> answers(6);
  concurrently(static_cast<int>(answers.size()), static_cast<int>(answers.size()), [&](int i, int) {
    ts::http_client own(port());
    answers[static_cast<std::size_t>(i)] = open(own, body);
  });
  ts::expect_done_once(answers, 201);
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM account WHERE owner_id = " + std::to_string(owner.id)), "1");
  const auto other = open(c, R"({"ownerId":)" + std::to_string(owner.id) + R"(,"currency":"USD"})");
  EXPECT_EQ(other.status, 422) << other.body;
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM account WHERE owner_id = " + std::to_string(owner.id)), "1");
}

TEST_F(LedgerE2E, FailedRequestMayBeRetriedWithTheSameKey) {
  ts::http_client c(port());
  const auto [alice, bob, a, b] = two_parties(c);
  const auto key = ts::unique_key("retry");
  auto poor = c.post("/v1/transfers", alice.key, transfer_body(a, b, 500), key);
  EXPECT_EQ(poor.status, 422) << poor.body;
  ts::deposit(c, op(), a, 500);
  auto rich = c.post("/v1/transfers", alice.key, transfer_body(a, b, 500), key);
  EXPECT_EQ(rich.status, 201) << rich.body;
  EXPECT_EQ(ts::balance(c, bob.key, b), 500);
}

// Opposite transfers between two accounts from many clients: no deadlock, no error other than
// insufficient funds, and the final balances are exactly what the successes imply.
TEST_F(LedgerE2E, OppositeTransfersDoNotDeadlock) {
  ts::http_client c(port());
  const auto [alice, bob, a, b] = two_parties(c);
  ts::deposit(c, op(), a, 20000);
  ts::deposit(c, op(), b, 20000);
  std::atomic<std::int64_t> a_to_b{0}, b_to_a{0};
  std::atomic<int> unexpected{0};
  concurrently(400, 40, [&](int i, int) {
    ts::http_client client(port());
    const bool forward = i % 2 == 0;
    const std::int64_t amount = 100 + (i % 7) * 50;
    auto r = forward ? client.post("/v1/transfers", alice.key, transfer_body(a, b, amount), ts::unique_key("ab"))
                     : client.post("/v1/transfers", bob.key, transfer_body(b, a, amount), ts::unique_key("ba"));
    if (r.status == 201) {
      (forward ? a_to_b : b_to_a) += amount;
    } else if (!(r.status == 422 && r.json().as_object().at("code").as_string() == "insufficient_funds")) {
      ++unexpected;
      ADD_FAILURE() << r.status << " " << r.body;
    }
  });
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_EQ(ts::balance(c, alice.key, a), 20000 - a_to_b.load() + b_to_a.load());
  EXPECT_EQ(ts::balance(c, bob.key, b), 20000 + a_to_b.load() - b_to_a.load());
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// Every kind of bad input gets its status and code, and the ledger does not change.
TEST_F(LedgerE2E, BadInputIsRefusedPrecisely) {
  ts::http_client c(port());
  const auto [alice, bob, a, b] = two_parties(c);
  auto carol = ts::create_principal(c, op());
  const auto usd = ts::create_account(c, op(), carol.id, "USD");
  ts::deposit(c, op(), a, 5000);
  const auto from = std::to_string(a);
  const auto to = std::to_string(b);
  // The entries on this test's accounts: the server's sweeper may meanwhile sweep the shards of
  // hot accounts that other suites left in the database, so the whole table is not a measure.
  const auto entries_query =
      "SELECT count(*) FROM ledger_entry WHERE account_id IN (" + from + ", " + to + ", " + std::to_string(usd) + ")";
  const auto entries_before = ts::query_value(entries_query);

  struct bad_case {
    std::string body;
    int status;
    std::string code;
  };
  const std::vector<bad_case> cases = {
      {R"({"fromAccountId":)" + from + R"(,"toAccountId":)" + to + R"(,"amount":0})", 400, "invalid_request"},
      {R"({"fromAccountId":)" + from + R"(,"toAccountId":)" + to + R"(,"amount":-5})", 400, "invalid_request"},
      {R"({"fromAccountId":)" + from + R"(,"toAccountId":)" + to + R"(,"amount":10.5})", 400, "invalid_request"},
      {R"({"fromAccountId":)" + from + R"(,"toAccountId":)" + to + R"(,"amount":1e3})", 400, "invalid_request"},
      {R"({"fromAccountId":)" + from + R"(,"toAccountId":)" + to + R"(,"amount":"12a"})", 400, "invalid_request"},
      {R"({"fromAccountId":)" + from + R"(,"toAccountId":)" + to + R"(,"amount":"-12"})", 400, "invalid_request"},
      {R"({"fromAccountId":)" + from + R"(,"toAccountId":)" + to + R"(,"amount":9007199254740992})", 400,
       "invalid_request"},
      {R"({"fromAccountId":)" + from + R"(,"toAccountId":)" + to + R"(,"amount":"99999999999999999999"})", 400,
       "invalid_request"},
      {R"({"fromAccountId":)" + from + R"(,"toAccountId":)" + to + R"(,"amount":"1000000000000000001"})", 400,
       "invalid_request"},
      {R"({"fromAccountId":)" + from + R"(,"toAccountId":)" + to + R"(,"amount":true})", 400, "invalid_request"},
      {R"({"fromAccountId":)" + from + R"(,"toAccountId":)" + to + R"(,"amount":10,"memo":"x"})", 400,
       "invalid_request"},
      {R"({"fromAccountId":)" + from + R"(,"toAccountId":)" + to + R"(,"amount":10,"amount":20})", 400,
       "invalid_request"},
      {R"({"fromAccountId":")" + from + R"(x","toAccountId":)" + to + R"(,"amount":10})", 400, "invalid_request"},
      {R"({"toAccountId":)" + to + R"(,"amount":10})", 400, "invalid_request"},
      {R"([1,2])", 400, "invalid_request"},
      {R"({"fromAccountId":)" + from + R"(,"toAccountId":{"x":1},"amount":10})", 400, "invalid_request"},
      {R"(not json)", 400, "invalid_request"},
      {R"({"fromAccountId":)" + from + R"(,"toAccountId":)" + from + R"(,"amount":10})", 422, "same_account"},
      {R"({"fromAccountId":)" + from + R"(,"toAccountId":)" + std::to_string(usd) + R"(,"amount":10})", 422,
       "currency_mismatch"},
      {R"({"fromAccountId":)" + from + R"(,"toAccountId":)" + to + R"(,"amount":999999})", 422, "insufficient_funds"},
      {R"({"fromAccountId":)" + to + R"(,"toAccountId":)" + from + R"(,"amount":10})", 404, "not_found"},
      {R"({"fromAccountId":)" + from + R"(,"toAccountId":987654321,"amount":10})", 404, "not_found"},
  };
  for (const auto& bc : cases) {
    auto r = c.post("/v1/transfers", alice.key, bc.body, ts::unique_key("bad"));
    EXPECT_EQ(r.status, bc.status) << bc.body << " -> " << r.body;
    EXPECT_EQ(r.header("Content-Type"), "application/problem+json") << bc.body;
    if (r.status == bc.status) {
      auto j = r.json().as_object();
      EXPECT_EQ(j.at("code").as_string(), bc.code) << bc.body;
      EXPECT_FALSE(j.at("detail").as_string().empty()) << bc.body;
    }
  }

  // No Idempotency-Key, a too long one, a wrong media type, no key at all, an unknown key.
  auto no_key = c.post("/v1/transfers", alice.key, transfer_body(a, b, 10));
  EXPECT_EQ(no_key.status, 400) << no_key.body;
  auto long_key = c.post("/v1/transfers", alice.key, transfer_body(a, b, 10), std::string(256, 'k'));
  EXPECT_EQ(long_key.status, 400) << long_key.body;
  auto text = c.request("POST", "/v1/transfers", transfer_body(a, b, 10),
                        {{"Authorization", "Bearer " + alice.key},
                         {"Content-Type", "text/plain"},
                         {"Idempotency-Key", ts::unique_key("media")}});
  EXPECT_EQ(text.status, 415) << text.body;
  auto anonymous = c.request("POST", "/v1/transfers", transfer_body(a, b, 10), {{"Content-Type", "application/json"}});
  EXPECT_EQ(anonymous.status, 401) << anonymous.body;
  auto unknown = c.post("/v1/transfers", "wk_not_a_key", transfer_body(a, b, 10), ts::unique_key("unknown"));
  EXPECT_EQ(unknown.status, 401) << unknown.body;
  // A user may not deposit; a frozen account refuses to pay.
  auto user_deposit =
      c.post("/v1/deposits", alice.key, R"({"accountId":)" + from + R"(,"amount":10})", ts::unique_key("d"));
  EXPECT_EQ(user_deposit.status, 403) << user_deposit.body;

  EXPECT_EQ(ts::query_value(entries_query), entries_before);
  EXPECT_EQ(ts::balance(c, alice.key, a), 5000);

  auto freeze = c.post("/v1/accounts/" + from + "/freeze", op(), "");
  EXPECT_EQ(freeze.status, 200) << freeze.body;
  auto frozen = c.post("/v1/transfers", alice.key, transfer_body(a, b, 10), ts::unique_key("frozen"));
  EXPECT_EQ(frozen.status, 422) << frozen.body;
  EXPECT_EQ(frozen.json().as_object().at("code").as_string(), "account_inactive");
  EXPECT_EQ(frozen.json().as_object().at("detail").as_string(),
            "account " + from + " is frozen or closed: it cannot pay or be paid");
}

// Accounts, entries and transactions read back what was written; another user's account is 404.
TEST_F(LedgerE2E, ReadsShowTheLedger) {
  ts::http_client c(port());
  const auto [alice, bob, a, b] = two_parties(c);
  ts::deposit(c, op(), a, 3000);
  std::string last_tx;
  for (int i = 0; i < 5; ++i) {
    auto r = c.post("/v1/transfers", alice.key, transfer_body(a, b, 100), ts::unique_key("read"));
    ASSERT_EQ(r.status, 201) << r.body;
    last_tx = std::string(r.json().as_object().at("transactionId").as_string());
  }
  auto account = c.get("/v1/accounts/" + std::to_string(a), alice.key);
  ASSERT_EQ(account.status, 200);
  EXPECT_EQ(account.json().as_object().at("balance").as_string(), "2500");
  EXPECT_EQ(c.get("/v1/accounts/" + std::to_string(b), alice.key).status, 404);

  // Six entries (one deposit, five transfers), read three at a time.
  auto page1 = c.get("/v1/accounts/" + std::to_string(a) + "/entries?limit=3", alice.key);
  ASSERT_EQ(page1.status, 200) << page1.body;
  auto p1 = page1.json().as_object();
  ASSERT_EQ(p1.at("entries").as_array().size(), 3u);
  ASSERT_TRUE(p1.at("next").is_string());
  auto page2 =
      c.get("/v1/accounts/" + std::to_string(a) + "/entries?limit=3&after=" + std::string(p1.at("next").as_string()),
            alice.key);
  auto p2 = page2.json().as_object();
  ASSERT_EQ(p2.at("entries").as_array().size(), 3u);
  EXPECT_TRUE(p2.at("next").is_null());
  EXPECT_EQ(p2.at("entries").as_array().back().as_object().at("balanceAfter").as_string(), "2500");
  EXPECT_EQ(c.get("/v1/accounts/" + std::to_string(a) + "/entries?limit=0", alice.key).status, 400);

  auto tx = c.get("/v1/transactions/" + last_tx, bob.key);
  ASSERT_EQ(tx.status, 200) << tx.body;
  EXPECT_EQ(tx.json().as_object().at("entries").as_array().size(), 2u);
  auto stranger = ts::create_principal(c, op());
  EXPECT_EQ(c.get("/v1/transactions/" + last_tx, stranger.key).status, 404);
}

// A user names, as its payer, the id the next account will get; that account is then created
// for another user, whose first payment from it must go through at once. (A leftover actor of
// the id, which had found no account, used to answer 404 to the owner for as long as anything
// touched it.)
TEST_F(LedgerE2E, NamingAnAccountThatDoesNotExistLeavesNothingBehind) {
  ts::http_client c(port());
  const auto [alice, bob, a, b] = two_parties(c);
  ts::deposit(c, op(), a, 1000);
  const auto next = std::stoll(ts::query_value("SELECT last_value + 1 FROM account_id_seq"));
  auto probe = c.post("/v1/transfers", alice.key, transfer_body(next, b, 10), ts::unique_key("probe"));
  ASSERT_EQ(probe.status, 404) << probe.body;
  const auto created = ts::create_account(c, op(), bob.id);
  ASSERT_EQ(created, next) << "another account was created meanwhile; the test needs the predicted id";
  ts::deposit(c, op(), created, 500);
  auto pay = c.post("/v1/transfers", bob.key, transfer_body(created, b, 200), ts::unique_key("owner"));
  EXPECT_EQ(pay.status, 201) << pay.body;
  EXPECT_EQ(ts::balance(c, bob.key, created), 300);
}

// A transaction shows each party the balanceAfter of its own accounts only: the payer does not
// learn the payee's balance, the payee not the payer's, and the owner of a deposited account not
// the clearing account's (all the money issued in that currency). An operator sees all of them.
TEST_F(LedgerE2E, ATransactionShowsOnlyYourOwnBalances) {
  ts::http_client c(port());
  const auto [alice, bob, a, b] = two_parties(c);
  auto deposited =
      c.post("/v1/deposits", op(), R"({"accountId":)" + std::to_string(a) + R"(,"amount":700})", ts::unique_key("dep"));
  ASSERT_EQ(deposited.status, 201) << deposited.body;
  auto paid = c.post("/v1/transfers", alice.key, transfer_body(a, b, 200), ts::unique_key("pay"));
  ASSERT_EQ(paid.status, 201) << paid.body;
  const std::string payment(paid.json().as_object().at("transactionId").as_string());
  const std::string deposit(deposited.json().as_object().at("transactionId").as_string());

  // The accounts whose entry shows balanceAfter, as `key` reads transaction `id`.
  auto balances_shown = [&](const std::string& id, const std::string& key) {
    auto r = c.get("/v1/transactions/" + id, key);
    EXPECT_EQ(r.status, 200) << r.body;
    std::set<std::int64_t> shown;
    const auto body = r.json();
    for (const auto& e : body.as_object().at("entries").as_array()) {
      const auto& entry = e.as_object();
      if (entry.contains("balanceAfter")) shown.insert(entry.at("accountId").as_int64());
    }
    return shown;
  };
  EXPECT_EQ(balances_shown(payment, alice.key), std::set<std::int64_t>{a});
  EXPECT_EQ(balances_shown(payment, bob.key), std::set<std::int64_t>{b});
  EXPECT_EQ(balances_shown(payment, op()), (std::set<std::int64_t>{a, b}));
  EXPECT_EQ(balances_shown(deposit, alice.key), std::set<std::int64_t>{a});
  EXPECT_EQ(balances_shown(deposit, op()).size(), 2u);
}

// A NUL character (\u0000) in any string field answers 400 with a reason, and nothing is written:
// PostgreSQL cannot store it, and refusing it in the database would fail the writer's whole batch.
TEST_F(LedgerE2E, ANulCharacterInAStringIsRefused) {
  ts::http_client c(port());
  const auto [alice, bob, a, b] = two_parties(c);
  const std::string key = ts::unique_key("nul");
  auto r = c.post("/v1/deposits", op(),
                  R"({"accountId":)" + std::to_string(a) + R"(,"amount":100,"externalRef":"ref\u0000x"})", key);
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json().as_object().at("code").as_string(), "invalid_request");
  EXPECT_NE(r.body.find("NUL"), std::string::npos) << r.body;
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM journal_transaction WHERE idempotency_key = '" + key + "'"), "0");
  EXPECT_EQ(ts::balance(c, alice.key, a), 0);
  auto named = c.post("/v1/principals", op(), R"({"name":"x\u0000y","role":"user"})");
  EXPECT_EQ(named.status, 400) << named.body;
}

}  // namespace

namespace {

// The README's first payment is docs/quickstart.sh; run word for word against a server, it moves
// the money it says: two users, a deposit of 50000 to Alice, a payment of 1000 to Bob.
TEST_F(LedgerE2E, TheQuickstartScriptMakesItsFirstPayment) {
  const std::string command = "WALLET_URL=http://127.0.0.1:" + std::to_string(port()) + " OP='" + op() + "' bash " +
                              ts::source_dir() + "/docs/quickstart.sh 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("alice has 49000 left"), std::string::npos) << output;
  EXPECT_NE(output.find("bob's balance: 1000"), std::string::npos) << output;
}

}  // namespace
