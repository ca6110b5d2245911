// Feed positions against commits out of id order, on the suite's own database, through
// persistence/outbox directly: a batch that took the smaller outbox id but commits after another
// gets the larger position, so a reader that paged past the first never misses the second. (A
// reader paging by outbox id would: that is why positions exist.)

#include <pqxx/pqxx>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "persistence/database.hpp"
#include "persistence/outbox.hpp"
#include "tests/events/fixture.hpp"
#include "tests/support/connections.hpp"

namespace events_test {
namespace {

class feed_order_test : public events_suite {
 protected:
  static persistence::connection_options options() {
    return test_support::options_for(services().database_url(), "events-test-feed");
  }

  // Inserts, in `txn`, an outbox row of one transfer of 1 from `from` to `to`; returns its id.
  static std::int64_t insert_row(pqxx::work& txn, const std::string& transaction_id, std::int64_t from,
                                 std::int64_t to) {
    const std::string payload = R"({"transactions":[{"transactionId":")" + transaction_id +
                                R"(","type":"TRANSFER","currency":"EUR","amount":"1","entries":[{"accountId":)" +
                                std::to_string(from) + R"(,"amount":"-1"},{"accountId":)" + std::to_string(to) +
                                R"(,"amount":"1"}]}]})";
    return txn
        .exec("INSERT INTO outbox_event (transaction_ids, topic, payload) VALUES (ARRAY[" + txn.quote(transaction_id) +
              "]::uuid[], 'ledger.batch', " + txn.quote(payload) + "::jsonb) RETURNING id")[0][0]
        .as<std::int64_t>();
  }

  // A transaction id of its own for `n`.
  static std::string uuid_for(std::int64_t n) {
    char tail[13];
    std::snprintf(tail, sizeof tail, "%012lld", static_cast<long long>(n % 1'000'000'000'000));
    return std::string("019c3a5e-7f10-7abc-8def-") + tail;
  }

