// Operators' administration: reconciliation runs (start one, read the latest verdict, read a run)
// and sweeps of the hot accounts' shards. No request scans the ledger itself: runs happen on the
// reconciler, and a request only starts one or reads what it recorded.

#include <algorithm>

#include "http/handlers/handlers.hpp"
#include "http/presenters.hpp"

namespace api::handlers {
namespace {

// The deadline of an operator's sweep of every hot account (at least http.request_deadline_ms).
constexpr std::int64_t k_sweep_deadline_ms = 60'000;

// The latest run with a verdict, and the run in progress if there is one.
void reconciliation(handler_support& s, const exchange_ptr& ex) {
  s.service.latest_reconciliation([&s, ex](actors::query_result<actors::reconciliation_status> r) {
    if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
    if (!r.value.latest) {
      return s.fail(ex, ledger::error_code::not_found,
                    "no reconciliation run has finished yet; start one with POST /v1/admin/reconciliation");
    }
    auto o = reconciliation_run_json(*r.value.latest);
    o["runningRunId"] =
        r.value.running_run_id ? boost::json::value(*r.value.running_run_id) : boost::json::value(nullptr);
    ex->respond(json_reply(200, o));
  });
}

// Starts a run ({"full": true} for a full one; an empty body is an incremental one), or names
// the run in progress: 202 either way, with the run to poll.
void start_reconciliation(handler_support& s, const exchange_ptr& ex, const principal& who) {
  bool full = false;
  if (!ex->body.empty()) {
    auto object = s.body(ex);
    if (!object) return;
    field_reader f(*object);
    f.allow_only({"full"});
    const auto requested = f.optional_bool("full");
    if (!f.ok()) return s.invalid(ex, f.error());
    full = requested.value_or(false);
  }
  s.service.start_reconciliation({who.id, ex->request_id}, full, "operator " + std::to_string(who.id),
                                 [&s, ex](actors::query_result<actors::reconciliation_claim_view> r) {
                                   if (r.outcome != ledger::error_code::ok)
                                     return s.unavailable(ex, r.outcome, r.detail);
                                   const auto& claim = r.value;
                                   boost::json::object o;
                                   o["runId"] = claim.run_id;
                                   o["status"] = "running";
                                   o["kind"] = claim.kind;
                                   o["started"] = claim.started;
                                   const auto location =
                                       "/v1/admin/reconciliation/runs/" + std::to_string(claim.run_id);
                                   o["location"] = location;
                                   auto reply = json_reply(202, o);
                                   reply.headers.emplace_back("Location", location);
                                   ex->respond(std::move(reply));
                                 });
}

void reconciliation_run(handler_support& s, const exchange_ptr& ex, const path_params& p) {
  const std::string not_found = "reconciliation run " + p.text + " was not found";
  if (p.id <= 0) return s.fail(ex, ledger::error_code::not_found, not_found);
  s.service.find_reconciliation_run(
      p.id, [&s, ex, not_found](actors::query_result<std::optional<actors::reconciliation_run_view>> r) {
        if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
        if (!r.value) return s.fail(ex, ledger::error_code::not_found, not_found);
        ex->respond(json_reply(200, reconciliation_run_json(*r.value)));
      });
}

void sweep(handler_support& s, const exchange_ptr& ex, const principal& who) {
  s.service.sweep_now({who.id, ex->request_id}, [&s, ex](actors::query_result<actors::sweep_view> r) {
    if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
    boost::json::object o;
    o["sweeps"] = r.value.sweeps;
    o["deferred"] = r.value.deferred;
    ex->respond(json_reply(200, o));
  });
}

}  // namespace

void add_admin_routes(router& r, handler_support& s) {
  r.add({"GET", "/v1/admin/reconciliation", access::operator_, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal&, const path_params&) { reconciliation(s, ex); }});
  r.add({"POST", "/v1/admin/reconciliation", access::operator_, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params&) { start_reconciliation(s, ex, who); }});
  r.add({"GET", "/v1/admin/reconciliation/runs/{id}", access::operator_, rate_class::read, param_kind::text, false,
         [&s](const exchange_ptr& ex, const principal&, const path_params& p) { reconciliation_run(s, ex, p); }});
  // Every hot account's sweeps are committed before the answer: more time than one request's.
  route sweeps{"POST",
               "/v1/admin/sweeps",
               access::operator_,
               rate_class::read,
               param_kind::integer,
               false,
               [&s](const exchange_ptr& ex, const principal& who, const path_params&) { sweep(s, ex, who); }};
  sweeps.deadline_ms = std::max<std::int64_t>(s.settings.http.request_deadline_ms, k_sweep_deadline_ms);
  r.add(std::move(sweeps));
}

}  // namespace api::handlers
