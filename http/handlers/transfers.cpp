// POST /v1/transfers: a principal pays from its own account into another user account.
// Idempotent by the Idempotency-Key; answered after COMMIT.

#include "http/crypto.hpp"
#include "http/handlers/handlers.hpp"

namespace api::handlers {
namespace {

void transfer(handler_support& s, const exchange_ptr& ex, const principal& who) {
  auto key = s.idempotency_key(ex);
  if (!key) return;
  auto object = s.body(ex);
  if (!object) return;
  field_reader f(*object);
  f.allow_only({"fromAccountId", "toAccountId", "amount"});
  actors::transfer_command cmd;
  cmd.from = f.id("fromAccountId");
  cmd.to = f.id("toAccountId");
  cmd.amount = f.amount("amount", s.settings.ledger.amount_minor_max);
  if (!f.ok()) return s.invalid(ex, f.error());
  if (cmd.from == cmd.to) return s.fail(ex, ledger::error_code::same_account, "an account cannot pay itself");
  cmd.principal = who.id;
  cmd.idempotency_key = *key;
  cmd.request_id = ex->request_id;
  cmd.request_hash = sha256_hex("transfer\n" + std::to_string(cmd.from) + "\n" + std::to_string(cmd.to) + "\n" +
                                std::to_string(cmd.amount));
  s.service.transfer(std::move(cmd), [&s, ex, who](actors::money_result r) { s.answer_money(ex, who, r); });
}

}  // namespace

void add_transfer_routes(router& r, handler_support& s) {
  r.add({"POST", "/v1/transfers", access::principal, rate_class::write, param_kind::integer, true,
         [&s](const exchange_ptr& ex, const principal& who, const path_params&) { transfer(s, ex, who); }});
}

}  // namespace api::handlers
