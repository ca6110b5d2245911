// End-to-end tests of batch transfers (POST /v1/transfers/batch) and of fee_revenue as a hot
// account, over HTTP against a real wallet-server, PostgreSQL and Redis: atomic batches move all
// or nothing, plain batches move exactly their good items, a batch replays its stored answer, a
// batch over the limit is refused, a batch racing single payments of its payer never overdraws it,
// and the fees of many concurrent payments into a hot merchant add up on fee_revenue's shards and
// main row, before and after sweeping, with a clean reconciliation.

#include <gtest/gtest.h>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <pqxx/pqxx>

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/database.hpp"
#include "tests/support/support.hpp"

namespace ts = test_support;

namespace {

std::string str(const boost::json::value& v) { return std::string(v.as_string()); }

struct item {
  std::int64_t from;
  std::int64_t to;
  std::int64_t amount;
};

std::string batch_body(bool atomic, const std::vector<item>& items) {
  boost::json::array transfers;
  for (std::size_t i = 0; i < items.size(); ++i) {
    boost::json::object o;
    o["fromAccountId"] = items[i].from;
    o["toAccountId"] = items[i].to;
    o["amount"] = items[i].amount;
    o["reference"] = "salary " + std::to_string(i);
    transfers.push_back(std::move(o));
  }
  boost::json::object body;
  body["atomic"] = atomic;
  body["transfers"] = std::move(transfers);
  return boost::json::serialize(body);
}

class BatchE2E : public ts::shared_server_test<BatchE2E> {
 protected:
  std::pair<ts::principal, std::int64_t> account_of(ts::http_client& c, const std::string& currency = "EUR",
                                                    int shards = 0, const std::string& role = "user") const {
    auto who = ts::create_principal(c, op(), role);
    return {who, ts::create_account(c, op(), who.id, currency, shards)};
  }

  std::int64_t account_for(ts::http_client& c, const ts::principal& who, const std::string& currency = "EUR") const {
    return ts::create_account(c, op(), who.id, currency);
  }

  ts::response batch(ts::http_client& c, const std::string& key, bool atomic, const std::vector<item>& items,
                     const std::string& idempotency_key = {}) const {
    return c.post("/v1/transfers/batch", key, batch_body(atomic, items),
                  idempotency_key.empty() ? ts::unique_key("batch") : idempotency_key);
  }

