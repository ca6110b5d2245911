#pragma once

// Posting rules: which entries one money event makes, decided against the committed, locked
// state of the accounts it touches. This is the authoritative check of every invariant that
// depends on balances (no disallowed negative balance, matching currencies, active accounts);
// the database re-checks the same rules with its own constraints.
//
// The ledger writer locks every account row of a batch, loads their states, and calls
// plan_postings() once for the whole batch: postings are applied in order, each fully or not
// at all, so a rejected posting never changes what its neighbours see.

#include <unordered_map>
#include <vector>

#include "ledger/errors.hpp"
#include "ledger/types.hpp"

namespace ledger {

// A further credit of a posting, paid out of its amount (e.g. a fee to fee_revenue).
struct credit_leg {
  account_id account = 0;
  amount_minor amount = 0;  // zero: no entry
};

// One leg of a posting that names its entries one by one (a reversal, an exchange): a signed
// amount on an account, in the account's currency. A debit of an account that may not go negative
// is drawn from its main row first, then from `shards` (for the posting's debit_account, from
// debit_shards, which its actor fills); a credit lands on the row named.
struct posting_leg {
  account_id account = 0;
  amount_minor amount = 0;  // negative: a debit; positive: a credit; never 0
  std::string currency;
  std::vector<account_id> shards;
  // A credit on a hot account's shard: that account, whose actor keeps the shard's balance
  // (0 or `account`: the row is an account of its own).
  account_id parent = 0;
};

struct posting {
  transaction_type type = transaction_type::transfer;
  // The account money leaves. For a hot account this is its main row.
  account_id debit_account = 0;
  // A hot debited account's credit shards, drawn on (in this order) when the main row holds
  // too little.
  std::vector<account_id> debit_shards;
  // The row money lands on: a shard of a hot payee, otherwise the payee itself.
  account_id credit_account = 0;
  // The account the payee sees: the hot parent of a shard, otherwise credit_account.
  account_id credit_parent = 0;
  // Positive: what leaves the debited account. For a sweep, zero means "the whole balance of the
  // debited shard".
  amount_minor amount = 0;
  std::string currency;
  // Further credits paid out of `amount`; the main credit gets what they leave (which may be 0:
  // then it has no entry).
  std::vector<credit_leg> extra_credits;
  // When set, what the debited account (main row and shards) cannot cover is debited from this
  // account instead of refusing the posting, and the debited account's status does not stop it:
  // a chargeback takes what the wallet holds and books the rest to chargeback_loss.
  account_id shortfall_account = 0;
  // When not empty, the posting makes exactly these legs (docs/corrections.md), summing to zero per
  // currency, and the fields above only route it: debit_account is the account whose actor (or
  // writer) decides it, `amount` and `currency` what leaves that account in its leg, and
  // credit_account one of the credited rows. extra_credits and shortfall_account are not used.
  std::vector<posting_leg> legs;
  // A hold's capture: the held amount of the debited account that this posting releases (the
  // whole hold; the posting's amount, at most that, is what is captured). Debits may spend the
  // balance less what active holds keep (account_state::held), so a capture first gives back
  // what its own hold kept.
  amount_minor releases_held = 0;
};

struct entry_line {
  account_id account = 0;
  amount_minor amount = 0;
  amount_minor balance_after = 0;
};

struct posting_plan {
  error_code outcome = error_code::ok;
  // The amount moved (a sweep's resolved amount); zero with outcome ok means "nothing to do".
  amount_minor amount = 0;
  std::vector<entry_line> entries;
  // Balance of the debited account (main row plus its shards) right after this posting.
  amount_minor debit_balance_after = 0;
  // What the shortfall account paid (0 unless the debited account held too little).
  amount_minor shortfall = 0;
  // account_inactive: the account (a shard's parent) that may not take part.
  account_id inactive_account = 0;
};

using account_states = std::unordered_map<account_id, account_state>;

// Plans one posting against `accounts` and, if it is accepted, applies it to them.
posting_plan plan_posting(const posting& p, account_states& accounts);

// Plans a batch in order. The result has one plan per posting.
std::vector<posting_plan> plan_postings(const std::vector<posting>& postings, account_states& accounts);

// True if the entries of a plan sum to zero (they are all in one currency by construction).
bool entries_balance(const std::vector<entry_line>& entries);

}  // namespace ledger
