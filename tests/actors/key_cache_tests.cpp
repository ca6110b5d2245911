// The API-key cache (actors/key_cache.hpp): known keys are answered from memory for their time to
// live since they were last confirmed, revoked keys are forgotten and stay forgotten, unknown keys
// are remembered only for their time to live, and every side stays within its bound.

#include <gtest/gtest.h>

#include "actors/key_cache.hpp"

namespace actors {
namespace {

using namespace std::chrono_literals;
const auto t0 = std::chrono::steady_clock::now();
// Long enough for the tests that do not read the clock of the cache's own entries.
constexpr auto k_ttl = std::chrono::milliseconds(1h);

TEST(key_cache, a_remembered_key_is_found_with_its_principal) {
  // The principal comes back as it was stored; another key is not found.
  key_cache cache(10, k_ttl, 1000ms, 10);
  cache.remember("aa", principal_view{7, "shop", ledger::role::merchant});
  const auto found = cache.find("aa");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->id, 7);
  EXPECT_EQ(found->role, ledger::role::merchant);
  EXPECT_FALSE(cache.find("bb"));
}

TEST(key_cache, an_unknown_key_is_remembered_for_its_time_to_live_only) {
  // Within the TTL the key is answered unknown without a read; at the TTL it is forgotten.
  key_cache cache(10, k_ttl, 1000ms, 10);
  cache.remember_unknown("bad", t0);
  EXPECT_TRUE(cache.known_unknown("bad", t0 + 999ms));
  EXPECT_FALSE(cache.known_unknown("bad", t0 + 1000ms));
  EXPECT_EQ(cache.unknown_count(), 0u);
}

TEST(key_cache, a_key_created_later_is_no_longer_unknown) {
  // A key remembered as unknown and then created is found at once (a new principal's first request).
  key_cache cache(10, k_ttl, 1000ms, 10);
  cache.remember_unknown("k", t0);
  cache.remember("k", principal_view{1, "p", ledger::role::user});
  EXPECT_FALSE(cache.known_unknown("k", t0));
  EXPECT_TRUE(cache.find("k"));
}

TEST(key_cache, no_unknown_key_is_kept_when_the_ttl_is_zero) {
  // unknown_key_cache_ms = 0 turns the unknown side off.
  key_cache cache(10, k_ttl, 0ms, 10);
  cache.remember_unknown("bad", t0);
  EXPECT_FALSE(cache.known_unknown("bad", t0));
}

TEST(key_cache, both_sides_stay_within_their_bounds) {
  // A full side starts over (expired unknown keys go first); it never holds more than its bound.
  key_cache cache(2, k_ttl, 1000ms, 2);
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

TEST(key_cache, a_known_key_is_trusted_for_its_ttl_since_it_was_read) {
  // Within the TTL of the read the key is found; at the TTL it must be read again, but the cache
  // still knows it was valid (a returning client, not a guess).
  key_cache cache(10, 1000ms, 1000ms, 10);
  cache.remember("k", principal_view{1, "p", ledger::role::user}, t0 + 5000ms);
  EXPECT_TRUE(cache.find("k", t0 + 5999ms));
  EXPECT_FALSE(cache.find("k", t0 + 6000ms));
  EXPECT_TRUE(cache.knows("k"));
  EXPECT_FALSE(cache.knows("other"));
}

TEST(key_cache, a_check_for_revoked_keys_confirms_the_others_from_its_start) {
  // A check that started at t confirms every key it does not name until t + TTL, and forgets the
  // ones it names (they are neither found nor known).
  key_cache cache(10, 1000ms, 1000ms, 10);
  cache.remember("kept", principal_view{1, "a", ledger::role::user}, t0 + 1000ms);
  cache.remember("gone", principal_view{2, "b", ledger::role::user}, t0 + 1000ms);
  cache.confirm({"gone"}, true, t0 + 1500ms);
  EXPECT_TRUE(cache.find("kept", t0 + 2499ms));
  EXPECT_FALSE(cache.find("kept", t0 + 2500ms));
  EXPECT_FALSE(cache.find("gone", t0 + 1500ms));
  EXPECT_FALSE(cache.knows("gone"));
  // A check that started earlier than the last one confirms nothing new.
  cache.confirm({}, true, t0 + 1200ms);
  EXPECT_FALSE(cache.find("kept", t0 + 2500ms));
}

TEST(key_cache, a_revoked_key_is_not_brought_back_by_a_read_that_started_before) {
  // A read that began before the revocation was seen may still have found the key: it must not
  // cache it again; a read that began after it may (it would not find a revoked key).
  key_cache cache(10, 1000ms, 1000ms, 10);
  const principal_view p{3, "c", ledger::role::user};
  cache.remember("k", p, t0 + 100ms);
  cache.revoke("k", t0 + 200ms);
  EXPECT_FALSE(cache.find("k", t0 + 200ms));
  cache.remember("k", p, t0 + 150ms);
  EXPECT_FALSE(cache.find("k", t0 + 300ms));
  EXPECT_FALSE(cache.knows("k"));
  // The same holds for a key a check for revoked keys named.
  cache.remember("j", p, t0 + 100ms);
  cache.confirm({"j"}, true, t0 + 400ms);
  cache.remember("j", p, t0 + 350ms);
  EXPECT_FALSE(cache.find("j", t0 + 500ms));
}

TEST(key_cache, an_incomplete_check_forgets_every_known_key) {
  // A check that hit its bound may have missed revocations: every key is read again.
  key_cache cache(10, 1000ms, 1000ms, 10);
  cache.remember("a", principal_view{1, "a", ledger::role::user}, t0);
  cache.confirm({}, false, t0 + 10ms);
  EXPECT_FALSE(cache.find("a", t0 + 20ms));
  EXPECT_EQ(cache.known_count(), 0u);
}

TEST(key_cache, revoked_marks_stay_within_their_bound) {
  // More revocations than the bound drop the marks, not the keys nobody revoked: a principal that
  // creates and revokes keys in a loop must not make every other client's key be read again.
  key_cache cache(10, 1000ms, 1000ms, 2);
  const principal_view p{4, "d", ledger::role::user};
  cache.remember("live", p, t0);
  cache.revoke("r1", t0);
  cache.revoke("r2", t0);
  cache.revoke("r3", t0);
  EXPECT_TRUE(cache.find("live", t0));
  EXPECT_FALSE(cache.find("r1", t0));
  EXPECT_FALSE(cache.find("r3", t0));
  cache.remember("r3", p, t0);  // its mark is kept: the read began no later than the revocation
  EXPECT_FALSE(cache.knows("r3"));
}

TEST(key_cache, a_read_older_than_dropped_marks_is_not_remembered) {
  // r1's mark goes when the marks overflow; a read of r1 that began before its revocation (and so
  // may have found it valid) must not bring it back. A read that began after the marks went may
  // be remembered.
  key_cache cache(10, 1000ms, 1000ms, 2);
  const principal_view p{5, "e", ledger::role::user};
  cache.revoke("r1", t0 + 100ms);
  cache.revoke("r2", t0 + 200ms);
  cache.revoke("r3", t0 + 300ms);  // no room: the marks of r1 and r2 go
  cache.remember("r1", p, t0 + 50ms);
  EXPECT_FALSE(cache.knows("r1"));
  cache.remember("live", p, t0 + 250ms);
  EXPECT_FALSE(cache.knows("live"));
  cache.remember("live", p, t0 + 400ms);
  EXPECT_TRUE(cache.find("live", t0 + 400ms));
}

TEST(key_cache, marks_dropped_by_a_check_cover_later_revocations) {
  // A check that started before k was revoked drops the marks: a read of k that began after the
  // check started but before the revocation must not be remembered either.
  key_cache cache(10, 1000ms, 1000ms, 2);
  const principal_view p{6, "f", ledger::role::user};
  cache.revoke("k", t0 + 100ms);
  cache.revoke("j", t0 + 100ms);
  cache.confirm({"x"}, true, t0 + 50ms);  // no room: the marks go
  cache.remember("k", p, t0 + 75ms);
  EXPECT_FALSE(cache.knows("k"));
}

}  // namespace
}  // namespace actors
