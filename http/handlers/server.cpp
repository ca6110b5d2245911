// What describes the server itself, open to anyone without an API key: liveness (/healthz),
// readiness (/readyz: PostgreSQL and Redis answer), the Prometheus page (/metrics) and the API
// document (/v1/openapi.json).

#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "http/handlers/handlers.hpp"
#include "http/openapi.hpp"
#include "http/presenters.hpp"

namespace api::handlers {
namespace {

// Readiness is answered from a health state refreshed at most every `http.readyz_refresh_ms`
// while it is good, and by at most one probe at a time while it is not: whatever the rate of
// /readyz, a flood of probes cannot take the readers that payments need. Callers that arrive
// while the state is stale wait for the probe in flight (at most `k_waiters_max` of them; more
// get the last state at once).
class readiness {
 public:
  readiness(handler_support& s, pipeline& p) : support_(s), pipeline_(p) {}

  void handle(const exchange_ptr& ex) {
    if (support_.stats.shutting_down.load()) {
      return ex->respond(problem_reply(problem_for(ledger::error_code::server_busy,
                                                   "not ready: the server is shutting down; send requests elsewhere",
                                                   ledger::k_retry_after_default_s),
                                       ex->request_id));
    }
    const auto now = std::chrono::steady_clock::now();
    bool start_probe = false;
    {
      std::lock_guard lock(mutex_);
      const bool ready = state_.database_ok && state_.redis_ok;
      const bool fresh =
          known_ && ready && now - at_ < std::chrono::milliseconds(support_.settings.http.readyz_refresh_ms);
      if (fresh || (known_ && waiters_.size() >= k_waiters_max)) return ex->respond(answer(state_, ex->request_id));
      waiters_.push_back(ex);
      if (!probing_) start_probe = probing_ = true;
    }
    if (start_probe) probe();
  }

 private:
  static constexpr std::size_t k_waiters_max = 1'000;

  struct state {
    bool database_ok = false;
    bool redis_ok = true;
    std::string database_detail;
    std::string redis_detail;
  };

  static reply answer(const state& h, std::string_view request_id) {
    if (h.database_ok && h.redis_ok) {
      boost::json::object o;
      o["status"] = "ready";
      o["database"] = "ok";
      o["redis"] = "ok";
      return json_reply(200, o);
    }
    std::string failed;
    if (!h.database_ok) failed = "database (PostgreSQL): " + h.database_detail;
    if (!h.redis_ok) failed += std::string(failed.empty() ? "" : "; ") + "redis: " + h.redis_detail;
    problem pr = http_problem(503, h.database_ok ? "redis_unavailable" : "database_unavailable", "Not ready",
                              "not ready: " + failed, ledger::k_retry_after_default_s);
    return problem_reply(pr, request_id);
  }

  // Asks PostgreSQL and Redis at once; the last answer publishes the state and answers the waiters.
  void probe() {
    struct probe_state {
      std::mutex mutex;
      int pending = 2;
      state result;
    };
    auto p = std::make_shared<probe_state>();
    auto finish = [this, p] {
      {
        std::lock_guard lock(p->mutex);
        if (--p->pending > 0) return;
      }
      std::vector<exchange_ptr> waiters;
      state published;
      {
        std::lock_guard lock(mutex_);
        known_ = true;
        probing_ = false;
        at_ = std::chrono::steady_clock::now();
        state_ = p->result;
        published = state_;
        waiters.swap(waiters_);
      }
      for (const auto& w : waiters) w->respond(answer(published, w->request_id));
    };
    support_.service.ping_database([p, finish](actors::query_result<bool> r) {
      {
        std::lock_guard lock(p->mutex);
        p->result.database_ok = r.outcome == ledger::error_code::ok && r.value;
        p->result.database_detail = r.detail.empty() ? "does not answer" : r.detail;
      }
      finish();
    });
    pipeline_.ping_redis([p, finish](bool ok, std::string detail) {
      {
        std::lock_guard lock(p->mutex);
        p->result.redis_ok = ok;
        p->result.redis_detail = detail.empty() ? "does not answer" : detail;
      }
      finish();
    });
  }

  handler_support& support_;
  pipeline& pipeline_;
  std::mutex mutex_;
  bool known_ = false;
  bool probing_ = false;
  std::chrono::steady_clock::time_point at_;
  state state_;
  std::vector<exchange_ptr> waiters_;
};

}  // namespace

void add_server_routes(router& r, handler_support& s, pipeline& p) {
  r.add({"GET", "/healthz", access::open, rate_class::none, param_kind::integer, false,
         [](const exchange_ptr& ex, const principal&, const path_params&) {
           boost::json::object o;
           o["status"] = "ok";
           ex->respond(json_reply(200, o));
         }});
  auto ready = std::make_shared<readiness>(s, p);
  r.add({"GET", "/readyz", access::open, rate_class::none, param_kind::integer, false,
         [ready](const exchange_ptr& ex, const principal&, const path_params&) { ready->handle(ex); }});
  r.add({"GET", "/metrics", access::open, rate_class::none, param_kind::integer, false,
         [&s, &p](const exchange_ptr& ex, const principal&, const path_params&) {
           reply out;
           out.status = 200;
           out.content_type = "text/plain; version=0.0.4";
           out.body = s.stats.render_page(s.service.stats(), p.limiter_stats());
           ex->respond(std::move(out));
         }});
  // The API's own description (docs/openapi.json, compiled in).
  r.add({"GET", "/v1/openapi.json", access::open, rate_class::none, param_kind::integer, false,
         [](const exchange_ptr& ex, const principal&, const path_params&) {
           reply out;
           out.status = 200;
           out.body = std::string(openapi_document());
           ex->respond(std::move(out));
         }});
}

}  // namespace api::handlers
