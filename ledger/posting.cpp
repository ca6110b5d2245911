#include "ledger/posting.hpp"

#include <algorithm>

#include "base/assert.hpp"

namespace ledger {
namespace {

account_state* find(account_states& accounts, account_id id) {
  auto it = accounts.find(id);
  return it == accounts.end() ? nullptr : &it->second;
}

posting_plan rejected(error_code code) {
  posting_plan plan;
  plan.outcome = code;
  return plan;
}

}  // namespace

bool entries_balance(const std::vector<entry_line>& entries) {
  amount_minor sum = 0;
  for (const auto& e : entries) {
    auto next = checked_add(sum, e.amount);
    if (!next) return false;
    sum = *next;
  }
  return sum == 0;
}

posting_plan plan_posting(const posting& p, account_states& accounts) {
  account_state* debit = find(accounts, p.debit_account);
  account_state* credit = find(accounts, p.credit_account);
  if (debit == nullptr || credit == nullptr) return rejected(error_code::not_found);

  std::vector<account_state*> shards;
  shards.reserve(p.debit_shards.size());
  for (account_id id : p.debit_shards) {
    // A shard named twice would be counted twice towards the funds.
    if (id == p.debit_account || std::count(p.debit_shards.begin(), p.debit_shards.end(), id) > 1) {
      return rejected(error_code::invalid_request);
    }
    account_state* shard = find(accounts, id);
    if (shard == nullptr) return rejected(error_code::not_found);
    shards.push_back(shard);
  }

  const bool is_sweep = p.type == transaction_type::sweep;
  if (!is_sweep) {
    const account_id payee = p.credit_parent != 0 ? p.credit_parent : p.credit_account;
    if (payee == p.debit_account || p.credit_account == p.debit_account) return rejected(error_code::same_account);
    if (debit->status != account_status::active || credit->status != account_status::active) {
      return rejected(error_code::account_inactive);
    }
  }
  if (debit->currency != p.currency || credit->currency != p.currency) {
    return rejected(error_code::currency_mismatch);
  }
  for (const account_state* shard : shards) {
    if (shard->currency != p.currency) return rejected(error_code::currency_mismatch);
  }

  amount_minor amount = p.amount;
  if (is_sweep) {
    // A sweep moves what the shard holds right now, under the lock: never more, never stale.
    if (p.amount == 0) amount = std::max<amount_minor>(debit->balance, 0);
    if (amount == 0) return posting_plan{};
    if (!debit->allow_negative && amount > debit->balance) return rejected(error_code::insufficient_funds);
  }
  if (amount <= 0) return rejected(error_code::invalid_request);

  // Funds: the main row first, then the shards, so that sweeping stays the common case.
  // The total is computed with checked arithmetic; an account can never hold more than int64.
  amount_minor total = debit->balance;
  for (const account_state* shard : shards) {
    auto next = checked_add(total, std::max<amount_minor>(shard->balance, 0));
    if (!next) return rejected(error_code::internal);
    total = *next;
  }
  if (!debit->allow_negative && total < amount) return rejected(error_code::insufficient_funds);

  auto credit_after = checked_add(credit->balance, amount);
  if (!credit_after) return rejected(error_code::invalid_request);

  posting_plan plan;
  plan.amount = amount;
  amount_minor remaining = amount;
  auto take = [&](account_state& row, amount_minor part) {
    WALLET_ASSERT(part > 0, "a debit leg moves a positive amount");
    row.balance -= part;  // cannot overflow: part <= balance, or the row may go negative by design
    WALLET_ASSERT(row.allow_negative || row.balance >= 0, "a debit never overdraws a row");
    plan.entries.push_back({row.id, -part, row.balance});
    remaining -= part;
  };

  if (debit->allow_negative) {
    auto after = checked_sub(debit->balance, amount);
    if (!after) return rejected(error_code::invalid_request);
    take(*debit, amount);
  } else {
    if (debit->balance > 0) take(*debit, std::min(debit->balance, remaining));
    for (account_state* shard : shards) {
      if (remaining == 0) break;
      if (shard->balance > 0) take(*shard, std::min(shard->balance, remaining));
    }
  }
  WALLET_ASSERT(remaining == 0, "the debit legs cover the whole amount");

  credit->balance = *credit_after;
  plan.entries.push_back({credit->id, amount, credit->balance});

  plan.debit_balance_after = debit->balance;
  for (const account_state* shard : shards) plan.debit_balance_after += shard->balance;

  for (const auto& e : plan.entries) ++accounts.at(e.account).version;
  WALLET_ASSERT(entries_balance(plan.entries), "a posting's entries sum to zero");
  return plan;
}

std::vector<posting_plan> plan_postings(const std::vector<posting>& postings, account_states& accounts) {
  std::vector<posting_plan> plans;
  plans.reserve(postings.size());
  for (const auto& p : postings) plans.push_back(plan_posting(p, accounts));
  return plans;
}

}  // namespace ledger
