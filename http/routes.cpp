#include "http/routes.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <spdlog/spdlog.h>

#include <charconv>
#include <shared_mutex>
#include <sstream>
#include <vector>

#include "http/crypto.hpp"
#include "http/json_input.hpp"
#include "http/token_buckets.hpp"
#include "http/url.hpp"
#include "ratelimit/limiter.hpp"

namespace api {
namespace {

using principal = persistence::principal_record;
namespace json = boost::json;

json::object account_json(const persistence::account_record& a, ledger::amount_minor reserved = 0) {
  json::object o;
  o["id"] = a.id;
  if (a.owner_id) {
    o["ownerId"] = *a.owner_id;
  } else {
    o["ownerId"] = nullptr;
  }
  o["currency"] = a.currency;
  o["kind"] = std::string(ledger::to_string(a.kind));
  o["status"] = std::string(ledger::to_string(a.status));
  const auto total = a.total_balance();
  o["balance"] = std::to_string(total);
  // Available: the committed balance less the debits its actor has in flight.
  o["available"] = std::to_string(total - std::min(reserved, total));
  o["hot"] = a.hot();
  if (a.hot()) {
    o["mainBalance"] = std::to_string(a.balance);
    json::array shards;
    for (const auto& s : a.shards) {
      json::object so;
      so["id"] = s.id;
      so["shardNo"] = s.shard_no;
      so["balance"] = std::to_string(s.balance);
      shards.push_back(std::move(so));
    }
    o["shards"] = std::move(shards);
  }
  if (a.parent_id != 0) o["parentId"] = a.parent_id;
  o["createdAt"] = a.created_at;
  return o;
}

// `show_balance`: false for an entry of another principal's account (a payer must not learn the
// payee's balance, nor a depositor the clearing account's, which is all the money issued).
json::object entry_json(const persistence::entry_record& e, bool show_balance = true) {
  json::object o;
  o["id"] = e.id;
  o["transactionId"] = e.transaction_id;
  o["accountId"] = e.account_id;
  o["currency"] = e.currency;
  o["amount"] = std::to_string(e.amount);
  if (show_balance) o["balanceAfter"] = std::to_string(e.balance_after);
  o["createdAt"] = e.created_at;
  return o;
}

reply json_reply(int status, const json::object& body) {
  reply r;
  r.status = status;
  r.body = json::serialize(body);
  return r;
}

// Client addresses and principals tracked by the in-process guards at most.
constexpr std::size_t k_guarded_keys_max = 100'000;

// The name of a reconciliation check in answers: the flag that says it passed.
std::string_view check_json_name(persistence::reconcile_check check) {
  switch (check) {
    case persistence::reconcile_check::currency_zero_sum: return "zeroSumPerCurrency";
    case persistence::reconcile_check::transaction_zero_sum: return "transactionsBalanced";
    case persistence::reconcile_check::account_cache: return "cachesMatchEntries";
    case persistence::reconcile_check::balance_after: return "balanceAfterMatchesEntries";
    case persistence::reconcile_check::negative_balance: return "noDisallowedNegatives";
    case persistence::reconcile_check::entry_account: return "entriesReferenceAccounts";
    case persistence::reconcile_check::checkpoint: return "checkpointsMatchEntries";
  }
  return "unknown";
}

// A reconciliation run: what it covered, each check's flag (null when not made), what it found.
json::object reconciliation_run_json(const persistence::reconcile_run& run) {
  auto text_or_null = [](const std::string& s) -> json::value { return s.empty() ? json::value(nullptr) : json::value(s); };
  auto int_or_null = [](const std::optional<std::int64_t>& v) -> json::value {
    return v ? json::value(*v) : json::value(nullptr);
  };
  json::object o;
  o["runId"] = run.id;
  o["kind"] = std::string(persistence::to_string(run.kind));
  o["status"] = run.status;
  o["phase"] = text_or_null(run.phase);
  o["requestedBy"] = run.requested_by;
  o["startedAt"] = run.started_at;
  o["finishedAt"] = text_or_null(run.finished_at);
  o["fromEntryId"] = int_or_null(run.from_entry_id);
  o["throughEntryId"] = int_or_null(run.through_entry_id);
  o["ok"] = run.ok ? json::value(*run.ok) : json::value(nullptr);
  for (auto check : persistence::k_reconcile_checks) {
    const auto passed = run.passed(check);
    o[check_json_name(check)] = passed ? json::value(*passed) : json::value(nullptr);
  }
  json::array findings;
  for (const auto& f : run.findings) {
    json::object fo;
    fo["check"] = check_json_name(f.check);
    if (f.account_id) fo["accountId"] = *f.account_id;
    if (!f.transaction_id.empty()) fo["transactionId"] = f.transaction_id;
    if (!f.currency.empty()) fo["currency"] = f.currency;
    if (f.entry_id) fo["entryId"] = *f.entry_id;
    fo["detail"] = f.detail;
    findings.push_back(std::move(fo));
  }
  o["findings"] = std::move(findings);
  o["accountsChecked"] = run.accounts_checked;
  o["entriesChecked"] = run.entries_checked;
  o["transactionsChecked"] = run.transactions_checked;
  o["durationMs"] = run.duration_ms;
  o["error"] = text_or_null(run.error);
  return o;
}

enum class route_id {
  healthz, readyz, metrics_page, create_principal, create_account, get_account, list_entries, make_hot, freeze,
  unfreeze, deposit, transfer, get_transaction, reconciliation, start_reconciliation, reconciliation_run, sweep
};

struct match {
  route_id id;
  std::string label;
  std::int64_t path_id = 0;
  std::string path_text;
};

}  // namespace

struct routes::impl {
  const config::settings& settings;
  actors::ledger_service& service;
  ratelimit::limiter* limiter;
  metrics& stats;

