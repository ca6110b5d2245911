#include "ledger/flows.hpp"

#include <limits>

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

bool is_reversible(transaction_type type) {
  switch (type) {
    case transaction_type::transfer:
    case transaction_type::capture:
    case transaction_type::deposit:
    case transaction_type::exchange: return true;
    // An adjustment is corrected by another adjustment, which takes two operators as it did: a
    // reversal takes one.
    default: return false;
  }
}

std::optional<posting> reversal(const std::vector<reversed_entry>& entries) {
  posting p;
  p.type = transaction_type::reversal;
  // One leg per (target row or account, direction), in the order the entries name them.
  auto add = [&p](account_id target, amount_minor amount, const reversed_entry& e) -> bool {
    for (auto& leg : p.legs) {
      if (leg.account == target && (leg.amount < 0) == (amount < 0)) {
        auto sum = checked_add(leg.amount, amount);
        if (!sum) return false;
        leg.amount = *sum;
        return true;
      }
    }
    if (amount < 0) {
      p.legs.push_back({target, amount, e.currency, e.shards, 0});
    } else {
      p.legs.push_back({target, amount, e.currency, {}, e.account});
    }
    return true;
  };
  const reversed_entry* user_debit = nullptr;
  for (const auto& e : entries) {
    if (e.amount == 0 || e.amount == std::numeric_limits<amount_minor>::min()) return std::nullopt;
    const amount_minor mirrored = -e.amount;
    // A credit is taken back from the account (main row and shards); a debit goes back to its row.
    const account_id target = mirrored < 0 ? e.account : e.row;
    if (!add(target, mirrored, e)) return std::nullopt;
    if (mirrored < 0 && e.user_account) {
      if (user_debit != nullptr && user_debit->account != e.account) return std::nullopt;
      user_debit = &e;
    }
  }
  const posting_leg* debit = nullptr;
  const posting_leg* credit = nullptr;
  for (const auto& leg : p.legs) {
    if (leg.amount < 0 && debit == nullptr && (user_debit == nullptr || leg.account == user_debit->account)) {
      debit = &leg;
    }
    if (leg.amount > 0 && credit == nullptr) credit = &leg;
  }
  if (debit == nullptr || credit == nullptr) return std::nullopt;
  p.debit_account = debit->account;
  p.amount = -debit->amount;
  p.currency = debit->currency;
  p.credit_account = credit->account;
  p.credit_parent = credit->parent != 0 ? credit->parent : credit->account;
  // The actor of a user account fills debit_shards with the shards it knows; a system account's
  // are named by its leg.
  if (user_debit == nullptr) p.debit_shards = debit->shards;
  return p;
}

posting adjustment(account_id adjustment_account, account_id account, account_id credit_row, amount_minor amount,
                   std::string currency) {
  WALLET_ASSERT(amount != 0 && amount != std::numeric_limits<amount_minor>::min(), "an adjustment moves money");
  if (amount > 0) {
    return make(transaction_type::adjustment, adjustment_account, credit_row, account, amount, std::move(currency));
  }
  return make(transaction_type::adjustment, account, adjustment_account, adjustment_account, -amount,
              std::move(currency));
}

posting exchange(account_id wallet_from, account_id fx_from, amount_minor from_amount, std::string from_currency,
                 account_id fx_to, account_id credit_row, account_id wallet_to, amount_minor to_amount,
                 std::string to_currency) {
  posting p;
  p.type = transaction_type::exchange;
  p.debit_account = wallet_from;
  p.amount = from_amount;
  p.currency = from_currency;
  p.credit_account = credit_row;
  p.credit_parent = wallet_to;
  p.legs = {{wallet_from, -from_amount, from_currency, {}},
            {fx_from, from_amount, from_currency, {}},
            {fx_to, -to_amount, to_currency, {}},
            {credit_row, to_amount, std::move(to_currency), {}, wallet_to}};
  return p;
}

}  // namespace ledger::flows
