#include "actors/webhook_endpoints.hpp"

#include <boost/json.hpp>
#include <pqxx/pqxx>
#include <variant>

#include "actors/keys_audit.hpp"
#include "actors/replays.hpp"
#include "events/name_lookup.hpp"
#include "ledger/webhooks.hpp"
#include "persistence/webhooks.hpp"

namespace actors {
namespace {

webhook_endpoint_view to_endpoint_view(const persistence::webhook_endpoint_record& e) {
  return webhook_endpoint_view{e.id,
                               e.owner,
                               e.account,
                               e.url,
                               e.event_types,
                               e.created_at,
                               e.disabled_at,
                               e.disabled_reason,
                               e.secret_rotated_at,
                               e.previous_secret_expires_at};
}

// Why deliveries may not go to `url`: it is not a webhook URL, or its host does not resolve, or to
// an address they may not go to. nullopt: they may. Blocks for the lookup, at most k_lookup_wait.
std::optional<std::string> refused_destination(events::destination_judge& judge, const std::string& url,
                                               bool allow_loopback) {
  const auto parsed = ledger::parse_webhook_url(url);
  if (const auto* why = std::get_if<std::string>(&parsed)) return *why;
  return judge.refused(std::get<ledger::webhook_url>(parsed).host, allow_loopback);
}

const char* const k_judges_busy =
    "other webhook endpoints are being registered and their hosts looked up: try again shortly";

webhook_delivery_view to_delivery_view(const persistence::webhook_delivery_record& d) {
  return webhook_delivery_view{d.id,
                               d.endpoint_id,
                               d.event_cursor,
                               d.event_id,
                               d.event_type,
                               std::string(persistence::to_string(d.status)),
                               d.attempts,
                               d.last_status_code,
                               d.last_error,
                               d.next_attempt_at,
                               d.last_attempt_at,
                               d.completed_at,
                               d.created_at};
}

}  // namespace

webhook_endpoints::webhook_endpoints(const config::settings& settings, std::shared_ptr<reader_pool> readers)
    : settings_(settings),
      readers_(std::move(readers)),
      judge_(std::make_shared<events::destination_judge>(events::lookup_host, k_lookups_max, k_lookup_wait)) {}

webhook_endpoints::~webhook_endpoints() = default;

void webhook_endpoints::create(request_origin origin, webhook_endpoint_request request,
                               query_callback<webhook_create_view> done) {
  const auto allow_loopback = settings_.webhooks.allow_loopback;
  const auto live_max = settings_.webhooks.endpoints_per_owner_max;
  // The place is held until the job ends, or is dropped unrun (the reader pool refused it).
  auto judge = judge_->admit();
  if (!judge) {
    done({ledger::error_code::server_busy, k_judges_busy, {}});
    return;
  }
  readers_->read<webhook_create_view>(
      [origin = std::move(origin), request = std::move(request), allow_loopback, live_max,
       judge = std::move(judge)](pqxx::connection& conn) -> webhook_create_view {
        webhook_create_view out;
        auto guard = replay_guard<persistence::webhook_endpoint_record>(
            origin, request.replay, "webhook_endpoint.create", 201, to_endpoint_view);
        // A retry is answered from its stored answer before its URL is judged again.
        if (guard) {
          if (auto stored = persistence::find_replay(conn, guard->request)) {
            out.replayed = to_replayed(*stored);
            return out;
          }
        }
        if (auto why = refused_destination(*judge, request.url, allow_loopback)) {
          out.outcome = webhook_create_outcome::destination_refused;
          out.detail = std::move(*why);
          return out;
        }
        persistence::new_webhook_endpoint e{request.owner, request.all_accounts, request.account,
                                            request.url,   request.event_types,  request.signing_secret};
        const auto audit = audit_entry_for(origin, "webhook_endpoint.create");
        auto created = persistence::create_webhook_endpoint(conn, e, live_max, &audit, guard ? &*guard : nullptr);
        if (guard && guard->stored) {
          out.replayed = to_replayed(*guard->stored);
          return out;
        }
        if (!created) {
          out.outcome = webhook_create_outcome::too_many_endpoints;
          out.detail = "principal " + std::to_string(request.owner) + " has " + std::to_string(live_max) +
                       " webhook endpoints, the most allowed (webhooks.endpoints_per_owner_max): delete one first";
          return out;
        }
        out.endpoint = to_endpoint_view(*created);
        return out;
      },
      std::move(done));
}

void webhook_endpoints::list(std::optional<ledger::principal_id> owner, std::int64_t after, int limit,
                             query_callback<std::vector<webhook_endpoint_view>> done) {
  readers_->read<std::vector<webhook_endpoint_view>>(
      [owner, after, limit](pqxx::connection& conn) {
        std::vector<webhook_endpoint_view> out;
        for (const auto& e : persistence::list_webhook_endpoints(conn, owner, after, limit))
          out.push_back(to_endpoint_view(e));
        return out;
      },
      std::move(done));
}

void webhook_endpoints::find(std::int64_t id, std::optional<ledger::principal_id> owner,
                             query_callback<std::optional<webhook_endpoint_view>> done) {
  readers_->read<std::optional<webhook_endpoint_view>>(
      [id, owner](pqxx::connection& conn) -> std::optional<webhook_endpoint_view> {
        const auto e = persistence::find_webhook_endpoint(conn, id, owner);
        if (!e) return std::nullopt;
        return to_endpoint_view(*e);
      },
      std::move(done));
}

void webhook_endpoints::remove(request_origin origin, std::int64_t id, std::optional<ledger::principal_id> owner,
                               query_callback<bool> done) {
  readers_->read<bool>(
      [origin = std::move(origin), id, owner](pqxx::connection& conn) {
        const auto audit = audit_entry_for(origin, "webhook_endpoint.delete");
        return persistence::delete_webhook_endpoint(conn, id, owner, &audit);
      },
      std::move(done));
}

void webhook_endpoints::set_enabled(request_origin origin, std::int64_t id, std::optional<ledger::principal_id> owner,
                                    bool enabled, std::string reason,
                                    query_callback<std::optional<webhook_endpoint_view>> done) {
  readers_->read<std::optional<webhook_endpoint_view>>(
      [origin = std::move(origin), id, owner, enabled,
       reason = std::move(reason)](pqxx::connection& conn) -> std::optional<webhook_endpoint_view> {
        const auto audit = audit_entry_for(origin, enabled ? "webhook_endpoint.enable" : "webhook_endpoint.disable");
        const auto e = enabled ? persistence::enable_webhook_endpoint(conn, id, owner, &audit)
                               : persistence::disable_webhook_endpoint(conn, id, owner, reason, &audit);
        if (!e) return std::nullopt;
        return to_endpoint_view(*e);
      },
      std::move(done));
}

void webhook_endpoints::rotate_secret(request_origin origin, std::int64_t id, std::optional<ledger::principal_id> owner,
                                      std::optional<webhook_replay_ticket> replay, std::string new_secret,
                                      std::int64_t previous_valid_s, query_callback<webhook_rotate_view> done) {
  readers_->read<webhook_rotate_view>(
      [origin = std::move(origin), id, owner, replay = std::move(replay), new_secret = std::move(new_secret),
       previous_valid_s](pqxx::connection& conn) -> webhook_rotate_view {
        webhook_rotate_view out;
        auto guard = replay_guard<persistence::webhook_endpoint_record>(
            origin, replay, "webhook_endpoint.rotate_secret", 200, to_endpoint_view);
        // The detail says how long the old secret signs, never a secret.
        const auto audit =
            audit_entry_for(origin, "webhook_endpoint.rotate_secret", "",
                            R"({"previousSecretValidSeconds":)" + std::to_string(previous_valid_s) + "}");
        const auto e = persistence::rotate_webhook_secret(conn, id, owner, new_secret, previous_valid_s, &audit,
                                                          guard ? &*guard : nullptr);
        if (guard && guard->stored) {
          out.replayed = to_replayed(*guard->stored);
        } else if (e) {
          out.endpoint = to_endpoint_view(*e);
        }
        return out;
      },
      std::move(done));
}

void webhook_endpoints::update(request_origin origin, std::int64_t id, std::optional<ledger::principal_id> owner,
                               webhook_endpoint_change change, query_callback<webhook_update_view> done) {
  std::shared_ptr<events::destination_judge> judge;
  if (change.url) {
    judge = judge_->admit();
    if (!judge) {
      done({ledger::error_code::server_busy, k_judges_busy, {}});
      return;
    }
  }
  readers_->read<webhook_update_view>(
      [origin = std::move(origin), id, owner, change = std::move(change),
       allow_loopback = settings_.webhooks.allow_loopback,
       judge = std::move(judge)](pqxx::connection& conn) -> webhook_update_view {
        webhook_update_view out;
        if (change.url) {
          if (auto why = refused_destination(*judge, *change.url, allow_loopback)) {
            out.outcome = webhook_update_outcome::destination_refused;
            out.detail = std::move(*why);
            return out;
          }
        }
        boost::json::object detail;
        if (change.url) detail["url"] = *change.url;
        if (change.event_types) {
          boost::json::array types;
          for (const auto& t : *change.event_types) types.emplace_back(t);
          detail["events"] = std::move(types);
        }
        if (change.account) detail["accountId"] = *change.account ? boost::json::value(**change.account) : nullptr;
        const auto audit = audit_entry_for(origin, "webhook_endpoint.update", "", boost::json::serialize(detail));
        auto updated = persistence::update_webhook_endpoint(conn, id, owner, change.url, change.event_types,
                                                            change.account, &audit);
        switch (updated.outcome) {
          case persistence::webhook_update_result::kind::updated: break;
          case persistence::webhook_update_result::kind::not_found:
            out.outcome = webhook_update_outcome::not_found;
            return out;
          case persistence::webhook_update_result::kind::account_not_owners:
            out.outcome = webhook_update_outcome::account_not_owners;
            out.detail = "field \"accountId\": account " + std::to_string(**change.account) +
                         " is not an account of the endpoint's owner (principal " +
                         std::to_string(updated.endpoint.owner) + "): its events would never reach the endpoint";
            return out;
        }
        out.endpoint = to_endpoint_view(updated.endpoint);
        return out;
      },
      std::move(done));
}

void webhook_endpoints::deliveries(std::int64_t endpoint_id, std::optional<ledger::principal_id> owner,
                                   std::int64_t after, int limit,
                                   query_callback<std::optional<webhook_deliveries_view>> done) {
  readers_->read<std::optional<webhook_deliveries_view>>(
      [endpoint_id, owner, after, limit](pqxx::connection& conn) -> std::optional<webhook_deliveries_view> {
        auto page = persistence::list_webhook_deliveries(conn, endpoint_id, owner, after, limit);
        if (!page) return std::nullopt;
        webhook_deliveries_view out;
        for (const auto& d : page->deliveries) out.deliveries.push_back(to_delivery_view(d));
        out.next_after = page->next_after;
        return out;
      },
      std::move(done));
}

void webhook_endpoints::retry(request_origin origin, std::int64_t endpoint_id, std::int64_t delivery_id,
                              query_callback<webhook_retry_view> done) {
  readers_->read<webhook_retry_view>(
      [origin = std::move(origin), endpoint_id, delivery_id](pqxx::connection& conn) {
        const auto audit = audit_entry_for(origin, "webhook_delivery.retry");
        const auto r = persistence::retry_webhook_delivery(conn, endpoint_id, delivery_id, &audit);
        webhook_retry_view out;
        switch (r.outcome) {
          case persistence::delivery_retry_outcome::retried: out.outcome = webhook_retry_outcome::retried; break;
          case persistence::delivery_retry_outcome::no_delivery:
            out.outcome = webhook_retry_outcome::no_delivery;
            break;
          case persistence::delivery_retry_outcome::not_failed: out.outcome = webhook_retry_outcome::not_failed; break;
        }
        out.delivery = to_delivery_view(r.delivery);
        return out;
      },
      std::move(done));
}

}  // namespace actors
