#pragma once

// From the persistence records to the views the facade answers with (actors/views.hpp).

#include "actors/views.hpp"
#include "persistence/accounts.hpp"
#include "persistence/flows.hpp"
#include "persistence/history.hpp"
#include "persistence/holds.hpp"
#include "persistence/outbox.hpp"
#include "persistence/principals.hpp"
#include "persistence/reconcile.hpp"

namespace actors {

principal_view to_view(const persistence::principal_record& p);
account_view to_view(const persistence::account_record& a);
entry_view to_view(const persistence::entry_record& e);
entries_view to_view(const persistence::entries_page& page);
transaction_view to_view(const persistence::transaction_record& t);
reconciliation_run_view to_view(const persistence::reconcile_run& run);
reconciliation_claim_view to_view(const persistence::run_claim& claim);
provider_view to_view(const persistence::provider_record& p);
withdrawal_view to_view(const persistence::withdrawal_record& w);
events_view to_view(const persistence::events_page& page);
hold_view to_view(const persistence::hold_record& h);

template <typename Record>
auto to_view(const std::optional<Record>& r) -> std::optional<decltype(to_view(*r))> {
  if (!r) return std::nullopt;
  return to_view(*r);
}

}  // namespace actors
