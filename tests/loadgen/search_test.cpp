#include "tools/loadgen/search.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace {

using loadgen::evaluate_step;
using loadgen::search_highest_rate;
using loadgen::search_result;
using loadgen::step_outcome;
using loadgen::window_stats;

// The latency target of the evaluate_step tests: 1 ms, a value the histogram keeps exactly.
constexpr double k_target_ms = 1;
constexpr std::int64_t k_target_us = 1'000;
constexpr std::int64_t k_fast_us = 500;

loadgen::options with_target() {
  loadgen::options o;
  o.p99_target_ms = k_target_ms;
  return o;
}

// A step's window from `start_s` to `end_s`: `scheduled` requests sent, `finished` of them
// answered, and `latencies` (microseconds to count) for the accepted ones.
window_stats window(double start_s, double end_s, std::int64_t scheduled, std::int64_t finished,
                    const std::map<std::int64_t, std::int64_t>& latencies) {
  window_stats w;
  w.start_s = start_s;
  w.end_s = end_s;
  w.scheduled = scheduled;
  w.finished = finished;
  for (const auto& [latency_us, count] : latencies) w.accepted_us.record(latency_us, count);
  return w;
}

// A p99 of exactly the target passes and one microsecond more fails; the slowest 1% of accepted
// requests do not count, but one request more in the slow tail does.
TEST(evaluate_step, p99_at_the_target_passes_and_above_it_fails) {
  const auto o = with_target();
  const auto at = evaluate_step(o, window(0, 1, 1000, 1000, {{k_target_us, 1000}}), 1000);
  EXPECT_EQ(at.p99_us, k_target_us);
  EXPECT_TRUE(at.ok);
  const auto above = evaluate_step(o, window(0, 1, 1000, 1000, {{k_target_us + 1, 1000}}), 1000);
  EXPECT_EQ(above.p99_us, k_target_us + 1);
  EXPECT_FALSE(above.ok);

  const auto tail_of_1_percent = evaluate_step(o, window(0, 1, 1000, 1000, {{k_fast_us, 990}, {1'000'000, 10}}), 1000);
  EXPECT_EQ(tail_of_1_percent.p99_us, k_fast_us);
  EXPECT_EQ(tail_of_1_percent.p50_us, k_fast_us);
  EXPECT_TRUE(tail_of_1_percent.ok);
  const auto tail_of_11 = evaluate_step(o, window(0, 1, 1000, 1000, {{k_fast_us, 989}, {1'000'000, 11}}), 1000);
  EXPECT_GT(tail_of_11.p99_us, k_target_us);
  EXPECT_FALSE(tail_of_11.ok);
}

// Up to 1% of the scheduled requests may end without being accepted, whether answered otherwise
// (503, 429, ...) or not answered at all; one more fails the step. Everything else is within
// target here, so the 1% rule alone decides.
TEST(evaluate_step, one_percent_not_accepted_passes_and_more_fails) {
  const auto o = with_target();
  const auto answered_10 = evaluate_step(o, window(0, 1, 1000, 1000, {{k_fast_us, 990}}), 1000);
  EXPECT_EQ(answered_10.not_accepted, 10);
  EXPECT_DOUBLE_EQ(answered_10.achieved, 990);
  EXPECT_TRUE(answered_10.ok);
  const auto answered_11 = evaluate_step(o, window(0, 1, 1000, 1000, {{k_fast_us, 989}}), 1000);
  EXPECT_EQ(answered_11.not_accepted, 11);
  EXPECT_FALSE(answered_11.ok);

  const auto unanswered_10 = evaluate_step(o, window(0, 1, 1000, 990, {{k_fast_us, 990}}), 1000);
  EXPECT_EQ(unanswered_10.not_accepted, 10);
  EXPECT_TRUE(unanswered_10.ok);
  const auto unanswered_11 = evaluate_step(o, window(0, 1, 1000, 989, {{k_fast_us, 989}}), 1000);
  EXPECT_EQ(unanswered_11.not_accepted, 11);
  EXPECT_FALSE(unanswered_11.ok);

  const auto mixed_11 = evaluate_step(o, window(0, 1, 1000, 995, {{k_fast_us, 989}}), 1000);
  EXPECT_EQ(mixed_11.not_accepted, 11);
  EXPECT_FALSE(mixed_11.ok);
}

// The accepted rate over the window must reach 90% of the intended rate: a step whose requests
// were all accepted, fast, still fails when fewer were sent than intended (a load generator that
// fell behind). Over a 10 s window, 9000 accepted is 900/s of 1000/s and passes; 8999 fails.
TEST(evaluate_step, ninety_percent_achieved_passes_and_less_fails) {
  const auto o = with_target();
  const auto at = evaluate_step(o, window(20, 30, 9000, 9000, {{k_fast_us, 9000}}), 1000);
  EXPECT_DOUBLE_EQ(at.achieved, 900);
  EXPECT_EQ(at.not_accepted, 0);
  EXPECT_TRUE(at.ok);
  const auto below = evaluate_step(o, window(20, 30, 8999, 8999, {{k_fast_us, 8999}}), 1000);
  EXPECT_DOUBLE_EQ(below.achieved, 899.9);
  EXPECT_EQ(below.not_accepted, 0);
  EXPECT_FALSE(below.ok);
}

