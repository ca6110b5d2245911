// API keys of a principal (docs/keys-and-audit.md): an operator, or the principal itself, makes a
// new key (shown this once), lists the keys (never a key nor its hash: an id, the last four
// characters, when and by whom it was made and revoked) and revokes one. Another principal's keys
// are not found. A revoked key is refused by this server from the answer on, and by every other
// server within auth.key_cache_ttl_ms.

#include "http/crypto.hpp"
#include "http/handlers/handlers.hpp"
#include "http/presenters.hpp"
#include "http/url.hpp"

namespace api::handlers {
namespace {

namespace json = boost::json;

constexpr std::int64_t k_keys_page_max = 100;

json::value id_or_null(const std::optional<ledger::principal_id>& id) {
  return id ? json::value(*id) : json::value(nullptr);
}
json::value text_or_null(const std::string& s) { return s.empty() ? json::value(nullptr) : json::value(s); }

json::object key_json(const actors::api_key_view& k) {
  json::object o;
  o["keyId"] = k.id;
  o["principalId"] = k.principal_id;
  o["hint"] = text_or_null(k.hint);
  o["active"] = k.revoked_at.empty();
  o["createdAt"] = k.created_at;
  o["createdBy"] = id_or_null(k.created_by);
  o["revokedAt"] = text_or_null(k.revoked_at);
  o["revokedBy"] = id_or_null(k.revoked_by);
  return o;
}

// An operator manages every principal's keys; a principal its own. Others' are not found.
bool may_manage(const principal& who, ledger::principal_id id) {
  return who.role == ledger::role::operator_role || who.id == id;
}

void principal_not_found(handler_support& s, const exchange_ptr& ex, ledger::principal_id id) {
  s.fail(ex, ledger::error_code::not_found, "principal " + std::to_string(id) + " was not found");
}

// The problem of a key change that did not happen; nothing changed.
void refuse(handler_support& s, const exchange_ptr& ex, actors::key_change_outcome outcome, ledger::principal_id id,
            std::int64_t key_id) {
  const auto p = std::to_string(id);
  switch (outcome) {
    case actors::key_change_outcome::done: break;
    case actors::key_change_outcome::no_principal: return principal_not_found(s, ex, id);
    case actors::key_change_outcome::provider_principal:
      return s.fail(ex, ledger::error_code::conflict,
                    "principal " + p + " is a payment provider: it signs its events and has no API keys");
    case actors::key_change_outcome::another_operator:
      return s.fail(ex, ledger::error_code::forbidden,
                    "principal " + p +
                        " is another operator: only it makes its own keys (two-person approvals need two people); "
                        "a lost operator key is replaced with wallet-admin create-operator");
    case actors::key_change_outcome::too_many_keys:
      return s.fail(ex, ledger::error_code::conflict,
                    "principal " + p + " has " + std::to_string(s.settings.auth.active_keys_max) +
                        " active API keys, the most allowed (auth.active_keys_max): revoke one first");
    case actors::key_change_outcome::no_key:
      return s.fail(ex, ledger::error_code::not_found,
                    "API key " + std::to_string(key_id) + " of principal " + p + " was not found");
    case actors::key_change_outcome::last_active_key:
      return s.fail(ex, ledger::error_code::conflict,
                    "API key " + std::to_string(key_id) + " is the last active key of principal " + p +
                        ": make a new one first (POST /v1/principals/" + p + "/keys), then revoke this one");
    case actors::key_change_outcome::caller_revoked: return s.caller_revoked(ex);
  }
  s.fail(ex, ledger::error_code::internal, "unexpected outcome of a key change");
}

// The origin of a key change: who asks, and the key it asks with, which the change checks is
// still active as it commits (persistence/api_keys.hpp).
actors::request_origin origin_of(const exchange_ptr& ex, const principal& who) {
  return {who.id, ex->request_id, ex->key_hash};
}

void create_key(handler_support& s, const exchange_ptr& ex, const principal& who, ledger::principal_id id) {
  if (!may_manage(who, id)) return principal_not_found(s, ex, id);
  const auto key = new_api_key();
  s.service.create_key(origin_of(ex, who), id, sha256_hex(key), api_key_hint(key),
                       [&s, ex, id, key](actors::query_result<actors::key_change_view> r) {
                         if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
                         if (r.value.outcome != actors::key_change_outcome::done) {
                           return refuse(s, ex, r.value.outcome, id, 0);
                         }
                         auto o = key_json(r.value.key);
                         o["apiKey"] = key;
                         ex->respond(json_reply(201, o));
                       });
}

void list_keys(handler_support& s, const exchange_ptr& ex, const principal& who, ledger::principal_id id) {
  std::int64_t limit = k_keys_page_max;
  std::int64_t after = 0;
  if (auto text = query_param(ex->query, "limit")) {
    auto v = ledger::parse_digits(*text);
    if (!v || *v < 1 || *v > k_keys_page_max) {
      return s.invalid(ex, "query parameter \"limit\" must be an integer from 1 to " + std::to_string(k_keys_page_max));
    }
    limit = *v;
  }
  if (auto text = query_param(ex->query, "after")) {
    auto v = ledger::parse_digits(*text);
    if (!v) return s.invalid(ex, "query parameter \"after\" must be a key id (the \"next\" of the previous page)");
    after = *v;
  }
  if (!may_manage(who, id)) return principal_not_found(s, ex, id);
  s.service.list_keys(
      id, after, static_cast<int>(limit), [&s, ex, id](actors::query_result<std::optional<actors::api_keys_view>> r) {
        if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
        if (!r.value) return principal_not_found(s, ex, id);
        json::array keys;
        for (const auto& k : r.value->keys) keys.push_back(key_json(k));
        json::object o;
        o["keys"] = std::move(keys);
        o["next"] = r.value->next_after ? json::value(std::to_string(*r.value->next_after)) : json::value(nullptr);
        ex->respond(json_reply(200, o));
      });
}

void revoke_key(handler_support& s, const exchange_ptr& ex, const principal& who, ledger::principal_id id,
                std::int64_t key_id) {
  if (!may_manage(who, id)) return principal_not_found(s, ex, id);
  s.service.revoke_key(origin_of(ex, who), id, key_id,
                       [&s, ex, id, key_id](actors::query_result<actors::key_change_view> r) {
                         if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
                         if (r.value.outcome != actors::key_change_outcome::done) {
                           return refuse(s, ex, r.value.outcome, id, key_id);
                         }
                         ex->respond(json_reply(200, key_json(r.value.key)));
                       });
}

// Every active key of a principal at once, for an operator locking it out: one transaction, so no
// key of it made meanwhile survives. No body is read.
void revoke_all_keys(handler_support& s, const exchange_ptr& ex, const principal& who, ledger::principal_id id) {
  // As with one key, a principal does not revoke its own last key: an operator would lock itself
  // out, and the last operator everyone.
  if (id == who.id) {
    return s.fail(ex, ledger::error_code::conflict,
                  "an operator does not revoke all of its own keys: it would lock itself out; revoke them one by "
                  "one (the last stays), or ask another operator");
  }
  s.service.revoke_all_keys(origin_of(ex, who), id, [&s, ex, id](actors::query_result<actors::keys_revoked_view> r) {
    if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
    if (r.value.outcome == actors::key_change_outcome::no_principal) return principal_not_found(s, ex, id);
    if (r.value.outcome == actors::key_change_outcome::caller_revoked) return s.caller_revoked(ex);
    json::object o;
    o["principalId"] = id;
    o["revokedKeys"] = r.value.revoked;
    ex->respond(json_reply(200, o));
  });
}

}  // namespace

void add_key_routes(router& r, handler_support& s) {
  // Key changes count against the write limit, as money does: each revocation is read by every
  // server's next check for revoked keys (actors/key_revocations.hpp), so their rate is bounded.
  r.add({"POST", "/v1/principals/{id}/keys", access::principal, rate_class::write, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { create_key(s, ex, who, p.id); }});
  r.add({"GET", "/v1/principals/{id}/keys", access::principal, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { list_keys(s, ex, who, p.id); }});
  r.add({"DELETE", "/v1/principals/{id}/keys", access::operator_, rate_class::write, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           revoke_all_keys(s, ex, who, p.id);
         }});
  r.add({"DELETE", "/v1/principals/{id}/keys/{keyId}", access::principal, rate_class::write, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           revoke_key(s, ex, who, p.id, p.second_id);
         }});
}

}  // namespace api::handlers
