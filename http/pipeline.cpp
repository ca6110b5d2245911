#include "http/pipeline.hpp"

#include <spdlog/spdlog.h>

#include "http/crypto.hpp"
#include "http/url.hpp"

namespace api {
namespace {

// Runs the next step from a callback of another component's thread (a reader's, the limiter's),
// whose own handling of an exception would log it and leave the request unanswered until its
// deadline: a handler that throws is answered 500 at once, as on the I/O thread (routes::handle).
template <typename Step>
void guarded(const exchange_ptr& ex, Step&& step) {
  try {
    step();
  } catch (const std::exception& e) {
    spdlog::error("req={} handler failed: {}", ex->request_id, e.what());
    ex->respond(problem_reply(problem_for(ledger::error_code::internal, "the server failed to handle this request"),
                              ex->request_id));
  }
}

}  // namespace

pipeline::pipeline(handler_support& support, ratelimit::limiter* limiter) : support_(support), limiter_(limiter) {}

void pipeline::run(const exchange_ptr& ex, const route& r, std::function<void(const principal&)> next) {
  if (r.who == access::open) return next(principal{});
  if (const auto admitted = support_.stats.admission->requests.load(); admitted > inflight_bound()) {
    return support_.fail(ex, ledger::error_code::server_busy,
                         admitted > support_.settings.admission.inflight_requests_max
                             ? "the server is at its limit of requests in flight"
                             : "the server has more requests in flight than it answers in " +
                                   std::to_string(support_.settings.admission.queue_target_ms) + " ms",
                         ledger::k_retry_after_default_s);
  }
  // A provider's event carries no API key: its handler verifies the signature.
  if (r.who == access::provider) return next(principal{});
  authenticate(ex, [this, ex, &r, next = std::move(next)](const principal& who) mutable {
    rate_limit(ex, who, r.rate, [this, ex, &r, who, next = std::move(next)] {
      if (r.who == access::operator_ && who.role != ledger::role::operator_role) {
        return support_.fail(ex, ledger::error_code::forbidden, "this operation needs an operator key");
      }
      if (r.names_accounts && !support_.within_lookup_allowance(ex, who)) return;
      next(who);
    });
  });
}

std::int64_t pipeline::inflight_bound() const {
  const auto& a = support_.settings.admission;
  if (a.queue_target_ms <= 0) return a.inflight_requests_max;
  const auto carried = support_.stats.retry_returns.capacity_per_second() * a.queue_target_ms / 1000;
  return std::min(a.inflight_requests_max, std::max(a.inflight_requests_min, carried));
}

void pipeline::authenticate(const exchange_ptr& ex, std::function<void(const principal&)> next) {
  const auto token = bearer_token(ex->authorization);
  const bool has_key = token.has_value();
  if (has_key) ex->key_hash = sha256_hex(*token);
  const std::string& key_hash = ex->key_hash;
  if (has_key) {
    if (auto known = support_.service.cached_principal(key_hash)) {
      ex->principal_id = known->id;
      return next(*known);
    }
  }
  // Not a key this server knows: it costs a database read at most, and only within the
  // client address's allowance. A key it knew but must confirm again (its time to live passed
  // while revoked keys could not be checked) is a returning client, not a guess: it is read
  // without spending the allowance. Nor is a request another node forwarded: that node checked its
  // key (and its address's allowance) before forwarding it, and every forwarded request would
  // otherwise share one allowance, the "cluster" address's, on a node whose key cache is cold.
  const bool known_before = has_key && (ex->forwarded || support_.service.knows_key(key_hash));
  if (!known_before && !support_.within_unauthenticated_allowance(ex)) return;
  if (!has_key) {
    auto r = problem_reply(
        problem_for(ledger::error_code::unauthorized, "send an API key as \"Authorization: Bearer <key>\""),
        ex->request_id);
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return ex->respond(std::move(r));
  }
  support_.service.authenticate(
      key_hash, [this, ex, next = std::move(next)](actors::query_result<std::optional<principal>> r) {
        if (r.outcome != ledger::error_code::ok) return support_.unavailable(ex, r.outcome, r.detail);
        if (!r.value) {
          auto reply =
              problem_reply(problem_for(ledger::error_code::unauthorized, "the API key is not known"), ex->request_id);
          reply.headers.emplace_back("WWW-Authenticate", "Bearer error=\"invalid_token\"");
          return ex->respond(std::move(reply));
        }
        ex->principal_id = r.value->id;
        guarded(ex, [&] { next(*r.value); });
      });
}

void pipeline::shutting_down(const exchange_ptr& ex) const {
  support_.fail(ex, ledger::error_code::server_busy, "the server is shutting down; retry later",
                ledger::k_retry_after_default_s);
}

void pipeline::rate_limit(const exchange_ptr& ex, const principal& who, rate_class rate, std::function<void()> next) {
  std::shared_lock lock(limiter_mutex_);
  if (stopped_) return shutting_down(ex);
  if (limiter_ == nullptr || rate == rate_class::none || ex->forwarded) return next();
  limiter_->check(who.id, rate == rate_class::write ? ratelimit::route_class::write : ratelimit::route_class::read,
                  [this, ex, next = std::move(next)](ratelimit::decision d) {
                    ex->extra_headers.emplace_back("RateLimit-Policy", std::move(d.policy));
                    ex->extra_headers.emplace_back("RateLimit", std::move(d.header));
                    // A check still pending at shutdown must not start work nobody can answer.
                    if (stopped_) return shutting_down(ex);
                    if (d.allowed) return guarded(ex, next);
                    support_.fail(ex, http_problem(429, "rate_limited", "Too many requests",
                                                   "this API key sent more requests than its limit; retry after " +
                                                       std::to_string(d.retry_after_s) + " s",
                                                   std::max<std::int64_t>(1, d.retry_after_s)));
                  });
}

void pipeline::stop() {
  std::unique_lock lock(limiter_mutex_);
  stopped_ = true;
  limiter_ = nullptr;
}

void pipeline::ping_redis(std::function<void(bool ok, std::string detail)> done) {
  std::shared_lock lock(limiter_mutex_);
  if (limiter_ == nullptr) {
    lock.unlock();
    return done(true, {});
  }
  limiter_->ping(std::move(done));
}

std::optional<ratelimit::limiter::stats> pipeline::limiter_stats() {
  std::shared_lock lock(limiter_mutex_);
  if (limiter_ == nullptr) return std::nullopt;
  return limiter_->snapshot();
}

}  // namespace api
