// Webhook endpoints (docs/events.md, "Webhooks"): a principal registers URLs that receive its
// events, signed like provider events; lists, changes (URL, event types) and deletes them; rotates
// their signing secrets; and reads each one's deliveries. An operator sees, changes and deletes
// every endpoint, and makes a FAILED delivery PENDING again. An endpoint whose delivery was given
// up is disabled; its owner or an operator enables it again (and may disable it, to pause
// deliveries). Another principal's endpoint is not found. A signing secret is shown once, in the
// answer that made it (the 201 of the endpoint, or the 200 of a rotation).

#include <boost/json.hpp>

#include "http/crypto.hpp"
#include "http/handlers/handlers.hpp"
#include "http/presenters.hpp"
#include "http/url.hpp"
#include "ledger/webhooks.hpp"

namespace api::handlers {
namespace {

namespace json = boost::json;

constexpr std::int64_t k_page_max = 100;
constexpr std::size_t k_event_types_max = 16;
constexpr std::size_t k_event_type_length_max = 40;

json::value text_or_null(const std::string& s) { return s.empty() ? json::value(nullptr) : json::value(s); }

json::object endpoint_json(const actors::webhook_endpoint_view& e) {
  json::object o;
  o["id"] = e.id;
  o["ownerId"] = e.owner_id;
  o["accountId"] = e.account_id ? json::value(*e.account_id) : json::value(nullptr);
  o["url"] = e.url;
  json::array types;
  for (const auto& t : e.event_types) types.emplace_back(t);
  o["events"] = std::move(types);
  o["createdAt"] = e.created_at;
  o["status"] = e.disabled_at.empty() ? "ENABLED" : "DISABLED";
  o["disabledAt"] = text_or_null(e.disabled_at);
  o["disabledReason"] = text_or_null(e.disabled_reason);
  o["secretRotatedAt"] = text_or_null(e.secret_rotated_at);
  o["previousSecretExpiresAt"] = text_or_null(e.previous_secret_expires_at);
  return o;
}

// The answer's body of a request that shows the endpoint with its new signing secret (registration,
// rotation), as kept under the request's Idempotency-Key.
std::function<std::string(const actors::webhook_endpoint_view&)> with_secret(std::string secret) {
  return [secret = std::move(secret)](const actors::webhook_endpoint_view& e) {
    auto o = endpoint_json(e);
    o["signingSecret"] = secret;
    return json::serialize(o);
  };
}

json::object delivery_json(const actors::webhook_delivery_view& d) {
  json::object o;
  o["id"] = d.id;
  o["endpointId"] = d.endpoint_id;
  o["eventId"] = d.event_id;
  o["eventType"] = d.event_type;
  o["cursor"] = std::to_string(d.event_cursor);
  o["status"] = d.status;
  o["attempts"] = d.attempts;
  o["lastStatusCode"] = d.last_status_code ? json::value(*d.last_status_code) : json::value(nullptr);
  o["lastError"] = text_or_null(d.last_error);
  o["nextAttemptAt"] = text_or_null(d.next_attempt_at);
  o["lastAttemptAt"] = text_or_null(d.last_attempt_at);
  o["completedAt"] = text_or_null(d.completed_at);
  o["createdAt"] = d.created_at;
  return o;
}

std::optional<ledger::principal_id> owner_filter(const principal& who) {
  if (who.role == ledger::role::operator_role) return std::nullopt;
  return who.id;
}

void endpoint_not_found(handler_support& s, const exchange_ptr& ex, std::int64_t id) {
  s.fail(ex, ledger::error_code::not_found, "webhook endpoint " + std::to_string(id) + " was not found");
}

// `after` and `limit` of a list; false: answered already.
bool read_page(handler_support& s, const exchange_ptr& ex, std::int64_t& after, std::int64_t& limit,
               const char* after_names) {
  limit = k_page_max;
  after = 0;
  if (auto text = query_param(ex->query, "limit")) {
    auto v = ledger::parse_digits(*text);
    if (!v || *v < 1 || *v > k_page_max) {
      s.invalid(ex, "query parameter \"limit\" must be an integer from 1 to " + std::to_string(k_page_max));
      return false;
    }
    limit = *v;
  }
  if (auto text = query_param(ex->query, "after")) {
    auto v = ledger::parse_digits(*text);
    if (!v) {
      s.invalid(
          ex, std::string("query parameter \"after\" must be ") + after_names + " (the \"next\" of the previous page)");
      return false;
    }
    after = *v;
  }
  return true;
}

// The body of POST /v1/webhook-endpoints: {"url", "events": [...], "accountId"?}; of PATCH
// /v1/webhook-endpoints/{id} (`change`): {"url"?, "events"?, "accountId"?}, one of them at least
// (an accountId of null there: every account again). The flat parser of other bodies takes no
// arrays, so this one is read here, as strictly.
struct endpoint_body {
  std::string url;
  std::vector<std::string> events;
  std::optional<ledger::account_id> account;
  bool url_given = false;
  bool events_given = false;
  bool account_given = false;
};

std::variant<endpoint_body, std::string> parse_endpoint_body(std::string_view text, bool change = false) {
  json::parse_options options;
  options.max_depth = 3;
  json::error_code ec;
  json::monotonic_resource memory;
  const auto value = json::parse(text, ec, &memory, options);
  if (ec) return std::string("the request body is not valid JSON");
  if (auto twice = duplicate_key(text)) return "field \"" + *twice + "\" appears more than once in one object";
  const auto* object = value.if_object();
  if (object == nullptr) return std::string("the request body must be a JSON object");
  endpoint_body out;
  for (const auto& [key, v] : *object) {
    if (key == "url") {
      if (!v.is_string()) return std::string("field \"url\" must be a string");
      out.url = std::string(v.get_string());
      out.url_given = true;
    } else if (key == "events") {
      if (!v.is_array()) return std::string("field \"events\" must be an array of event types, or [\"*\"]");
      const auto& types = v.get_array();
      out.events_given = true;
      if (types.size() > k_event_types_max) {
        return "field \"events\" names more than " + std::to_string(k_event_types_max) + " event types";
      }
      for (const auto& t : types) {
        if (!t.is_string() || t.get_string().size() > k_event_type_length_max) {
          return std::string("field \"events\" must hold event type names (strings)");
        }
        out.events.emplace_back(t.get_string());
      }
    } else if (key == "accountId") {
      out.account_given = true;
      if (v.is_null()) continue;
      std::optional<std::int64_t> id;
      if (v.is_int64() && v.get_int64() > 0) id = v.get_int64();
      if (v.is_string()) id = parse_id(v.get_string());
      if (!id) return std::string("field \"accountId\" must be an account id (1 to 19 digits)");
      out.account = *id;
    } else {
      return "unknown field \"" + std::string(key).substr(0, 40) + "\"; allowed fields: url, events, accountId";
    }
  }
  if (change) {
    if (out.url_given && out.url.empty()) return std::string("field \"url\" must not be empty");
    if (!out.url_given && !out.events_given && !out.account_given) {
      return std::string("nothing to change: give \"url\", \"events\", \"accountId\" or several of them");
    }
    return out;
  }
  if (out.url.empty()) return std::string("field \"url\" is required: the http:// or https:// URL to POST events to");
  if (!out.events_given) return std::string("field \"events\" is required: event types, or [\"*\"]");
  return out;
}

void refuse_url(handler_support& s, const exchange_ptr& ex, std::string detail) {
  s.fail(ex, http_problem(400, "webhook_url_refused", "Webhook URL refused", std::move(detail)));
}

void create_endpoint(handler_support& s, const exchange_ptr& ex, const principal& who) {
  if (!is_json_media_type(ex->content_type)) {
    return s.fail(ex, http_problem(415, "unsupported_media_type", "Unsupported media type",
                                   "send the body as Content-Type: application/json"));
  }
  auto parsed = parse_endpoint_body(ex->body);
  if (auto* why = std::get_if<std::string>(&parsed)) return s.invalid(ex, *why);
  auto body = std::get<endpoint_body>(std::move(parsed));
  const auto url = ledger::parse_webhook_url(body.url);
  if (auto* why = std::get_if<std::string>(&url)) return s.invalid(ex, "field \"url\": " + *why);
  std::string why;
  auto types = ledger::check_event_types(body.events, why);
  if (!types) return s.invalid(ex, "field " + why);

  actors::webhook_endpoint_request request;
  request.owner = who.id;
  request.all_accounts = who.role == ledger::role::operator_role;
  request.url = body.url;
  request.event_types = std::move(*types);
  request.signing_secret = new_signing_secret();
  if (ex->has_idempotency_key) {
    const auto key = s.idempotency_key(ex);
    if (!key) return;
    std::string hashed = "webhook_endpoint.create\n" + body.url + "\n";
    for (const auto& t : request.event_types) hashed += t + ",";
    hashed += "\n" + (body.account ? std::to_string(*body.account) : std::string("any"));
    request.replay = actors::webhook_replay_ticket{*key, sha256_hex(hashed), with_secret(request.signing_secret)};
  }
  auto make = [&s, ex, who](actors::webhook_endpoint_request r) {
    const auto secret = r.signing_secret;
    s.service.create_webhook_endpoint({who.id, ex->request_id}, std::move(r),
                                      [&s, ex, secret](actors::query_result<actors::webhook_create_view> res) {
                                        if (res.outcome != ledger::error_code::ok)
                                          return s.unavailable(ex, res.outcome, res.detail);
                                        if (res.value.replayed) return s.answer_replayed(ex, *res.value.replayed);
                                        switch (res.value.outcome) {
                                          case actors::webhook_create_outcome::created: break;
                                          case actors::webhook_create_outcome::destination_refused:
                                            return refuse_url(s, ex, res.value.detail);
                                          case actors::webhook_create_outcome::too_many_endpoints:
                                            return s.fail(ex, ledger::error_code::conflict, res.value.detail);
                                        }
                                        auto o = endpoint_json(res.value.endpoint);
                                        o["signingSecret"] = secret;
                                        ex->respond(json_reply(201, o));
                                      });
  };
  if (!body.account) return make(std::move(request));
  // An account that is not the caller's is not found, as everywhere. Events name a hot account's
  // shards as the account itself, so a shard (which only an operator may name) means its account.
  s.visible_account(ex, who, *body.account, [make, request](const actors::account_view& a) mutable {
    request.account = a.parent_id != 0 ? a.parent_id : a.id;
    make(std::move(request));
  });
}

// {"url"?, "events"?, "accountId"?}: what is not given stays.
void update_endpoint(handler_support& s, const exchange_ptr& ex, const principal& who, std::int64_t id) {
  if (!is_json_media_type(ex->content_type)) {
    return s.fail(ex, http_problem(415, "unsupported_media_type", "Unsupported media type",
                                   "send the body as Content-Type: application/json"));
  }
  auto parsed = parse_endpoint_body(ex->body, true);
  if (auto* why = std::get_if<std::string>(&parsed)) return s.invalid(ex, *why);
  auto body = std::get<endpoint_body>(std::move(parsed));
  actors::webhook_endpoint_change change;
  if (body.url_given) {
    const auto url = ledger::parse_webhook_url(body.url);
    if (auto* why = std::get_if<std::string>(&url)) return s.invalid(ex, "field \"url\": " + *why);
    change.url = std::move(body.url);
  }
  if (body.events_given) {
    std::string why;
    auto types = ledger::check_event_types(body.events, why);
    if (!types) return s.invalid(ex, "field " + why);
    change.event_types = std::move(*types);
  }
  auto update = [&s, ex, who, id](actors::webhook_endpoint_change c) {
    s.service.update_webhook_endpoint({who.id, ex->request_id}, id, owner_filter(who), std::move(c),
                                      [&s, ex, id](actors::query_result<actors::webhook_update_view> r) {
                                        if (r.outcome != ledger::error_code::ok)
                                          return s.unavailable(ex, r.outcome, r.detail);
                                        switch (r.value.outcome) {
                                          case actors::webhook_update_outcome::updated: break;
                                          case actors::webhook_update_outcome::not_found:
                                            return endpoint_not_found(s, ex, id);
                                          case actors::webhook_update_outcome::destination_refused:
                                            return refuse_url(s, ex, r.value.detail);
                                          case actors::webhook_update_outcome::account_not_owners:
                                            return s.invalid(ex, r.value.detail);
                                        }
                                        ex->respond(json_reply(200, endpoint_json(r.value.endpoint)));
                                      });
  };
  if (!body.account_given) return update(std::move(change));
  if (!body.account) {
    change.account = std::optional<ledger::account_id>{};
    return update(std::move(change));
  }
  // As at registration: an account that is not the caller's is not found, and a hot account's shard
  // means its account.
  s.visible_account(ex, who, *body.account, [update, change](const actors::account_view& a) mutable {
    change.account = std::optional<ledger::account_id>{a.parent_id != 0 ? a.parent_id : a.id};
    update(std::move(change));
  });
}

// {"previousSecretExpiresInSeconds"?}; an empty body is allowed. The new secret is shown once, here.
// With an Idempotency-Key, the new secret's answer is kept: a retry gets it again.
void rotate_secret(handler_support& s, const exchange_ptr& ex, const principal& who, std::int64_t id) {
  const auto previous_valid_s = previous_secret_window(s, ex);
  if (!previous_valid_s) return;
  auto secret = new_signing_secret();
  std::optional<actors::webhook_replay_ticket> replay;
  if (ex->has_idempotency_key) {
    const auto key = s.idempotency_key(ex);
    if (!key) return;
    replay = actors::webhook_replay_ticket{
        *key,
        sha256_hex("webhook_endpoint.rotate_secret\n" + std::to_string(id) + "\n" + std::to_string(*previous_valid_s)),
        with_secret(secret)};
  }
  s.service.rotate_webhook_secret({who.id, ex->request_id}, id, owner_filter(who), secret, *previous_valid_s,
                                  std::move(replay),
                                  [&s, ex, id, secret](actors::query_result<actors::webhook_rotate_view> r) {
                                    if (r.outcome != ledger::error_code::ok)
                                      return s.unavailable(ex, r.outcome, r.detail);
                                    if (r.value.replayed) return s.answer_replayed(ex, *r.value.replayed);
                                    if (!r.value.endpoint) return endpoint_not_found(s, ex, id);
                                    auto o = endpoint_json(*r.value.endpoint);
                                    o["signingSecret"] = secret;
                                    ex->respond(json_reply(200, o));
                                  });
}

void list_endpoints(handler_support& s, const exchange_ptr& ex, const principal& who) {
  std::int64_t after = 0, limit = 0;
  if (!read_page(s, ex, after, limit, "an endpoint id")) return;
  s.service.list_webhook_endpoints(owner_filter(who), after, static_cast<int>(limit),
                                   [&s, ex, limit](actors::query_result<std::vector<actors::webhook_endpoint_view>> r) {
                                     if (r.outcome != ledger::error_code::ok)
                                       return s.unavailable(ex, r.outcome, r.detail);
                                     json::array endpoints;
                                     for (const auto& e : r.value) endpoints.push_back(endpoint_json(e));
                                     json::object o;
                                     const bool full = static_cast<std::int64_t>(r.value.size()) == limit;
                                     o["endpoints"] = std::move(endpoints);
                                     o["next"] =
                                         full ? json::value(std::to_string(r.value.back().id)) : json::value(nullptr);
                                     ex->respond(json_reply(200, o));
                                   });
}

void get_endpoint(handler_support& s, const exchange_ptr& ex, const principal& who, std::int64_t id) {
  s.service.find_webhook_endpoint(id, owner_filter(who),
                                  [&s, ex, id](actors::query_result<std::optional<actors::webhook_endpoint_view>> r) {
                                    if (r.outcome != ledger::error_code::ok)
                                      return s.unavailable(ex, r.outcome, r.detail);
                                    if (!r.value) return endpoint_not_found(s, ex, id);
                                    ex->respond(json_reply(200, endpoint_json(*r.value)));
                                  });
}

void delete_endpoint(handler_support& s, const exchange_ptr& ex, const principal& who, std::int64_t id) {
  s.service.delete_webhook_endpoint({who.id, ex->request_id}, id, owner_filter(who),
                                    [&s, ex, id](actors::query_result<bool> r) {
                                      if (r.outcome != ledger::error_code::ok)
                                        return s.unavailable(ex, r.outcome, r.detail);
                                      if (!r.value) return endpoint_not_found(s, ex, id);
                                      json::object o;
                                      o["id"] = id;
                                      o["deleted"] = true;
                                      ex->respond(json_reply(200, o));
                                    });
}

void set_enabled(handler_support& s, const exchange_ptr& ex, const principal& who, std::int64_t id, bool enabled) {
  const auto reason = "disabled on request of principal " + std::to_string(who.id);
  s.service.set_webhook_endpoint_enabled(
      {who.id, ex->request_id}, id, owner_filter(who), enabled, reason,
      [&s, ex, id](actors::query_result<std::optional<actors::webhook_endpoint_view>> r) {
        if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
        if (!r.value) return endpoint_not_found(s, ex, id);
        ex->respond(json_reply(200, endpoint_json(*r.value)));
      });
}

void list_deliveries(handler_support& s, const exchange_ptr& ex, const principal& who, std::int64_t id) {
  std::int64_t after = 0, limit = 0;
  if (!read_page(s, ex, after, limit, "a delivery id")) return;
  s.service.list_webhook_deliveries(
      id, owner_filter(who), after, static_cast<int>(limit),
      [&s, ex, id](actors::query_result<std::optional<actors::webhook_deliveries_view>> r) {
        if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
        if (!r.value) return endpoint_not_found(s, ex, id);
        json::array deliveries;
        for (const auto& d : r.value->deliveries) deliveries.push_back(delivery_json(d));
        json::object o;
        o["deliveries"] = std::move(deliveries);
        o["next"] = r.value->next_after ? json::value(std::to_string(*r.value->next_after)) : json::value(nullptr);
        ex->respond(json_reply(200, o));
      });
}

void retry_delivery(handler_support& s, const exchange_ptr& ex, const principal& who, std::int64_t id,
                    std::int64_t delivery_id) {
  s.service.retry_webhook_delivery(
      {who.id, ex->request_id}, id, delivery_id,
      [&s, ex, id, delivery_id](actors::query_result<actors::webhook_retry_view> r) {
        if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
        switch (r.value.outcome) {
          case actors::webhook_retry_outcome::retried: break;
          case actors::webhook_retry_outcome::no_delivery:
            return s.fail(ex, ledger::error_code::not_found,
                          "delivery " + std::to_string(delivery_id) + " of webhook endpoint " + std::to_string(id) +
                              " was not found");
          case actors::webhook_retry_outcome::not_failed:
            return s.fail(ex, http_problem(409, "delivery_not_failed", "Delivery not failed",
                                           "delivery " + std::to_string(delivery_id) + " is " +
                                               r.value.delivery.status + ": only a FAILED delivery is retried"));
        }
        ex->respond(json_reply(200, delivery_json(r.value.delivery)));
      });
}

}  // namespace

void add_webhook_routes(router& r, handler_support& s) {
  r.add({"POST", "/v1/webhook-endpoints", access::principal, rate_class::read, param_kind::integer, true,
         [&s](const exchange_ptr& ex, const principal& who, const path_params&) { create_endpoint(s, ex, who); }});
  r.add({"GET", "/v1/webhook-endpoints", access::principal, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params&) { list_endpoints(s, ex, who); }});
  r.add({"DELETE", "/v1/webhook-endpoints/{id}", access::principal, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           delete_endpoint(s, ex, who, p.id);
         }});
  r.add({"GET", "/v1/webhook-endpoints/{id}", access::principal, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { get_endpoint(s, ex, who, p.id); }});
  r.add({"PATCH", "/v1/webhook-endpoints/{id}", access::principal, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           update_endpoint(s, ex, who, p.id);
         }});
  r.add({"POST", "/v1/webhook-endpoints/{id}/rotate-secret", access::principal, rate_class::read, param_kind::integer,
         false, [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           rotate_secret(s, ex, who, p.id);
         }});
  r.add({"POST", "/v1/webhook-endpoints/{id}/disable", access::principal, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           set_enabled(s, ex, who, p.id, false);
         }});
  r.add({"POST", "/v1/webhook-endpoints/{id}/enable", access::principal, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           set_enabled(s, ex, who, p.id, true);
         }});
  r.add({"GET", "/v1/webhook-endpoints/{id}/deliveries", access::principal, rate_class::read, param_kind::integer,
         false, [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           list_deliveries(s, ex, who, p.id);
         }});
  r.add({"POST", "/v1/webhook-endpoints/{id}/deliveries/{deliveryId}/retry", access::operator_, rate_class::read,
         param_kind::integer, false, [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           retry_delivery(s, ex, who, p.id, p.second_id);
         }});
}

}  // namespace api::handlers
