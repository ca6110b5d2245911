// GET /v1/transactions/{id}: a journal transaction and its entries, for an operator or a
// principal it concerns (the entries of other parties' accounts show no balance).

#include "http/handlers/handlers.hpp"
#include "http/presenters.hpp"
#include "http/url.hpp"

namespace api::handlers {
namespace {

void get_transaction(handler_support& s, const exchange_ptr& ex, const principal& who, const std::string& id) {
  if (!is_valid_uuid(id)) return s.fail(ex, ledger::error_code::not_found, "transaction " + id + " was not found");
  s.service.find_transaction(id, [&s, ex, who, id](actors::query_result<std::optional<actors::transaction_view>> r) {
    if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
    if (!r.value || !r.value->visible_to(who.id, who.role)) {
      return s.fail(ex, ledger::error_code::not_found, "transaction " + id + " was not found");
    }
    ex->respond(json_reply(200, transaction_json(*r.value, who.id, who.role)));
  });
}

}  // namespace

void add_transaction_routes(router& r, handler_support& s) {
  r.add({"GET", "/v1/transactions/{id}", access::principal, rate_class::read, param_kind::text, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           get_transaction(s, ex, who, p.text);
         }});
}

}  // namespace api::handlers
