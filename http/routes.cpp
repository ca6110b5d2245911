#include "http/routes.hpp"

#include <spdlog/spdlog.h>

#include <iterator>

#include "http/crypto.hpp"
#include "http/handler_support.hpp"
#include "http/handlers/handlers.hpp"
#include "http/pipeline.hpp"
#include "http/router.hpp"

namespace api {

struct routes::impl {
  handler_support support;
  pipeline steps;
  router table;

  impl(const config::settings& s, actors::ledger_service& service, ratelimit::limiter* limiter, metrics& m)
      : support(s, service, m), steps(support, limiter) {
    handlers::add_server_routes(table, support, steps);
    handlers::add_principal_routes(table, support);
    handlers::add_account_routes(table, support);
    handlers::add_deposit_routes(table, support);
    handlers::add_transfer_routes(table, support);
    handlers::add_withdrawal_routes(table, support);
    handlers::add_provider_routes(table, support);
    handlers::add_payment_routes(table, support);
    handlers::add_transaction_routes(table, support);
    handlers::add_admin_routes(table, support);
    handlers::add_settlement_routes(table, support);
    handlers::add_key_routes(table, support);
    handlers::add_audit_routes(table, support);
    handlers::add_event_routes(table, support);
    handlers::add_correction_routes(table, support);
    handlers::add_hold_routes(table, support);
    handlers::add_webhook_routes(table, support);
  }

  void handle(const exchange_ptr& ex) {
    auto found = table.find(ex->method, ex->path);
    if (found.matched == nullptr) {
      if (!found.allowed.empty()) {
        auto r = problem_reply(http_problem(405, "method_not_allowed", "Method not allowed",
                                            ex->method + " is not allowed on " + ex->path + "; use " + found.allowed),
                               ex->request_id);
        r.headers.emplace_back("Allow", found.allowed);
        return ex->respond(std::move(r));
      }
      return support.fail(
          ex, http_problem(404, "route_not_found", "Not found", "no route for " + ex->method + " " + ex->path));
    }
    const route& r = *found.matched;
    ex->route = r.pattern;
    steps.run(ex, r, [ex, &r, params = std::move(found.params)](const principal& who) { r.run(ex, who, params); });
  }
};

routes::routes(const config::settings& settings, actors::ledger_service& service, ratelimit::limiter* limiter,
               metrics& m)
    : impl_(std::make_unique<impl>(settings, service, limiter, m)) {}

routes::~routes() = default;

void routes::stop() { impl_->steps.stop(); }

const router& routes::table() const { return impl_->table; }

request_limits routes::limits(std::string_view method, std::string_view path) const {
  const auto& http = impl_->support.settings.http;
  request_limits out{http.body_bytes_max, http.request_deadline_ms};
  const auto found = impl_->table.find(method, path);
  if (found.matched == nullptr) return out;
  if (found.matched->body_bytes_max > 0) out.body_bytes_max = found.matched->body_bytes_max;
  if (found.matched->deadline_ms > 0) out.deadline_ms = found.matched->deadline_ms;
  return out;
}

void routes::serve_forwarded(actors::forwarded_request request, std::function<void(actors::forwarded_reply)> done) {
  auto ex = std::make_shared<exchange>();
  // Work another node sent here counts against this node's bound as its own requests do.
  ex->slot = admission_slot(impl_->support.stats.admission, 0);
  ex->forwarded = true;
  // The forwarding node chose (or checked) the id: its log and the answer name the same request.
  ex->request_id = !request.request_id.empty() ? std::move(request.request_id) : new_request_id();
  ex->method = std::move(request.method);
  ex->target = std::move(request.target);
  const auto q = ex->target.find('?');
  ex->path = ex->target.substr(0, q);
  ex->query = q == std::string::npos ? "" : ex->target.substr(q + 1);
  ex->body = std::move(request.body);
  ex->client_address = "cluster";
  ex->deadline = request.bound;
  for (auto& [name, value] : request.headers) {
    if (name == "Authorization") {
      ex->authorization = std::move(value);
    } else if (name == "Idempotency-Key") {
      ex->has_idempotency_key = true;
      ex->idempotency_key = std::move(value);
    } else if (name == "Content-Type") {
      ex->content_type = std::move(value);
    } else if (name == "Wallet-Signature") {
      ex->wallet_signature = std::move(value);
    }
  }
  // Held weakly, as the server's own exchanges are: the work behind the request holds it.
  std::weak_ptr<exchange> weak_ex = ex;
  ex->respond = [weak_ex, stats = &impl_->support.stats, done = std::move(done)](reply r) {
    auto ex = weak_ex.lock();
    if (!ex || ex->answered.exchange(true)) return;
    // It held one of this node's admission slots, so it counts in the capacity that bounds them
    // (docs/backpressure.md), as an answer written to a client here does (server.cpp).
    if (r.status != 503) stats->retry_returns.answered();
    r.headers.insert(r.headers.begin(), std::make_move_iterator(ex->extra_headers.begin()),
                     std::make_move_iterator(ex->extra_headers.end()));
    actors::forwarded_reply out;
    out.delivered = true;
    out.status = r.status;
    out.content_type = std::move(r.content_type);
    out.headers = std::move(r.headers);
    out.body = std::move(r.body);
    done(std::move(out));
  };
  handle(ex);
}

void routes::handle(const exchange_ptr& ex) {
  try {
    impl_->handle(ex);
  } catch (const std::exception& e) {
    spdlog::error("req={} handler failed: {}", ex->request_id, e.what());
    ex->respond(problem_reply(problem_for(ledger::error_code::internal, "the server failed to handle this request"),
                              ex->request_id));
  }
}

}  // namespace api
