#pragma once

// Webhook endpoints behind the facade (actors/ledger_service.hpp): made, listed and deleted, and
// their deliveries listed and retried, on the reader pool. Making one resolves its host there (a
// blocking lookup, on a reader thread, never an I/O one) and refuses it when any address is not
// one deliveries may go to (ledger/webhooks.hpp). Delivery itself is events/webhooks.*.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "actors/commands.hpp"
#include "actors/query_result.hpp"
#include "actors/reader_pool.hpp"
#include "actors/views.hpp"
#include "config/settings.hpp"

namespace actors {

// Why deliveries may not go to `host`: it does not resolve, or one of its addresses is not allowed
// (loopback ones only with `allow_loopback`). nullopt: it may. Blocks on the resolver.
std::optional<std::string> refused_destination(const std::string& host, std::uint16_t port, bool allow_loopback);

class webhook_endpoints {
 public:
  webhook_endpoints(const config::settings& settings, std::shared_ptr<reader_pool> readers);

  void create(request_origin origin, webhook_endpoint_request request, query_callback<webhook_create_view> done);
  // `owner`: that principal's endpoints; nullopt: everyone's (an operator).
  void list(std::optional<ledger::principal_id> owner, std::int64_t after, int limit,
            query_callback<std::vector<webhook_endpoint_view>> done);
  // False: no such live endpoint (of `owner`).
  void remove(request_origin origin, std::int64_t id, std::optional<ledger::principal_id> owner,
              query_callback<bool> done);
  // nullopt: no such live endpoint (of `owner`).
  void deliveries(std::int64_t endpoint_id, std::optional<ledger::principal_id> owner, std::int64_t after, int limit,
                  query_callback<std::optional<webhook_deliveries_view>> done);
  void retry(request_origin origin, std::int64_t endpoint_id, std::int64_t delivery_id,
             query_callback<webhook_retry_view> done);

 private:
  const config::settings& settings_;
  std::shared_ptr<reader_pool> readers_;
};

}  // namespace actors
