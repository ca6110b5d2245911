// The fee of a payment (ledger/fees.hpp): fixed + floor(amount × bps / 10000), capped at the
// amount, exact for every int64 amount and fixed part (the edges of int64 included), and which
// schedules an operator may set.

#include <gtest/gtest.h>

#include <limits>

#include "ledger/fees.hpp"

namespace ledger {
namespace {

constexpr amount_minor k_max = std::numeric_limits<amount_minor>::max();

TEST(fees, basis_points_round_down_and_the_fixed_part_adds) {
  // 2.9 % + 30 of 10,000 is 320; fractions of a minor unit are never charged.
  EXPECT_EQ(payment_fee({290, 30}, 10'000), 320);
  EXPECT_EQ(payment_fee({290, 0}, 34), 0);   // 0.986 → 0
  EXPECT_EQ(payment_fee({290, 0}, 35), 1);   // 1.015 → 1
  EXPECT_EQ(payment_fee({1, 0}, 9'999), 0);  // 0.9999 → 0
  EXPECT_EQ(payment_fee({1, 0}, 10'000), 1);
  EXPECT_EQ(payment_fee({0, 0}, 10'000), 0);
  EXPECT_EQ(payment_fee({0, 7}, 10'000), 7);
}

TEST(fees, a_fee_is_never_more_than_the_amount) {
  // 100 % plus a fixed part, or a fixed part above the amount, takes the amount and no more.
  EXPECT_EQ(payment_fee({fee_bps_max, 0}, 1'234), 1'234);
  EXPECT_EQ(payment_fee({fee_bps_max, 1}, 1'234), 1'234);
  EXPECT_EQ(payment_fee({0, 5'000}, 1'000), 1'000);
  EXPECT_EQ(payment_fee({0, 1'000}, 1'000), 1'000);
  EXPECT_EQ(payment_fee({0, 999}, 1'000), 999);
  EXPECT_EQ(payment_fee({5'000, 500}, 1'000), 1'000);  // 500 + 500
  EXPECT_EQ(payment_fee({5'000, 499}, 1'000), 999);
}

TEST(fees, the_int64_edges_are_exact) {
  // amount × bps overflows int64 for large amounts: the product is taken in 128 bits, so the
  // share is exact; a fixed part that overflows the sum is capped at the amount, never wrapped.
  EXPECT_EQ(payment_fee({fee_bps_max, 0}, k_max), k_max);
  EXPECT_EQ(payment_fee({5'000, 0}, k_max), k_max / 2);                  // floor((2^63 - 1) / 2)
  EXPECT_EQ(payment_fee({1, 0}, k_max), 922'337'203'685'477);            // floor((2^63 - 1) / 10000)
  EXPECT_EQ(payment_fee({9'999, 0}, k_max), 9'222'449'699'651'090'329);  // floor((2^63 - 1) × 0.9999)
  EXPECT_EQ(payment_fee({1, k_max}, k_max), k_max);                      // fixed + share overflows
  EXPECT_EQ(payment_fee({0, k_max}, 1), 1);
  EXPECT_EQ(payment_fee({5'000, k_max - 1}, 3), 3);
  EXPECT_EQ(payment_fee({1, 10}, k_max), 922'337'203'685'487);
  EXPECT_EQ(payment_fee({fee_bps_max, 0}, 1), 1);
  EXPECT_EQ(payment_fee({9'999, 0}, 1), 0);
}

TEST(fees, an_operator_sets_0_to_10000_bps_and_a_non_negative_fixed_part) {
  // What PUT /v1/accounts/{id}/fees accepts; the database's CHECKs say the same.
  EXPECT_TRUE(is_valid({0, 0}));
  EXPECT_TRUE(is_valid({fee_bps_max, k_max}));
  EXPECT_FALSE(is_valid({-1, 0}));
  EXPECT_FALSE(is_valid({fee_bps_max + 1, 0}));
  EXPECT_FALSE(is_valid({0, -1}));
}

}  // namespace
}  // namespace ledger