  // Guards `limiter` against routes::stop(), after which it is gone.
  std::shared_mutex limiter_mutex;
  std::atomic<bool> stopped{false};

  // Requests whose API key needs a database read (unknown, or not yet cached), per client
  // address: checked before the read, so a flood of bad keys cannot take the readers.
  token_buckets unauthenticated;
  // Lookups of accounts that turned out not to exist (or not to be the caller's), per principal.
  token_buckets unknown_accounts;

  impl(const config::settings& s, actors::ledger_service& svc, ratelimit::limiter* l, metrics& m)
      : settings(s),
        service(svc),
        limiter(l),
        stats(m),
        unauthenticated(s.auth.unauthenticated_per_second, s.auth.unauthenticated_burst, k_guarded_keys_max),
        unknown_accounts(s.auth.unknown_accounts_per_second, s.auth.unknown_accounts_burst, k_guarded_keys_max) {}

  void fail(const exchange_ptr& ex, const problem& p) { ex->respond(problem_reply(p, ex->request_id)); }
  void fail(const exchange_ptr& ex, ledger::error_code code, std::string detail, std::int64_t retry_after_s = 0) {
    fail(ex, problem_for(code, std::move(detail), retry_after_s));
  }
  void invalid(const exchange_ptr& ex, std::string detail) {
    fail(ex, ledger::error_code::invalid_request, std::move(detail));
  }

  // Routing: the path decides the route; a known path with another method is 405.
  std::optional<match> route(const exchange_ptr& ex, std::string& allowed) {
    const auto parts = split_path(ex->path);
    const std::string& m = ex->method;
    auto want = [&](std::string_view method, route_id id, std::string label, std::int64_t path_id = 0,
                    std::string path_text = {}) -> std::optional<match> {
      allowed = std::string(method);
      if (m != method) return std::nullopt;
      return match{id, std::move(label), path_id, std::move(path_text)};
    };
    if (parts.size() == 1 && parts[0] == "healthz") return want("GET", route_id::healthz, "/healthz");
    if (parts.size() == 1 && parts[0] == "readyz") return want("GET", route_id::readyz, "/readyz");
    if (parts.size() == 1 && parts[0] == "metrics") return want("GET", route_id::metrics_page, "/metrics");
    if (parts.empty() || parts[0] != "v1") return std::nullopt;
    if (parts.size() == 2 && parts[1] == "principals") return want("POST", route_id::create_principal, "/v1/principals");
    if (parts.size() == 2 && parts[1] == "accounts") return want("POST", route_id::create_account, "/v1/accounts");
    if (parts.size() == 2 && parts[1] == "deposits") return want("POST", route_id::deposit, "/v1/deposits");
    if (parts.size() == 2 && parts[1] == "transfers") return want("POST", route_id::transfer, "/v1/transfers");
    if (parts.size() == 3 && parts[1] == "admin" && parts[2] == "reconciliation") {
      auto found = m == "POST" ? want("POST", route_id::start_reconciliation, "/v1/admin/reconciliation")
                               : want("GET", route_id::reconciliation, "/v1/admin/reconciliation");
      allowed = "GET, POST";
      return found;
    }
    if (parts.size() == 5 && parts[1] == "admin" && parts[2] == "reconciliation" && parts[3] == "runs") {
      return want("GET", route_id::reconciliation_run, "/v1/admin/reconciliation/runs/{id}",
                  parse_id(parts[4]).value_or(0));
    }
    if (parts.size() == 3 && parts[1] == "admin" && parts[2] == "sweeps") {
      return want("POST", route_id::sweep, "/v1/admin/sweeps");
    }
    if (parts.size() == 3 && parts[1] == "transactions") {
      return want("GET", route_id::get_transaction, "/v1/transactions/{id}", 0, std::string(parts[2]));
    }
    if (parts.size() >= 3 && parts[1] == "accounts") {
      auto id = parse_id(parts[2]);
      if (!id) return std::nullopt;
      if (parts.size() == 3) return want("GET", route_id::get_account, "/v1/accounts/{id}", *id);
      if (parts.size() == 4 && parts[3] == "entries") {
        return want("GET", route_id::list_entries, "/v1/accounts/{id}/entries", *id);
      }
      if (parts.size() == 4 && parts[3] == "hot") return want("POST", route_id::make_hot, "/v1/accounts/{id}/hot", *id);
      if (parts.size() == 4 && parts[3] == "freeze") return want("POST", route_id::freeze, "/v1/accounts/{id}/freeze", *id);
      if (parts.size() == 4 && parts[3] == "unfreeze") {
        return want("POST", route_id::unfreeze, "/v1/accounts/{id}/unfreeze", *id);
      }
    }
    return std::nullopt;
  }