  // An item committed by an earlier attempt of its batch, visible only after the retry first looked
  // for it, is answered with its receipt, not refused for the money or the status it changed. The
  // earlier attempt's commit is played by a transaction of the test's: it posts the item (payroll
  // pays 100 under the item's key and request hash) while it holds the account table, and commits
  // once the retry, past its first lookup, waits to read the payee it has not seen. The payroll is
  // frozen, and its live actor refuses the item; the batch must look the item up again before
  // answering. `legacy`: the earlier attempt committed before the retry, under the key item 0 had
  // before it took the batch's own ("batch/0/<key>"), which the retry must find.
  void answered_with_the_earlier_commit(bool atomic, bool legacy = false) const {
    ts::http_client c(port());
    const auto [boss, payroll] = account_of(c);
    ts::deposit(c, op(), payroll, 200);
    // A payment first, so that the payroll's actor is alive and learns of the freeze.
    const auto [other, other_account] = account_of(c);
    ASSERT_EQ(batch(c, boss.key, false, {{payroll, other_account, 100}}).status, 201);
    // The payee is made behind the server's back, so the batch has to read it.
    const auto [owner, unused] = account_of(c);
    const auto payee = std::stoll(ts::query_value("INSERT INTO account (owner_id, currency, kind) VALUES (" +
                                                  std::to_string(owner.id) + ", 'EUR', 'user') RETURNING id"));
    ASSERT_EQ(c.post("/v1/accounts/" + std::to_string(payroll) + "/freeze", op(), "{}").status, 200);

    const std::vector<item> items = {{payroll, payee, 100}};
    const auto key = ts::unique_key("earlier-attempt");
    // The item's request hash, as the server makes it (http/handlers/transfers.cpp).
    const std::string canonical = "transfer-batch\n" + std::string(atomic ? "atomic" : "each") + "\n" +
                                  std::to_string(payroll) + "\n" + std::to_string(payee) + "\n100\n" +
                                  ts::query_value("SELECT encode(sha256('salary 0'), 'hex')") + "\n";
    const auto hash =
        ts::query_value("SELECT encode(sha256(convert_to(" + ts::sql_literal(canonical) + ", 'UTF8')), 'hex')");
    const auto id = ts::query_value("SELECT gen_random_uuid()");

    pqxx::connection conn(ts::owner_database_url());
    pqxx::work earlier(conn);
    earlier.exec("LOCK TABLE account IN ACCESS EXCLUSIVE MODE");
    earlier.exec("INSERT INTO ledger_entry (transaction_id, account_id, currency, amount, balance_after) VALUES ('" +
                 id + "', " + std::to_string(payroll) + ", 'EUR', -100, 0), ('" + id + "', " + std::to_string(payee) +
                 ", 'EUR', 100, 100)");
    earlier.exec(
        "INSERT INTO journal_transaction (id, principal_id, idempotency_key, request_hash, type, response_status,"
        " response_body, first_entry_id, last_entry_id) SELECT '" +
        id + "', " + std::to_string(boss.id) + ", " + ts::sql_literal(legacy ? "batch/0/" + key : key) + ", " +
        ts::sql_literal(hash + "/0") + ", 'TRANSFER', 201, " +
        ts::sql_literal("{\"transactionId\":\"" + id +
                        "\",\"status\":\"COMPLETED\",\"fromBalanceAfter\":\"0\",\"fee\":\"0\",\"netAmount\":\"100\"}") +
        ", min(id), max(id) FROM ledger_entry WHERE transaction_id = '" + id + "'");
    earlier.exec("UPDATE account SET balance = balance - 100, version = version + 1 WHERE id = " +
                 std::to_string(payroll));
    earlier.exec("UPDATE account SET balance = balance + 100, version = version + 1 WHERE id = " +
                 std::to_string(payee));

    if (legacy) earlier.commit();
    auto retry = std::async(std::launch::async, [&] {
      ts::http_client client(port());
      return batch(client, boss.key, atomic, items, key);
    });
    if (!legacy) {
      // A reader of the server's waiting to read the table (the owner may not see its query's
      // text): a plain read's lock, not the row locks the hold expirer also waits for here.
      ASSERT_TRUE(ts::eventually([&] {
        return ts::query_value(
                   "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                   " WHERE NOT l.granted AND l.relation = 'account'::regclass AND l.mode = 'AccessShareLock'"
                   "   AND a.application_name = 'wallet-reader'") != "0";
      })) << "the retry never read the payee";
      earlier.commit();
    }

    const auto answer = retry.get();
    ASSERT_EQ(answer.status, 201) << answer.body;
    const auto body = answer.json();
    const auto& result = body.as_object().at("results").as_array().at(0).as_object();
    ASSERT_EQ(result.at("status").as_int64(), 201) << answer.body;
    EXPECT_EQ(str(result.at("receipt").as_object().at("transactionId")), id);
    EXPECT_EQ(held(payroll), 0);
    EXPECT_EQ(held(payee), 100);
    EXPECT_TRUE(ts::reconciliation_ok(c, op()));
  }

