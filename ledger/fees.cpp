#include "ledger/fees.hpp"

#include <algorithm>

#include "base/assert.hpp"

namespace ledger {

bool is_valid(const fee_schedule& schedule) {
  return schedule.bps >= 0 && schedule.bps <= fee_bps_max && schedule.fixed >= 0;
}

amount_minor payment_fee(const fee_schedule& schedule, amount_minor amount) {
  WALLET_ASSERT(amount > 0, "a payment moves a positive amount");
  WALLET_ASSERT(is_valid(schedule), "a fee schedule holds 0..10000 bps and a non-negative fixed part");
  // amount × bps < 2^63 × 2^14 fits in 128 bits; divided by 10000 it is at most the amount.
  const auto share = static_cast<amount_minor>(static_cast<__int128>(amount) * schedule.bps / fee_bps_max);
  const auto fee = checked_add(schedule.fixed, share);
  // An overflow means fixed + share > int64 max >= amount: the cap applies.
  if (!fee) return amount;
  return std::min(*fee, amount);
}

}  // namespace ledger
