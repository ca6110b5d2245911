#pragma once

// The JSON document of one feed event (docs/events.md): what GET /v1/events lists and what a
// webhook delivery carries as its body, the same document either way, so a consumer may move
// between the feed and webhooks. The feed holds an event as actors::event_view (http/ sees no
// persistence rows), the webhook dispatcher as persistence::event_record; both carry the fields
// below under the same names, so the document is written once, over whichever it is given.

#include <string>

#include <boost/json.hpp>

namespace events {

// `Event` has cursor, transaction_id, type, currency, created_at and legs, each leg an account,
// an amount and a currency.
template <typename Event>
boost::json::object event_json(const Event& e) {
  boost::json::object o;
  o["eventId"] = e.transaction_id;
  o["cursor"] = std::to_string(e.cursor);
  o["type"] = e.type;
  o["transactionId"] = e.transaction_id;
  o["currency"] = e.currency;
  boost::json::array accounts, amounts, currencies;
  for (const auto& leg : e.legs) {
    accounts.emplace_back(leg.account);
    amounts.emplace_back(std::to_string(leg.amount));
    currencies.emplace_back(leg.currency);
  }
  o["accounts"] = std::move(accounts);
  o["amounts"] = std::move(amounts);
  o["currencies"] = std::move(currencies);
  o["createdAt"] = e.created_at;
  return o;
}

}  // namespace events
