#include "actors/view_conversions.hpp"

namespace actors {
namespace {

// The name of a reconciliation check in answers: the flag that says it passed.
std::string check_name(persistence::reconcile_check check) {
  switch (check) {
    case persistence::reconcile_check::currency_zero_sum: return "zeroSumPerCurrency";
    case persistence::reconcile_check::transaction_zero_sum: return "transactionsBalanced";
    case persistence::reconcile_check::account_cache: return "cachesMatchEntries";
    case persistence::reconcile_check::balance_after: return "balanceAfterMatchesEntries";
    case persistence::reconcile_check::negative_balance: return "noDisallowedNegatives";
    case persistence::reconcile_check::entry_account: return "entriesReferenceAccounts";
    case persistence::reconcile_check::checkpoint: return "checkpointsMatchEntries";
    case persistence::reconcile_check::held_mismatch: return "heldMatchesActiveHolds";
  }
  return "unknown";
}

}  // namespace

principal_view to_view(const persistence::principal_record& p) { return principal_view{p.id, p.name, p.role}; }

account_view to_view(const persistence::account_record& a) {
  account_view v;
  v.id = a.id;
  v.owner_id = a.owner_id;
  v.currency = a.currency;
  v.kind = a.kind;
  v.status = a.status;
  v.status_version = a.status_version;
  v.main_balance = a.balance;
  v.total_balance = a.total_balance();
  v.parent_id = a.parent_id;
  for (const auto& s : a.shards) v.shards.push_back(shard_view{s.id, s.shard_no, s.balance});
  v.created_at = a.created_at;
  v.fees = a.fees;
  v.held = a.held;
  return v;
}

entry_view to_view(const persistence::entry_record& e) {
  return entry_view{e.id,         e.transaction_id, e.account_id,      e.currency, e.amount, e.balance_after,
                    e.created_at, e.account_owner,  e.transaction_type};
}

entries_view to_view(const persistence::entries_page& page) {
  entries_view v;
  v.next_after = page.next_after;
  for (const auto& e : page.entries) v.entries.push_back(to_view(e));
  return v;
}

transaction_view to_view(const persistence::transaction_record& t) {
  transaction_view v;
  v.id = t.id;
  v.principal_id = t.principal_id;
  v.type = t.type;
  v.status = t.status;
  v.created_at = t.created_at;
  for (const auto& e : t.entries) v.entries.push_back(to_view(e));
  return v;
}

reconciliation_run_view to_view(const persistence::reconcile_run& run) {
  reconciliation_run_view v;
  v.id = run.id;
  v.kind = std::string(persistence::to_string(run.kind));
  v.status = run.status;
  v.phase = run.phase;
  v.requested_by = run.requested_by;
  v.started_at = run.started_at;
  v.finished_at = run.finished_at;
  v.from_entry_id = run.from_entry_id;
  v.through_entry_id = run.through_entry_id;
  v.ok = run.ok;
  for (auto check : persistence::k_reconcile_checks) v.checks.push_back({check_name(check), run.passed(check)});
  for (const auto& f : run.findings) {
    v.findings.push_back({check_name(f.check), f.account_id, f.transaction_id, f.currency, f.entry_id, f.detail});
  }
  v.accounts_checked = run.accounts_checked;
  v.entries_checked = run.entries_checked;
  v.transactions_checked = run.transactions_checked;
  v.duration_ms = run.duration_ms;
  v.error = run.error;
  return v;
}

reconciliation_claim_view to_view(const persistence::run_claim& claim) {
  return reconciliation_claim_view{claim.run_id, claim.started, std::string(persistence::to_string(claim.kind))};
}

provider_view to_view(const persistence::provider_record& p) {
  return provider_view{p.id,
                       p.name,
                       p.principal_id,
                       p.signing_secret,
                       p.created_at,
                       p.previous_signing_secret,
                       p.previous_secret_expires_unix,
                       p.previous_secret_expires_at,
                       p.secret_rotated_at};
}

withdrawal_view to_view(const persistence::withdrawal_record& w) {
  return withdrawal_view{w.id,
                         w.account_id,
                         w.principal_id,
                         w.provider,
                         w.currency,
                         w.amount,
                         w.fee,
                         w.destination,
                         w.status,
                         w.transaction_id,
                         w.settled_transaction_id,
                         w.provider_payment_id,
                         w.created_at,
                         w.settled_at};
}

events_view to_view(const persistence::events_page& page) {
  events_view out;
  out.next = page.next;
  out.more = page.more;
  out.pruned_through = page.pruned_through;
  out.expired = page.expired;
  for (const auto& e : page.events) {
    event_view v;
    v.cursor = e.cursor;
    v.transaction_id = e.transaction_id;
    v.type = e.type;
    v.currency = e.currency;
    v.created_at = e.created_at;
    for (const auto& leg : e.legs) v.legs.push_back({leg.account, leg.amount, leg.currency});
    out.events.push_back(std::move(v));
  }
  return out;
}

hold_view to_view(const persistence::hold_record& h) {
  const auto& f = h.facts;
  return hold_view{f.id,          f.status,     f.payer,      f.payee,      f.currency,
                   f.amount,      f.captured,   f.expires_at, f.created_at, f.capture_transaction_id,
                   h.payer_owner, h.payee_owner};
}

}  // namespace actors