  // One relay round's sequencing, under the relay lock; the rows it gave positions.
  static std::int64_t sequence(pqxx::connection& conn) {
    pqxx::work txn(conn);
    EXPECT_TRUE(persistence::try_relay_lock(txn));
    const auto n = persistence::sequence_outbox(txn, 1'000);
    txn.commit();
    return n;
  }
};

TEST_F(feed_order_test, a_batch_that_commits_after_a_later_id_gets_the_later_position_and_is_not_skipped) {
  // Batch A inserts its outbox row first (the smaller id) and stays open; batch B inserts and
  // commits. The relay sequences B alone; a reader pages past B. A commits; the next round gives
  // A the position after B's, and the reader's next page, from the cursor it holds, has A.
  auto slow = persistence::connect(options());
  auto fast = persistence::connect(options());
  auto relay = persistence::connect(options());
  auto reader = persistence::connect(options());
  // Accounts that exist nowhere: events name them as they are, and only this test's rows do.
  const std::int64_t from = 900'000'000'000 + 2 * static_cast<std::int64_t>(::getpid());
  const std::int64_t to = from + 1;
  const std::string a_id = uuid_for(from);
  const std::string b_id = uuid_for(to);
  const persistence::event_filter only_these{std::nullopt, from};

  // Rows other tests' servers left unsequenced get their positions first; then the feed's end,
  // where nothing of this test is yet.
  while (sequence(*relay) > 0) {}
  auto page = persistence::read_event_feed(*reader, 0, 10, 10'000'000, only_these);
  ASSERT_TRUE(page.events.empty());
  const auto start = page.next;

  pqxx::work a(*slow);
  const auto a_row = insert_row(a, a_id, from, to);
  {
    pqxx::work b(*fast);
    const auto b_row = insert_row(b, b_id, from, to);
    b.commit();
    ASSERT_LT(a_row, b_row);
  }
  EXPECT_EQ(sequence(*relay), 1);  // B only: A is not committed
  page = persistence::read_event_feed(*reader, start, 10, 10'000'000, only_these);
  ASSERT_EQ(page.events.size(), 1u);
  EXPECT_EQ(page.events[0].transaction_id, b_id);
  const auto after_b = page.next;

  a.commit();
  EXPECT_EQ(sequence(*relay), 1);
  page = persistence::read_event_feed(*reader, after_b, 10, 10'000'000, only_these);
  ASSERT_EQ(page.events.size(), 1u) << "the row committed late was skipped";
  EXPECT_EQ(page.events[0].transaction_id, a_id);
  EXPECT_GT(page.events[0].cursor, after_b);
  ASSERT_EQ(page.events[0].legs.size(), 2u);
  EXPECT_EQ(page.events[0].legs[0].account, from);
  EXPECT_EQ(page.events[0].legs[0].amount, -1);
  EXPECT_EQ(page.events[0].legs[1].account, to);
  EXPECT_EQ(page.events[0].legs[1].amount, 1);
}

TEST_F(feed_order_test, rows_expand_into_events_of_public_accounts_as_their_payloads_and_accounts_say) {
  // Real accounts: a user account and a USD account of one fresh principal, and a hot account
  // with two shards. One batch row of five transactions, then one row as written before
  // migration 003 (a single transaction, transaction_id set). The fourth transaction's type is
  // one this build does not know (a newer server's, during a rolling upgrade): it is passed on as
  // written, not a row that stops the relay.
  auto owner = persistence::connect(test_support::options_for(owner_url(), "events-test-feed-owner"));
  auto int_of = [&](const std::string& sql) {
    pqxx::work txn(*owner);
    const auto v = txn.exec1(sql)[0].as<std::int64_t>();
    txn.commit();
    return v;
  };
  const auto principal = int_of("INSERT INTO principal (name, role) VALUES ('feed-expansion-" +
                                std::to_string(::getpid()) + "', 'merchant') RETURNING id");
  auto account = [&](const std::string& currency, const std::string& kind_parent_shard) {
    return int_of("INSERT INTO account (owner_id, currency, kind, parent_id, shard_no) VALUES (" +
                  std::to_string(principal) + ", '" + currency + "', " + kind_parent_shard + ") RETURNING id");
  };
  const auto user = account("EUR", "'user', NULL, NULL");
  const auto dollars = account("USD", "'user', NULL, NULL");
  const auto hot = account("EUR", "'user', NULL, NULL");
  const auto shard1 = account("EUR", "'shard', " + std::to_string(hot) + ", 0");
  const auto shard2 = account("EUR", "'shard', " + std::to_string(hot) + ", 1");
  const std::int64_t nowhere = 900'000'000'000 + 2 * static_cast<std::int64_t>(::getpid()) + 1;
  const std::string u = std::to_string(user), d = std::to_string(dollars), s1 = std::to_string(shard1),
                    s2 = std::to_string(shard2), x = std::to_string(nowhere);
  std::vector<std::string> ids;
  for (std::int64_t n = 1; n <= 6; ++n) ids.push_back(uuid_for(7'000'000 + 10 * ::getpid() + n));
  auto tx = [&](int n, const std::string& type, const std::string& currency, const std::string& entries) {
    return R"({"transactionId":")" + ids[n - 1] + R"(","type":")" + type + R"(","currency":")" + currency +
           R"(","amount":"1")" + entries + "}";
  };
  auto entry = [](const std::string& account, const std::string& amount) {
    return R"({"accountId":)" + account + R"(,"amount":")" + amount + R"("})";
  };
  const std::string batch =
      R"({"transactions":[)" +
      tx(1, "TRANSFER", "EUR", R"(,"entries":[)" + entry(u, "-5") + "," + entry(s1, "5") + "]") + "," +
      tx(2, "SWEEP", "EUR", R"(,"entries":[)" + entry(s1, "-3") + "," + entry(s2, "3") + "]") + "," +
      tx(3, "EXCHANGE", "EUR", R"(,"entries":[)" + entry(u, "-10") + "," + entry(d, "11") + "]") + "," +
      tx(4, "CARD_AUTHORIZATION", "EUR", "") + "," +
      tx(5, "TRANSFER", "EUR", R"(,"entries":[)" + entry(u, "-1") + "," + entry(x, "1") + "]") + "]}";
  const std::string single = tx(6, "TRANSFER", "EUR", R"(,"entries":[)" + entry(u, "-2") + "," + entry(s2, "2") + "]");
  std::vector<std::int64_t> rows;
  {
    pqxx::work txn(*owner);
    std::string names = "ARRAY[";
    for (int n = 0; n < 5; ++n) names += (n ? "," : "") + txn.quote(ids[n]);
    rows.push_back(txn.exec1("INSERT INTO outbox_event (transaction_ids, topic, payload) VALUES (" + names +
                             "]::uuid[], 'ledger.batch', " + txn.quote(batch) + "::jsonb) RETURNING id")[0]
                       .as<std::int64_t>());
    rows.push_back(txn.exec1("INSERT INTO outbox_event (transaction_id, topic, payload) VALUES (" + txn.quote(ids[5]) +
                             "::uuid, 'ledger.transaction', " + txn.quote(single) + "::jsonb) RETURNING id")[0]
                       .as<std::int64_t>());
    txn.commit();
  }
  auto relay = persistence::connect(options());
  while (sequence(*relay) > 0) {}

