// account_directory::credit_row: which row of a hot account a payment credits. A writer credits
// the shards that are its own (every writer_count-th from its index), spread over all of them;
// an account with fewer shards than writers falls back to any shard, and a plain one to itself.

#include <gtest/gtest.h>

#include <map>

#include "actors/directory.hpp"

namespace actors {
namespace {

account_facts hot(int shards) {
  account_facts f;
  f.id = 1000;
  f.currency = "EUR";
  for (int i = 0; i < shards; ++i) f.shards.push_back(2000 + i);
  return f;
}

// How often each row is picked when `spread` takes every value in [0, n).
std::map<ledger::account_id, int> picks(const account_facts& f, std::size_t writer, std::size_t writers, int n) {
  std::map<ledger::account_id, int> out;
  for (int spread = 0; spread < n; ++spread) {
    ++out[account_directory::credit_row(f, writer, writers, static_cast<std::uint64_t>(spread))];
  }
  return out;
}

TEST(credit_row, one_writer_spreads_over_every_shard_evenly) {
  const auto got = picks(hot(16), 0, 1, 32);
  ASSERT_EQ(got.size(), 16u);
  for (const auto& [row, count] : got) EXPECT_EQ(count, 2) << row;
}

TEST(credit_row, a_writer_credits_only_its_own_shards_evenly) {
  // 16 shards, 3 writers: writer 1 owns shard numbers 1, 4, 7, 10, 13.
  const auto got = picks(hot(16), 1, 3, 10);
  const std::map<ledger::account_id, int> expected{{2001, 2}, {2004, 2}, {2007, 2}, {2010, 2}, {2013, 2}};
  EXPECT_EQ(got, expected);
  // Writer 0 owns one more (0, 3, ..., 15): six.
  EXPECT_EQ(picks(hot(16), 0, 3, 60).size(), 6u);
}

TEST(credit_row, fewer_shards_than_writers_fall_back_to_any_shard) {
  const auto got = picks(hot(2), 5, 8, 4);
  const std::map<ledger::account_id, int> expected{{2000, 2}, {2001, 2}};
  EXPECT_EQ(got, expected);
}

TEST(credit_row, an_account_without_shards_is_its_own_row) {
  EXPECT_EQ(account_directory::credit_row(hot(0), 0, 4, 12345), 1000);
}

// Facts read before an account was made hot, stored after its shards were, leave the shards as
// they are: shards are only ever added.
TEST(account_directory, facts_read_before_the_shards_keep_them) {
  account_directory directory(16);
  directory.put(hot(4));
  auto stale = hot(0);
  stale.owner_id = 7;
  directory.put(stale);
  const auto found = directory.find(1000);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->shards.size(), 4u);
  EXPECT_EQ(found->owner_id, 7);
  directory.put(hot(6));
  EXPECT_EQ(directory.find(1000)->shards.size(), 6u);
}

}  // namespace
}  // namespace actors
