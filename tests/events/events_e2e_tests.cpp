// Events end to end, through wallet-server children on the suite's own PostgreSQL and Redis:
// payments become exactly one stream entry each, in every account's commit order; a server
// killed under load loses no event; Redis down delays events but never a payment; and the feed
// (GET /v1/events) pages every event once, in stream order, showing a principal only its own.

#include <boost/json.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <regex>
#include <thread>

#include "tests/events/fixture.hpp"

namespace events_test {
namespace {

namespace json = boost::json;
using test_support::eventually;
using test_support::metric_value;

struct party {
  std::int64_t account = 0;
  std::string key;
};

party make_party(http_client& c, const std::string& op, std::int64_t deposit = 0, int hot_shards = 0) {
  const auto who = test_support::create_principal(c, op);
  party p{test_support::create_account(c, op, who.id, "EUR", hot_shards), who.key};
  if (deposit > 0) test_support::deposit(c, op, p.account, deposit);
  return p;
}

// One page of GET /v1/events.
struct feed_page {
  int status = 0;
  json::array events;
  std::string next;
  bool more = false;
  std::string code;  // a problem's code
};

feed_page read_feed(http_client& c, const std::string& key, const std::string& after, int limit,
                    std::int64_t account = 0) {
  std::string target = "/v1/events?after=" + after + "&limit=" + std::to_string(limit);
  if (account != 0) target += "&accountId=" + std::to_string(account);
  const auto r = c.get(target, key);
  feed_page page;
  page.status = r.status;
  const auto body = r.json().as_object();
  if (r.status != 200) {
    page.code = std::string(body.at("code").as_string());
    return page;
  }
  page.events = body.at("events").as_array();
  page.next = std::string(body.at("next").as_string());
  page.more = body.at("hasMore").as_bool();
  return page;
}

// Every event after `after` that `key` may see, following `next` until the feed ends (at most
// `pages_max` pages). `short_pages` counts pages that came back short while more followed.
json::array read_all(http_client& c, const std::string& key, std::string after, int limit, std::int64_t account = 0,
                     int* short_pages = nullptr, int pages_max = 10'000) {
  json::array out;
  for (int page = 0; page < pages_max; ++page) {
    auto p = read_feed(c, key, after, limit, account);
    EXPECT_EQ(p.status, 200) << p.code;
    if (p.status != 200) break;
    if (short_pages && p.more && static_cast<int>(p.events.size()) < limit) ++*short_pages;
    for (auto& e : p.events) out.push_back(e);
    after = p.next;
    if (!p.more) return out;
  }
  ADD_FAILURE() << "the feed did not end within " << pages_max << " pages";
  return out;
}

// The cursor where the feed ends now.
std::string feed_head(http_client& c, const std::string& op) {
  std::string after = "0";
  for (int page = 0; page < 100'000; ++page) {
    auto p = read_feed(c, op, after, 1'000);
    EXPECT_EQ(p.status, 200);
    after = p.next;
    if (!p.more || p.status != 200) return after;
  }
  ADD_FAILURE() << "no end of the feed";
  return after;
}

std::set<std::string> event_ids(const json::array& events) {
  std::set<std::string> out;
  for (const auto& e : events) out.insert(std::string(e.as_object().at("eventId").as_string()));
  return out;
}

std::vector<std::string> transactions_in_entry_order(const std::string& url, std::int64_t account) {
  return sql_column(url, "SELECT transaction_id::text FROM ledger_entry WHERE account_id = " + std::to_string(account) +
                             " ORDER BY id");
}

class events_e2e : public events_suite {};

TEST_F(events_e2e, payments_make_one_stream_entry_each_in_every_accounts_commit_order) {
  // Four payers pay each other and a hot merchant 400 times from eight threads through two ledger
  // writers. Every committed transaction that touches them (deposits, transfers, the merchant's
  // sweeps) is exactly one stream entry, with the public accounts and what moved on each; each
  // payer's entries come in the stream in the order its ledger entries committed; /metrics counts
  // them and the lag returns to 0. (The sweeper's timer is off: the test sweeps once itself, after
  // the payments, so that the set of committed transactions is known when it is read.)
  server_process server(server_options({{"WALLET_WRITER_COUNT", "2"},
                                        {"WALLET_EVENTS_BATCH_ROWS_MAX", "3"},
                                        {"WALLET_LEDGER_SWEEP_INTERVAL_MS", "86400000"}}));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto head = feed_head(c, op);
  std::vector<party> payers;
  for (int i = 0; i < 4; ++i) payers.push_back(make_party(c, op, 1'000'000));
  const auto merchant = make_party(c, op, 0, 4);
  std::vector<std::int64_t> accounts{merchant.account};
  for (const auto& p : payers) accounts.push_back(p.account);

  std::mutex mutex;
  std::map<std::string, std::tuple<std::int64_t, std::int64_t, std::int64_t>> transfers;  // id -> from, to, amount
  test_support::concurrently(400, 8, [&](int i, int) {
    thread_local std::unique_ptr<http_client> tc;
    if (!tc) tc = std::make_unique<http_client>(server.port());
    const auto& from = payers[static_cast<std::size_t>(i) % payers.size()];
    const auto to = i % 3 == 0 ? merchant.account : payers[static_cast<std::size_t>(i + 1) % payers.size()].account;
    const std::int64_t amount = 1 + i % 97;
    const auto id = transfer(*tc, from.key, from.account, to, amount);
    std::lock_guard lock(mutex);
    transfers[id] = {from.account, to, amount};
  });
  const auto swept = c.post("/v1/admin/sweeps", op, "{}");
  ASSERT_EQ(swept.status, 200) << swept.body;
  ASSERT_GE(swept.json().as_object().at("sweeps").as_int64(), 1);
  const auto committed = committed_transactions(accounts);
  ASSERT_GE(committed.size(), 405u);  // 4 deposits, 400 transfers, the merchant's sweeps
  ASSERT_TRUE(wait_until_streamed(committed, accounts));

  const auto entries = entries_touching(accounts);
  std::set<std::string> streamed;
  const std::regex timestamp(R"(^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$)");
  for (const auto& [event, n] : counts_by_event(entries)) {
    EXPECT_EQ(n, 1) << event;
    streamed.insert(event);
  }
  EXPECT_EQ(streamed, committed);
  int sweeps = 0;
  for (const auto& e : entries) {
    EXPECT_EQ(e.field("eventId"), e.field("transactionId"));
    if (e.field("type") == "SWEEP") {
      // Shards into the main row: nothing moves on the account as the API shows it.
      ++sweeps;
      EXPECT_EQ(accounts_of(e), std::vector<std::int64_t>{merchant.account});
      EXPECT_EQ(e.field("amounts"), R"(["0"])");
    }
    EXPECT_EQ(e.field("currency"), "EUR");
    EXPECT_TRUE(std::regex_match(e.field("createdAt"), timestamp)) << e.field("createdAt");
    auto it = transfers.find(e.field("eventId"));
    if (it == transfers.end()) continue;
    const auto& [from, to, amount] = it->second;
    EXPECT_EQ(e.field("type"), "TRANSFER");
    EXPECT_EQ(accounts_of(e), (std::vector<std::int64_t>{from, to}));
    EXPECT_EQ(e.field("amounts"), "[\"-" + std::to_string(amount) + "\",\"" + std::to_string(amount) + "\"]");
  }
  for (const auto& p : payers) {
    std::vector<std::string> in_stream;
    for (const auto& e : entries) {
      const auto named = accounts_of(e);
      if (std::find(named.begin(), named.end(), p.account) != named.end()) in_stream.push_back(e.field("eventId"));
    }
    EXPECT_EQ(in_stream, transactions_in_entry_order(owner_url(), p.account)) << "account " << p.account;
  }
  EXPECT_EQ(sweeps, static_cast<int>(committed.size()) - 404);
  // The feed names the merchant, never its shards; an operator naming a shard gets the merchant's.
  const auto merchant_events = committed_transactions({merchant.account});
  EXPECT_EQ(event_ids(read_all(c, op, head, 1'000, merchant.account)), merchant_events);
  const auto shards = c.get("/v1/accounts/" + std::to_string(merchant.account), op).json().as_object().at("shards");
  const auto shard = shards.as_array().at(0).as_object().at("id").as_int64();
  EXPECT_EQ(event_ids(read_all(c, op, head, 1'000, shard)), merchant_events);
  EXPECT_GE(metric_value(server.port(), "wallet_events_published_total"), static_cast<double>(committed.size()));
  EXPECT_TRUE(eventually([&] { return metric_value(server.port(), "wallet_events_relay_lag_seconds") == 0; },
                         std::chrono::seconds(30), std::chrono::milliseconds(50)));
  EXPECT_EQ(metric_value(server.port(), "wallet_events_relay_active"), 1);
}

TEST_F(events_e2e, a_server_killed_under_load_loses_no_event) {
  // Four threads pay while the server is SIGKILLed once events are flowing, wherever its relay
  // was (between XADD and COMMIT included), and started again; the clients retry with the same
  // Idempotency-Key. Once the restarted relay has published everything, the stream holds every
  // committed transaction at least once, and nothing else: at least once, none lost.
  server_process server(server_options({{"WALLET_EVENTS_BATCH_ROWS_MAX", "2"}}));
  std::vector<party> payers;
  std::vector<std::int64_t> accounts;
  {
    http_client c(server.port());
    for (int i = 0; i < 4; ++i) payers.push_back(make_party(c, server.operator_key(), 1'000'000));
  }
  for (const auto& p : payers) accounts.push_back(p.account);

  std::atomic<int> answered{0};
  std::atomic<int> gave_up{0};
  std::mutex mutex;
  std::set<std::string> acknowledged;
  std::thread load([&] {
    test_support::concurrently(300, 4, [&](int i, int) {
      const auto& from = payers[static_cast<std::size_t>(i) % payers.size()];
      const auto to = payers[static_cast<std::size_t>(i + 1) % payers.size()].account;
      const auto key = test_support::unique_key("killed");
      // Bounded: 600 attempts, at least 20 ms apart when they fail.
      for (int attempt = 0; attempt < 600; ++attempt) {
        try {
          http_client tc(server.port(), std::chrono::seconds(10));
          const auto r = tc.post("/v1/transfers", from.key, test_support::transfer_body(from.account, to, 1), key);
          if (r.status == 201) {
            std::lock_guard lock(mutex);
            acknowledged.insert(std::string(r.json().as_object().at("transactionId").as_string()));
            ++answered;
            return;
          }
          ASSERT_EQ(r.status, 503) << r.body;
        } catch (const std::exception&) {
          // The server is down or restarting: try again with the same key.
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      ++gave_up;
    });
  });
  const bool flowing = eventually(
      [&] { return answered.load() >= 60 && metric_value(server.port(), "wallet_events_published_total", 0) >= 30; },
      std::chrono::seconds(60), std::chrono::milliseconds(20));
  const int answered_before_kill = answered.load();
  server.kill();
  server.restart();
  load.join();
  ASSERT_TRUE(flowing) << "events were not flowing before the kill";
  EXPECT_EQ(gave_up.load(), 0);
  EXPECT_EQ(answered.load(), 300);

  ASSERT_TRUE(
      eventually([&] { return unpublished_rows() == 0; }, std::chrono::seconds(60), std::chrono::milliseconds(20)));
  const auto committed = committed_transactions(accounts);
  for (const auto& id : acknowledged) EXPECT_EQ(committed.count(id), 1u) << id;
  const auto counts = counts_by_event(entries_touching(accounts));
  std::set<std::string> streamed;
  int duplicates = 0;
  for (const auto& [event, n] : counts) {
    EXPECT_GE(n, 1);
    duplicates += n - 1;
    streamed.insert(event);
  }
  EXPECT_EQ(streamed, committed);
  std::cout << "killed under load after " << answered_before_kill << " of 300 payments: " << committed.size()
            << " transactions, " << duplicates << " stream entries published twice" << std::endl;
}

TEST_F(events_e2e, redis_down_delays_events_but_never_payments) {
  // With the stream's Redis killed, 30 payments are still answered 201 and the feed, served from
  // PostgreSQL, already shows them; the relay counts Redis errors and its lag grows. Once Redis is
  // back, each of them reaches the stream exactly once and the lag returns to 0.
  server_process server(server_options({{"WALLET_EVENTS_REDIS_TIMEOUT_MS", "200"}}));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto alice = make_party(c, op, 1'000'000);
  const auto bob = make_party(c, op);
  const std::vector<std::int64_t> accounts{alice.account, bob.account};
  ASSERT_TRUE(wait_until_streamed(committed_transactions(accounts), accounts));
  const auto head = feed_head(c, op);

  services().kill_redis();
  std::set<std::string> paid;
  for (int i = 0; i < 30; ++i) paid.insert(transfer(c, alice.key, alice.account, bob.account, 10 + i));
  EXPECT_EQ(paid.size(), 30u);
  EXPECT_EQ(test_support::balance(c, bob.key, bob.account), 30 * 10 + 29 * 30 / 2);

  EXPECT_TRUE(eventually(
      [&] {
        const auto seen = event_ids(read_all(c, op, head, 100));
        return std::includes(seen.begin(), seen.end(), paid.begin(), paid.end());
      },
      std::chrono::seconds(30), std::chrono::milliseconds(50)));
  EXPECT_TRUE(eventually(
      [&] {
        const auto page = test_support::metrics_page(server.port());
        return test_support::metric(page, "wallet_events_relay_errors_total{kind=\"redis\"}").value_or(0) > 0 &&
               test_support::metric(page, "wallet_events_relay_lag_seconds").value_or(0) > 0;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(50)));
  EXPECT_GT(unpublished_rows(), 0);

  services().start();
  ASSERT_TRUE(wait_until_streamed(paid, accounts));
  for (const auto& [event, n] : counts_by_event(entries_touching(accounts))) {
    if (paid.count(event) != 0) {
      EXPECT_EQ(n, 1) << event;
    }
  }
  EXPECT_TRUE(eventually([&] { return metric_value(server.port(), "wallet_events_relay_lag_seconds") == 0; },
                         std::chrono::seconds(30), std::chrono::milliseconds(50)));
}

TEST_F(events_e2e, the_feed_pages_every_event_once_in_stream_order) {
  // Pages of 7 from the feed's end before the payments: the cursors only grow, no event comes
  // twice, the events touching this test's accounts are exactly the committed transactions, in
  // the stream's order, and each has the stream entry's fields.
  server_process server(server_options());
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto head = feed_head(c, op);
  std::vector<party> parties;
  for (int i = 0; i < 3; ++i) parties.push_back(make_party(c, op, 100'000));
  std::vector<std::int64_t> accounts;
  for (const auto& p : parties) accounts.push_back(p.account);
  test_support::concurrently(40, 4, [&](int i, int) {
    thread_local std::unique_ptr<http_client> tc;
    if (!tc) tc = std::make_unique<http_client>(server.port());
    const auto& from = parties[static_cast<std::size_t>(i) % parties.size()];
    transfer(*tc, from.key, from.account, parties[static_cast<std::size_t>(i + 1) % parties.size()].account, 5);
  });
  const auto committed = committed_transactions(accounts);
  ASSERT_EQ(committed.size(), 43u);
  ASSERT_TRUE(wait_until_streamed(committed, accounts));

  const auto events = read_all(c, op, head, 7);
  std::vector<std::string> feed_order;
  std::set<std::string> seen;
  std::int64_t last_cursor = std::stoll(head);
  std::map<std::string, json::object> by_id;
  for (const auto& v : events) {
    const auto& e = v.as_object();
    const std::string id(e.at("eventId").as_string());
    const auto cursor = std::stoll(std::string(e.at("cursor").as_string()));
    EXPECT_GT(cursor, last_cursor);
    last_cursor = cursor;
    EXPECT_TRUE(seen.insert(id).second) << id << " came twice";
    if (committed.count(id) != 0) feed_order.push_back(id);
    by_id[id] = e;
  }
  std::vector<std::string> stream_order;
  for (const auto& e : entries_touching(accounts)) {
    stream_order.push_back(e.field("eventId"));
    ASSERT_EQ(by_id.count(e.field("eventId")), 1u);
    const auto& f = by_id[e.field("eventId")];
    EXPECT_EQ(std::string(f.at("cursor").as_string()), e.field("cursor"));
    EXPECT_EQ(std::string(f.at("type").as_string()), e.field("type"));
    EXPECT_EQ(std::string(f.at("createdAt").as_string()), e.field("createdAt"));
    EXPECT_EQ(json::serialize(f.at("accounts")), e.field("accounts"));
    EXPECT_EQ(json::serialize(f.at("amounts")), e.field("amounts"));
    EXPECT_EQ(json::serialize(f.at("currencies")), e.field("currencies"));
  }
  EXPECT_EQ(feed_order, stream_order);
  EXPECT_EQ(std::set<std::string>(feed_order.begin(), feed_order.end()), committed);
}

TEST_F(events_e2e, a_principal_sees_only_the_events_that_move_its_own_money) {
  // Alice pays Bob, Carol pays Dave. With a scan bound of 3 events a call, pages come back short
  // and the client follows `next`: Alice sees exactly the transactions on her account, Bob his;
  // naming Bob's account gets Alice a 404, an operator Bob's events. No event carries a balance.
  server_process server(server_options({{"WALLET_EVENTS_FEED_SCAN_MAX", "3"}}));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto head = feed_head(c, op);
  const auto alice = make_party(c, op, 50'000);
  const auto bob = make_party(c, op);
  const auto carol = make_party(c, op, 50'000);
  const auto dave = make_party(c, op);
  for (int i = 0; i < 5; ++i) {
    transfer(c, alice.key, alice.account, bob.account, 100 + i);
    transfer(c, carol.key, carol.account, dave.account, 200 + i);
  }
  const std::vector<std::int64_t> all{alice.account, bob.account, carol.account, dave.account};
  ASSERT_TRUE(wait_until_streamed(committed_transactions(all), all));

  int short_pages = 0;
  const auto alices = read_all(c, alice.key, head, 100, 0, &short_pages);
  EXPECT_EQ(event_ids(alices), committed_transactions({alice.account}));
  EXPECT_GT(short_pages, 0);
  EXPECT_EQ(event_ids(read_all(c, bob.key, head, 100)), committed_transactions({bob.account}));
  EXPECT_EQ(event_ids(read_all(c, alice.key, head, 2, alice.account)), committed_transactions({alice.account}));
  EXPECT_EQ(event_ids(read_all(c, op, head, 100, bob.account)), committed_transactions({bob.account}));
  const auto refused = read_feed(c, alice.key, head, 10, bob.account);
  EXPECT_EQ(refused.status, 404);
  EXPECT_EQ(refused.code, "not_found");
  for (const auto& v : alices) {
    for (const auto& [name, value] : v.as_object()) {
      EXPECT_EQ(std::string(name).find("alance"), std::string::npos) << name;
    }
  }
}

TEST_F(events_e2e, bad_feed_queries_are_refused_with_invalid_request) {
  // A cursor, limit or account id that is not one answers 400 invalid_request naming the
  // parameter; no key answers 401.
  server_process server(server_options());
  http_client c(server.port());
  const auto& op = server.operator_key();
  for (const std::string query : {"after=abc", "after=-1", "after=99999999999999999999", "limit=0", "limit=1001",
                                  "limit=x", "accountId=0", "accountId=abc"}) {
    const auto r = c.get("/v1/events?" + query, op);
    EXPECT_EQ(r.status, 400) << query;
    const auto body = r.json().as_object();
    EXPECT_EQ(body.at("code"), "invalid_request") << query;
    const auto name = query.substr(0, query.find('='));
    EXPECT_NE(std::string(body.at("detail").as_string()).find(name), std::string::npos) << body.at("detail");
  }
  EXPECT_EQ(c.request("GET", "/v1/events").status, 401);
}

TEST_F(events_e2e, the_feed_deletes_events_past_its_retention_and_says_so_to_an_older_cursor) {
  // Three payments, each its own outbox row; then every outbox row is made 31 days old. The
  // server's relay (pruning every 20 ms, 30 days' retention by default) deletes every row but the
  // feed's last. A consumer whose cursor is before the last event deleted is answered 410
  // cursor_expired with the cursor to go on from; from that cursor, or from the start, the feed
  // holds the third payment alone. The ledger keeps all three.
  server_process server(server_options({{"WALLET_EVENTS_PRUNE_INTERVAL_MS", "20"}}));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto payer = make_party(c, op, 1'000);
  const auto payee = make_party(c, op);
  const auto head = feed_head(c, op);
  std::vector<std::string> paid;
  for (int i = 1; i <= 3; ++i) paid.push_back(transfer(c, payer.key, payer.account, payee.account, i));
  json::array events;
  ASSERT_TRUE(eventually(
      [&] {
        events = read_all(c, op, head, 100);
        return events.size() == 3;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(20)));
  std::vector<std::string> cursors;
  for (std::size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(std::string(events[i].as_object().at("eventId").as_string()), paid[i]);
    cursors.emplace_back(events[i].as_object().at("cursor").as_string());
  }
  ASSERT_TRUE(wait_until_streamed({paid.begin(), paid.end()}, {payer.account}));
  const auto rows = std::stoll(sql_value(owner_url(), "SELECT count(*) FROM outbox_event"));
  const auto pruned_before = metric_value(server.port(), "wallet_events_outbox_rows_pruned_total");
  sql_value(owner_url(), "UPDATE outbox_event SET created_at = now() - interval '31 days' RETURNING 1");
  ASSERT_TRUE(eventually([&] { return sql_value(owner_url(), "SELECT count(*) FROM outbox_event") == "1"; },
                         std::chrono::seconds(30), std::chrono::milliseconds(20)));
  // The counter moves after the delete commits.
  EXPECT_TRUE(eventually(
      [&] { return metric_value(server.port(), "wallet_events_outbox_rows_pruned_total") - pruned_before == rows - 1; },
      std::chrono::seconds(30), std::chrono::milliseconds(20)));

  for (const auto& after : {head, cursors[0]}) {
    const auto r = c.get("/v1/events?after=" + after, op);
    ASSERT_EQ(r.status, 410) << after;
    const auto body = r.json().as_object();
    EXPECT_EQ(body.at("code"), "cursor_expired");
    EXPECT_NE(std::string(body.at("detail").as_string()).find("after=" + cursors[1]), std::string::npos)
        << body.at("detail");
  }
  for (const auto& after : {cursors[1], std::string("0")}) {
    const auto page = read_feed(c, op, after, 10);
    ASSERT_EQ(page.status, 200) << after;
    ASSERT_EQ(page.events.size(), 1u);
    EXPECT_EQ(std::string(page.events[0].as_object().at("eventId").as_string()), paid[2]);
  }
  for (const auto& id : paid) EXPECT_EQ(c.get("/v1/transactions/" + id, op).status, 200) << id;
}

}  // namespace
}  // namespace events_test