  // The balance of an account as the database holds it: main row and shards.
  static std::int64_t held(std::int64_t account) {
    return std::stoll(ts::query_value("SELECT COALESCE(sum(balance), 0) FROM account WHERE id = " +
                                      std::to_string(account) + " OR parent_id = " + std::to_string(account)));
  }
};

// An atomic batch whose third item is more than the payer has left moves nothing: 422 names index
// 2 and its code, every balance is as it was, and no journal row carries the batch's references.
TEST_F(BatchE2E, AnAtomicBatchWithOneBadItemMovesNothing) {
  ts::http_client c(port());
  const auto [boss, payroll] = account_of(c);
  ts::deposit(c, op(), payroll, 1'000);
  const auto [a, pa] = account_of(c);
  const auto [b, pb] = account_of(c);
  const auto [d, pd] = account_of(c);

  auto r = batch(c, boss.key, true, {{payroll, pa, 300}, {payroll, pb, 300}, {payroll, pd, 500}, {payroll, pa, 100}});
  ASSERT_EQ(r.status, 422) << r.body;
  auto problem = r.json().as_object();
  EXPECT_EQ(str(problem.at("code")), "insufficient_funds");
  EXPECT_EQ(problem.at("index").as_int64(), 2);
  EXPECT_EQ(held(payroll), 1'000);
  EXPECT_EQ(held(pa), 0);
  EXPECT_EQ(held(pb), 0);
  EXPECT_EQ(held(pd), 0);

  // A payee in another currency is found by the writer under its locks: the same all-or-nothing.
  const auto usd = account_for(c, b, "USD");
  r = batch(c, boss.key, true, {{payroll, pa, 100}, {payroll, usd, 100}});
  ASSERT_EQ(r.status, 422) << r.body;
  problem = r.json().as_object();
  EXPECT_EQ(str(problem.at("code")), "currency_mismatch");
  EXPECT_EQ(problem.at("index").as_int64(), 1);
  EXPECT_EQ(held(payroll), 1'000);
  EXPECT_EQ(held(pa), 0);

  // A payer the caller does not own refuses the whole batch with 404, naming that item.
  r = batch(c, boss.key, true, {{payroll, pa, 100}, {pb, pa, 100}});
  ASSERT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(r.json().as_object().at("index").as_int64(), 1);

  // Good items only: all of them commit, each with its receipt.
  r = batch(c, boss.key, true, {{payroll, pa, 300}, {payroll, pb, 700}});
  ASSERT_EQ(r.status, 201) << r.body;
  const auto results = r.json().as_object().at("results").as_array();
  ASSERT_EQ(results.size(), 2U);
  EXPECT_EQ(results[1].as_object().at("status").as_int64(), 201);
  EXPECT_EQ(str(results[1].as_object().at("receipt").as_object().at("fromBalanceAfter")), "0");
  EXPECT_EQ(held(payroll), 0);
  EXPECT_EQ(held(pa), 300);
  EXPECT_EQ(held(pb), 700);
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// A plain batch moves exactly its good items; each item has its own answer, in order.
TEST_F(BatchE2E, APlainBatchMovesExactlyTheGoodItems) {
  ts::http_client c(port());
  const auto [boss, payroll] = account_of(c);
  ts::deposit(c, op(), payroll, 1'000);
  const auto [a, pa] = account_of(c);
  const auto [b, pb] = account_of(c);
  const auto usd = account_for(c, b, "USD");

  auto r =
      batch(c, boss.key, false,
            {{payroll, pa, 300}, {payroll, pb, 5'000}, {payroll, pb, 200}, {payroll, usd, 100}, {payroll, payroll, 1}});
  ASSERT_EQ(r.status, 201) << r.body;
  const auto results = r.json().as_object().at("results").as_array();
  ASSERT_EQ(results.size(), 5U);
  const std::vector<std::pair<int, std::string>> expected = {
      {201, ""}, {422, "insufficient_funds"}, {201, ""}, {422, "currency_mismatch"}, {422, "same_account"}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& o = results[i].as_object();
    EXPECT_EQ(o.at("index").as_int64(), static_cast<std::int64_t>(i));
    EXPECT_EQ(o.at("status").as_int64(), expected[i].first) << i;
    if (expected[i].first == 422) {
      EXPECT_EQ(str(o.at("code")), expected[i].second) << i;
    }
  }
  EXPECT_EQ(held(payroll), 500);
  EXPECT_EQ(held(pa), 300);
  EXPECT_EQ(held(pb), 200);
  EXPECT_EQ(held(usd), 0);
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// A batch may draw on several accounts of its caller: each payer's items are decided against that
// payer alone, plain or atomic.
TEST_F(BatchE2E, ABatchOfSeveralPayersDecidesEachPayerAlone) {
  ts::http_client c(port());
  const auto [boss, first] = account_of(c);
  const auto second = account_for(c, boss);
  const auto third = account_for(c, boss);
  ts::deposit(c, op(), first, 500);
  ts::deposit(c, op(), second, 500);
  ts::deposit(c, op(), third, 500);
  const auto [a, pa] = account_of(c);

  auto r = batch(c, boss.key, false,
                 {{first, pa, 300}, {second, pa, 400}, {third, pa, 600}, {first, pa, 300}, {second, pa, 100}});
  ASSERT_EQ(r.status, 201) << r.body;
  const auto answer = r.json();
  const auto& results = answer.as_object().at("results").as_array();
  const std::vector<std::int64_t> statuses = {201, 201, 422, 422, 201};
  for (std::size_t i = 0; i < statuses.size(); ++i) {
    EXPECT_EQ(results[i].as_object().at("status").as_int64(), statuses[i]) << i;
  }
  EXPECT_EQ(held(first), 200);
  EXPECT_EQ(held(second), 0);
  EXPECT_EQ(held(third), 500);
  EXPECT_EQ(held(pa), 800);

  // Atomic: the third payer's item cannot be paid, so nothing of the other payers moves either.
  r = batch(c, boss.key, true, {{first, pa, 200}, {third, pa, 600}});
  ASSERT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(r.json().as_object().at("index").as_int64(), 1);
  EXPECT_EQ(held(first), 200);
  r = batch(c, boss.key, true, {{first, pa, 200}, {third, pa, 500}});
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(held(first), 0);
  EXPECT_EQ(held(third), 0);
  EXPECT_EQ(held(pa), 1'500);
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// A replay of the batch's key returns the stored answer (even once the payer could no longer pay
// the refused item, or could pay it now), and the same key with another body is refused.
TEST_F(BatchE2E, ABatchReplayReturnsTheSameAnswer) {
  ts::http_client c(port());
  const auto [boss, payroll] = account_of(c);
  ts::deposit(c, op(), payroll, 1'000);
  const auto [a, pa] = account_of(c);
  const std::vector<item> items = {{payroll, pa, 600}, {payroll, pa, 600}};
  const auto key = ts::unique_key("payday");
  auto first = batch(c, boss.key, false, items, key);
  ASSERT_EQ(first.status, 201) << first.body;
  EXPECT_EQ(held(payroll), 400);

  ts::deposit(c, op(), payroll, 1'000);  // the refused item could be paid now: the answer stays
  auto again = batch(c, boss.key, false, items, key);
  ASSERT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(again.body, first.body);
  EXPECT_EQ(again.header("idempotent-replayed"), "true");
  EXPECT_EQ(held(payroll), 1'400);
  EXPECT_EQ(held(pa), 600);

  auto other = batch(c, boss.key, false, {{payroll, pa, 1}}, key);
  EXPECT_EQ(other.status, 422) << other.body;
  EXPECT_EQ(str(other.json().as_object().at("code")), "idempotency_key_reused");

  // An atomic batch replays too.
  const auto atomic_key = ts::unique_key("atomic");
  auto committed = batch(c, boss.key, true, {{payroll, pa, 100}, {payroll, pa, 200}}, atomic_key);
  ASSERT_EQ(committed.status, 201) << committed.body;
  auto replayed = batch(c, boss.key, true, {{payroll, pa, 100}, {payroll, pa, 200}}, atomic_key);
  EXPECT_EQ(replayed.body, committed.body);
  EXPECT_EQ(replayed.header("idempotent-replayed"), "true");
  EXPECT_EQ(held(payroll), 1'100);
}

// A batch whose every item committed stores no answer of its own: its replay is rebuilt from the
// items' journal rows, byte for byte, and the key still refuses another body (one item fewer, or
// another amount) without moving money.
TEST_F(BatchE2E, AFullyCommittedBatchReplaysFromItsItems) {
  ts::http_client c(port());
  const auto [boss, payroll] = account_of(c);
  ts::deposit(c, op(), payroll, 1'000);
  const auto [a, pa] = account_of(c);
  const auto [b, pb] = account_of(c);
  const std::vector<item> items = {{payroll, pa, 100}, {payroll, pb, 200}, {payroll, pa, 300}};
  const auto key = ts::unique_key("all-committed");
  auto first = batch(c, boss.key, false, items, key);
  ASSERT_EQ(first.status, 201) << first.body;
  EXPECT_EQ(first.header("idempotent-replayed"), "");

  auto again = batch(c, boss.key, false, items, key);
  ASSERT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(again.body, first.body);
  EXPECT_EQ(again.header("idempotent-replayed"), "true");

  auto fewer = batch(c, boss.key, false, {{payroll, pa, 100}, {payroll, pb, 200}}, key);
  EXPECT_EQ(fewer.status, 422) << fewer.body;
  EXPECT_EQ(str(fewer.json().as_object().at("code")), "idempotency_key_reused");
  auto other = batch(c, boss.key, false, {{payroll, pa, 100}, {payroll, pb, 200}, {payroll, pa, 301}}, key);
  EXPECT_EQ(other.status, 422) << other.body;
  EXPECT_EQ(str(other.json().as_object().at("code")), "idempotency_key_reused");

  EXPECT_EQ(held(payroll), 400);
  EXPECT_EQ(held(pa), 400);
  EXPECT_EQ(held(pb), 200);
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// (answered_with_the_earlier_commit, in the fixture: the scene and what it must answer.)
TEST_F(BatchE2E, AnItemCommittedByAnEarlierAttemptIsAnsweredWithItsReceipt) { answered_with_the_earlier_commit(false); }

// The same for an atomic batch, whose actor's refusal would refuse the whole batch.
TEST_F(BatchE2E, AnAtomicBatchCommittedByAnEarlierAttemptIsAnsweredWithItsReceipts) {
  answered_with_the_earlier_commit(true);
}

// An item 0 committed under the key it had before it took the batch's own is found by a retry.
TEST_F(BatchE2E, AnItemCommittedUnderItsFormerKeyIsAnsweredWithItsReceipt) {
  answered_with_the_earlier_commit(false, true);
}

// A batch's key is taken for the principal's single requests too, and a single request's key for
// its batches: the second request under a key is 422 idempotency_key_reused, and moves nothing.
TEST_F(BatchE2E, ABatchAndASingleTransferDoNotShareAKey) {
  ts::http_client c(port());
  const auto [boss, payroll] = account_of(c);
  ts::deposit(c, op(), payroll, 1'000);
  const auto [a, pa] = account_of(c);

  const auto single_first = ts::unique_key("single-first");
  ASSERT_EQ(c.post("/v1/transfers", boss.key, ts::transfer_body(payroll, pa, 100), single_first).status, 201);
  for (const bool atomic : {false, true}) {
    auto reused = batch(c, boss.key, atomic, {{payroll, pa, 100}, {payroll, pa, 200}}, single_first);
    EXPECT_EQ(reused.status, 422) << reused.body;
    EXPECT_EQ(str(reused.json().as_object().at("code")), "idempotency_key_reused") << reused.body;
  }
  EXPECT_EQ(held(payroll), 900);

  const auto batch_first = ts::unique_key("batch-first");
  ASSERT_EQ(batch(c, boss.key, false, {{payroll, pa, 100}, {payroll, pa, 200}}, batch_first).status, 201);
  auto reused = c.post("/v1/transfers", boss.key, ts::transfer_body(payroll, pa, 100), batch_first);
  EXPECT_EQ(reused.status, 422) << reused.body;
  EXPECT_EQ(str(reused.json().as_object().at("code")), "idempotency_key_reused") << reused.body;
  EXPECT_EQ(held(payroll), 600);
  EXPECT_EQ(held(pa), 400);

  // A batch whose first transfer was refused holds its key through its stored answer alone: a
  // transfer, or a withdrawal, under it is refused all the same, and moves nothing.
  const auto first_refused = ts::unique_key("first-refused");
  auto partly = batch(c, boss.key, false, {{payroll, payroll, 1}, {payroll, pa, 100}}, first_refused);
  ASSERT_EQ(partly.status, 201) << partly.body;
  EXPECT_EQ(held(payroll), 500);
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM journal_transaction WHERE idempotency_key = " +
                            ts::sql_literal(first_refused)),
            "0");
  reused = c.post("/v1/transfers", boss.key, ts::transfer_body(payroll, pa, 300), first_refused);
  EXPECT_EQ(reused.status, 422) << reused.body;
  EXPECT_EQ(str(reused.json().as_object().at("code")), "idempotency_key_reused") << reused.body;
  reused = c.post("/v1/withdrawals", boss.key, R"({"accountId":)" + std::to_string(payroll) + R"(,"amount":300})",
                  first_refused);
  EXPECT_EQ(reused.status, 422) << reused.body;
  EXPECT_EQ(str(reused.json().as_object().at("code")), "idempotency_key_reused") << reused.body;
  EXPECT_EQ(held(payroll), 500);
  EXPECT_EQ(held(pa), 500);
  // The batch itself replays its answer.
  auto again = batch(c, boss.key, false, {{payroll, payroll, 1}, {payroll, pa, 100}}, first_refused);
  EXPECT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(again.body, partly.body);
}

// A client's own Idempotency-Key may not begin "batch/": the transfers of a batch after its first
// are keyed so, and a request under such a key would take an item's place (400, nothing moves).
TEST_F(BatchE2E, AKeyThatNamesABatchItemIsRefused) {
  ts::http_client c(port());
  const auto [boss, payroll] = account_of(c);
  ts::deposit(c, op(), payroll, 1'000);
  const auto [a, pa] = account_of(c);
  auto r = c.post("/v1/transfers", boss.key, ts::transfer_body(payroll, pa, 100), "batch/1/" + ts::unique_key("k"));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("must not begin with"), std::string::npos) << r.body;
  r = batch(c, boss.key, false, {{payroll, pa, 100}}, "batch/" + ts::unique_key("k"));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(held(payroll), 1'000);
  EXPECT_EQ(held(pa), 0);
}

// More transfers than ledger.batch_transfers_max (1,000 by default) is 400 batch_too_large, and
// moves nothing.
TEST_F(BatchE2E, ABatchOverTheLimitIsRefused) {
  ts::http_client c(port());
  const auto [boss, payroll] = account_of(c);
  ts::deposit(c, op(), payroll, 10'000);
  const auto [a, pa] = account_of(c);
  std::vector<item> items(1'001, item{payroll, pa, 1});
  auto r = batch(c, boss.key, false, items);
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("code")), "batch_too_large");
  EXPECT_EQ(held(payroll), 10'000);
  items.resize(1'000);
  r = batch(c, boss.key, false, items);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(held(payroll), 9'000);
  EXPECT_EQ(held(pa), 1'000);

  r = c.post("/v1/transfers/batch", boss.key, R"({"atomic":true,"transfers":[{"fromAccountId":1,"toAccountId":2}]})",
             ts::unique_key("bad"));
  EXPECT_EQ(r.status, 400) << r.body;

  // An id is any positive int64, as in a single transfer: one beyond 2^53 names no account (404,
  // the item's index), where an amount beyond 2^53 is 400.
  r = c.post("/v1/transfers/batch", boss.key,
             R"({"atomic":true,"transfers":[{"fromAccountId":9007199254740993,"toAccountId":)" + std::to_string(pa) +
                 R"(,"amount":1}]})",
             ts::unique_key("big-id"));
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(r.json().as_object().at("index").as_int64(), 0);
  r = c.post("/v1/transfers/batch", boss.key,
             R"({"atomic":true,"transfers":[{"fromAccountId":)" + std::to_string(payroll) + R"(,"toAccountId":)" +
                 std::to_string(pa) + R"(,"amount":9007199254740993}]})",
             ts::unique_key("big-amount"));
  EXPECT_EQ(r.status, 400) << r.body;

  // A field twice in one item (or in the batch) is 400, as in a single transfer: a reader that
  // takes the first would see another amount than the last.
  const auto item_of = [&](const std::string& amounts) {
    return R"({"fromAccountId":)" + std::to_string(payroll) + R"(,"toAccountId":)" + std::to_string(pa) + "," +
           amounts + "}";
  };
  for (const auto& body : {R"({"atomic":false,"transfers":[)" + item_of(R"("amount":1,"amount":5000)") + "]}",
                           R"({"atomic":true,"atomic":false,"transfers":[)" + item_of(R"("amount":1)") + "]}"}) {
    r = c.post("/v1/transfers/batch", boss.key, body, ts::unique_key("twice"));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("appears more than once"), std::string::npos) << r.body;
  }
  EXPECT_EQ(held(payroll), 9'000);
}

// A payer holding 10,000 pays 100 salaries of 100 in batches (one atomic, one plain) while 60
// single payments of 100 from the same account race them: the account never goes below zero, and
// what left it is exactly 100 times the payments that were answered 201.
TEST_F(BatchE2E, ABatchRacingSingleDebitsOfItsPayerNeverOverdraws) {
  ts::http_client setup(port());
  const auto [boss, payroll] = account_of(setup);
  ts::deposit(setup, op(), payroll, 10'000);
  const auto [a, pa] = account_of(setup);
  std::atomic<int> paid{0};
  std::atomic<int> other{0};
  ts::concurrently(62, 8, [&](int i, int) {
    ts::http_client c(port());
    if (i == 0 || i == 1) {
      // Item i of 50 salaries of 100 each.
      auto r = batch(c, boss.key, i == 0, std::vector<item>(50, item{payroll, pa, 100}));
      if (r.status == 422 && i == 0) return;  // atomic: all or nothing
      if (r.status != 201) {
        ++other;
        ADD_FAILURE() << r.status << " " << r.body;
        return;
      }
      const auto answer = r.json();  // kept: a range over a temporary's member would dangle
      for (const auto& result : answer.as_object().at("results").as_array()) {
        if (result.as_object().at("status").as_int64() == 201) ++paid;
      }
      return;
    }
    auto r = c.post("/v1/transfers", boss.key, ts::transfer_body(payroll, pa, 100), ts::unique_key("single"));
    if (r.status == 201) {
      ++paid;
    } else if (r.status != 422) {
      ++other;
      ADD_FAILURE() << r.status << " " << r.body;
    }
  });
  EXPECT_EQ(other.load(), 0);
  EXPECT_GE(held(payroll), 0);
  EXPECT_EQ(held(payroll), 10'000 - 100 * paid.load());
  EXPECT_EQ(held(pa), 100 * paid.load());
  EXPECT_EQ(std::stoll(ts::query_value("SELECT count(*) FROM account WHERE balance < 0 AND NOT allow_negative")), 0);
  EXPECT_TRUE(ts::reconciliation_ok(setup, op()));
}

// Fees apply per item like single payments: each item's receipt names its fee, and fee_revenue
// gets their sum.
TEST_F(BatchE2E, FeesApplyPerItem) {
  ts::http_client c(port());
  const auto [boss, payroll] = account_of(c, "CHF");
  ts::deposit(c, op(), payroll, 10'000);
  const auto [shop, m] = account_of(c, "CHF", 0, "merchant");
  const auto [a, pa] = account_of(c, "CHF");
  auto fees = c.request("PUT", "/v1/accounts/" + std::to_string(m) + "/fees", R"({"feeBps":1000,"feeFixed":5})",
                        {{"Authorization", "Bearer " + op()}, {"Content-Type", "application/json"}});
  ASSERT_EQ(fees.status, 200) << fees.body;
  const std::string fee_revenue_id = "(SELECT id FROM account WHERE currency = 'CHF' AND system_role = 'fee_revenue')";
  const auto fee_revenue_held = [&] {
    return std::stoll(ts::query_value("SELECT COALESCE(sum(balance), 0) FROM account WHERE id = " + fee_revenue_id +
                                      " OR parent_id = " + fee_revenue_id));
  };
  const auto before = fee_revenue_held();
  auto r = batch(c, boss.key, false, {{payroll, m, 1'000}, {payroll, pa, 1'000}, {payroll, m, 100}});
  ASSERT_EQ(r.status, 201) << r.body;
  const auto results = r.json().as_object().at("results").as_array();
  EXPECT_EQ(str(results[0].as_object().at("receipt").as_object().at("fee")), "105");
  EXPECT_EQ(str(results[1].as_object().at("receipt").as_object().at("fee")), "0");
  EXPECT_EQ(str(results[2].as_object().at("receipt").as_object().at("fee")), "15");
  EXPECT_EQ(held(m), 895 + 85);
  EXPECT_EQ(held(pa), 1'000);
  EXPECT_EQ(fee_revenue_held() - before, 120);
}

// fee_revenue is hot: 2,000 concurrent payments into a hot merchant with a fee credit its shards
// (one per writer at least); main row and shards together hold exactly the sum of the fees, and
// still do once the sweeper has moved every shard into the main row. The ledger reconciles.
TEST_F(BatchE2E, FeeRevenueIsHotAndAddsUpUnderConcurrentPayments) {
  ts::http_client c(port());
  const auto [shop, m] = account_of(c, "GBP", 8, "merchant");
  auto fees = c.request("PUT", "/v1/accounts/" + std::to_string(m) + "/fees", R"({"feeBps":250,"feeFixed":3})",
                        {{"Authorization", "Bearer " + op()}, {"Content-Type", "application/json"}});
  ASSERT_EQ(fees.status, 200) << fees.body;
  constexpr int k_payers = 20;
  constexpr int k_payments = 2'000;
  constexpr std::int64_t k_amount = 1'000;
  constexpr std::int64_t k_fee = 3 + k_amount * 250 / 10'000;  // 28
  std::vector<std::pair<ts::principal, std::int64_t>> payers;
  for (int i = 0; i < k_payers; ++i) {
    payers.push_back(account_of(c, "GBP"));
    ts::deposit(c, op(), payers.back().second, k_amount * (k_payments / k_payers));
  }
  // What GBP's fee_revenue (main row and shards) held before, if it exists yet.
  const auto fee_revenue_held = [] {
    const std::string id = "(SELECT id FROM account WHERE currency = 'GBP' AND system_role = 'fee_revenue')";
    return std::stoll(
        ts::query_value("SELECT COALESCE(sum(balance), 0) FROM account WHERE id = " + id + " OR parent_id = " + id));
  };
  const auto before = fee_revenue_held();
  std::atomic<int> created{0};
  ts::concurrently(k_payments, 16, [&](int i, int) {
    thread_local std::unique_ptr<ts::http_client> client;
    if (!client) client = std::make_unique<ts::http_client>(port());
    const auto& [who, from] = payers[static_cast<std::size_t>(i % k_payers)];
    auto r = client->post("/v1/transfers", who.key, ts::transfer_body(from, m, k_amount), ts::unique_key("fee"));
    if (r.status == 201) {
      ++created;
    } else {
      ADD_FAILURE() << r.status << " " << r.body;
    }
  });
  ASSERT_EQ(created.load(), k_payments);
  const auto fee_revenue =
      std::stoll(ts::query_value("SELECT id FROM account WHERE currency = 'GBP' AND system_role = 'fee_revenue'"));
  const auto shards =
      std::stoll(ts::query_value("SELECT count(*) FROM account WHERE parent_id = " + std::to_string(fee_revenue)));
  EXPECT_GE(shards, 1);
  // The fees landed on the shards, not on the main row (it is never locked by a payment).
  EXPECT_EQ(
      std::stoll(ts::query_value("SELECT count(*) FROM ledger_entry WHERE account_id = " + std::to_string(fee_revenue) +
                                 " AND transaction_id IN (SELECT id FROM journal_transaction WHERE type = "
                                 "'TRANSFER')")),
      0);
  EXPECT_EQ(fee_revenue_held() - before, k_fee * k_payments);
  EXPECT_EQ(held(m), (k_amount - k_fee) * k_payments);

  // The sweeper moves every shard into the main row; the sum stays.
  const auto main_holds_all = [&] {
    c.post("/v1/admin/sweeps", op(), "{}", ts::unique_key("sweep"));
    return std::stoll(ts::query_value("SELECT COALESCE(sum(balance), 0) FROM account WHERE parent_id = " +
                                      std::to_string(fee_revenue))) == 0;
  };
  ASSERT_TRUE(ts::eventually(main_holds_all, std::chrono::seconds(60), std::chrono::milliseconds(200)));
  EXPECT_EQ(
      std::stoll(ts::query_value("SELECT balance FROM account WHERE id = " + std::to_string(fee_revenue))) - before,
      k_fee * k_payments);
  EXPECT_EQ(fee_revenue_held() - before, k_fee * k_payments);
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// A batch of the most items the server takes, each with a reference of 200 bytes written as JSON
// escapes (100 "é" as \u00e9, 600 characters), fits the route's body limit: a valid batch is
// never 413. A reference of 300 bytes (150 "é") is 400, saying that the limit is in bytes.
TEST(BatchLimits, TheLargestValidBatchFitsItsBodyLimit) {
  ts::server_process::options options;
  options.env = ts::unlimited_rates();
  options.env["WALLET_LEDGER_BATCH_TRANSFERS_MAX"] = "200";
  ts::server_process server(options);
  ts::http_client c(server.port());
  const auto& op = server.operator_key();
  const auto boss = ts::create_principal(c, op);
  const auto payroll = ts::create_account(c, op, boss.id);
  const auto staff = ts::create_principal(c, op);
  const auto payee = ts::create_account(c, op, staff.id);
  ts::deposit(c, op, payroll, 200);

  std::string escaped;
  for (int i = 0; i < 100; ++i) escaped += "\\u00e9";
  std::string body = R"({"atomic":false,"transfers":[)";
  for (int i = 0; i < 200; ++i) {
    if (i > 0) body += ',';
    body += R"({"fromAccountId":)" + std::to_string(payroll) + R"(,"toAccountId":)" + std::to_string(payee) +
            R"(,"amount":1,"reference":")" + escaped + R"("})";
  }
  body += "]}";
  ASSERT_GT(body.size(), 512U * 200U);
  auto r = c.post("/v1/transfers/batch", boss.key, body, ts::unique_key("big"));
  ASSERT_EQ(r.status, 201) << r.body.substr(0, 500);
  EXPECT_EQ(r.json().as_object().at("results").as_array().size(), 200U);
  EXPECT_EQ(ts::balance(c, staff.key, payee), 200);
  std::string reference;
  for (int i = 0; i < 100; ++i) reference += "\xc3\xa9";
  EXPECT_EQ(ts::query_value("SELECT DISTINCT j.metadata->>'reference' FROM journal_transaction j JOIN ledger_entry e"
                            " ON e.transaction_id = j.id WHERE e.account_id = " +
                            std::to_string(payee)),
            reference);

  std::string too_long;
  for (int i = 0; i < 150; ++i) too_long += "\\u00e9";
  r = c.post("/v1/transfers/batch", boss.key,
             R"({"atomic":false,"transfers":[{"fromAccountId":)" + std::to_string(payroll) + R"(,"toAccountId":)" +
                 std::to_string(payee) + R"(,"amount":1,"reference":")" + too_long + R"("}]})",
             ts::unique_key("long"));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("at most 200 bytes"), std::string::npos) << r.body;
}

}  // namespace
