// Settlement reconciliation (docs/settlements.md), for operators: import a payment provider's
// settlement report (CSV), page through the exceptions imports found, and resolve one, once, with
// a note. The report is the one request body allowed to be large (http.settlement_body_bytes_max),
// and its answer waits for the match (http.settlement_deadline_ms).

#include <boost/json/array.hpp>

#include <memory>

#include "http/handlers/handlers.hpp"
#include "http/presenters.hpp"
#include "http/url.hpp"

namespace api::handlers {
namespace {

namespace json = boost::json;

// The exceptions page size when the request names none.
constexpr std::int64_t k_exceptions_page_default = 100;
constexpr std::size_t k_note_max = 2000;
constexpr std::size_t k_owner_max = 200;

json::value text_or_null(const std::string& s) { return s.empty() ? json::value(nullptr) : json::value(s); }

json::object import_json(const actors::settlement_import_view& s) {
  json::object exceptions;
  exceptions["postedNotSettled"] = s.posted_not_settled;
  exceptions["settledNotPosted"] = s.settled_not_posted;
  exceptions["amountMismatch"] = s.amount_mismatch;
  json::object o;
  o["importId"] = s.import_id;
  o["provider"] = s.provider;
  o["fileSha256"] = s.file_hash;
  o["lines"] = s.lines;
  o["settledFrom"] = s.settled_from;
  o["settledTo"] = s.settled_to;
  o["checkedFrom"] = s.checked_from;
  o["matched"] = s.matched;
  o["exceptions"] = std::move(exceptions);
  o["newExceptions"] = s.new_exceptions;
  o["resolvedExceptions"] = s.resolved_exceptions;
  o["createdAt"] = s.created_at;
  return o;
}

json::object exception_json(const actors::settlement_exception_view& e) {
  json::object o;
  o["id"] = e.id;
  o["importId"] = e.import_id;
  o["kind"] = e.kind;
  o["provider"] = e.provider;
  o["paymentId"] = text_or_null(e.payment_id);
  o["type"] = e.type;
  o["ledgerAmount"] = text_or_null(e.ledger_amount);
  o["reportAmount"] = text_or_null(e.report_amount);
  o["currency"] = e.currency;
  o["reportCurrency"] = text_or_null(e.report_currency);
  o["transactionId"] = text_or_null(e.transaction_id);
  o["settledAt"] = text_or_null(e.settled_at);
  o["owner"] = text_or_null(e.owner);
  o["status"] = e.status;
  o["note"] = text_or_null(e.note);
  o["resolvedBy"] = text_or_null(e.resolved_by);
  o["resolvedAt"] = text_or_null(e.resolved_at);
  o["createdAt"] = e.created_at;
  return o;
}

// The report is the body, as sent; the import reads it line by line and names the first bad one.
void import_report(handler_support& s, const exchange_ptr& ex, const principal& who) {
  if (!has_media_type(ex->content_type, "text/csv")) {
    return s.fail(ex, http_problem(415, "unsupported_media_type", "Unsupported media type",
                                   "send the settlement report as Content-Type: text/csv"));
  }
  // Moved, not copied: the body may be as large as the route's limit.
  auto report = std::make_shared<const std::string>(std::move(ex->body));
  s.service.import_settlements({who.id, ex->request_id}, std::move(report), "operator " + std::to_string(who.id),
                               [&s, ex](actors::query_result<actors::settlement_import_view> r) {
                                 if (r.outcome == ledger::error_code::invalid_request) {
                                   return s.invalid(ex, "the settlement report was not imported: " + r.detail);
                                 }
                                 if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
                                 ex->respond(json_reply(200, import_json(r.value)));
                               });
}

void list_exceptions(handler_support& s, const exchange_ptr& ex) {
  std::string status;
  if (auto text = query_param(ex->query, "status")) {
    if (*text != "open" && *text != "resolved") {
      return s.invalid(ex, "query parameter \"status\" must be open or resolved (or absent for both)");
    }
    status = *text;
  }
  std::int64_t limit = k_exceptions_page_default;
  if (auto text = query_param(ex->query, "limit")) {
    const auto v = ledger::parse_digits(*text);
    if (!v || *v < 1 || *v > s.settings.ledger.entries_page_max) {
      return s.invalid(ex, "query parameter \"limit\" must be an integer from 1 to " +
                               std::to_string(s.settings.ledger.entries_page_max));
    }
    limit = *v;
  }
  std::int64_t after = 0;
  if (auto text = query_param(ex->query, "after")) {
    const auto v = ledger::parse_digits(*text);
    if (!v)
      return s.invalid(ex, "query parameter \"after\" must be an exception id (the \"next\" of the previous page)");
    after = *v;
  }
  s.service.list_settlement_exceptions(
      status, after, static_cast<int>(limit), [&s, ex](actors::query_result<actors::settlement_exceptions_view> r) {
        if (r.outcome != ledger::error_code::ok) {
          return s.unavailable(ex, r.outcome, r.detail);
        }
        json::array items;
        for (const auto& e : r.value.exceptions) items.push_back(exception_json(e));
        json::object o;
        o["exceptions"] = std::move(items);
        o["next"] = r.value.next_after ? json::value(std::to_string(*r.value.next_after)) : json::value(nullptr);
        ex->respond(json_reply(200, o));
      });
}

// {"note", "importId", "owner"?}: the note (and who, and when) stay on the exception as its audit
// record. importId is the exception's as the operator reviewed it: an import that changed its
// amounts since gave it another, and the resolve is then a conflict (409) that changes nothing.
void resolve(handler_support& s, const exchange_ptr& ex, const principal& who, const path_params& p) {
  auto object = s.body(ex);
  if (!object) return;
  field_reader f(*object);
  f.allow_only({"note", "importId", "owner"});
  auto note = f.string("note", k_note_max);
  const auto seen_import_id = f.id("importId");
  auto owner = f.optional_string("owner", k_owner_max);
  if (!f.ok()) return s.invalid(ex, f.error());
  // PostgreSQL text holds no NUL character.
  if (note.find('\0') != std::string::npos || (owner && owner->find('\0') != std::string::npos)) {
    return s.invalid(ex, "fields \"note\" and \"owner\" must not contain the character U+0000");
  }
  const auto id = p.id;
  s.service.resolve_settlement_exception(
      {who.id, ex->request_id}, id, seen_import_id, std::move(note), std::move(owner),
      "operator " + std::to_string(who.id),
      [&s, ex, id](actors::query_result<std::optional<actors::settlement_exception_view>> r) {
        if (r.outcome == ledger::error_code::conflict) return s.fail(ex, r.outcome, r.detail);
        if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
        if (!r.value) {
          return s.fail(ex, ledger::error_code::not_found,
                        "settlement exception " + std::to_string(id) + " was not found");
        }
        ex->respond(json_reply(200, exception_json(*r.value)));
      });
}

}  // namespace

void add_settlement_routes(router& r, handler_support& s) {
  route import{"POST",
               "/v1/admin/settlements",
               access::operator_,
               rate_class::read,
               param_kind::integer,
               false,
               [&s](const exchange_ptr& ex, const principal& who, const path_params&) { import_report(s, ex, who); }};
  import.body_bytes_max = s.settings.http.settlement_body_bytes_max;
  import.deadline_ms = s.settings.http.settlement_deadline_ms;
  r.add(std::move(import));
  r.add({"GET", "/v1/admin/reconciliation-exceptions", access::operator_, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal&, const path_params&) { list_exceptions(s, ex); }});
  r.add({"POST", "/v1/admin/reconciliation-exceptions/{id}/resolve", access::operator_, rate_class::read,
         param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { resolve(s, ex, who, p); }});
}

}  // namespace api::handlers
