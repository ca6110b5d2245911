// The throttle of flooding log lines (http/log_throttle.hpp): one line per period, and the next
// line says how many were held back; threads racing for one period let exactly one through.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "http/log_throttle.hpp"

namespace {

TEST(log_throttle, one_line_per_period_reports_the_lines_held_back) {
  api::log_throttle t(1'000'000);
  std::int64_t held = -1;
  EXPECT_TRUE(t.admit(5'000'000, held));
  EXPECT_EQ(held, 0);
  for (int i = 0; i < 7; ++i) EXPECT_FALSE(t.admit(5'000'001 + i, held));
  EXPECT_FALSE(t.admit(5'999'999, held));
  EXPECT_TRUE(t.admit(6'000'000, held));
  EXPECT_EQ(held, 8);
  // A quiet stretch longer than the period: the next line goes through at once.
  EXPECT_TRUE(t.admit(60'000'000, held));
  EXPECT_EQ(held, 0);
}

TEST(log_throttle, racing_threads_let_one_line_through_per_period) {
  api::log_throttle t(1'000'000);
  std::atomic<int> admitted{0};
  std::atomic<std::int64_t> reported{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10'000; ++i) {
        std::int64_t held = 0;
        if (t.admit(1'000'000, held)) {
          ++admitted;
          reported += held;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(admitted.load(), 1);
  EXPECT_EQ(reported.load(), 0);
  std::int64_t held = 0;
  ASSERT_TRUE(t.admit(2'000'000, held));
  EXPECT_EQ(held, 40'000 - 1);
}

}  // namespace
