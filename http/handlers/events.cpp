// GET /v1/events: the event feed from PostgreSQL (docs/events.md), for consumers without Redis.
// One event per committed journal transaction, in the order the Redis Stream wallet:events gets
// them, keyset-paged by cursor. An operator sees every event; a principal the events that move
// money on its own accounts. Events carry no balances, so nobody learns another party's.

#include "events/event_json.hpp"
#include "http/handlers/handlers.hpp"
#include "http/presenters.hpp"
#include "http/url.hpp"

namespace api::handlers {
namespace {

// The page size when the request names none.
constexpr std::int64_t k_events_page_default = 100;

boost::json::object events_page_json(const actors::events_view& page) {
  boost::json::array events;
  for (const auto& e : page.events) events.emplace_back(events::event_json(e));
  boost::json::object o;
  o["events"] = std::move(events);
  o["next"] = std::to_string(page.next);
  o["hasMore"] = page.more;
  return o;
}

// A cursor below the last event deleted past the retention: the events after it were not all kept.
// A page from the oldest event kept would hide that gap, so the consumer is told instead.
problem cursor_expired(const handler_support& s, std::int64_t pruned_through) {
  const auto through = std::to_string(pruned_through);
  return http_problem(
      410, "cursor_expired", "Cursor expired",
      "events after this cursor were deleted: the feed keeps an event for events.feed_retention_days (" +
          std::to_string(s.settings.events.feed_retention_days) +
          " days here), and every event up to "
          "cursor " +
          through +
          " is gone. Read what you missed from the ledger (GET "
          "/v1/accounts/{id}/entries, GET /v1/transactions/{id}), then continue with after=" +
          through + ".");
}

void list_events(handler_support& s, const exchange_ptr& ex, const principal& who) {
  std::int64_t limit = k_events_page_default;
  std::int64_t after = 0;
  std::optional<ledger::account_id> account;
  if (auto text = query_param(ex->query, "limit")) {
    auto v = ledger::parse_digits(*text);
    if (!v || *v < 1 || *v > s.settings.events.feed_page_max) {
      return s.invalid(ex, "query parameter \"limit\" must be an integer from 1 to " +
                               std::to_string(s.settings.events.feed_page_max));
    }
    limit = *v;
  }
  if (auto text = query_param(ex->query, "after")) {
    auto v = ledger::parse_digits(*text);
    if (!v)
      return s.invalid(ex, "query parameter \"after\" must be an event cursor (the \"next\" of the previous page)");
    after = *v;
  }
  if (auto text = query_param(ex->query, "accountId")) {
    account = parse_id(*text);
    if (!account) return s.invalid(ex, "query parameter \"accountId\" must be an account id (1 to 19 digits)");
  }
  // A principal sees what moves money on its own accounts; an operator sees everything.
  std::optional<ledger::principal_id> owner;
  if (who.role != ledger::role::operator_role) owner = who.id;
  auto read = [&s, ex, after, limit, owner](std::optional<ledger::account_id> only) {
    s.service.list_events(after, static_cast<int>(limit), owner, only,
                          [&s, ex](actors::query_result<actors::events_view> r) {
                            if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
                            if (r.value.expired) return s.fail(ex, cursor_expired(s, r.value.pruned_through));
                            ex->respond(json_reply(200, events_page_json(r.value)));
                          });
  };
  if (!account) return read(std::nullopt);
  // An account that is not the caller's answers 404, as everywhere else. Events name a hot
  // account's shards as the account itself, so a shard (which only an operator may name) means
  // its account.
  s.visible_account(ex, who, *account,
                    [read](const actors::account_view& a) { read(a.parent_id != 0 ? a.parent_id : a.id); });
}

}  // namespace

void add_event_routes(router& r, handler_support& s) {
  r.add({"GET", "/v1/events", access::principal, rate_class::read, param_kind::integer, true,
         [&s](const exchange_ptr& ex, const principal& who, const path_params&) { list_events(s, ex, who); }});
}

}  // namespace api::handlers
