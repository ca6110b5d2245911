#include "ledger/flows.hpp"

#include "base/assert.hpp"

namespace ledger::flows {
namespace {

posting make(transaction_type type, account_id debit, account_id credit_row, account_id credit_account,
             amount_minor amount, std::string currency) {
  posting p;
  p.type = type;
  p.debit_account = debit;
  p.credit_account = credit_row;
  p.credit_parent = credit_account;
  p.amount = amount;
  p.currency = std::move(currency);
  return p;
}

}  // namespace

posting deposit(account_id clearing, account_id credit_row, account_id credit_account, amount_minor amount,
                std::string currency) {
  return make(transaction_type::deposit, clearing, credit_row, credit_account, amount, std::move(currency));
}

posting transfer(account_id payer, account_id credit_row, account_id payee, amount_minor amount, std::string currency,
                 std::optional<payee_fee> fee) {
  auto p = make(transaction_type::transfer, payer, credit_row, payee, amount, std::move(currency));
  if (fee) {
    p.extra_credits.push_back({fee->fee_revenue, 0});
    const bool priced = price_payee_fee(p, fee->schedule);
    WALLET_ASSERT(priced, "a payment with a fee leg is always priced");
  }
  return p;
}

posting capture(account_id payer, account_id credit_row, account_id payee, amount_minor amount, std::string currency,
                amount_minor hold_amount, std::optional<payee_fee> fee) {
  auto p = transfer(payer, credit_row, payee, amount, std::move(currency), fee);
  p.type = transaction_type::capture;
  p.releases_held = hold_amount;
  return p;
}

bool price_payee_fee(posting& p, const fee_schedule& schedule) {
  WALLET_ASSERT(pays_payee_fee(p.type), "only a payment (or a hold's capture) pays its payee's fee");
  WALLET_ASSERT(p.extra_credits.size() <= 1, "a payment's one extra credit is its fee");
  // A payment that moves nothing is refused by plan_posting; it has no fee to price.
  if (p.amount <= 0) return true;
  const amount_minor fee = payment_fee(schedule, p.amount);
  if (p.extra_credits.empty()) return fee == 0;
  p.extra_credits.front().amount = fee;
  return true;
}

amount_minor payee_fee_of(const posting& p) { return p.extra_credits.empty() ? 0 : p.extra_credits.front().amount; }

std::optional<posting> withdrawal(account_id wallet, account_id pending_withdrawal, account_id fee_revenue,
                                  amount_minor amount, amount_minor fee, std::string currency) {
  const auto total = checked_add(amount, fee);
  if (!total || fee < 0) return std::nullopt;
  auto p =
      make(transaction_type::withdrawal, wallet, pending_withdrawal, pending_withdrawal, *total, std::move(currency));
  p.extra_credits.push_back({fee_revenue, fee});
  return p;
}

posting payout(account_id pending_withdrawal, account_id clearing, amount_minor amount, std::string currency) {
  return make(transaction_type::payout, pending_withdrawal, clearing, clearing, amount, std::move(currency));
}

posting payout_failed(account_id pending_withdrawal, account_id credit_row, account_id wallet, amount_minor amount,
                      std::string currency) {
  return make(transaction_type::payout_failed, pending_withdrawal, credit_row, wallet, amount, std::move(currency));
}

posting deposit_refund(account_id wallet, account_id clearing, amount_minor amount, std::string currency) {
  return make(transaction_type::deposit_refund, wallet, clearing, clearing, amount, std::move(currency));
}

posting chargeback(account_id wallet, account_id clearing, account_id chargeback_loss, amount_minor amount,
                   std::string currency) {
  auto p = make(transaction_type::chargeback, wallet, clearing, clearing, amount, std::move(currency));
  p.shortfall_account = chargeback_loss;
  return p;
}

posting refund(account_id payee, account_id credit_row, account_id payer, amount_minor amount, std::string currency) {
  return make(transaction_type::refund, payee, credit_row, payer, amount, std::move(currency));
}

}  // namespace ledger::flows
