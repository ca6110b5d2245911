#pragma once

// The JSON shape of every answer that is not a problem: accounts, entries, transactions,
// principals and reconciliation runs, as docs/openapi.json describes them. Amounts are strings of
// digits (a JSON number cannot carry every int64 exactly).

#include <boost/json/object.hpp>

#include "actors/views.hpp"
#include "http/exchange.hpp"

namespace api {

reply json_reply(int status, const boost::json::object& body);

// `reserved`: the debits the account's actor has in flight; `available` is the balance less them.
boost::json::object account_json(const actors::account_view& a, ledger::amount_minor reserved = 0);
// `show_balance`: false for an entry of another principal's account (a payer must not learn the
// payee's balance, nor a depositor the clearing account's, which is all the money issued).
boost::json::object entry_json(const actors::entry_view& e, bool show_balance = true);
boost::json::object entries_page_json(const actors::entries_view& page);
// The entries of accounts `who` does not own show no balance (unless `who` is an operator).
boost::json::object transaction_json(const actors::transaction_view& t, ledger::principal_id who, ledger::role role);
// With the API key, which is shown this once and never again.
boost::json::object new_principal_json(const actors::principal_view& p, const std::string& api_key);
// A run: what it covered, each check's flag (null when not made), what it found.
boost::json::object reconciliation_run_json(const actors::reconciliation_run_view& run);

// A provider; with its signing secret only when it was just created (shown once).
boost::json::object provider_json(const actors::provider_view& p, bool with_secret);
boost::json::object withdrawal_json(const actors::withdrawal_view& w);

}  // namespace api