  void handle(const exchange_ptr& ex) {
    std::string allowed;
    auto found = route(ex, allowed);
    if (!found) {
      if (!allowed.empty()) {
        auto r = problem_reply(http_problem(405, "method_not_allowed", "Method not allowed",
                                            ex->method + " is not allowed on " + ex->path + "; use " + allowed),
                               ex->request_id);
        r.headers.emplace_back("Allow", allowed);
        return ex->respond(std::move(r));
      }
      return fail(ex, http_problem(404, "route_not_found", "Not found", "no route for " + ex->method + " " + ex->path));
    }
    ex->route = found->label;
    switch (found->id) {
      case route_id::healthz: {
        json::object o;
        o["status"] = "ok";
        return ex->respond(json_reply(200, o));
      }
      case route_id::readyz: return readyz(ex);
      case route_id::metrics_page: return metrics_page(ex);
      default: break;
    }
    if (stats.inflight_requests.load() > settings.admission.inflight_requests_max) {
      return fail(ex, ledger::error_code::server_busy, "the server is at its limit of requests in flight",
                  ledger::k_retry_after_default_s);
    }
    authenticate(ex, [this, ex, m = *found](const principal& who) {
      const bool write = m.id == route_id::deposit || m.id == route_id::transfer;
      rate_limit(ex, who, write, [this, ex, m, who] { dispatch(ex, m, who); });
    });
  }

  void authenticate(const exchange_ptr& ex, std::function<void(const principal&)> next) {
    constexpr std::string_view scheme = "Bearer ";
    const std::string& h = ex->authorization;
    const bool has_key = h.size() > scheme.size() && h.compare(0, scheme.size(), scheme) == 0;
    const std::string key_hash = has_key ? sha256_hex(h.substr(scheme.size())) : std::string();
    if (has_key) {
      if (auto known = service.cached_principal(key_hash)) {
        ex->principal_id = known->id;
        return next(*known);
      }
    }
    // Not a key this server knows: it costs a database read at most, and only within the
    // client address's allowance.
    if (!unauthenticated.take(ex->client_address)) {
      ++stats.unauthenticated_refused;
      return fail(ex, http_problem(429, "rate_limited", "Too many requests",
                                   "too many requests without a valid API key from this address; retry after " +
                                       std::to_string(unauthenticated.retry_after_s(ex->client_address)) + " s",
                                   unauthenticated.retry_after_s(ex->client_address)));
    }
    if (!has_key) {
      auto r = problem_reply(problem_for(ledger::error_code::unauthorized,
                                         "send an API key as \"Authorization: Bearer <key>\""),
                             ex->request_id);
      r.headers.emplace_back("WWW-Authenticate", "Bearer");
      return ex->respond(std::move(r));
    }
    service.authenticate(key_hash, [this, ex, next = std::move(next)](
                                       actors::query_result<std::optional<principal>> r) {
      if (r.outcome != ledger::error_code::ok) return fail(ex, r.outcome, r.detail, ledger::k_retry_after_default_s);
      if (!r.value) {
        auto reply = problem_reply(problem_for(ledger::error_code::unauthorized, "the API key is not known"),
                                   ex->request_id);
        reply.headers.emplace_back("WWW-Authenticate", "Bearer error=\"invalid_token\"");
        return ex->respond(std::move(reply));
      }
      ex->principal_id = r.value->id;
      next(*r.value);
    });
  }

  // Whether the principal may still name accounts this server has to look up; a principal that
  // named too many accounts that do not exist (or are not its own) waits.
  bool within_lookup_allowance(const exchange_ptr& ex, const principal& who) {
    const std::string key = std::to_string(who.id);
    if (unknown_accounts.has_token(key)) return true;
    ++stats.unknown_account_refused;
    const auto retry = unknown_accounts.retry_after_s(key);
    fail(ex, http_problem(429, "rate_limited", "Too many requests",
                          "too many requests named accounts that do not exist or are not yours; retry after " +
                              std::to_string(retry) + " s",
                          retry));
    return false;
  }

  void count_unknown_account(const principal& who) { unknown_accounts.take(std::to_string(who.id)); }

