// The audit log (docs/keys-and-audit.md): every operator action, and every change a principal
// makes to its own keys or accounts, oldest first, in keyset pages (`after` is the id of the
// last row read; rows become visible in id order, so a reader following `next` misses none).

#include <boost/json/parse.hpp>

#include "http/handlers/handlers.hpp"
#include "http/presenters.hpp"
#include "http/url.hpp"

namespace api::handlers {
namespace {

namespace json = boost::json;

constexpr std::int64_t k_audit_page_default = 100;
constexpr std::int64_t k_audit_page_max = 500;

json::object audit_json(const actors::audit_view& a) {
  json::object o;
  o["id"] = a.id;
  o["principalId"] = a.principal_id;
  o["action"] = a.action;
  o["target"] = a.target;
  o["detail"] = json::parse(a.detail_json);
  o["requestId"] = a.request_id;
  o["createdAt"] = a.created_at;
  return o;
}

void list_audit(handler_support& s, const exchange_ptr& ex) {
  std::int64_t limit = k_audit_page_default;
  std::int64_t after = 0;
  if (auto text = query_param(ex->query, "limit")) {
    auto v = ledger::parse_digits(*text);
    if (!v || *v < 1 || *v > k_audit_page_max) {
      return s.invalid(ex,
                       "query parameter \"limit\" must be an integer from 1 to " + std::to_string(k_audit_page_max));
    }
    limit = *v;
  }
  if (auto text = query_param(ex->query, "after")) {
    auto v = ledger::parse_digits(*text);
    if (!v)
      return s.invalid(ex, "query parameter \"after\" must be an audit row id (the \"next\" of the previous page)");
    after = *v;
  }
  s.service.list_audit(after, static_cast<int>(limit), [&s, ex](actors::query_result<actors::audit_page_view> r) {
    if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
    json::array entries;
    for (const auto& a : r.value.entries) entries.push_back(audit_json(a));
    json::object o;
    o["entries"] = std::move(entries);
    o["next"] = r.value.next_after ? json::value(std::to_string(*r.value.next_after)) : json::value(nullptr);
    ex->respond(json_reply(200, o));
  });
}

}  // namespace

void add_audit_routes(router& r, handler_support& s) {
  r.add({"GET", "/v1/admin/audit", access::operator_, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal&, const path_params&) { list_audit(s, ex); }});
}

}  // namespace api::handlers
