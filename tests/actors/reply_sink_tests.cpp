// reply_sink: the one way a debit's answer leaves the actor system. Exactly one answer must
// reach the caller, whether the sink is answered, answered twice by mistake, copied into several
// handlers, or dropped unanswered (an actor stopped with the message in its mailbox).

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "actors/messages.hpp"
#include "actors/outcomes.hpp"

namespace actors {
namespace {

struct recorder {
  std::vector<money_result> answers;
  reply_sink sink() {
    return reply_sink{[this](money_result r) { answers.push_back(std::move(r)); }};
  }
};

TEST(reply_sink, delivers_the_first_answer_only) {
  recorder r;
  {
    auto sink = r.sink();
    sink.deliver(refusal(ledger::error_code::insufficient_funds, "first"));
    sink.deliver(refusal(ledger::error_code::not_found, "second"));
  }
  ASSERT_EQ(r.answers.size(), 1u);
  EXPECT_EQ(r.answers[0].outcome, ledger::error_code::insufficient_funds);
}

TEST(reply_sink, a_sink_dropped_unanswered_answers_outcome_unknown_once) {
  recorder r;
  {
    auto sink = r.sink();
    auto copy = sink;  // a handler holding a copy keeps the question open
    { auto gone = std::move(sink); }
    EXPECT_TRUE(r.answers.empty());
  }
  ASSERT_EQ(r.answers.size(), 1u);
  EXPECT_EQ(r.answers[0].outcome, ledger::error_code::outcome_unknown);
}

TEST(reply_sink, concurrent_answers_from_many_threads_deliver_exactly_one) {
  for (int round = 0; round < 200; ++round) {
    std::atomic<int> calls{0};
    {
      reply_sink sink{[&calls](money_result) { ++calls; }};
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t) {
        threads.emplace_back([sink] { sink.deliver(refusal(ledger::error_code::not_found, "race")); });
      }
      for (auto& t : threads) t.join();
    }
    ASSERT_EQ(calls.load(), 1) << "round " << round;
  }
}

// A posting the writer's lease fence refused (cluster mode: the payer's partition changed hands
// after its actor decided) is a 503 not_partition_owner to retry, never a 500: nothing was posted.
TEST(outcomes, a_posting_refused_by_the_lease_fence_is_retried_elsewhere) {
  persistence::posting_outcome fenced;
  fenced.outcome = ledger::error_code::not_partition_owner;
  const auto r = to_money_result(fenced);
  EXPECT_EQ(r.outcome, ledger::error_code::not_partition_owner);
  EXPECT_GT(r.retry_after_s, 0);
}

}  // namespace
}  // namespace actors
