#include "actors/views.hpp"

#include <algorithm>

namespace actors {

bool account_view::visible_to(ledger::principal_id who, ledger::role role) const {
  if (role == ledger::role::operator_role) return true;
  return owner_id && *owner_id == who && kind == ledger::account_kind::user;
}

bool transaction_view::visible_to(ledger::principal_id who, ledger::role role) const {
  if (role == ledger::role::operator_role || (principal_id && *principal_id == who)) return true;
  return std::any_of(entries.begin(), entries.end(),
                     [who](const entry_view& e) { return e.account_owner && *e.account_owner == who; });
}

}  // namespace actors
