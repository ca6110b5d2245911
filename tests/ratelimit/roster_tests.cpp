// The roster's arithmetic on a clock the test moves (ratelimit/roster.hpp): which count the limit
// uses, and when a process may admit locally.

#include "ratelimit/roster.hpp"

#include <gtest/gtest.h>

namespace ratelimit {
namespace {

// Renewals every 100 ms, counts fresh for 1 s, admissions weighing 4 s, 500 ms margin: the entry
// lives 4 + 2 + 1 = 7 s, a process may admit 1 + 4 + 0.5 = 5.5 s after its entry appeared and until
// 2 x 1 + 0.5 = 2.5 s after the last renewal it sent.
roster_timing timing() {
  roster_timing t;
  t.beat_ms = 100;
  t.fresh_ms = 1'000;
  t.span_ms = 4'000;
  t.margin_ms = 500;
  return t;
}

TEST(roster, the_timing_follows_the_longest_window) {
  const roster_timing t = roster_timing_for(2'000);
  EXPECT_EQ(t.span_ms, 4'000);
  EXPECT_EQ(t.warmup(), t.fresh_ms + 4'000 + t.margin_ms);
  EXPECT_EQ(t.ttl_ms(), 4'000 + 2 * t.fresh_ms + 2 * t.margin_ms);
  // A process renewing every beat stays able to admit: its entry outlives the next renewals.
  EXPECT_GT(t.ttl_ms() - t.span_ms - t.margin_ms, 2 * t.beat_ms);
}

TEST(roster, before_any_renewal_the_limit_keeps_back_every_process_and_nothing_is_admitted_locally) {
  const roster r(timing(), 4);
  EXPECT_EQ(r.processes(0), 4);
  EXPECT_FALSE(r.may_admit_locally(0));
  EXPECT_FALSE(r.may_admit_locally(1'000'000));
}

TEST(roster, a_fresh_count_is_used_within_one_and_processes_max) {
  roster r(timing(), 4);
  r.renewed(10'000, 10'005, 2);
  EXPECT_EQ(r.processes(10'005), 2);
  EXPECT_EQ(r.processes(11'000), 2);  // sent + fresh: still fresh
  EXPECT_EQ(r.processes(11'001), 4);  // stale: processes_max again
  r.renewed(10'100, 10'101, 0);       // never fewer than this process
  EXPECT_EQ(r.processes(10'101), 1);
  r.renewed(10'200, 10'201, 9);  // never more than processes_max
  EXPECT_EQ(r.processes(10'201), 4);
}

TEST(roster, a_process_admits_locally_only_after_its_warmup_and_before_its_entry_could_expire) {
  roster r(timing(), 4);
  r.renewed(10'000, 10'020, 1);
  EXPECT_FALSE(r.may_admit_locally(10'020));
  EXPECT_FALSE(r.may_admit_locally(15'519));
  // Renewed every beat meanwhile: from 5.5 s after the first answer on.
  for (std::int64_t sent = 10'100; sent <= 15'500; sent += 100) r.renewed(sent, sent + 20, 1);
  EXPECT_FALSE(r.may_admit_locally(15'519));
  EXPECT_TRUE(r.may_admit_locally(15'520));
  // The renewals stop (last sent at 15,500): admissions stop 2.5 s later.
  EXPECT_TRUE(r.may_admit_locally(18'000));
  EXPECT_FALSE(r.may_admit_locally(18'001));
  EXPECT_EQ(r.processes(18'000), 4);  // and the count went stale before that
}

TEST(roster, a_renewal_after_the_entry_could_have_expired_starts_the_warmup_again) {
  roster r(timing(), 4);
  for (std::int64_t sent = 0; sent <= 6'000; sent += 100) r.renewed(sent, sent + 10, 1);
  EXPECT_TRUE(r.may_admit_locally(6'010));
  // Silent for a while: the entry sent at 6,000 lives until 13,000 at least. A renewal answered
  // before then continues the run...
  r.renewed(12'000, 12'990, 1);
  EXPECT_TRUE(r.may_admit_locally(12'990));
  // ...one answered at or after the last send plus the lifetime does not.
  r.renewed(19'000, 19'990, 1);
  EXPECT_FALSE(r.may_admit_locally(19'990));
  EXPECT_FALSE(r.may_admit_locally(19'990 + 5'499));
  for (std::int64_t sent = 19'100; sent <= 25'500; sent += 100) r.renewed(sent, sent + 10, 1);
  EXPECT_TRUE(r.may_admit_locally(19'990 + 5'500));
}

}  // namespace
}  // namespace ratelimit