// A step with nothing accepted fails, even when every other rule holds (an empty step at rate 0:
// no latency, nothing not accepted, 0/s achieved of 0/s intended), and so does one whose every
// answer was a refusal.
TEST(evaluate_step, zero_accepted_fails) {
  const auto o = with_target();
  const auto empty = evaluate_step(o, window(0, 1, 0, 0, {}), 0);
  EXPECT_EQ(empty.p99_us, 0);
  EXPECT_EQ(empty.not_accepted, 0);
  EXPECT_DOUBLE_EQ(empty.achieved, 0);
  EXPECT_FALSE(empty.ok);
  const auto refused = evaluate_step(o, window(0, 1, 100, 100, {}), 100);
  EXPECT_EQ(refused.not_accepted, 100);
  EXPECT_FALSE(refused.ok);
}

// A stand-in for the server in search tests. A step passes when its rate is at most `capacity`
// and then achieves its rate; above capacity it misses and achieves the capacity (a saturated
// server). Steps listed in `noisy` (by number, from 0) miss whatever their rate, as when another
// program takes the CPU; the step numbered `abandoned` reports requests unanswered at its end.
struct scripted_server {
  double capacity = 0;
  std::set<std::size_t> noisy;
  std::optional<std::size_t> abandoned;
  std::vector<double> rates;  // of every step run, in order

  loadgen::step_runner runner() {
    return [this](double rate) {
      const auto number = rates.size();
      rates.push_back(rate);
      step_outcome outcome;
      outcome.step.rate = rate;
      outcome.step.ok = rate <= capacity && noisy.count(number) == 0;
      outcome.step.achieved = rate <= capacity ? rate : capacity;
      outcome.abandoned = abandoned == number;
      return outcome;
    };
  }
};

loadgen::options search_options(double start, double factor, double max, std::int64_t refine) {
  loadgen::options o;
  o.search_start_rate = start;
  o.search_step_factor = factor;
  o.search_max_rate = max;
  o.search_refine = refine;
  return o;
}

std::vector<double> rates_of(const search_result& r) {
  std::vector<double> rates;
  for (const auto& s : r.steps) rates.push_back(s.rate);
  return rates;
}

std::vector<bool> oks_of(const search_result& r) {
  std::vector<bool> oks;
  for (const auto& s : r.steps) oks.push_back(s.ok);
  return oks;
}

