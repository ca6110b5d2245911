// POST /v1/principals: an operator creates a principal and its API key, shown once.

#include "http/crypto.hpp"
#include "http/handlers/handlers.hpp"
#include "http/presenters.hpp"

namespace api::handlers {
namespace {

constexpr std::size_t k_name_max = 200;
constexpr std::size_t k_role_max = 16;

void create_principal(handler_support& s, const exchange_ptr& ex, const principal& who) {
  auto object = s.body(ex);
  if (!object) return;
  field_reader f(*object);
  f.allow_only({"name", "role"});
  auto name = f.string("name", k_name_max);
  auto role_text = f.string("role", k_role_max);
  if (!f.ok()) return s.invalid(ex, f.error());
  auto role = ledger::parse_role(role_text);
  // A provider principal is made with its provider (POST /v1/providers), never on its own.
  if (!role || *role == ledger::role::provider) {
    return s.invalid(ex, "field \"role\" must be one of: user, merchant (operators: wallet-admin create-operator)");
  }
  // An operator who could make operators could approve its own adjustments as "another" one.
  if (*role == ledger::role::operator_role) {
    return s.fail(ex, ledger::error_code::forbidden,
                  "operators are made with wallet-admin create-operator, by whoever administers the database: an "
                  "operator cannot make another (two-person approvals need two people)");
  }
  auto key = new_api_key();
  // With the request's key: one revoked meanwhile on another server makes no principal (and key).
  s.service.create_principal({who.id, ex->request_id, ex->key_hash}, name, *role, sha256_hex(key), api_key_hint(key),
                             [&s, ex, key](actors::query_result<principal> r) {
                               if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
                               ex->respond(json_reply(201, new_principal_json(r.value, key)));
                             });
}

}  // namespace

void add_principal_routes(router& r, handler_support& s) {
  r.add({"POST", "/v1/principals", access::operator_, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params&) { create_principal(s, ex, who); }});
}

}  // namespace api::handlers
