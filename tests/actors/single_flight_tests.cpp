// single_flight: concurrent requests with one Idempotency-Key share one execution. Joins, the
// answers of the leader and its followers, a conflicting body, a caller that went away, and the
// key's reuse once the flight ended.

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "actors/outcomes.hpp"
#include "actors/single_flight.hpp"

namespace actors {
namespace {

money_result created() {
  money_result r;
  r.status = 201;
  r.body = "{\"transactionId\":\"t\"}";
  return r;
}

TEST(single_flight, followers_get_the_leaders_answer_as_a_replay) {
  single_flight flights;
  std::vector<money_result> got(3);
  EXPECT_EQ(flights.join("k", "h", [&](money_result r) { got[0] = r; }), single_flight::join_result::leader);
  EXPECT_EQ(flights.join("k", "h", [&](money_result r) { got[1] = r; }), single_flight::join_result::follower);
  EXPECT_EQ(flights.join("k", "h", [&](money_result r) { got[2] = r; }), single_flight::join_result::follower);
  flights.finish("k", created());
  EXPECT_FALSE(got[0].replayed);
  EXPECT_TRUE(got[1].replayed);
  EXPECT_TRUE(got[2].replayed);
  for (const auto& r : got) EXPECT_EQ(r.body, "{\"transactionId\":\"t\"}");
  EXPECT_EQ(flights.size(), 0u);
}

TEST(single_flight, a_refusal_reaches_every_waiter_and_is_not_a_replay) {
  single_flight flights;
  std::vector<money_result> got(2);
  flights.join("k", "h", [&](money_result r) { got[0] = r; });
  flights.join("k", "h", [&](money_result r) { got[1] = r; });
  flights.finish("k", refusal(ledger::error_code::insufficient_funds, "too little"));
  for (const auto& r : got) {
    EXPECT_EQ(r.outcome, ledger::error_code::insufficient_funds);
    EXPECT_FALSE(r.replayed);
  }
}

TEST(single_flight, another_body_under_the_same_key_is_a_conflict_and_is_not_kept) {
  single_flight flights;
  int leader_answers = 0, conflicting_answers = 0;
  flights.join("k", "h1", [&](money_result) { ++leader_answers; });
  EXPECT_EQ(flights.join("k", "h2", [&](money_result) { ++conflicting_answers; }),
            single_flight::join_result::conflict);
  flights.finish("k", created());
  EXPECT_EQ(leader_answers, 1);
  EXPECT_EQ(conflicting_answers, 0);
}

TEST(single_flight, a_caller_that_went_away_does_not_keep_the_others_from_their_answer) {
  // The HTTP layer's callback holds only a weak reference to its exchange: a client that
  // disconnected leaves a callback that does nothing; the others are answered all the same.
  single_flight flights;
  auto gone = std::make_shared<int>(0);
  std::weak_ptr<int> weak = gone;
  int answered = 0;
  flights.join("k", "h", [&](money_result) { ++answered; });
  flights.join("k", "h", [weak](money_result) {
    if (auto alive = weak.lock()) ++*alive;
  });
  flights.join("k", "h", [&](money_result) { ++answered; });
  gone.reset();
  flights.finish("k", created());
  EXPECT_EQ(answered, 2);
  EXPECT_TRUE(weak.expired());
}

TEST(single_flight, a_finished_key_starts_a_new_flight) {
  single_flight flights;
  flights.join("k", "h", [](money_result) {});
  flights.finish("k", created());
  EXPECT_EQ(flights.join("k", "h", [](money_result) {}), single_flight::join_result::leader);
  EXPECT_EQ(flights.join("other", "h", [](money_result) {}), single_flight::join_result::leader);
  EXPECT_EQ(flights.size(), 2u);
}

TEST(single_flight, concurrent_joins_make_exactly_one_leader) {
  // Eight threads join one key at once: one leads, seven follow, and all eight are answered once.
  single_flight flights;
  std::atomic<int> leaders{0}, answers{0};
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      while (!go) std::this_thread::yield();
      if (flights.join("k", "h", [&](money_result) { ++answers; }) == single_flight::join_result::leader) ++leaders;
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(leaders.load(), 1);
  flights.finish("k", created());
  EXPECT_EQ(answers.load(), 8);
}

}  // namespace
}  // namespace actors
