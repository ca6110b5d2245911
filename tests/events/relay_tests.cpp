// The outbox relay in process, where a test can step into its round: a relay stopped between its
// XADDs and the mark publishes those rows again (at least once, never lost, consumers deduplicate
// by eventId), and two relays on one database never publish one row, nor even hold a round, at
// the same time; and the relay's prune deletes only the feed's old head. The payments come from a
// wallet-server whose own relay is off.

#include <pqxx/pqxx>

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "events/stream_entry.hpp"
#include "persistence/database.hpp"
#include "persistence/outbox.hpp"
#include "tests/events/fixture.hpp"

namespace events_test {
namespace {

using test_support::concurrently;
using test_support::eventually;

// Payers and payees of a test's own, with money to pay.
struct parties {
  std::vector<std::int64_t> payers;
  std::vector<std::int64_t> payees;
  std::vector<std::string> payer_keys;
  std::vector<std::int64_t> all() const {
    auto out = payers;
    out.insert(out.end(), payees.begin(), payees.end());
    return out;
  }
};

parties make_parties(http_client& c, const std::string& op, int payers, int payees) {
  parties p;
  for (int i = 0; i < payers; ++i) {
    const auto who = test_support::create_principal(c, op);
    p.payers.push_back(test_support::create_account(c, op, who.id));
    p.payer_keys.push_back(who.key);
    test_support::deposit(c, op, p.payers.back(), 1'000'000);
  }
  for (int i = 0; i < payees; ++i) {
    const auto who = test_support::create_principal(c, op);
    p.payees.push_back(test_support::create_account(c, op, who.id));
  }
  return p;
}

// `count` transfers from the payers to the payees on `threads` threads; their transaction ids.
std::set<std::string> pay(int port, const parties& p, int count, int threads) {
  std::mutex mutex;
  std::set<std::string> ids;
  concurrently(count, threads, [&](int i, int) {
    thread_local std::unique_ptr<http_client> c;
    if (!c) c = std::make_unique<http_client>(port);
    const auto payer = static_cast<std::size_t>(i) % p.payers.size();
    const auto payee = p.payees[static_cast<std::size_t>(i) % p.payees.size()];
    const auto id = transfer(*c, p.payer_keys[payer], p.payers[payer], payee, 1 + i % 50);
    std::lock_guard lock(mutex);
    ids.insert(id);
  });
  return ids;
}

// The transactions of the outbox rows `ids`.
std::set<std::string> transactions_of_rows(const std::string& url, const std::vector<std::int64_t>& ids) {
  const auto rows =
      sql_column(url, "SELECT unnest(transaction_ids)::text FROM outbox_event WHERE id IN (" + id_list(ids) + ")");
  return {rows.begin(), rows.end()};
}

TEST(stream_fields, name_the_event_its_public_accounts_and_their_sums_and_no_balance) {
  // One event becomes one entry whose fields are, in order, the eventId (its transaction's id),
  // type, transactionId, currency, the accounts, amounts and their currencies as JSON arrays,
  // createdAt and the feed cursor: and nothing about any balance.
  persistence::event_record e;
  e.cursor = persistence::event_cursor(3, 2);
  e.transaction_id = "019c3a5e-7f10-7abc-8def-0123456789ab";
  e.type = "TRANSFER";
  e.currency = "EUR";
  e.created_at = "2026-11-30T01:59:00.123456Z";
  e.legs = {{12, -1000, 7, "EUR"}, {34, 970, 8, "EUR"}, {5, 30, std::nullopt, "EUR"}};
  const events::stream_fields expected = {
      {"eventId", "019c3a5e-7f10-7abc-8def-0123456789ab"},
      {"type", "TRANSFER"},
      {"transactionId", "019c3a5e-7f10-7abc-8def-0123456789ab"},
      {"currency", "EUR"},
      {"accounts", "[12,34,5]"},
      {"amounts", R"(["-1000","970","30"])"},
      {"currencies", R"(["EUR","EUR","EUR"])"},
      {"createdAt", "2026-11-30T01:59:00.123456Z"},
      {"cursor", std::to_string((3 << 16) | 2)},
  };
  EXPECT_EQ(events::to_stream_fields(e), expected);
}

TEST(stream_fields, an_exchange_names_the_currency_of_each_leg) {
  // An exchange moves two currencies: each leg carries its account's, and the event's own
  // currency stays the debited account's.
  persistence::event_record e;
  e.transaction_id = "019c3a5e-7f10-7abc-8def-0123456789ac";
  e.type = "EXCHANGE";
  e.currency = "USD";
  e.legs = {
      {12, -100, 7, "USD"}, {3, 100, std::nullopt, "USD"}, {4, -15137, std::nullopt, "JPY"}, {13, 15137, 7, "JPY"}};
  const auto fields = events::to_stream_fields(e);
  const std::map<std::string, std::string> by_name(fields.begin(), fields.end());
  EXPECT_EQ(by_name.at("currency"), "USD");
  EXPECT_EQ(by_name.at("accounts"), "[12,3,4,13]");
  EXPECT_EQ(by_name.at("currencies"), R"(["USD","USD","JPY","JPY"])");
}

class relay_test : public events_suite {};

TEST_F(relay_test, a_relay_stopped_between_its_xadds_and_the_mark_publishes_them_again) {
  // The relay's first round that holds this test's rows is aborted by its hook after Redis
  // acknowledged the XADDs and before the rows were marked: as a crash there would, it leaves
  // them unpublished. The relay's next rounds publish them again. Exactly the transactions of the
  // aborted round occur twice in the stream, every other one once, and none is missing: after
  // deduplication by eventId the stream holds exactly the committed transactions. And the aborted
  // round's rows had their feed positions committed before Redis acknowledged them (seen from
  // another connection inside the hook): the cursors those entries carry are the feed's.
  server_process server(server_options({{"WALLET_EVENTS_ENABLED", "false"}}));
  http_client c(server.port());
  const auto p = make_parties(c, server.operator_key(), 4, 3);
  pay(server.port(), p, 60, 4);
  const auto committed = committed_transactions(p.all());
  ASSERT_GE(committed.size(), 64u);
  const auto mine = sql_column(owner_url(),
                               "SELECT DISTINCT o.id::text FROM outbox_event o"
                               " CROSS JOIN LATERAL unnest(o.transaction_ids) AS t(id)"
                               " JOIN ledger_entry e ON e.transaction_id = t.id"
                               " WHERE e.account_id IN (" +
                                   id_list(p.all()) + ")");
  const std::set<std::string> my_rows(mine.begin(), mine.end());

  std::mutex mutex;
  std::vector<std::int64_t> aborted;
  std::string unsequenced_when_sent;
  events::relay_hooks hooks;
  hooks.after_stream_write = [&](const std::vector<std::int64_t>& rows) {
    std::lock_guard lock(mutex);
    if (!aborted.empty()) return;
    const bool holds_mine =
        std::any_of(rows.begin(), rows.end(), [&](std::int64_t id) { return my_rows.count(std::to_string(id)) != 0; });
    if (!holds_mine) return;
    aborted = rows;
    std::string ids;
    for (const auto id : rows) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    unsequenced_when_sent =
        sql_column(owner_url(), "SELECT count(*) FROM outbox_event WHERE feed_seq IS NULL AND id IN (" + ids + ")")
            .at(0);
    throw events::round_aborted("stopped between XADD and the mark by the test");
  };
  events::outbox_relay relay(relay_config(), hooks);
  relay.start();
  ASSERT_TRUE(
      eventually([&] { return unpublished_rows() == 0; }, std::chrono::seconds(60), std::chrono::milliseconds(20)))
      << unpublished_rows() << " rows still unpublished";
  relay.stop();

  std::set<std::string> replayed;
  {
    std::lock_guard lock(mutex);
    ASSERT_FALSE(aborted.empty()) << "the hook never saw this test's rows";
    EXPECT_EQ(unsequenced_when_sent, "0") << "rows sent to the stream before their positions committed";
    replayed = transactions_of_rows(owner_url(), aborted);
  }
  const auto counts = counts_by_event(entries_touching(p.all()));
  std::set<std::string> streamed;
  for (const auto& [event, n] : counts) {
    streamed.insert(event);
    EXPECT_EQ(n, replayed.count(event) != 0 ? 2 : 1) << event;
  }
  EXPECT_EQ(streamed, committed);
  EXPECT_FALSE(replayed.empty());
  EXPECT_EQ(relay.stats().database_errors, 0u);
}

TEST_F(relay_test, two_relays_on_one_database_never_publish_a_row_at_the_same_time) {
  // Two relays poll one database every millisecond, two rows a round, while payments commit. Each
  // hook call is a round between its XADDs and its mark: at no time are two relays inside one,
  // no outbox row is ever handed to two rounds, and every committed transaction is in the stream
  // exactly once (nothing crashed, so nothing is published twice).
  server_process server(server_options({{"WALLET_EVENTS_ENABLED", "false"}}));
  http_client c(server.port());
  const auto p = make_parties(c, server.operator_key(), 6, 4);

  std::mutex mutex;
  std::map<std::int64_t, int> rounds_of_row;
  std::atomic<int> inside{0};
  std::atomic<int> most_inside{0};
  std::array<std::atomic<int>, 2> rounds_by_relay{};
  auto hooks_for = [&](int relay) {
    events::relay_hooks h;
    h.after_stream_write = [&, relay](const std::vector<std::int64_t>& rows) {
      const int now_inside = ++inside;
      int seen = most_inside.load();
      while (now_inside > seen && !most_inside.compare_exchange_weak(seen, now_inside)) {}
      ++rounds_by_relay[static_cast<std::size_t>(relay)];
      {
        std::lock_guard lock(mutex);
        for (auto id : rows) ++rounds_of_row[id];
      }
      // Stay inside a moment, so that a second relay in its own round at the same time would be seen.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      --inside;
    };
    return h;
  };
  events::outbox_relay first(relay_config(), hooks_for(0));
  events::outbox_relay second(relay_config(), hooks_for(1));
  first.start();
  second.start();
  pay(server.port(), p, 300, 8);
  ASSERT_TRUE(
      eventually([&] { return unpublished_rows() == 0; }, std::chrono::seconds(60), std::chrono::milliseconds(20)));
  first.stop();
  second.stop();

  EXPECT_EQ(most_inside.load(), 1);
  {
    std::lock_guard lock(mutex);
    for (const auto& [row, n] : rounds_of_row) EXPECT_EQ(n, 1) << "outbox row " << row;
  }
  const auto counts = counts_by_event(entries_touching(p.all()));
  std::set<std::string> streamed;
  for (const auto& [event, n] : counts) {
    streamed.insert(event);
    EXPECT_EQ(n, 1) << event;
  }
  EXPECT_EQ(streamed, committed_transactions(p.all()));
  const auto a = first.stats(), b = second.stats();
  EXPECT_EQ(a.database_errors + b.database_errors, 0u);
  std::cout << "relay rounds with rows: first " << rounds_by_relay[0] << ", second " << rounds_by_relay[1]
            << "; rows published: " << a.rows_published << " + " << b.rows_published << std::endl;
}

TEST_F(relay_test, a_prune_deletes_the_feeds_old_head_and_keeps_every_row_still_needed) {
  // Six payments, each its own outbox row, published by an in-process relay; then every row of the
  // database is made 31 days old, and prune statements run one at a time against a retention of
  // 30 days. Each deletes exactly a prefix of the feed: never past an unpublished row, nor past the
  // row an enabled webhook endpoint has been fanned out to, nor the feed's last row; it records the
  // cursor of the last event deleted, which the feed then reports for an older cursor. A relay
  // holding the lock elsewhere makes it stand by. The ledger keeps every transaction.
  server_process server(server_options({{"WALLET_EVENTS_ENABLED", "false"}}));
  http_client c(server.port());
  const auto p = make_parties(c, server.operator_key(), 1, 1);
  std::vector<std::string> paid;
  for (int i = 0; i < 6; ++i) paid.push_back(transfer(c, p.payer_keys[0], p.payers[0], p.payees[0], 10 + i));
  auto config = relay_config();
  config.feed_retention_days = 0;
  {
    events::outbox_relay relay(config);
    relay.start();
    ASSERT_TRUE(
        eventually([&] { return unpublished_rows() == 0; }, std::chrono::seconds(60), std::chrono::milliseconds(20)));
  }
  // The positions of the payments' rows, in payment order: one payment, one row, one event each.
  std::vector<std::int64_t> seq;
  for (const auto& id : paid) {
    seq.push_back(std::stoll(sql_value(
        owner_url(), "SELECT feed_seq FROM outbox_event WHERE transaction_ids = ARRAY['" + id + "']::uuid[]")));
  }
  for (std::size_t i = 1; i < seq.size(); ++i) ASSERT_GT(seq[i], seq[i - 1]);
  ASSERT_EQ(sql_value(owner_url(), "SELECT max(feed_seq) FROM outbox_event"), std::to_string(seq[5]));
  const auto rows_before = [&](std::int64_t s) {
    return std::stoll(
        sql_value(owner_url(), "SELECT count(*) FROM outbox_event WHERE feed_seq < " + std::to_string(s)));
  };
  sql_value(owner_url(), "UPDATE outbox_event SET created_at = now() - interval '31 days' RETURNING 1");
  sql_value(owner_url(),
            "UPDATE outbox_event SET published_at = NULL WHERE feed_seq = " + std::to_string(seq[2]) + " RETURNING 1");
  const auto cursor = [](std::int64_t s) { return persistence::event_cursor(s, 0); };

  persistence::connection_options options;
  options.url = services().database_url();  // the server's role: its grants are what is tested
  const auto conn = persistence::connect(options);

  // Another relay holds the lock: this one stands by.
  {
    auto other = persistence::connect(options);
    pqxx::work holder(*other);
    ASSERT_TRUE(persistence::try_relay_lock(holder));
    EXPECT_FALSE(persistence::prune_outbox(*conn, 30, 1'000).has_value());
  }
  // One row at most, the oldest; then up to the unpublished row.
  const auto older = rows_before(seq[2]);
  ASSERT_GE(older, 2);
  auto pruned = persistence::prune_outbox(*conn, 30, 1);
  ASSERT_TRUE(pruned.has_value());
  EXPECT_EQ(pruned->rows, 1);
  pruned = persistence::prune_outbox(*conn, 30, 1'000);
  ASSERT_TRUE(pruned.has_value());
  EXPECT_EQ(pruned->rows, older - 1);
  EXPECT_EQ(pruned->through_cursor, cursor(seq[1]));
  EXPECT_EQ(rows_before(seq[2]), 0);

  // Published again; an enabled endpoint that follows the fan-out's shared position (migration
  // 029) stands at that position, not at its own cursor (0 here): the position in the fourth
  // payment's row keeps that row.
  sql_value(owner_url(),
            "UPDATE outbox_event SET published_at = now() WHERE feed_seq = " + std::to_string(seq[2]) + " RETURNING 1");
  const auto owner = sql_value(owner_url(), "SELECT owner_id FROM account WHERE id = " + std::to_string(p.payees[0]));
  const auto add_endpoint = [&](std::int64_t feed_cursor, bool follows) {
    return sql_value(owner_url(),
                     "INSERT INTO webhook_endpoint (owner_id, all_accounts, url, event_types, signing_secret, "
                     "feed_cursor, follows_fan_out) VALUES (" +
                         owner +
                         ", false, 'https://receiver.example/hook', ARRAY['*'], 'whsec_0123456789abcdef0123', " +
                         std::to_string(feed_cursor) + ", " + (follows ? "true" : "false") + ") RETURNING id");
  };
  const auto following = add_endpoint(0, true);
  sql_value(owner_url(), "UPDATE webhook_fan_out SET cursor = " + std::to_string(cursor(seq[3])) + " RETURNING 1");
  pruned = persistence::prune_outbox(*conn, 30, 1'000);
  ASSERT_TRUE(pruned.has_value());
  EXPECT_EQ(pruned->rows, 1);  // the third payment's
  EXPECT_EQ(pruned->through_cursor, cursor(seq[2]));
  sql_value(owner_url(), "UPDATE webhook_endpoint SET deleted_at = now() WHERE id = " + following + " RETURNING 1");

  // An enabled endpoint that does not follow the position stands at its own cursor: fanned out
  // into the fifth payment's row, it keeps that row.
  const auto endpoint = add_endpoint(cursor(seq[4]), false);
  pruned = persistence::prune_outbox(*conn, 30, 1'000);
  ASSERT_TRUE(pruned.has_value());
  EXPECT_EQ(pruned->rows, 1);  // the fourth payment's
  EXPECT_EQ(pruned->through_cursor, cursor(seq[3]));

  // Deleted, the endpoint no longer holds anything: the last row stays all the same.
  sql_value(owner_url(), "UPDATE webhook_endpoint SET deleted_at = now() WHERE id = " + endpoint + " RETURNING 1");
  pruned = persistence::prune_outbox(*conn, 30, 1'000);
  ASSERT_TRUE(pruned.has_value());
  EXPECT_EQ(pruned->rows, 1);
  EXPECT_EQ(pruned->through_cursor, cursor(seq[4]));
  EXPECT_EQ(sql_column(owner_url(), "SELECT feed_seq FROM outbox_event"),
            std::vector<std::string>{std::to_string(seq[5])});
  pruned = persistence::prune_outbox(*conn, 30, 1'000);
  ASSERT_TRUE(pruned.has_value());
  EXPECT_EQ(pruned->rows, 0);
  EXPECT_EQ(pruned->through_cursor, cursor(seq[4]));

  // The feed: a cursor before the last event deleted has expired; that event's cursor has not.
  const persistence::event_filter everything;
  auto page = persistence::read_event_feed(*conn, cursor(seq[0]), 10, 1'000, everything);
  EXPECT_TRUE(page.expired);
  EXPECT_EQ(page.pruned_through, cursor(seq[4]));
  page = persistence::read_event_feed(*conn, cursor(seq[4]), 10, 1'000, everything);
  EXPECT_FALSE(page.expired);
  ASSERT_EQ(page.events.size(), 1u);
  EXPECT_EQ(page.events[0].transaction_id, paid[5]);
  page = persistence::read_event_feed(*conn, 0, 10, 1'000, everything);
  EXPECT_FALSE(page.expired);
  ASSERT_EQ(page.events.size(), 1u);
  EXPECT_EQ(page.events[0].transaction_id, paid[5]);
  // The ledger keeps every transaction.
  std::string ids;
  for (const auto& id : paid) ids += (ids.empty() ? "'" : ",'") + id + "'";
  EXPECT_EQ(sql_value(owner_url(), "SELECT count(*) FROM journal_transaction WHERE id IN (" + ids + ")"), "6");
}

}  // namespace
}  // namespace events_test
