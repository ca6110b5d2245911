// The in-process token buckets (http/token_buckets.hpp) on a clock the test moves: what they
// admit, when they refill, what they keep in memory and what they do when the table is full.

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "http/token_buckets.hpp"

namespace {

using api::token_buckets;
using namespace std::chrono_literals;

const token_buckets::clock::time_point t0{1000s};

TEST(token_buckets, asking_about_a_key_keeps_nothing_only_taking_does) {
  token_buckets buckets(10, 20, 100);
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(buckets.has_token("principal-" + std::to_string(i), t0));
  EXPECT_EQ(buckets.size(), 0u);
  EXPECT_EQ(buckets.retry_after_s("principal-1", t0), 1);
  EXPECT_EQ(buckets.size(), 0u);
  EXPECT_TRUE(buckets.take("principal-1", t0));
  EXPECT_EQ(buckets.size(), 1u);
}

TEST(token_buckets, a_burst_empties_the_bucket_and_the_rate_refills_it) {
  token_buckets buckets(10, 20, 100);
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(buckets.take("p", t0)) << i;
  EXPECT_FALSE(buckets.take("p", t0));
  EXPECT_FALSE(buckets.has_token("p", t0));
  EXPECT_EQ(buckets.retry_after_s("p", t0), 1);
  // 10 per second: half a token after 50 ms, one and a half after 150 ms, so one take and no more.
  EXPECT_FALSE(buckets.has_token("p", t0 + 50ms));
  EXPECT_TRUE(buckets.has_token("p", t0 + 150ms));
  EXPECT_TRUE(buckets.take("p", t0 + 150ms));
  EXPECT_FALSE(buckets.take("p", t0 + 150ms));
  // Never more than the burst, however long the wait.
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(buckets.take("p", t0 + 1h)) << i;
  EXPECT_FALSE(buckets.take("p", t0 + 1h));
  // Another key is untouched by all of this.
  EXPECT_TRUE(buckets.has_token("q", t0 + 1h));
}

TEST(token_buckets, retry_after_is_the_whole_seconds_until_a_token) {
  token_buckets buckets(1, 2, 100);
  EXPECT_TRUE(buckets.take("p", t0));
  EXPECT_TRUE(buckets.take("p", t0));
  EXPECT_FALSE(buckets.has_token("p", t0));
  EXPECT_EQ(buckets.retry_after_s("p", t0), 1);
  token_buckets slow(1, 1, 100);
  EXPECT_TRUE(slow.take("p", t0));
  EXPECT_EQ(slow.retry_after_s("p", t0 + 500ms), 1);
  EXPECT_TRUE(slow.has_token("p", t0 + 1s));
}

TEST(token_buckets, what_was_admitted_together_is_charged_as_debt) {
  // 25 requests checked at once while the bucket is full all pass; each turns out to cost a token.
  // The five beyond the burst are a debt the rate repays before the next one passes: six tokens'
  // worth (0.6 s at 10 a second) until a whole token is there again.
  token_buckets buckets(10, 20, 100);
  for (int i = 0; i < 25; ++i) EXPECT_TRUE(buckets.has_token("p", t0)) << i;
  for (int i = 0; i < 25; ++i) buckets.charge("p", t0);
  EXPECT_FALSE(buckets.has_token("p", t0));
  EXPECT_EQ(buckets.retry_after_s("p", t0), 1);
  EXPECT_FALSE(buckets.take("p", t0 + 100ms));
  EXPECT_FALSE(buckets.has_token("p", t0 + 590ms));
  EXPECT_TRUE(buckets.has_token("p", t0 + 610ms));
  // A debt longer than a second is told as such.
  for (int i = 0; i < 30; ++i) buckets.charge("q", t0);
  EXPECT_EQ(buckets.retry_after_s("q", t0), 2);
  // The debt stops at a minute of the rate (600 tokens), however much more is charged: 601 tokens,
  // 60.1 s, to refill.
  for (int i = 0; i < 10'000; ++i) buckets.charge("r", t0);
  EXPECT_EQ(buckets.retry_after_s("r", t0), 61);
  EXPECT_FALSE(buckets.has_token("r", t0 + 60'050ms));
  EXPECT_TRUE(buckets.has_token("r", t0 + 60'150ms));
}

TEST(token_buckets, a_table_full_of_live_buckets_refuses_new_keys) {
  // Three keys each spent a token: their buckets say something, so none is dropped, and a fourth
  // key gets no bucket and no token, whether it asks or takes.
  token_buckets buckets(1, 5, 3);
  for (const auto* key : {"a", "b", "c"}) EXPECT_TRUE(buckets.take(key, t0));
  EXPECT_EQ(buckets.size(), 3u);
  EXPECT_FALSE(buckets.has_token("d", t0));
  EXPECT_FALSE(buckets.take("d", t0));
  EXPECT_EQ(buckets.size(), 3u);
  // The keys that have buckets are answered as before.
  EXPECT_TRUE(buckets.has_token("a", t0));
  // Once the old buckets have refilled, they say nothing a new one would not: they make room.
  EXPECT_TRUE(buckets.has_token("d", t0 + 1s));
  EXPECT_TRUE(buckets.take("d", t0 + 1s));
  EXPECT_LE(buckets.size(), 3u);
}

}  // namespace
