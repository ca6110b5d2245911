#include "http/handler_support.hpp"

#include <algorithm>
#include <chrono>

#include "http/url.hpp"
#include "ledger/types.hpp"

namespace api {

handler_support::handler_support(const config::settings& s, actors::ledger_service& svc, metrics& m)
    : settings(s),
      service(svc),
      stats(m),
      unknown_accounts_(s.auth.unknown_accounts_per_second, s.auth.unknown_accounts_burst, k_guarded_keys_max),
      unauthenticated_(s.auth.unauthenticated_per_second, s.auth.unauthenticated_burst, k_guarded_keys_max) {}

void handler_support::fail(const exchange_ptr& ex, const problem& p) const {
  ex->respond(problem_reply(p, ex->request_id));
}

void handler_support::fail(const exchange_ptr& ex, ledger::error_code code, std::string detail,
                           std::int64_t retry_after_s) const {
  fail(ex, problem_for(code, std::move(detail), retry_after_s));
}

void handler_support::invalid(const exchange_ptr& ex, std::string detail) const {
  fail(ex, ledger::error_code::invalid_request, std::move(detail));
}

void handler_support::unavailable(const exchange_ptr& ex, ledger::error_code code, std::string detail) const {
  if (code == ledger::error_code::unauthorized) return caller_revoked(ex);
  fail(ex, code, std::move(detail), ledger::k_retry_after_default_s);
}

void handler_support::caller_revoked(const exchange_ptr& ex) const {
  auto r = problem_reply(problem_for(ledger::error_code::unauthorized, "the API key of this request was revoked"),
                         ex->request_id);
  r.headers.emplace_back("WWW-Authenticate", "Bearer error=\"invalid_token\"");
  ex->respond(std::move(r));
}

std::optional<json_fields> handler_support::body(const exchange_ptr& ex) const {
  if (!is_json_media_type(ex->content_type)) {
    fail(ex, http_problem(415, "unsupported_media_type", "Unsupported media type",
                          "send the body as Content-Type: application/json"));
    return std::nullopt;
  }
  auto parsed = parse_json_object(ex->body);
  if (!parsed.ok) {
    invalid(ex, parsed.error);
    return std::nullopt;
  }
  return std::move(parsed.object);
}

std::optional<std::string> handler_support::idempotency_key(const exchange_ptr& ex) const {
  if (!ex->has_idempotency_key) {
    invalid(ex, "the Idempotency-Key header is required on this request (1 to 255 printable ASCII characters)");
    return std::nullopt;
  }
  if (!is_valid_idempotency_key(ex->idempotency_key)) {
    invalid(ex, "the Idempotency-Key header must be 1 to 255 printable ASCII characters without spaces");
    return std::nullopt;
  }
  // A request of the client's own under a batch item's key would take the item's place.
  if (std::string_view(ex->idempotency_key).starts_with(ledger::k_batch_item_key_prefix)) {
    invalid(ex, "the Idempotency-Key header must not begin with \"" + std::string(ledger::k_batch_item_key_prefix) +
                    "\": the server keys the transfers of a batch so");
    return std::nullopt;
  }
  return ex->idempotency_key;
}

bool handler_support::within_lookup_allowance(const exchange_ptr& ex, const principal& who) {
  const std::string key = std::to_string(who.id);
  if (unknown_accounts_.has_token(key)) {
    ex->lookup_checked = true;
    return true;
  }
  ++stats.unknown_account_refused;
  const auto retry = unknown_accounts_.retry_after_s(key);
  fail(ex, http_problem(429, "rate_limited", "Too many requests",
                        "too many requests named accounts that do not exist or are not yours; retry after " +
                            std::to_string(retry) + " s",
                        retry));
  return false;
}

bool handler_support::within_unauthenticated_allowance(const exchange_ptr& ex) {
  if (unauthenticated_.take(ex->client_address)) return true;
  ++stats.unauthenticated_refused;
  const auto retry = unauthenticated_.retry_after_s(ex->client_address);
  fail(ex, http_problem(429, "rate_limited", "Too many requests",
                        "too many requests without a valid credential from this address; retry after " +
                            std::to_string(retry) + " s",
                        retry));
  return false;
}

void handler_support::count_unknown_account(const exchange_ptr& ex, ledger::principal_id by) {
  // A request checked against the allowance is charged even past it: those in flight together
  // when it ran out were all admitted, and each is paid for before the principal names accounts
  // again. Another (a capture of an unknown hold, a refund of an unknown payment) only takes a
  // token while one is left: it was never checked, so it makes no debt.
  if (ex->lookup_checked) return unknown_accounts_.charge(std::to_string(by));
  unknown_accounts_.take(std::to_string(by));
}

void handler_support::visible_account(const exchange_ptr& ex, const principal& who, ledger::account_id id,
                                      std::function<void(const actors::account_view&)> next) {
  service.find_account(
      id, [this, ex, who, id, next = std::move(next)](actors::query_result<std::optional<actors::account_view>> r) {
        if (r.outcome != ledger::error_code::ok) return unavailable(ex, r.outcome, r.detail);
        if (!r.value || !r.value->visible_to(who.id, who.role)) {
          count_unknown_account(ex, who.id);
          return fail(ex, ledger::error_code::not_found, "account " + std::to_string(id) + " was not found");
        }
        next(*r.value);
      });
}

// Cluster mode: the debit belongs to a partition another node holds. Nothing was started here, so
// the request goes to that node as it came, and its answer is this request's answer.
void handler_support::forward(const exchange_ptr& ex, const actors::money_result& refusal) {
  actors::forwarded_request request;
  request.method = ex->method;
  request.target = ex->target;
  request.request_id = ex->request_id;
  request.body = ex->body;
  if (!ex->authorization.empty()) request.headers.emplace_back("Authorization", ex->authorization);
  if (ex->has_idempotency_key) request.headers.emplace_back("Idempotency-Key", ex->idempotency_key);
  if (!ex->content_type.empty()) request.headers.emplace_back("Content-Type", ex->content_type);
  if (!ex->wallet_signature.empty()) request.headers.emplace_back("Wallet-Signature", ex->wallet_signature);
  // The holder has what is left of this request's deadline, less a quarter for the way back.
  if (ex->deadline.count() > 0) {
    const auto spent =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - ex->started);
    request.bound = std::max(std::chrono::milliseconds(1), (ex->deadline - spent) * 3 / 4);
  }
  ++stats.forwarded_requests;
  service.forward(refusal.partition, std::move(request), [this, ex, refusal](actors::forwarded_reply r) {
    if (!r.delivered) {
      ++stats.forward_failures;
      if (r.sent) {
        return fail(ex, ledger::error_code::outcome_unknown,
                    r.detail + "; the outcome of this request is unknown: retry with the same Idempotency-Key",
                    ledger::k_retry_after_default_s);
      }
      return fail(ex, refusal.outcome, refusal.detail + " (" + r.detail + ")", refusal.retry_after_s);
    }
    reply out;
    out.status = r.status;
    out.body = std::move(r.body);
    if (!r.content_type.empty()) out.content_type = std::move(r.content_type);
    out.headers = std::move(r.headers);
    ex->respond(std::move(out));
  });
}

