// Feed positions against commits out of id order, on the suite's own database, through
// persistence/outbox directly: a batch that took the smaller outbox id but commits after another
// gets the larger position, so a reader that paged past the first never misses the second. (A
// reader paging by outbox id would: that is why positions exist.)

#include <pqxx/pqxx>
#include <unistd.h>

#include <cstdio>

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
