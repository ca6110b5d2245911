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
  account_state* shortfall = nullptr;
  if (p.shortfall_account != 0) {
    shortfall = find(accounts, p.shortfall_account);
    if (shortfall == nullptr) return rejected(error_code::not_found);
    if (!shortfall->allow_negative || p.shortfall_account == p.debit_account)
      return rejected(error_code::invalid_request);
  }

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

  // The extra credits, and what they leave for the main credit.
  std::vector<std::pair<account_state*, amount_minor>> extras;
  amount_minor extras_total = 0;
  for (const auto& leg : p.extra_credits) {
    if (leg.amount < 0) return rejected(error_code::invalid_request);
    account_state* row = find(accounts, leg.account);
    if (row == nullptr) return rejected(error_code::not_found);
    if (leg.account == p.debit_account || leg.account == p.credit_account) return rejected(error_code::invalid_request);
    if (row->currency != p.currency) return rejected(error_code::currency_mismatch);
    auto next = checked_add(extras_total, leg.amount);
    if (!next) return rejected(error_code::invalid_request);
    extras_total = *next;
    if (leg.amount > 0) extras.emplace_back(row, leg.amount);
  }

  const bool is_sweep = p.type == transaction_type::sweep;
  if (!is_sweep) {
    const account_id payee = p.credit_parent != 0 ? p.credit_parent : p.credit_account;
    if (payee == p.debit_account || p.credit_account == p.debit_account) return rejected(error_code::same_account);
    const bool debit_may_act = shortfall != nullptr || debit->status == account_status::active;
    if (!debit_may_act || credit->status != account_status::active) return rejected(error_code::account_inactive);
  }
  if (debit->currency != p.currency || credit->currency != p.currency) {
    return rejected(error_code::currency_mismatch);
  }
  if (shortfall != nullptr && shortfall->currency != p.currency) return rejected(error_code::currency_mismatch);
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
  if (amount <= 0 || extras_total > amount) return rejected(error_code::invalid_request);
  const amount_minor main_credit = amount - extras_total;

  // Funds: the main row first, then the shards, so that sweeping stays the common case.
  // The total is computed with checked arithmetic; an account can never hold more than int64.
  amount_minor total = debit->balance;
  for (const account_state* shard : shards) {
    auto next = checked_add(total, std::max<amount_minor>(shard->balance, 0));
    if (!next) return rejected(error_code::internal);
    total = *next;
  }
  // What active holds keep from this debit (a capture gives back its own hold first); a chargeback
  // takes only what they leave, so the holds stay covered (migration 011).
  if (p.releases_held < 0 || p.releases_held > debit->held) return rejected(error_code::invalid_request);
  const amount_minor kept = debit->held - p.releases_held;
  const amount_minor spendable = total - kept;
  // What the debited account itself pays; the shortfall account pays the rest.
  amount_minor own = amount;
  if (!debit->allow_negative && spendable < amount) {
    if (shortfall == nullptr) return rejected(error_code::insufficient_funds);
    own = std::max<amount_minor>(spendable, 0);
  }

  for (const auto& [row, part] : extras) {
    if (!checked_add(row->balance, part)) return rejected(error_code::invalid_request);
  }
  auto credit_after = checked_add(credit->balance, main_credit);
  if (!credit_after) return rejected(error_code::invalid_request);

  posting_plan plan;
  plan.amount = amount;
  amount_minor remaining = own;
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
    if (debit->balance > 0 && remaining > 0) take(*debit, std::min(debit->balance, remaining));
    for (account_state* shard : shards) {
      if (remaining == 0) break;
      if (shard->balance > 0) take(*shard, std::min(shard->balance, remaining));
    }
  }
  WALLET_ASSERT(remaining == 0, "the debit legs cover what the debited account pays");
  if (own < amount) {
    auto after = checked_sub(shortfall->balance, amount - own);
    if (!after) return rejected(error_code::invalid_request);
    plan.shortfall = amount - own;
    remaining = plan.shortfall;
    take(*shortfall, plan.shortfall);
  }

  if (main_credit > 0) {
    credit->balance = *credit_after;
    plan.entries.push_back({credit->id, main_credit, credit->balance});
  }
  for (const auto& [row, part] : extras) {
    row->balance += part;
    plan.entries.push_back({row->id, part, row->balance});
  }

  if (p.releases_held > 0) {
    debit->held = kept;
    ++debit->held_version;
  }

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
