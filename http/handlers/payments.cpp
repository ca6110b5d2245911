// Merchant flows (docs/money-flows.md): an operator sets the fee schedule of the payments an
// account receives (PUT /v1/accounts/{id}/fees), and the owner of a payment's payee, or an
// operator, refunds it in part or in full (POST /v1/transfers/{id}/refunds; idempotent by the
// Idempotency-Key, answered after COMMIT).

#include "http/crypto.hpp"
#include "http/handlers/handlers.hpp"
#include "http/presenters.hpp"
#include "http/url.hpp"

namespace api::handlers {
namespace {

// {"feeBps": 0..10000, "feeFixed": minor units >= 0 (a JSON integer or a string of digits)}.
void set_fees(handler_support& s, const exchange_ptr& ex, const principal& who, ledger::account_id id) {
  auto object = s.body(ex);
  if (!object) return;
  field_reader f(*object);
  f.allow_only({"feeBps", "feeFixed"});
  if (object->find("feeBps") == nullptr || object->find("feeFixed") == nullptr) {
    return s.invalid(ex, "fields \"feeBps\" and \"feeFixed\" are required");
  }
  ledger::fee_schedule schedule;
  schedule.bps = static_cast<std::int32_t>(f.integer("feeBps", 0, ledger::fee_bps_max));
  // A fixed fee may be zero, which amount() refuses: zero is read here, every other value by it.
  const json_scalar* fixed = object->find("feeFixed");
  const bool zero = (fixed->type == json_scalar::kind::integer && fixed->integer == 0) ||
                    (fixed->type == json_scalar::kind::string && fixed->text == "0");
  if (!zero) schedule.fixed = f.amount("feeFixed", s.settings.ledger.amount_minor_max);
  if (!f.ok()) return s.invalid(ex, f.error());
  s.service.set_fees({who.id, ex->request_id}, id, schedule,
                     [&s, ex, id](actors::query_result<std::optional<actors::account_view>> r) {
                       if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
                       if (!r.value) {
                         return s.fail(ex, ledger::error_code::not_found,
                                       "account " + std::to_string(id) + " was not found");
                       }
                       ex->respond(json_reply(200, account_json(*r.value)));
                     });
}

// A refund of payment `id`: {"amount"?}; the amount defaults to all that is left of the payment.
void refund(handler_support& s, const exchange_ptr& ex, const principal& who, const std::string& text) {
  // One spelling of the id (the journal's, lower case) for the writer's refund totals and the hash.
  const auto id = canonical_uuid(text);
  actors::payment_refund_command cmd;
  if (!open_amount_command(s, ex, who, id, "transfer " + text + " was not found", cmd)) return;
  cmd.transfer_id = id;
  cmd.request_hash = sha256_hex("transfer_refund\n" + id + "\n" + (cmd.amount ? std::to_string(*cmd.amount) : "rest"));
  s.service.refund_payment(std::move(cmd),
                           [&s, ex, by = who.id](actors::money_result r) { s.answer_money(ex, by, std::move(r)); });
}

}  // namespace

void add_payment_routes(router& r, handler_support& s) {
  r.add({"PUT", "/v1/accounts/{id}/fees", access::operator_, rate_class::read, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { set_fees(s, ex, who, p.id); }});
  r.add({"POST", "/v1/transfers/{id}/refunds", access::principal, rate_class::write, param_kind::text, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { refund(s, ex, who, p.text); }});
}

}  // namespace api::handlers
