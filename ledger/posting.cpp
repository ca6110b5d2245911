#include "ledger/posting.hpp"

#include <algorithm>
#include <map>

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

// account_inactive, naming row `id`'s account (its parent for a shard).
posting_plan inactive(account_id id, const account_state& row) {
  posting_plan plan = rejected(error_code::account_inactive);
  plan.inactive_account = row.parent_id != 0 ? row.parent_id : id;
  return plan;
}

// A posting of explicit legs. Every check comes before any change, on copies of the rows it
// touches: a refused posting leaves `accounts` as it was.
posting_plan plan_legs(const posting& p, account_states& accounts) {
  if (p.legs.size() < 2 || p.amount <= 0) return rejected(error_code::invalid_request);
  std::map<std::string, amount_minor> sums;
  bool debit_named = false;
  for (const auto& leg : p.legs) {
    if (leg.amount == 0) return rejected(error_code::invalid_request);
    const account_state* row = find(accounts, leg.account);
    if (row == nullptr) return rejected(error_code::not_found);
    if (row->currency != leg.currency) return rejected(error_code::currency_mismatch);
    if (row->status != account_status::active) return inactive(leg.account, *row);
    auto sum = checked_add(sums[leg.currency], leg.amount);
    if (!sum) return rejected(error_code::invalid_request);
    sums[leg.currency] = *sum;
    if (leg.account == p.debit_account && leg.amount < 0) {
      // The actor reserved p.amount of this account: its leg must be that debit exactly.
      if (debit_named || leg.amount != -p.amount || leg.currency != p.currency) {
        return rejected(error_code::invalid_request);
      }
      debit_named = true;
    }
  }
  if (!debit_named) return rejected(error_code::invalid_request);
  for (const auto& [currency, sum] : sums) {
    if (sum != 0) return rejected(error_code::invalid_request);
  }

  account_states work;
  auto row_of = [&](account_id id) -> account_state* {
    auto it = work.find(id);
    if (it != work.end()) return &it->second;
    const account_state* row = find(accounts, id);
    return row == nullptr ? nullptr : &work.emplace(id, *row).first->second;
  };
  posting_plan plan;
  plan.amount = p.amount;
  auto entry = [&](account_state& row, amount_minor amount) {
    row.balance += amount;  // checked by the caller
    ++row.version;
    plan.entries.push_back({row.id, amount, row.balance});
  };
  for (const auto& leg : p.legs) {
    account_state& row = *row_of(leg.account);
    if (leg.amount > 0) {
      if (!checked_add(row.balance, leg.amount)) return rejected(error_code::invalid_request);
      entry(row, leg.amount);
      continue;
    }
    const auto need = checked_neg(leg.amount);
    if (!need) return rejected(error_code::invalid_request);
    if (row.allow_negative) {
      if (!checked_sub(row.balance, *need)) return rejected(error_code::invalid_request);
      entry(row, leg.amount);
      continue;
    }
    const auto& shard_ids = leg.account == p.debit_account ? p.debit_shards : leg.shards;
    std::vector<account_state*> shards;
    amount_minor total = std::max<amount_minor>(row.balance, 0);
    for (account_id id : shard_ids) {
      if (std::count(shard_ids.begin(), shard_ids.end(), id) > 1) return rejected(error_code::invalid_request);
      account_state* shard = row_of(id);
      if (shard == nullptr) return rejected(error_code::not_found);
      if (shard->parent_id != leg.account || shard->currency != leg.currency) {
        return rejected(error_code::invalid_request);
      }
      auto next = checked_add(total, std::max<amount_minor>(shard->balance, 0));
      if (!next) return rejected(error_code::internal);
      total = *next;
      shards.push_back(shard);
    }
    // What active holds keep on the account stays (migration 011), as for any debit.
    if (total - row.held < *need) return rejected(error_code::insufficient_funds);
    // The main row first, then the shards, as plan_posting draws on them.
    amount_minor remaining = *need;
    if (row.balance > 0) {
      const auto part = std::min(row.balance, remaining);
      entry(row, -part);
      remaining -= part;
    }
    for (account_state* shard : shards) {
      if (remaining == 0) break;
      if (shard->balance <= 0) continue;
      const auto part = std::min(shard->balance, remaining);
      entry(*shard, -part);
      remaining -= part;
    }
    WALLET_ASSERT(remaining == 0, "the debit legs cover the debit");
  }
  for (auto& [id, row] : work) {
    WALLET_ASSERT(row.allow_negative || row.balance >= 0, "a leg never overdraws a row");
    accounts[id] = row;
  }
  plan.debit_balance_after = accounts.at(p.debit_account).balance;
  for (account_id id : p.debit_shards) plan.debit_balance_after += accounts.at(id).balance;
  std::map<std::string, amount_minor> check;
  for (const auto& e : plan.entries) check[accounts.at(e.account).currency] += e.amount;
  for (const auto& [currency, sum] : check) WALLET_ASSERT(sum == 0, "a posting sums to zero per currency");
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
  if (!p.legs.empty()) return plan_legs(p, accounts);
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
    // A failed payout gives the wallet back its own money and settles its withdrawal: like a
    // chargeback it is not the owner's choice, and refusing it would leave the money in
    // pending_withdrawal with the withdrawal PENDING for good. So it reaches a frozen wallet too
    // (never a closed one: a wallet with a PENDING withdrawal does not close).
    const bool credit_may_receive =
        credit->status == account_status::active ||
        (p.type == transaction_type::payout_failed && credit->status == account_status::frozen);
    if (!debit_may_act) return inactive(p.debit_account, *debit);
    if (!credit_may_receive) return inactive(p.credit_account, *credit);
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