bool handler_support::forwardable(const exchange_ptr& ex, const actors::money_result& r) const {
  return r.outcome == ledger::error_code::not_partition_owner && r.partition >= 0 && !ex->forwarded &&
         service.forwards();
}

void handler_support::answer_money(const exchange_ptr& ex, ledger::principal_id by, actors::money_result r) {
  if (forwardable(ex, r)) return forward(ex, r);
  if (r.outcome == ledger::error_code::not_found) count_unknown_account(ex, by);
  if (r.outcome != ledger::error_code::ok) return fail(ex, r.outcome, std::move(r.detail), r.retry_after_s);
  reply out;
  out.status = r.status;
  out.body = std::move(r.body);
  if (r.replayed) out.headers.emplace_back("Idempotent-Replayed", "true");
  ex->respond(std::move(out));
}

void handler_support::answer_replayed(const exchange_ptr& ex, const actors::replayed_answer& a) const {
  if (!a.same_request) {
    return fail(ex, ledger::error_code::idempotency_key_reused,
                "the Idempotency-Key was sent before with another request; a new request needs a new key");
  }
  reply out;
  out.status = a.status;
  out.body = a.body;
  out.headers.emplace_back("Idempotent-Replayed", "true");
  ex->respond(std::move(out));
}

}  // namespace api
