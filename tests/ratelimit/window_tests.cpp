// The window arithmetic, the in-process limiter, the leased-allowance table and URL parsing,
// without Redis.

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "ratelimit/allowance.hpp"
#include "ratelimit/local_limiter.hpp"
#include "ratelimit/redis_url.hpp"
#include "ratelimit/window.hpp"

namespace ratelimit {
namespace {

using verdict = allowance_table::verdict;

config::ratelimit_settings limits(std::int64_t rate, std::int64_t burst) {
  config::ratelimit_settings s;
  s.rate_per_second = rate;
  s.burst = burst;
  s.read_rate_per_second = rate * 5;
  s.read_burst = burst * 5;
  return s;
}

TEST(window_policy, burst_over_rate_is_the_window) {
  // The defaults map to `burst` requests per burst/rate seconds, and the header says so.
  const config::ratelimit_settings defaults;
  const window_policy write = policy_for(defaults, route_class::write);
  const window_policy read = policy_for(defaults, route_class::read);
  EXPECT_EQ(write.limit, 200);
  EXPECT_EQ(write.window_ms, 2000);
  EXPECT_EQ(read.limit, 1000);
  EXPECT_EQ(read.window_ms, 2000);
  EXPECT_EQ(policy_header(write), "200;w=2");
  // Sub-second and non-integral windows round up, both in milliseconds and in the header.
  const window_policy fast = policy_for(limits(3, 1), route_class::write);
  EXPECT_EQ(fast.window_ms, 334);
  EXPECT_EQ(policy_header(fast), "1;w=1");
}

TEST(window_policy, a_lease_never_strands_more_than_half_the_limit_in_a_window) {
  // The defaults keep their leases of 8: 200 per 2 s, leases living 2 s, at most 2 expire per
  // window, each stranding at most 7 (14 of 200).
  const config::ratelimit_settings defaults;
  EXPECT_EQ(lease_size(policy_for(defaults, route_class::write), defaults.lease_tokens, defaults.lease_ms), 8);
  EXPECT_EQ(lease_size(policy_for(defaults, route_class::read), defaults.lease_tokens, defaults.lease_ms), 8);
  // 5 per 5 s: a lease of the whole burst expiring after 250 ms would refuse a client's second
  // request. 21 leases can expire in that window, so none is taken: every check asks Redis.
  EXPECT_EQ(lease_size(policy_for(limits(1, 5), route_class::write), 8, 250), 1);
  // 100 per 10 s with leases living 1 s: 11 expiring leases may strand 4 each, 44 in all.
  const window_policy hundred = policy_for(limits(10, 100), route_class::write);
  EXPECT_EQ(lease_size(hundred, 50, 1000), 5);
  EXPECT_LE((hundred.window_ms / 1000 + 1) * (lease_size(hundred, 50, 1000) - 1), hundred.limit / 2);
  // Never more than configured, and 1 stays 1 (leases off).
  EXPECT_EQ(lease_size(hundred, 3, 1000), 3);
  EXPECT_EQ(lease_size(policy_for(defaults, route_class::write), 1, 250), 1);
}

TEST(sliding, counts_exactly_up_to_the_limit_in_a_fresh_window) {
  // Feeding each allowed request back as the current count allows exactly `limit`, with
  // remaining counting down to zero, then denies with a wait that the arithmetic confirms.
  const window_policy policy{10, 2000};
  std::int64_t current = 0;
  for (std::int64_t i = 0; i < 10; ++i) {
    const outcome o = evaluate_sliding(current, 0, 500, policy);
    ASSERT_TRUE(o.allowed);
    EXPECT_EQ(o.remaining, 9 - i);
    EXPECT_EQ(o.reset_ms, 1500);
    ++current;
  }
  const outcome denied = evaluate_sliding(current, 0, 500, policy);
  ASSERT_FALSE(denied.allowed);
  // 1500 ms to the next window, then 1/10 of a window for one request's worth to decay.
  EXPECT_EQ(denied.retry_after_ms, 1500 + 200 + 1);
  // After that wait the estimate lets a request pass.
  EXPECT_TRUE(evaluate_sliding(0, current, 200 + 1, policy).allowed);
  EXPECT_FALSE(evaluate_sliding(0, current, 199, policy).allowed);
}

TEST(sliding, previous_window_decays_and_retry_is_exact) {
  // With a full previous window, a request passes exactly once the weighted share has dropped
  // by one, and the computed wait lands on that moment.
  const window_policy policy{10, 1000};
  const outcome denied = evaluate_sliding(0, 10, 0, policy);
  ASSERT_FALSE(denied.allowed);
  EXPECT_GE(denied.retry_after_ms, 100);
  EXPECT_TRUE(evaluate_sliding(0, 10, denied.retry_after_ms, policy).allowed);
  EXPECT_FALSE(evaluate_sliding(0, 10, 99, policy).allowed);
  const outcome partial = evaluate_sliding(4, 10, 0, policy);
  ASSERT_FALSE(partial.allowed);
  EXPECT_TRUE(evaluate_sliding(4, 10, partial.retry_after_ms, policy).allowed);
}

TEST(fixed, allows_limit_then_waits_for_the_window_end) {
  // The count including the request decides; the wait is the rest of the window.
  const window_policy policy{3, 1000};
  EXPECT_TRUE(evaluate_fixed(1, 100, policy).allowed);
  EXPECT_EQ(evaluate_fixed(3, 100, policy).remaining, 0);
  const outcome denied = evaluate_fixed(4, 100, policy);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.retry_after_ms, 900);
}

TEST(decision_headers, whole_seconds_rounded_up) {
  // Denied decisions carry Retry-After of at least one second, and the header strings match the
  // numeric fields in the IETF draft's format.
  const window_policy policy{200, 2000};
  const decision allowed = to_decision(policy, outcome{true, 17, 801, 0}, false);
  EXPECT_EQ(allowed.header, "limit=200, remaining=17, reset=1");
  EXPECT_EQ(allowed.policy, "200;w=2");
  EXPECT_EQ(allowed.retry_after_s, 0);
  const decision denied = to_decision(policy, outcome{false, 0, 1, 1}, true);
  EXPECT_EQ(denied.retry_after_s, 1);
  EXPECT_EQ(denied.reset_s, 1);
  EXPECT_TRUE(denied.fallback);
  EXPECT_EQ(denied.header, "limit=200, remaining=0, reset=1");
  EXPECT_EQ(to_decision(policy, outcome{false, 0, 2001, 2001}, false).retry_after_s, 3);
  const decision open = unlimited_decision(policy);
  EXPECT_TRUE(open.allowed);
  EXPECT_EQ(open.header, "limit=200, remaining=200, reset=2");
}

TEST(local_limiter, same_counts_per_principal_and_class) {
  // The fallback allows exactly `limit` per principal and class in one window, independently.
  for (algorithm algo : {algorithm::sliding, algorithm::fixed}) {
    local_limiter local(algo, 1000);
    const window_policy policy{5, 10'000};
    const std::int64_t now = 1'000'000'000;  // the start of a window
    int allowed_a = 0;
    int allowed_b = 0;
    int allowed_a_read = 0;
    for (int i = 0; i < 20; ++i) {
      allowed_a += local.take(1, route_class::write, policy, now + i).allowed;
      allowed_b += local.take(2, route_class::write, policy, now + i).allowed;
      allowed_a_read += local.take(1, route_class::read, policy, now + i).allowed;
    }
    EXPECT_EQ(allowed_a, 5);
    EXPECT_EQ(allowed_b, 5);
    EXPECT_EQ(allowed_a_read, 5);
    const outcome denied = local.take(1, route_class::write, policy, now + 100);
    EXPECT_FALSE(denied.allowed);
    EXPECT_TRUE(local.take(1, route_class::write, policy, now + 100 + denied.retry_after_ms).allowed);
  }
}

TEST(local_limiter, memory_is_bounded_and_stale_counters_are_pruned) {
  // Far more principals than entries_max (10 per shard) never grow the table past the bound, and once their
  // windows pass, old counters make room for new principals.
  local_limiter local(algorithm::sliding, 160);
  const window_policy policy{5, 1000};
  const std::int64_t now = 5'000'000;
  for (std::int64_t p = 0; p < 10'000; ++p) local.take(p, route_class::write, policy, now);
  EXPECT_LE(local.size(), 160);
  const std::int64_t later = now + 3000;
  for (std::int64_t p = 20'000; p < 20'010; ++p) {
    local.take(p, route_class::write, policy, later);
  }
  // New principals took the place of pruned ones: their second request is counted.
  for (std::int64_t p = 20'000; p < 20'010; ++p) {
    EXPECT_EQ(local.take(p, route_class::write, policy, later).remaining, 3);
  }
  EXPECT_LE(local.size(), 160);
}

TEST(allowance_table, spends_a_lease_then_asks_for_the_next) {
  // An empty entry starts one lease and no second one while it is in flight; the settled lease's
  // spare tokens are spent one by one with the header values counting down and the reset moving
  // with the clock; once they are gone the next take starts a new lease.
  allowance_table table(1000);
  const std::int64_t now = 1'000'000;
  const auto first = table.take(7, route_class::write, now, true);
  EXPECT_NE(first.kind, verdict::spent);
  EXPECT_EQ(first.kind, verdict::lease);
  const auto while_leasing = table.take(7, route_class::write, now, true);
  EXPECT_NE(while_leasing.kind, verdict::spent);
  EXPECT_NE(while_leasing.kind, verdict::lease);
  // Another class and another principal are separate entries.
  EXPECT_EQ(table.take(7, route_class::read, now, true).kind, verdict::lease);
  EXPECT_NE(table.take(8, route_class::write, now, false).kind, verdict::lease);

  table.settle(7, route_class::write, 3, 6, now + 1, now + 100, now + 500);
  std::vector<std::int64_t> remaining;
  for (int i = 0; i < 3; ++i) {
    const auto t = table.take(7, route_class::write, now + 10 * i, true);
    ASSERT_EQ(t.kind, verdict::spent);
    EXPECT_NE(t.kind, verdict::lease);
    remaining.push_back(t.tokens.remaining);
    EXPECT_EQ(t.tokens.reset_ms, 500 - 10 * i);
  }
  EXPECT_EQ(remaining, (std::vector<std::int64_t>{8, 7, 6}));
  const auto spent = table.take(7, route_class::write, now + 30, true);
  EXPECT_NE(spent.kind, verdict::spent);
  EXPECT_EQ(spent.kind, verdict::lease);
  EXPECT_EQ(table.expired_tokens(), 0u);
}

TEST(allowance_table, leftovers_expire_and_are_counted) {
  // Tokens not spent by a lease's expiry are dropped and counted; a refused or abandoned lease
  // leaves nothing behind; a lease that lands already expired is counted as expired at once.
  allowance_table table(1000);
  const std::int64_t now = 2'000'000;
  ASSERT_EQ(table.take(1, route_class::write, now, true).kind, verdict::lease);
  table.settle(1, route_class::write, 5, 10, now, now + 100, now + 1000);
  EXPECT_EQ(table.take(1, route_class::write, now + 99, true).kind, verdict::spent);
  const auto expired = table.take(1, route_class::write, now + 100, true);
  EXPECT_NE(expired.kind, verdict::spent);
  EXPECT_EQ(expired.kind, verdict::lease);
  EXPECT_EQ(table.expired_tokens(), 4u);

  table.settle(1, route_class::write, 0, 0, now + 101, now + 101, now + 101);
  EXPECT_EQ(table.size(), 0);
  ASSERT_EQ(table.take(1, route_class::write, now + 200, true).kind, verdict::lease);
  table.settle(1, route_class::write, 3, 0, now + 300, now + 250, now + 1000);
  EXPECT_EQ(table.expired_tokens(), 7u);
  EXPECT_NE(table.take(1, route_class::write, now + 300, false).kind, verdict::spent);
}

TEST(allowance_table, memory_is_bounded_and_expired_entries_make_room) {
  // Far more principals than entries_max (10 per shard) never grow the table past the bound; a
  // principal that finds no room gets no lease (its check asks Redis for one token); once leases
  // expire, their entries make room, but an entry with a lease in flight is never dropped.
  allowance_table table(160);
  const std::int64_t now = 3'000'000;
  std::int64_t leased = 0;
  for (std::int64_t p = 0; p < 10'000; ++p) {
    if (table.take(p, route_class::write, now, true).kind != verdict::lease) continue;
    ++leased;
    table.settle(p, route_class::write, 4, 0, now, now + 100, now + 1000);
  }
  EXPECT_LE(table.size(), 160);
  EXPECT_LE(leased, 160);
  EXPECT_GE(leased, 16);

  const std::int64_t later = now + 200;
  for (std::int64_t p = 0; p < 10'000; ++p)
    EXPECT_NE(table.take(p, route_class::write, later, false).kind, verdict::spent);
  EXPECT_EQ(table.expired_tokens(), static_cast<std::uint64_t>(4 * leased));
  for (std::int64_t p = 20'000; p < 20'010; ++p) {
    EXPECT_EQ(table.take(p, route_class::write, later, true).kind, verdict::lease) << p;
  }
  EXPECT_LE(table.size(), 160);

  // A table holding only leases in flight has nothing to prune: a newcomer gets no lease.
  allowance_table busy(16);
  for (std::int64_t p = 0; p < 1000; ++p) busy.take(p, route_class::write, now, true);
  EXPECT_LE(busy.size(), 16);
  std::int64_t refused = 0;
  for (std::int64_t p = 5000; p < 5100; ++p)
    refused += busy.take(p, route_class::write, now + 1000, true).kind == verdict::ask;
  EXPECT_EQ(refused, 100);
  EXPECT_LE(busy.size(), 16);
}

TEST(allowance_table, waiters_are_served_from_the_lease_in_order) {
  // Checks that find a lease in flight wait for it, at most `waiters_max` of them (later ones ask
  // Redis themselves); the settled lease serves them first, in arrival order, with the header
  // counting down; waiters it cannot serve come back without a token; a refused lease serves none.
  allowance_table table(1000);
  const std::int64_t now = 4'000'000;
  ASSERT_EQ(table.take(9, route_class::write, now, true).kind, verdict::lease);
  std::vector<int> order;
  for (int i = 0; i < 4; ++i) {
    allowance_table::callback done = [&order, i](decision) { order.push_back(i); };
    const auto t = table.take(9, route_class::write, now, true, {}, &done, 3);
    EXPECT_EQ(t.kind, i < 3 ? verdict::waiting : verdict::ask) << i;
  }
  auto waiters = table.settle(9, route_class::write, 2, 5, now + 2, now + 100, now + 900);
  ASSERT_EQ(waiters.size(), 3u);
  ASSERT_TRUE(waiters[0].tokens && waiters[1].tokens);
  EXPECT_EQ(waiters[0].tokens->remaining, 6);
  EXPECT_EQ(waiters[1].tokens->remaining, 5);
  EXPECT_EQ(waiters[1].tokens->reset_ms, 898);
  EXPECT_FALSE(waiters[2].tokens);
  for (auto& w : waiters) w.done(decision{});
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  // The lease is used up: the next check leases again.
  ASSERT_EQ(table.take(9, route_class::write, now + 3, true).kind, verdict::lease);
  allowance_table::callback late = [](decision) {};
  ASSERT_EQ(table.take(9, route_class::write, now + 3, true, {}, &late, 3).kind, verdict::waiting);
  waiters = table.settle(9, route_class::write, 0, 0, now + 4, now + 100, now + 900);
  ASSERT_EQ(waiters.size(), 1u);
  EXPECT_FALSE(waiters[0].tokens);
  EXPECT_EQ(table.size(), 0);
}

TEST(window_policy, the_local_allowance_keeps_back_what_every_process_may_admit) {
  // The defaults: 4 per process, at most 4 processes; the sliding estimate weighs two windows, so
  // at most 32 of 200 are kept back from Redis's limit (8 a process counted), 16 under the fixed
  // window (4 a process).
  const config::ratelimit_settings defaults;
  const window_policy write = policy_for(defaults, route_class::write);
  const local_share sliding = local_share_for(write, algorithm::sliding, defaults.local_tokens, defaults.processes_max);
  EXPECT_EQ(sliding.tokens, 4);
  EXPECT_EQ(sliding.reserved, 32);
  EXPECT_EQ(sliding.reserved_for(1), 8);
  const local_share fixed = local_share_for(write, algorithm::fixed, defaults.local_tokens, defaults.processes_max);
  EXPECT_EQ(fixed.tokens, 4);
  EXPECT_EQ(fixed.reserved, 16);
  EXPECT_EQ(fixed.reserved_for(1), 4);
  // A small limit is cut, then has none: 20 keeps back 8 for 1 token, 5 keeps back nothing.
  EXPECT_EQ(local_share_for(policy_for(limits(10, 20), route_class::write), algorithm::sliding, 2, 4).tokens, 1);
  const local_share five = local_share_for(policy_for(limits(1, 5), route_class::write), algorithm::sliding, 2, 4);
  EXPECT_EQ(five.tokens, 0);
  EXPECT_EQ(five.reserved, 0);
  // 0 turns it off; whatever the settings, never more than half the limit is kept back, and what
  // is kept back covers every process's tokens in the windows the algorithm counts.
  EXPECT_EQ(local_share_for(write, algorithm::sliding, 0, 4).reserved, 0);
  for (std::int64_t limit = 1; limit <= 300; ++limit) {
    for (std::int64_t tokens = 0; tokens <= local_tokens_max; ++tokens) {
      for (std::int64_t processes : {1, 2, 3, 7, 50}) {
        for (algorithm algo : {algorithm::sliding, algorithm::fixed}) {
          const local_share share = local_share_for(window_policy{limit, 1000}, algo, tokens, processes);
          EXPECT_LE(share.tokens, tokens);
          EXPECT_LE(2 * share.reserved, limit) << limit << " " << tokens << " " << processes;
          EXPECT_EQ(share.reserved, share.tokens * processes * (algo == algorithm::sliding ? 2 : 1));
          // Fewer processes counted keep back less, in proportion.
          EXPECT_EQ(share.reserved_for(processes), share.reserved);
          EXPECT_EQ(share.per_process, share.tokens * (algo == algorithm::sliding ? 2 : 1));
        }
      }
    }
  }
}

TEST(allowance_table, local_admissions_never_exceed_the_tokens_in_any_window_long_interval) {
  // Checks at uneven instants: every admission without Redis is more than a window after the one
  // `tokens` admissions before it, so no interval one window long, wherever it starts, holds more
  // than `tokens`; and a check finding fewer than `tokens` in the last window is admitted.
  for (std::int64_t tokens = 1; tokens <= 3; ++tokens) {
    allowance_table table(1000);
    const allowance_table::local_rule rule{tokens, 1000};
    std::vector<std::int64_t> admitted;
    std::int64_t now = 5'000'000;
    for (int i = 0; i < 2000; ++i) {
      now += (i * 7919) % 700;  // 0 to 699 ms apart, in no regular pattern
      const std::int64_t within = static_cast<std::int64_t>(
          std::count_if(admitted.begin(), admitted.end(), [&](std::int64_t t) { return now - t <= 1000; }));
      const auto t = table.take(3, route_class::write, now, false, rule);
      if (within < tokens) {
        ASSERT_EQ(t.kind, verdict::local) << "tokens " << tokens << ", check " << i;
        EXPECT_EQ(t.local_count, within + 1);
        admitted.push_back(now);
      } else {
        ASSERT_EQ(t.kind, verdict::ask) << "tokens " << tokens << ", check " << i;
      }
    }
    ASSERT_GT(admitted.size(), 100u);
    for (std::size_t i = static_cast<std::size_t>(tokens); i < admitted.size(); ++i) {
      EXPECT_GT(admitted[i] - admitted[i - static_cast<std::size_t>(tokens)], 1000);
    }
  }
}

TEST(allowance_table, leased_tokens_go_before_the_local_allowance_and_a_lease_follows_it) {
  // Tokens already counted in Redis are spent first; with none, the local allowance; with that
  // used up, a lease is started.
  allowance_table table(1000);
  const allowance_table::local_rule rule{1, 1000};
  const std::int64_t now = 6'000'000;
  EXPECT_EQ(table.take(4, route_class::write, now, true, rule).kind, verdict::local);
  ASSERT_EQ(table.take(4, route_class::write, now + 1, true, rule).kind, verdict::lease);
  table.settle(4, route_class::write, 2, 10, now + 2, now + 500, now + 900);
  EXPECT_EQ(table.take(4, route_class::write, now + 3, true, rule).kind, verdict::spent);
  EXPECT_EQ(table.take(4, route_class::write, now + 4, true, rule).kind, verdict::spent);
  ASSERT_EQ(table.take(4, route_class::write, now + 5, true, rule).kind, verdict::lease);
  table.settle(4, route_class::write, 0, 0, now + 6, now + 6, now + 6);
  // The settled lease left no tokens, but the entry stays while its local admission counts.
  EXPECT_EQ(table.size(), 1);
  EXPECT_EQ(table.take(4, route_class::write, now + 1000, false, rule).kind, verdict::ask);
  EXPECT_EQ(table.take(4, route_class::write, now + 1001, false, rule).kind, verdict::local);
}

TEST(allowance_table, an_entry_whose_local_admissions_still_count_is_never_dropped) {
  // One entry per shard: newcomers may take the place of entries whose admissions are more than a
  // window old, never of one admitted within the last window, or that principal could be admitted
  // locally again within it.
  const allowance_table::local_rule rule{1, 1000};
  const std::int64_t now = 7'000'000;
  allowance_table table(16);
  std::vector<std::int64_t> kept;
  for (std::int64_t p = 0; p < 1000; ++p) {
    if (table.take(p, route_class::write, now, false, rule).kind == verdict::local) kept.push_back(p);
  }
  ASSERT_FALSE(kept.empty());
  EXPECT_LE(table.size(), 16);
  // Half a window later, a flood of newcomers (past the prune interval) finds no room ...
  for (std::int64_t p = 10'000; p < 11'000; ++p) {
    EXPECT_EQ(table.take(p, route_class::write, now + 500, false, rule).kind, verdict::ask);
  }
  // ... and every principal admitted is still refused a second local admission in its window.
  for (std::int64_t p : kept) EXPECT_EQ(table.take(p, route_class::write, now + 999, false, rule).kind, verdict::ask);
  // A window later their entries make room.
  std::int64_t newcomers = 0;
  for (std::int64_t p = 20'000; p < 21'000; ++p) {
    newcomers += table.take(p, route_class::write, now + 1200, false, rule).kind == verdict::local;
  }
  EXPECT_GE(newcomers, 1);
  EXPECT_LE(table.size(), 16);
}

TEST(redis_url, parses_what_hiredis_can_use) {
  // Host, port, password, ACL user and database come out of the URL; unusable URLs are refused.
  const redis_endpoint plain = parse_redis_url("redis://127.0.0.1:56380");
  EXPECT_EQ(plain.host, "127.0.0.1");
  EXPECT_EQ(plain.port, 56380);
  EXPECT_EQ(plain.database, 0);
  const redis_endpoint full = parse_redis_url("redis://app:s3cret@cache.internal:6390/2");
  EXPECT_EQ(full.username, "app");
  EXPECT_EQ(full.password, "s3cret");
  EXPECT_EQ(full.host, "cache.internal");
  EXPECT_EQ(full.port, 6390);
  EXPECT_EQ(full.database, 2);
  EXPECT_EQ(parse_redis_url("redis://:pw@h").password, "pw");
  EXPECT_EQ(parse_redis_url("redis://h").port, 6379);
  EXPECT_THROW(parse_redis_url("rediss://h:1"), std::invalid_argument);
  EXPECT_THROW(parse_redis_url("redis://h:99999"), std::invalid_argument);
  EXPECT_THROW(parse_redis_url("redis://:1"), std::invalid_argument);
}

}  // namespace
}  // namespace ratelimit
