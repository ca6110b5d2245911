#pragma once

// The fee a payee pays on each payment it receives (docs/money-flows.md): a fee schedule of basis
// points of the amount plus a fixed part, set per account by an operator.

#include <cstdint>

#include "ledger/money.hpp"

namespace ledger {

inline constexpr std::int32_t fee_bps_max = 10'000;  // 100 %

struct fee_schedule {
  std::int32_t bps = 0;    // 0 .. fee_bps_max
  amount_minor fixed = 0;  // >= 0

  bool operator==(const fee_schedule& o) const { return bps == o.bps && fixed == o.fixed; }
  bool operator!=(const fee_schedule& o) const { return !(*this == o); }
};

// What an operator may set: 0 <= bps <= fee_bps_max and fixed >= 0.
bool is_valid(const fee_schedule& schedule);

// fee = fixed + floor(amount × bps / 10000), never more than `amount`. `amount` is positive and
// the schedule valid (asserted). The product is taken in 128 bits, and a sum beyond int64 can only
// be above the amount, so every int64 input has an exact answer.
amount_minor payment_fee(const fee_schedule& schedule, amount_minor amount);

}  // namespace ledger