  struct leg {
    std::int64_t account;
    std::int64_t amount;
    std::optional<std::int64_t> owner;
    std::string currency;
    bool operator==(const leg&) const = default;
  };
  auto legs_of = [](const persistence::event_record& e) {
    std::vector<leg> out;
    for (const auto& l : e.legs) out.push_back({l.account, l.amount, l.owner, l.currency});
    return out;
  };
  const std::vector<std::vector<leg>> expected = {
      {{user, -5, principal, "EUR"}, {hot, 5, principal, "EUR"}},
      {{hot, 0, principal, "EUR"}},
      {{user, -10, principal, "EUR"}, {dollars, 11, principal, "USD"}},
      {},
      {{user, -1, principal, "EUR"}, {nowhere, 1, std::nullopt, "EUR"}},
      {{user, -2, principal, "EUR"}, {hot, 2, principal, "EUR"}},
  };
  const std::vector<std::string> types = {"TRANSFER",           "SWEEP",    "EXCHANGE",
                                          "CARD_AUTHORIZATION", "TRANSFER", "TRANSFER"};

  // The relay's expansion, twice with one set of labels: the second reads no account again and
  // says the same.
  persistence::account_labels labels;
  for (int round = 0; round < 2; ++round) {
    pqxx::work txn(*relay);
    const auto events = persistence::outbox_events(txn, rows, labels);
    ASSERT_EQ(events.size(), 6u);
    std::int64_t previous = 0;
    for (std::size_t i = 0; i < events.size(); ++i) {
      SCOPED_TRACE("event " + std::to_string(i + 1));
      EXPECT_EQ(events[i].transaction_id, ids[i]);
      EXPECT_EQ(events[i].type, types[i]);
      EXPECT_EQ(events[i].currency, "EUR");
      EXPECT_EQ(events[i].outbox_id, i < 5 ? rows[0] : rows[1]);
      EXPECT_EQ(events[i].legs.size(), expected[i].size());
      EXPECT_TRUE(legs_of(events[i]) == expected[i]);
      EXPECT_GT(events[i].cursor, previous);
      EXPECT_EQ(events[i].created_at.size(), std::string("2026-11-30T18:00:00.000000Z").size());
      previous = events[i].cursor;
    }
    EXPECT_EQ(events[1].cursor, events[0].cursor + 1);
    EXPECT_EQ(labels.known.count(nowhere), 0u) << "an account the database does not know is not remembered";
    EXPECT_EQ(labels.known.at(shard1).parent, hot);
  }

  // The feed says the same from any cursor: the principal's events after the first one.
  pqxx::work txn(*relay);
  const auto first = persistence::outbox_events(txn, rows, labels).front().cursor;
  txn.commit();
  auto reader = persistence::connect(options());
  const persistence::event_filter mine{principal, std::nullopt};
  const auto page = persistence::read_event_feed(*reader, first, 10, 10'000'000, mine);
  ASSERT_EQ(page.events.size(), 4u);  // the fourth names no account, so no owner
  const std::vector<std::size_t> seen = {1, 2, 4, 5};
  for (std::size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(page.events[i].transaction_id, ids[seen[i]]);
    EXPECT_TRUE(legs_of(page.events[i]) == expected[seen[i]]);
  }
}

TEST_F(feed_order_test, only_one_relay_holds_the_relay_lock) {
  // While one relay's round holds the relay lock, another's try fails at once (it stands by);
  // when the first round ends, the other gets it.
  auto first = persistence::connect(options());
  auto second = persistence::connect(options());
  pqxx::work holder(*first);
  ASSERT_TRUE(persistence::try_relay_lock(holder));
  {
    pqxx::work other(*second);
    EXPECT_FALSE(persistence::try_relay_lock(other));
  }
  holder.commit();
  pqxx::work other(*second);
  EXPECT_TRUE(persistence::try_relay_lock(other));
}

}  // namespace
}  // namespace events_test