  void rate_limit(const exchange_ptr& ex, const principal& who, bool write, std::function<void()> next) {
    std::shared_lock lock(limiter_mutex);
    if (stopped) return fail(ex, ledger::error_code::server_busy, "the server is shutting down; retry later",
                  ledger::k_retry_after_default_s);
    if (limiter == nullptr) return next();
    limiter->check(who.id, write ? ratelimit::route_class::write : ratelimit::route_class::read,
                   [this, ex, next = std::move(next)](ratelimit::decision d) {
                     ex->extra_headers.emplace_back("RateLimit-Policy", d.policy);
                     ex->extra_headers.emplace_back("RateLimit", d.header);
                     // A check still pending at shutdown must not start work nobody can answer.
                     if (stopped) {
                       return fail(ex, ledger::error_code::server_busy, "the server is shutting down; retry later",
                  ledger::k_retry_after_default_s);
                     }
                     if (d.allowed) return next();
                     auto p = http_problem(429, "rate_limited", "Too many requests",
                                           "this API key sent more requests than its limit; retry after " +
                                               std::to_string(d.retry_after_s) + " s",
                                           std::max<std::int64_t>(1, d.retry_after_s));
                     ex->respond(problem_reply(p, ex->request_id));
                   });
  }

  bool require_operator(const exchange_ptr& ex, const principal& who) {
    if (who.role == ledger::role::operator_role) return true;
    fail(ex, ledger::error_code::forbidden, "this operation needs an operator key");
    return false;
  }

