// POST /v1/deposits: an operator credits a user account from the clearing account of its
// currency. Idempotent by the Idempotency-Key; answered after COMMIT.

#include <boost/json/serialize.hpp>

#include "http/crypto.hpp"
#include "http/handlers/handlers.hpp"

namespace api::handlers {
namespace {

constexpr std::size_t k_external_ref_max = 255;

void deposit(handler_support& s, const exchange_ptr& ex, const principal& who) {
  auto key = s.idempotency_key(ex);
  if (!key) return;
  auto object = s.body(ex);
  if (!object) return;
  field_reader f(*object);
  f.allow_only({"accountId", "amount", "externalRef"});
  actors::deposit_command cmd;
  cmd.account = f.id("accountId");
  cmd.amount = f.amount("amount", s.settings.ledger.amount_minor_max);
  auto external_ref = f.optional_string("externalRef", k_external_ref_max);
  if (!f.ok()) return s.invalid(ex, f.error());
  cmd.principal = who.id;
  cmd.idempotency_key = *key;
  cmd.request_id = ex->request_id;
  if (external_ref) {
    boost::json::object meta;
    meta["externalRef"] = *external_ref;
    cmd.metadata_json = boost::json::serialize(meta);
  }
  cmd.request_hash = sha256_hex("deposit\n" + std::to_string(cmd.account) + "\n" + std::to_string(cmd.amount) + "\n" +
                                external_ref.value_or(""));
  s.service.deposit(std::move(cmd), [&s, ex, who](actors::money_result r) { s.answer_money(ex, who, r); });
}

}  // namespace

void add_deposit_routes(router& r, handler_support& s) {
  r.add({"POST", "/v1/deposits", access::operator_, rate_class::write, param_kind::integer, true,
         [&s](const exchange_ptr& ex, const principal& who, const path_params&) { deposit(s, ex, who); }});
}

}  // namespace api::handlers