// Against a capacity of 500/s, from 100/s doubling: 100, 200 and 400 pass; 800 misses and is run
// once more; then two bisection steps between the last good and first bad rate, 600 (misses) and
// 500 (passes). The best step is 500/s.
TEST(search, climbs_retries_the_missed_step_then_bisects) {
  scripted_server server{500};
  const auto result = search_highest_rate(search_options(100, 2, 10'000, 2), server.runner());
  EXPECT_EQ(server.rates, (std::vector<double>{100, 200, 400, 800, 800, 600, 500}));
  EXPECT_EQ(rates_of(result), server.rates);
  EXPECT_EQ(oks_of(result), (std::vector<bool>{true, true, true, false, false, false, true}));
  ASSERT_TRUE(result.best);
  EXPECT_EQ(result.best->rate, 500);
  EXPECT_EQ(result.best->achieved, 500);
}

// With the default options (from 100/s by 1.5, two bisection steps) against 1000/s: the climb
// passes up to 759.375, misses 1139.0625 twice, then bisects to 949.21875 (passes) and
// 1044.140625 (misses). Every rate is exact in binary, so the sequence is compared exactly.
TEST(search, default_options_climb_by_half_again_and_bisect_twice) {
  scripted_server server{1000};
  const auto result = search_highest_rate(loadgen::options{}, server.runner());
  EXPECT_EQ(server.rates,
            (std::vector<double>{100, 150, 225, 337.5, 506.25, 759.375, 1139.0625, 1139.0625, 949.21875, 1044.140625}));
  ASSERT_TRUE(result.best);
  EXPECT_EQ(result.best->rate, 949.21875);
}

// The climb stops at search_max_rate: a rate equal to it is run, the next one above it is not,
// and without a missed step there is nothing to bisect.
TEST(search, stops_at_the_max_rate) {
  const double unlimited = std::numeric_limits<double>::infinity();
  scripted_server up_to_400{unlimited};
  const auto at_400 = search_highest_rate(search_options(100, 2, 400, 2), up_to_400.runner());
  EXPECT_EQ(up_to_400.rates, (std::vector<double>{100, 200, 400}));
  ASSERT_TRUE(at_400.best);
  EXPECT_EQ(at_400.best->rate, 400);

  scripted_server up_to_799{unlimited};
  search_highest_rate(search_options(100, 2, 799, 2), up_to_799.runner());
  EXPECT_EQ(up_to_799.rates, (std::vector<double>{100, 200, 400}));

  scripted_server up_to_800{unlimited};
  search_highest_rate(search_options(100, 2, 800, 2), up_to_800.runner());
  EXPECT_EQ(up_to_800.rates, (std::vector<double>{100, 200, 400, 800}));
}

// One noisy miss at 200/s (the second step) is absorbed by the retry: the climb goes on and ends
// where it ends without noise, at 500/s; the missed step stays in the result.
TEST(search, a_single_noisy_miss_is_absorbed_by_the_retry) {
  scripted_server server{500};
  server.noisy = {1};
  const auto result = search_highest_rate(search_options(100, 2, 10'000, 2), server.runner());
  EXPECT_EQ(server.rates, (std::vector<double>{100, 200, 200, 400, 800, 800, 600, 500}));
  EXPECT_EQ(oks_of(result), (std::vector<bool>{true, false, true, true, false, false, false, true}));
  ASSERT_TRUE(result.best);
  EXPECT_EQ(result.best->rate, 500);
}

// A step that misses twice ends the climb although the server could do more: a missed step is run
// exactly once more. Bisection then works between 100 and 200: 150 and 175 pass.
TEST(search, a_step_missed_twice_ends_the_climb) {
  scripted_server server{500};
  server.noisy = {1, 2};
  const auto result = search_highest_rate(search_options(100, 2, 10'000, 2), server.runner());
  EXPECT_EQ(server.rates, (std::vector<double>{100, 200, 200, 150, 175}));
  ASSERT_TRUE(result.best);
  EXPECT_EQ(result.best->rate, 175);
}

// When even the first step misses twice there is no good rate to bisect from and no best step;
// with search_refine 0 a climb ends at its missed step without bisection.
TEST(search, no_bisection_without_a_good_step_or_with_refine_zero) {
  scripted_server too_slow{50};
  const auto nothing = search_highest_rate(search_options(100, 2, 10'000, 2), too_slow.runner());
  EXPECT_EQ(too_slow.rates, (std::vector<double>{100, 100}));
  EXPECT_FALSE(nothing.best);

  scripted_server server{500};
  const auto unrefined = search_highest_rate(search_options(100, 2, 10'000, 0), server.runner());
  EXPECT_EQ(server.rates, (std::vector<double>{100, 200, 400, 800, 800}));
  ASSERT_TRUE(unrefined.best);
  EXPECT_EQ(unrefined.best->rate, 400);
}

// The best step is the passing step with the highest achieved rate: not a missed step that
// achieved more, not the last passing one, and on a tie the earlier one.
TEST(search, best_is_the_passing_step_with_the_highest_achieved_rate) {
  // Achieved rates by step number; a step passes unless listed in `missed`.
  const std::vector<double> achieved{100, 200, 390, 650, 660, 560, 550};
  const std::set<std::size_t> missed{3, 4};
  std::vector<double> rates;
  const auto result = search_highest_rate(search_options(100, 2, 10'000, 2), [&](double rate) {
    const auto number = rates.size();
    rates.push_back(rate);
    step_outcome outcome;
    outcome.step.rate = rate;
    outcome.step.achieved = achieved.at(number);
    outcome.step.ok = missed.count(number) == 0;
    return outcome;
  });
  EXPECT_EQ(rates, (std::vector<double>{100, 200, 400, 800, 800, 600, 700}));
  ASSERT_TRUE(result.best);
  EXPECT_EQ(result.best->rate, 600);
  EXPECT_EQ(result.best->achieved, 560);

  std::vector<double> tied_rates;
  const auto tied = search_highest_rate(search_options(100, 2, 400, 2), [&](double rate) {
    tied_rates.push_back(rate);
    step_outcome outcome;
    outcome.step.rate = rate;
    outcome.step.achieved = 100;
    outcome.step.ok = true;
    return outcome;
  });
  EXPECT_EQ(tied_rates, (std::vector<double>{100, 200, 400}));
  ASSERT_TRUE(tied.best);
  EXPECT_EQ(tied.best->rate, 100);
}

// A step whose requests were still unanswered at its end stops the search after it: in the climb
// (even after a pass), without the retry of a missed step, and during bisection.
TEST(search, an_abandoned_step_ends_the_search) {
  scripted_server passing{500};
  passing.abandoned = 1;
  const auto after_pass = search_highest_rate(search_options(100, 2, 10'000, 2), passing.runner());
  EXPECT_EQ(passing.rates, (std::vector<double>{100, 200}));
  ASSERT_TRUE(after_pass.best);
  EXPECT_EQ(after_pass.best->rate, 200);

  scripted_server missing{300};
  missing.abandoned = 2;
  search_highest_rate(search_options(100, 2, 10'000, 2), missing.runner());
  EXPECT_EQ(missing.rates, (std::vector<double>{100, 200, 400}));

  scripted_server bisecting{500};
  bisecting.abandoned = 5;
  const auto in_bisection = search_highest_rate(search_options(100, 2, 10'000, 2), bisecting.runner());
  EXPECT_EQ(bisecting.rates, (std::vector<double>{100, 200, 400, 800, 800, 600}));
  ASSERT_TRUE(in_bisection.best);
  EXPECT_EQ(in_bisection.best->rate, 400);
}

}  // namespace
