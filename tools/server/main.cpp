// wallet-server: the HTTP API in front of the actor system and the ledger.

#include <spdlog/spdlog.h>

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <optional>
#include <thread>

#include "actors/ledger_service.hpp"
#include "base/allocator.hpp"
#include "config/logging.hpp"
#include "config/settings.hpp"
#include "events/relay.hpp"
#include "events/webhooks.hpp"
#include "http/crypto.hpp"
#include "http/metrics.hpp"
#include "http/problem.hpp"
#include "http/routes.hpp"
#include "http/server.hpp"
#include "persistence/migrations.hpp"
#include "ratelimit/limiter.hpp"

namespace {

// The database may still be starting (a container, a restart): try for a bounded time.
template <typename Step>
void with_retries(const char* what, int attempts_max, Step step) {
  for (int attempt = 1;; ++attempt) {
    try {
      step();
      return;
    } catch (const std::exception& e) {
      if (attempt >= attempts_max) throw;
      spdlog::warn("{} failed ({}); retrying", what, e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
}

// Every connection holds a file descriptor, and so does every database and Redis connection.
// The usual soft limit (1,024) is far below http.connections_max, so it would be the bound that
// really stops connections, at accept, without an answer. The soft limit is raised to the hard
// one (which only the administrator can raise); if even that is too low, the log says so.
void raise_open_files_limit(std::int64_t connections_max) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    const rlim_t before = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) limit.rlim_cur = before;
  }
  // Descriptors beyond the connections: database and Redis connections, the actors' sockets, logs.
  constexpr std::int64_t k_reserved = 256;
  if (limit.rlim_cur != RLIM_INFINITY && static_cast<std::int64_t>(limit.rlim_cur) < connections_max + k_reserved) {
    spdlog::warn(
        "open files limit is {}, below http.connections_max ({}) + {}: connections beyond it wait in the listen "
        "backlog; raise the hard limit (ulimit -Hn, LimitNOFILE=) or lower http.connections_max",
        static_cast<std::int64_t>(limit.rlim_cur), connections_max, k_reserved);
  }
}

}  // namespace

int main(int argc, char** argv) {
  config::load_result loaded;
  try {
    loaded = config::load(argc, argv, config::process_environment());
  } catch (const config::config_error& e) {
    std::cerr << "wallet-server: " << e.what() << "\n";
    return 2;
  }
  if (loaded.exit_now) {
    if (loaded.print_example) std::cout << config::example_toml();
    return loaded.exit_code;
  }
  const config::settings& settings = loaded.values;
  config::setup_logging(settings.log, "wallet-server");
  raise_open_files_limit(settings.http.connections_max);

  try {
    if (settings.database.migrate_on_start && !settings.database.owner_url.empty()) {
      persistence::connection_options owner;
      owner.url = settings.database.owner_url;
      owner.statement_timeout_ms = 0;
      owner.application_name = "wallet-migrate";
      with_retries("applying migrations", 20, [&] {
        for (const auto& version : persistence::apply_migrations(owner)) spdlog::info("applied migration {}", version);
      });
    }

    actors::ledger_service service(settings);
    // Cluster mode: requests other nodes forward here reach the routes once they exist.
    std::atomic<api::routes*> forwarded_to{nullptr};
    service.set_forward_handler(
        [&forwarded_to](actors::forwarded_request request, std::function<void(actors::forwarded_reply)> done) {
          if (auto* r = forwarded_to.load()) return r->serve_forwarded(std::move(request), std::move(done));
          actors::forwarded_reply busy;
          busy.delivered = true;
          busy.status = 503;
          busy.content_type = "application/problem+json";
          busy.headers.emplace_back("Retry-After", std::to_string(ledger::k_retry_after_default_s));
          busy.body = api::problem_reply(api::problem_for(ledger::error_code::server_busy,
                                                          "the node holding this account is starting; retry shortly",
                                                          ledger::k_retry_after_default_s),
                                         request.request_id)
                          .body;
          done(std::move(busy));
        });
    service.start();
    if (!settings.auth.bootstrap_key.empty()) {
      with_retries("ensuring the bootstrap operator", 20,
                   [&] { service.ensure_operator_blocking(api::sha256_hex(settings.auth.bootstrap_key)); });
    }

    // Shutdown order matters: a rate-limit check still pending when the HTTP threads stop calls
    // back into the routes, and the routes into the service. So the limiter is stopped (its
    // pending callbacks run) while the routes and the service still exist, then the service
    // (which from then on answers "shutting down"), and only then are the routes destroyed.
    std::optional<ratelimit::limiter> limiter(std::in_place, settings.redis, settings.ratelimit);
    api::metrics metrics{api::retry_calendar::options{
        .retry_after_max_s = settings.http.retry_after_max_s,
        .returns_share = static_cast<double>(settings.http.retry_returns_percent) / 100.0,
    }};
    // The outbox relay runs on its own thread and connections: payments never wait for it. It
    // stops after the HTTP server, the last reader of its metrics.
    std::optional<events::outbox_relay> relay;
    if (settings.events.enabled) {
      relay.emplace(events::relay_config_from(settings));
      relay->start();
    }
    // Webhook delivery: its own thread, connection and HTTP client (events/webhooks.hpp); like the
    // relay, it stops after the HTTP server.
    std::optional<events::webhook_dispatcher> webhooks;
    if (settings.webhooks.enabled) {
      webhooks.emplace(events::webhook_config_from(settings));
      webhooks->start();
    }
    metrics.more_series = [&relay, &webhooks] {
      return (relay ? relay->render_metrics() : std::string()) +
             (webhooks ? webhooks->render_metrics() : std::string());
    };
    api::routes routes(settings, service, &*limiter, metrics);
    api::server server(
        settings.http, metrics, [&routes](const api::exchange_ptr& ex) { routes.handle(ex); },
        [&routes](std::string_view method, std::string_view path) { return routes.limits(method, path); });
    forwarded_to = &routes;
    server.start();
    spdlog::info("wallet-server listening on http://{}:{} ({} I/O threads, {} ledger writers, {})", settings.http.host,
                 server.port(), settings.http.io_threads, settings.writer.count, base::allocator_name());
    server.run_until_stopped();
    if (webhooks) webhooks->stop();
    if (relay) relay->stop();
    forwarded_to = nullptr;
    routes.stop();
    limiter.reset();
    service.stop();
    spdlog::info("wallet-server stopped");
  } catch (const std::exception& e) {
    spdlog::critical("wallet-server failed: {}", e.what());
    return 1;
  }
  return 0;
}