  // JSON body of a POST: the media type and a strict parse.
  std::optional<json_fields> body(const exchange_ptr& ex) {
    std::string_view type = ex->content_type;
    type = type.substr(0, type.find(';'));
    while (!type.empty() && type.back() == ' ') type.remove_suffix(1);
    if (type != "application/json") {
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

  std::optional<std::string> idempotency_key(const exchange_ptr& ex) {
    if (!ex->has_idempotency_key) {
      invalid(ex, "the Idempotency-Key header is required on this request (1 to 255 printable ASCII characters)");
      return std::nullopt;
    }
    if (!is_valid_idempotency_key(ex->idempotency_key)) {
      invalid(ex, "the Idempotency-Key header must be 1 to 255 printable ASCII characters without spaces");
      return std::nullopt;
    }
    return ex->idempotency_key;
  }

  void dispatch(const exchange_ptr& ex, const match& m, const principal& who) {
    switch (m.id) {
      case route_id::get_account:
      case route_id::list_entries:
      case route_id::deposit:
      case route_id::transfer:
        if (!within_lookup_allowance(ex, who)) return;
        break;
      default: break;
    }
    switch (m.id) {
      case route_id::create_principal: return create_principal(ex, who);
      case route_id::create_account: return create_account(ex, who);
      case route_id::get_account: return get_account(ex, who, m.path_id);
      case route_id::list_entries: return list_entries(ex, who, m.path_id);
      case route_id::make_hot: return make_hot(ex, who, m.path_id);
      case route_id::freeze: return set_status(ex, who, m.path_id, ledger::account_status::frozen);
      case route_id::unfreeze: return set_status(ex, who, m.path_id, ledger::account_status::active);
      case route_id::deposit: return deposit(ex, who);
      case route_id::transfer: return transfer(ex, who);
      case route_id::get_transaction: return get_transaction(ex, who, m.path_text);
      case route_id::reconciliation: return reconciliation(ex, who);
      case route_id::start_reconciliation: return start_reconciliation(ex, who);
      case route_id::reconciliation_run: return reconciliation_run(ex, who, m.path_id);
      case route_id::sweep: return sweep(ex, who);
      default: return fail(ex, ledger::error_code::internal, "unrouted request");
    }
  }

  // Readiness is answered from a health state refreshed at most every `http.readyz_refresh_ms`
  // while it is good, and by at most one probe at a time while it is not: whatever the rate of
  // /readyz, a flood of probes cannot take the readers that payments need. Callers that arrive
  // while the state is stale wait for the probe in flight (at most `k_readyz_waiters_max` of
  // them; more get the last state at once).
  void readyz(const exchange_ptr& ex) {
    const auto now = std::chrono::steady_clock::now();
    bool start_probe = false;
    {
      std::lock_guard lock(health.mutex);
      const bool ready = health.database_ok && health.redis_ok;
      const bool fresh =
          health.known && ready && now - health.at < std::chrono::milliseconds(settings.http.readyz_refresh_ms);
      if (fresh || (health.known && health.waiters.size() >= k_readyz_waiters_max)) {
        return ex->respond(health_reply(health, ex->request_id));
      }
      health.waiters.push_back(ex);
      if (!health.probing) start_probe = health.probing = true;
    }
    if (start_probe) probe_health();
  }

  struct health_state {
    std::mutex mutex;
    bool known = false;
    bool probing = false;
    std::chrono::steady_clock::time_point at;
    bool database_ok = false;
    bool redis_ok = false;
    std::string database_detail;
    std::string redis_detail;
    std::vector<exchange_ptr> waiters;
  };
  static constexpr std::size_t k_readyz_waiters_max = 1'000;
  health_state health;

  static reply health_reply(const health_state& h, std::string_view request_id) {
    if (h.database_ok && h.redis_ok) {
      json::object o;
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

  void probe_health() {
    struct probe {
      std::mutex mutex;
      int pending = 2;
      bool database_ok = false;
      bool redis_ok = true;
      std::string database_detail;
      std::string redis_detail;
    };
    auto p = std::make_shared<probe>();
    auto finish = [this, p] {
      {
        std::lock_guard lock(p->mutex);
        if (--p->pending > 0) return;
      }
      std::vector<exchange_ptr> waiters;
      {
        std::lock_guard lock(health.mutex);
        health.known = true;
        health.probing = false;
        health.at = std::chrono::steady_clock::now();
        health.database_ok = p->database_ok;
        health.redis_ok = p->redis_ok;
        health.database_detail = p->database_detail;
        health.redis_detail = p->redis_detail;
        waiters.swap(health.waiters);
      }
      for (const auto& w : waiters) {
        std::lock_guard lock(health.mutex);
        w->respond(health_reply(health, w->request_id));
      }
    };
    service.ping_database([p, finish](actors::query_result<bool> r) {
      {
        std::lock_guard lock(p->mutex);
        p->database_ok = r.outcome == ledger::error_code::ok && r.value;
        p->database_detail = r.detail.empty() ? "does not answer" : r.detail;
      }
      finish();
    });
    std::shared_lock lock(limiter_mutex);
    if (limiter == nullptr) {
      lock.unlock();
      return finish();
    }
    limiter->ping([p, finish](bool ok, std::string detail) {
      {
        std::lock_guard lock(p->mutex);
        p->redis_ok = ok;
        p->redis_detail = detail.empty() ? "does not answer" : detail;
      }
      finish();
    });
  }

  void metrics_page(const exchange_ptr& ex) {
    const auto s = service.stats();
    std::ostringstream out;
    auto gauge = [&](const char* name, const char* help, const char* type, auto value) {
      out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n' << name << ' ' << value
          << '\n';
    };
    gauge("wallet_account_actors_live", "Live account actors.", "gauge", s.live_account_actors);
    gauge("wallet_writer_postings_queued", "Postings queued at ledger writers.", "gauge", s.writer_queued);
    gauge("wallet_writer_batches_total", "Batches committed by ledger writers.", "counter", s.batches);
    gauge("wallet_writer_postings_total", "Postings processed by ledger writers.", "counter", s.postings);
    gauge("wallet_writer_failures_total", "Batches that failed as a whole.", "counter", s.writer_failures);
    gauge("wallet_writers_connected", "1 when every ledger writer has a database connection.", "gauge",
          s.writers_connected ? 1 : 0);
    gauge("wallet_reader_jobs_queued", "Database reads waiting for a connection.", "gauge", s.reader_queued);
    gauge("wallet_reader_jobs_total", "Database reads asked for since the start.", "counter", s.reader_jobs);
    gauge("wallet_preloaded_api_keys", "API keys loaded into the key cache at start.", "gauge", s.preloaded_keys);
    gauge("wallet_preloaded_accounts", "Accounts loaded into the account directory at start.", "gauge",
          s.preloaded_accounts);
    gauge("wallet_sweeps_total", "Sweep transactions committed.", "counter", s.sweeps_committed);
    gauge("wallet_sweeps_deferred_total",
          "Hot accounts a sweeper tick skipped: a sweep of it in flight, or its writer at the queue bound.", "counter",
          s.sweeps_deferred);
    gauge("wallet_sweeper_ticks_total", "Sweeper ticks.", "counter", s.sweeper_ticks);
    gauge("wallet_unknown_keys_cached", "Unknown API keys answered 401 without a database read.", "gauge",
          s.unknown_keys_cached);
    gauge("wallet_reconciliation_runs_total", "Reconciliation runs.", "counter", s.reconcile_runs);
    gauge("wallet_reconciliation_failures_total", "Reconciliation runs that found a broken invariant.", "counter",
          s.reconcile_failures);
    gauge("wallet_reconciliation_ok", "1 when the last reconciliation was clean.", "gauge", s.reconcile_last_ok ? 1 : 0);
    gauge("wallet_reconciliation_errors_total", "Reconciliation runs that ended without a verdict.", "counter",
          s.reconcile_errors);
    gauge("wallet_reconciliation_last_duration_ms", "How long the last reconciliation run took.", "gauge",
          s.reconcile_last_ms);
    gauge("wallet_reconciliation_watermark_entry_id", "The entry id the last reconciliation covers.", "gauge",
          s.reconcile_watermark);
    std::shared_lock lock(limiter_mutex);
    if (limiter != nullptr) {
      const auto l = limiter->snapshot();
      gauge("wallet_ratelimit_redis_decisions_total", "Rate-limit decisions made in Redis.", "counter", l.redis_decisions);
      gauge("wallet_ratelimit_fallback_decisions_total", "Rate-limit decisions made in process (Redis unusable).",
            "counter", l.fallback_decisions);
      gauge("wallet_ratelimit_redis_failures_total", "Failed Redis calls.", "counter", l.redis_failures);
      gauge("wallet_ratelimit_fallback_transitions_total", "Switches to the in-process limiter.", "counter",
            l.transitions_to_fallback);
      gauge("wallet_ratelimit_fallback_active", "1 while the in-process limiter decides.", "gauge",
            l.using_fallback ? 1 : 0);
    }
    reply r;
    r.status = 200;
    r.content_type = "text/plain; version=0.0.4";
    r.body = stats.render(out.str());
    ex->respond(std::move(r));
  }

  void create_principal(const exchange_ptr& ex, const principal& who) {
    if (!require_operator(ex, who)) return;
    auto object = body(ex);
    if (!object) return;
    field_reader f(*object);
    f.allow_only({"name", "role"});
    auto name = f.string("name", 200);
    auto role_text = f.string("role", 16);
    if (!f.ok()) return invalid(ex, f.error());
    auto role = ledger::parse_role(role_text);
    if (!role) return invalid(ex, "field \"role\" must be one of: user, merchant, operator");
    auto key = new_api_key();
    service.create_principal(name, *role, sha256_hex(key), [this, ex, key](actors::query_result<principal> r) {
      if (r.outcome != ledger::error_code::ok) return fail(ex, r.outcome, r.detail, ledger::k_retry_after_default_s);
      json::object o;
      o["id"] = r.value.id;
      o["name"] = r.value.name;
      o["role"] = std::string(ledger::to_string(r.value.role));
      o["apiKey"] = key;
      ex->respond(json_reply(201, o));
    });
  }

  void create_account(const exchange_ptr& ex, const principal& who) {
    auto object = body(ex);
    if (!object) return;
    field_reader f(*object);
    f.allow_only({"ownerId", "currency", "hot", "shards"});
    const auto owner = f.id("ownerId");
    const auto currency = f.string("currency", 3);
    const auto hot = f.optional_bool("hot");
    const auto shards = f.optional_int("shards", 1, settings.ledger.hot_shards_max);
    if (!f.ok()) return invalid(ex, f.error());
    if (!ledger::is_valid_currency(currency)) {
      return invalid(ex, "field \"currency\" must be three upper-case letters (ISO 4217), e.g. EUR");
    }
    if (shards && !hot.value_or(false)) return invalid(ex, "field \"shards\" needs \"hot\": true");
    const bool is_operator = who.role == ledger::role::operator_role;
    if (!is_operator && owner != who.id) {
      return fail(ex, ledger::error_code::not_found, "principal " + std::to_string(owner) + " was not found");
    }
    if (hot.value_or(false) && !is_operator) {
      return fail(ex, ledger::error_code::forbidden, "only an operator makes an account hot");
    }
    const int shard_count =
        hot.value_or(false) ? static_cast<int>(shards.value_or(settings.ledger.hot_shards_default)) : 0;
    service.create_account(owner, currency, shard_count,
                           [this, ex, owner](actors::query_result<std::optional<persistence::account_record>> r) {
                             if (r.outcome != ledger::error_code::ok) return fail(ex, r.outcome, r.detail, ledger::k_retry_after_default_s);
                             if (!r.value) {
                               return fail(ex, ledger::error_code::not_found,
                                           "principal " + std::to_string(owner) + " (ownerId) was not found");
                             }
                             ex->respond(json_reply(201, account_json(*r.value)));
                           });
  }

  // Loads an account the principal may see: its own, or any for an operator; otherwise 404.
  void visible_account(const exchange_ptr& ex, const principal& who, std::int64_t id,
                       std::function<void(const persistence::account_record&)> next) {
    service.find_account(id, [this, ex, who, id, next = std::move(next)](
                                 actors::query_result<std::optional<persistence::account_record>> r) {
      if (r.outcome != ledger::error_code::ok) return fail(ex, r.outcome, r.detail, ledger::k_retry_after_default_s);
      const bool visible = r.value && (who.role == ledger::role::operator_role ||
                                       (r.value->owner_id && *r.value->owner_id == who.id &&
                                        r.value->kind == ledger::account_kind::user));
      if (!visible) {
        count_unknown_account(who);
        return fail(ex, ledger::error_code::not_found, "account " + std::to_string(id) + " was not found");
      }
      next(*r.value);
    });
  }

  void get_account(const exchange_ptr& ex, const principal& who, std::int64_t id) {
    visible_account(ex, who, id, [this, ex, id](const persistence::account_record& a) {
      service.reserved(id, [ex, a](ledger::amount_minor reserved) { ex->respond(json_reply(200, account_json(a, reserved))); });
    });
  }

  void list_entries(const exchange_ptr& ex, const principal& who, std::int64_t id) {
    std::int64_t limit = 100;
    std::int64_t after = 0;
    if (auto text = query_param(ex->query, "limit")) {
      auto v = ledger::parse_digits(*text);
      if (!v || *v < 1 || *v > settings.ledger.entries_page_max) {
        return invalid(ex, "query parameter \"limit\" must be an integer from 1 to " +
                               std::to_string(settings.ledger.entries_page_max));
      }
      limit = *v;
    }
    if (auto text = query_param(ex->query, "after")) {
      auto v = ledger::parse_digits(*text);
      if (!v) return invalid(ex, "query parameter \"after\" must be an entry id (the \"next\" of the previous page)");
      after = *v;
    }
    visible_account(ex, who, id, [this, ex, id, after, limit](const persistence::account_record&) {
      service.list_entries(id, after, static_cast<int>(limit), [this, ex](actors::query_result<persistence::entries_page> r) {
        if (r.outcome != ledger::error_code::ok) return fail(ex, r.outcome, r.detail, ledger::k_retry_after_default_s);
        json::array entries;
        for (const auto& e : r.value.entries) entries.push_back(entry_json(e));
        json::object o;
        o["entries"] = std::move(entries);
        if (r.value.next_after) {
          o["next"] = std::to_string(*r.value.next_after);
        } else {
          o["next"] = nullptr;
        }
        ex->respond(json_reply(200, o));
      });
    });
  }

  void make_hot(const exchange_ptr& ex, const principal& who, std::int64_t id) {
    if (!require_operator(ex, who)) return;
    auto object = body(ex);
    if (!object) return;
    field_reader f(*object);
    f.allow_only({"shards"});
    auto shards = f.optional_int("shards", 1, settings.ledger.hot_shards_max);
    if (!f.ok()) return invalid(ex, f.error());
    const int count = static_cast<int>(shards.value_or(settings.ledger.hot_shards_default));
    service.make_hot(id, count, [this, ex, id](actors::query_result<std::optional<persistence::account_record>> r) {
      if (r.outcome != ledger::error_code::ok) return fail(ex, r.outcome, r.detail, ledger::k_retry_after_default_s);
      if (!r.value) return fail(ex, ledger::error_code::not_found, "account " + std::to_string(id) + " was not found");
      ex->respond(json_reply(200, account_json(*r.value)));
    });
  }

  void set_status(const exchange_ptr& ex, const principal& who, std::int64_t id, ledger::account_status status) {
    if (!require_operator(ex, who)) return;
    service.set_status(id, status, [this, ex, id](actors::query_result<std::optional<persistence::account_record>> r) {
      if (r.outcome != ledger::error_code::ok) return fail(ex, r.outcome, r.detail, ledger::k_retry_after_default_s);
      if (!r.value) return fail(ex, ledger::error_code::not_found, "account " + std::to_string(id) + " was not found");
      ex->respond(json_reply(200, account_json(*r.value)));
    });
  }

  void answer_money(const exchange_ptr& ex, const principal& who, const actors::money_result& r) {
    if (r.outcome == ledger::error_code::not_found) count_unknown_account(who);
    if (r.outcome != ledger::error_code::ok) return fail(ex, r.outcome, r.detail, r.retry_after_s);
    reply out;
    out.status = r.status;
    out.body = r.body;
    if (r.replayed) out.headers.emplace_back("Idempotent-Replayed", "true");
    ex->respond(std::move(out));
  }

  void deposit(const exchange_ptr& ex, const principal& who) {
    if (!require_operator(ex, who)) return;
    auto key = idempotency_key(ex);
    if (!key) return;
    auto object = body(ex);
    if (!object) return;
    field_reader f(*object);
    f.allow_only({"accountId", "amount", "externalRef"});
    actors::deposit_command cmd;
    cmd.account = f.id("accountId");
    cmd.amount = f.amount("amount", settings.ledger.amount_minor_max);
    auto external_ref = f.optional_string("externalRef", 255);
    if (!f.ok()) return invalid(ex, f.error());
    cmd.principal = who.id;
    cmd.idempotency_key = *key;
    cmd.request_id = ex->request_id;
    if (external_ref) {
      json::object meta;
      meta["externalRef"] = *external_ref;
      cmd.metadata_json = json::serialize(meta);
    }
    cmd.request_hash = sha256_hex("deposit\n" + std::to_string(cmd.account) + "\n" + std::to_string(cmd.amount) +
                                  "\n" + external_ref.value_or(""));
    service.deposit(std::move(cmd), [this, ex, who](actors::money_result r) { answer_money(ex, who, r); });
  }

  void transfer(const exchange_ptr& ex, const principal& who) {
    auto key = idempotency_key(ex);
    if (!key) return;
    auto object = body(ex);
    if (!object) return;
    field_reader f(*object);
    f.allow_only({"fromAccountId", "toAccountId", "amount"});
    actors::transfer_command cmd;
    cmd.from = f.id("fromAccountId");
    cmd.to = f.id("toAccountId");
    cmd.amount = f.amount("amount", settings.ledger.amount_minor_max);
    if (!f.ok()) return invalid(ex, f.error());
    if (cmd.from == cmd.to) return fail(ex, ledger::error_code::same_account, "an account cannot pay itself");
    cmd.principal = who.id;
    cmd.idempotency_key = *key;
    cmd.request_id = ex->request_id;
    cmd.request_hash = sha256_hex("transfer\n" + std::to_string(cmd.from) + "\n" + std::to_string(cmd.to) + "\n" +
                                  std::to_string(cmd.amount));
    service.transfer(std::move(cmd), [this, ex, who](actors::money_result r) { answer_money(ex, who, r); });
  }

  void get_transaction(const exchange_ptr& ex, const principal& who, const std::string& id) {
    if (!is_valid_uuid(id)) {
      return fail(ex, ledger::error_code::not_found, "transaction " + id + " was not found");
    }
    service.find_transaction(id, [this, ex, who, id](actors::query_result<std::optional<persistence::transaction_record>> r) {
      if (r.outcome != ledger::error_code::ok) return fail(ex, r.outcome, r.detail, ledger::k_retry_after_default_s);
      bool visible = r.value && who.role == ledger::role::operator_role;
      if (r.value && !visible) {
        visible = r.value->principal_id && *r.value->principal_id == who.id;
        for (const auto& e : r.value->entries) visible = visible || (e.account_owner && *e.account_owner == who.id);
      }
      if (!visible) return fail(ex, ledger::error_code::not_found, "transaction " + id + " was not found");
      const auto& t = *r.value;
      json::object o;
      o["id"] = t.id;
      o["type"] = t.type;
      o["status"] = t.status;
      o["createdAt"] = t.created_at;
      if (t.principal_id) o["principalId"] = *t.principal_id;
      const bool is_operator = who.role == ledger::role::operator_role;
      json::array entries;
      for (const auto& e : t.entries) {
        entries.push_back(entry_json(e, is_operator || (e.account_owner && *e.account_owner == who.id)));
      }
      o["entries"] = std::move(entries);
      ex->respond(json_reply(200, o));
    });
  }

  // The latest run with a verdict (no request scans the ledger: runs happen on the reconciler).
  void reconciliation(const exchange_ptr& ex, const principal& who) {
    if (!require_operator(ex, who)) return;
    service.latest_reconciliation([this, ex](actors::query_result<actors::reconciliation_status> r) {
      if (r.outcome != ledger::error_code::ok) return fail(ex, r.outcome, r.detail, ledger::k_retry_after_default_s);
      if (!r.value.latest) {
        return fail(ex, ledger::error_code::not_found,
                    "no reconciliation run has finished yet; start one with POST /v1/admin/reconciliation");
      }
      auto o = reconciliation_run_json(*r.value.latest);
      o["runningRunId"] = r.value.running_run_id ? json::value(*r.value.running_run_id) : json::value(nullptr);
      ex->respond(json_reply(200, o));
    });
  }

  // Starts a run ({"full": true} for a full one; an empty body is an incremental one), or names
  // the run in progress: 202 either way, with the run to poll.
  void start_reconciliation(const exchange_ptr& ex, const principal& who) {
    if (!require_operator(ex, who)) return;
    bool full = false;
    if (!ex->body.empty()) {
      auto object = body(ex);
      if (!object) return;
      field_reader f(*object);
      f.allow_only({"full"});
      const auto requested = f.optional_bool("full");
      if (!f.ok()) return invalid(ex, f.error());
      full = requested.value_or(false);
    }
    service.start_reconciliation(full, "operator " + std::to_string(who.id),
                                 [this, ex](actors::query_result<persistence::run_claim> r) {
                                   if (r.outcome != ledger::error_code::ok) return fail(ex, r.outcome, r.detail, ledger::k_retry_after_default_s);
                                   const auto& claim = r.value;
                                   json::object o;
                                   o["runId"] = claim.run_id;
                                   o["status"] = "running";
                                   o["kind"] = std::string(persistence::to_string(claim.kind));
                                   o["started"] = claim.started;
                                   const auto location = "/v1/admin/reconciliation/runs/" + std::to_string(claim.run_id);
                                   o["location"] = location;
                                   auto reply = json_reply(202, o);
                                   reply.headers.emplace_back("Location", location);
                                   ex->respond(std::move(reply));
                                 });
  }

  void reconciliation_run(const exchange_ptr& ex, const principal& who, std::int64_t id) {
    if (!require_operator(ex, who)) return;
    const std::string not_found = "reconciliation run " + ex->path.substr(ex->path.rfind('/') + 1) + " was not found";
    if (id <= 0) return fail(ex, ledger::error_code::not_found, not_found);
    service.find_reconciliation_run(id, [this, ex, not_found](
                                            actors::query_result<std::optional<persistence::reconcile_run>> r) {
      if (r.outcome != ledger::error_code::ok) return fail(ex, r.outcome, r.detail, ledger::k_retry_after_default_s);
      if (!r.value) return fail(ex, ledger::error_code::not_found, not_found);
      ex->respond(json_reply(200, reconciliation_run_json(*r.value)));
    });
  }

  void sweep(const exchange_ptr& ex, const principal& who) {
    if (!require_operator(ex, who)) return;
    service.sweep_now([this, ex](actors::query_result<int> r) {
      if (r.outcome != ledger::error_code::ok) return fail(ex, r.outcome, r.detail, ledger::k_retry_after_default_s);
      json::object o;
      o["sweeps"] = r.value;
      ex->respond(json_reply(200, o));
    });
  }
};

routes::routes(const config::settings& settings, actors::ledger_service& service, ratelimit::limiter* limiter,
               metrics& m)
    : impl_(std::make_unique<impl>(settings, service, limiter, m)) {}

routes::~routes() = default;

void routes::stop() {
  std::unique_lock lock(impl_->limiter_mutex);
  impl_->stopped = true;
  impl_->limiter = nullptr;
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
