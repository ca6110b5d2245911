#pragma once

// Webhook endpoints behind the facade (actors/ledger_service.hpp): made, listed, changed (URL,
// event types, signing secret) and deleted, and their deliveries listed and retried, on the reader
// pool. Making one, or giving it another URL, judges the URL's host first and refuses it when the
// host does not resolve or any address is not one deliveries may go to (ledger/webhooks.hpp). The
// lookup runs on a pool of its own (events::destination_judge), and the reader that writes the
// endpoint waits for it at most k_lookup_wait; at most k_lookups_max registrations wait at once, so
// slow names hold at most that many of the readers every other read shares, for a bounded time.
// Delivery itself is events/webhooks.*.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "actors/commands.hpp"
#include "actors/query_result.hpp"
#include "actors/reader_pool.hpp"
#include "actors/views.hpp"
#include "config/settings.hpp"

namespace events {
class destination_judge;
}

namespace actors {

class webhook_endpoints {
 public:
  // Registrations judging their hosts at once (and the lookup pool's threads); one more is
  // answered 503 server_busy.
  static constexpr int k_lookups_max = 2;
  // How long a registration waits for its host's addresses before it is refused.
  static constexpr std::chrono::milliseconds k_lookup_wait{5'000};

  webhook_endpoints(const config::settings& settings, std::shared_ptr<reader_pool> readers);
  ~webhook_endpoints();
  webhook_endpoints(const webhook_endpoints&) = delete;
  webhook_endpoints& operator=(const webhook_endpoints&) = delete;

  void create(request_origin origin, webhook_endpoint_request request, query_callback<webhook_create_view> done);
  // `owner`: that principal's endpoints; nullopt: everyone's (an operator).
  void list(std::optional<ledger::principal_id> owner, std::int64_t after, int limit,
            query_callback<std::vector<webhook_endpoint_view>> done);
  // nullopt: no such live endpoint (of `owner`).
  void find(std::int64_t id, std::optional<ledger::principal_id> owner,
            query_callback<std::optional<webhook_endpoint_view>> done);
  // False: no such live endpoint (of `owner`).
  void remove(request_origin origin, std::int64_t id, std::optional<ledger::principal_id> owner,
              query_callback<bool> done);
  // Disables (`enabled` false, for `reason`) or enables a live endpoint of `owner`; the endpoint as
  // it is now. nullopt: no such live endpoint.
  void set_enabled(request_origin origin, std::int64_t id, std::optional<ledger::principal_id> owner, bool enabled,
                   std::string reason, query_callback<std::optional<webhook_endpoint_view>> done);
  // Replaces the endpoint's signing secret by `new_secret`; the one replaced goes on signing for
  // `previous_valid_s` seconds (0: not at all). With `replay`, the answer is kept under its key.
  void rotate_secret(request_origin origin, std::int64_t id, std::optional<ledger::principal_id> owner,
                     std::optional<webhook_replay_ticket> replay, std::string new_secret, std::int64_t previous_valid_s,
                     query_callback<webhook_rotate_view> done);
  // Changes the endpoint's URL (its host judged as at registration) and/or event types.
  void update(request_origin origin, std::int64_t id, std::optional<ledger::principal_id> owner,
              webhook_endpoint_change change, query_callback<webhook_update_view> done);
  // nullopt: no such live endpoint (of `owner`).
  void deliveries(std::int64_t endpoint_id, std::optional<ledger::principal_id> owner, std::int64_t after, int limit,
                  query_callback<std::optional<webhook_deliveries_view>> done);
  void retry(request_origin origin, std::int64_t endpoint_id, std::int64_t delivery_id,
             query_callback<webhook_retry_view> done);

 private:
  const config::settings& settings_;
  std::shared_ptr<reader_pool> readers_;
  // Shared with the readers' jobs, which may outlive this object at shutdown.
  std::shared_ptr<events::destination_judge> judge_;
};

}  // namespace actors
