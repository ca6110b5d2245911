// The API-key cache (actors/key_cache.hpp): known keys are answered from memory, unknown keys are
// remembered only for their time to live, and both sides stay within their bounds.

#include <gtest/gtest.h>

#include "actors/key_cache.hpp"

namespace actors {
namespace {

using namespace std::chrono_literals;
const auto t0 = std::chrono::steady_clock::time_point{} + 1h;

TEST(key_cache, a_remembered_key_is_found_with_its_principal) {
  // The principal comes back as it was stored; another key is not found.
  key_cache cache(10, 1000ms, 10);
  cache.remember("aa", principal_view{7, "shop", ledger::role::merchant});
  const auto found = cache.find("aa");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->id, 7);
  EXPECT_EQ(found->role, ledger::role::merchant);
  EXPECT_FALSE(cache.find("bb"));
}

TEST(key_cache, an_unknown_key_is_remembered_for_its_time_to_live_only) {
  // Within the TTL the key is answered unknown without a read; at the TTL it is forgotten.
  key_cache cache(10, 1000ms, 10);
  cache.remember_unknown("bad", t0);
  EXPECT_TRUE(cache.known_unknown("bad", t0 + 999ms));
  EXPECT_FALSE(cache.known_unknown("bad", t0 + 1000ms));
  EXPECT_EQ(cache.unknown_count(), 0u);
}

TEST(key_cache, a_key_created_later_is_no_longer_unknown) {
  // A key remembered as unknown and then created is found at once (a new principal's first request).
  key_cache cache(10, 1000ms, 10);
  cache.remember_unknown("k", t0);
  cache.remember("k", principal_view{1, "p", ledger::role::user});
  EXPECT_FALSE(cache.known_unknown("k", t0));
  EXPECT_TRUE(cache.find("k"));
}

TEST(key_cache, no_unknown_key_is_kept_when_the_ttl_is_zero) {
  // unknown_key_cache_ms = 0 turns the unknown side off.
  key_cache cache(10, 0ms, 10);
  cache.remember_unknown("bad", t0);
  EXPECT_FALSE(cache.known_unknown("bad", t0));
}

TEST(key_cache, both_sides_stay_within_their_bounds) {
  // A full side starts over (expired unknown keys go first); it never holds more than its bound.
  key_cache cache(2, 1000ms, 2);
  for (const char* k : {"a", "b", "c"}) cache.remember(k, principal_view{1, k, ledger::role::user});
  EXPECT_TRUE(cache.find("c"));
  EXPECT_LE(static_cast<int>(cache.find("a").has_value()) + static_cast<int>(cache.find("b").has_value()), 1);
  cache.remember_unknown("x", t0);
  cache.remember_unknown("y", t0 + 2000ms);
  cache.remember_unknown("z", t0 + 2000ms);  // "x" has expired by then and makes room
  EXPECT_EQ(cache.unknown_count(), 2u);
  EXPECT_TRUE(cache.known_unknown("y", t0 + 2000ms));
  EXPECT_TRUE(cache.known_unknown("z", t0 + 2000ms));
}

}  // namespace
}  // namespace actors
