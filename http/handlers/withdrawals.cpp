// Withdrawals, in two steps: the owner requests one (its amount and fee leave the wallet at once),
// and it settles once, as PAID or FAILED, by an operator here or by the provider's event.

#include "http/crypto.hpp"
#include "http/handlers/handlers.hpp"
#include "http/presenters.hpp"
#include "http/url.hpp"

namespace api::handlers {
namespace {

constexpr std::size_t k_provider_name_max = 40;
constexpr std::size_t k_destination_max = 255;
constexpr std::size_t k_payment_id_max = 255;

void withdraw(handler_support& s, const exchange_ptr& ex, const principal& who) {
  auto key = s.idempotency_key(ex);
  if (!key) return;
  auto object = s.body(ex);
  if (!object) return;
  field_reader f(*object);
  f.allow_only({"accountId", "amount", "provider", "destination"});
  actors::withdrawal_command cmd;
  cmd.account = f.id("accountId");
  cmd.amount = f.amount("amount", s.settings.ledger.amount_minor_max);
  cmd.provider = f.optional_string("provider", k_provider_name_max).value_or("manual");
  cmd.destination = f.optional_string("destination", k_destination_max).value_or("");
  if (!f.ok()) return s.invalid(ex, f.error());
  cmd.principal = who.id;
  cmd.idempotency_key = *key;
  cmd.request_id = ex->request_id;
  cmd.request_hash = sha256_hex("withdrawal\n" + std::to_string(cmd.account) + "\n" + std::to_string(cmd.amount) +
                                "\n" + cmd.provider + "\n" + cmd.destination);
  s.service.withdraw(std::move(cmd),
                     [&s, ex, by = who.id](actors::money_result r) { s.answer_money(ex, by, std::move(r)); });
}

void get_withdrawal(handler_support& s, const exchange_ptr& ex, const principal& who, const std::string& text) {
  const std::string not_found = "withdrawal " + text + " was not found";
  if (!is_valid_uuid(text)) return s.fail(ex, ledger::error_code::not_found, not_found);
  const auto id = canonical_uuid(text);
  s.service.find_withdrawal(id,
                            [&s, ex, who, not_found](actors::query_result<std::optional<actors::withdrawal_view>> r) {
                              if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
                              if (!r.value || !r.value->visible_to(who.id, who.role)) {
                                return s.fail(ex, ledger::error_code::not_found, not_found);
                              }
                              ex->respond(json_reply(200, withdrawal_json(*r.value)));
                            });
}

// An operator settles a withdrawal: {"providerPaymentId"?}.
void settle(handler_support& s, const exchange_ptr& ex, const principal& who, const std::string& text, bool paid) {
  if (!is_valid_uuid(text)) return s.fail(ex, ledger::error_code::not_found, "withdrawal " + text + " was not found");
  const auto id = canonical_uuid(text);
  auto key = s.idempotency_key(ex);
  if (!key) return;
  actors::settle_command cmd;
  if (!ex->body.empty()) {
    auto object = s.body(ex);
    if (!object) return;
    field_reader f(*object);
    f.allow_only({"providerPaymentId"});
    cmd.provider_payment_id = f.optional_string("providerPaymentId", k_payment_id_max).value_or("");
    if (!f.ok()) return s.invalid(ex, f.error());
  }
  cmd.principal = who.id;
  cmd.withdrawal_id = id;
  cmd.paid = paid;
  cmd.idempotency_key = *key;
  cmd.request_id = ex->request_id;
  cmd.request_hash = sha256_hex(std::string(paid ? "confirm\n" : "fail\n") + id + "\n" + cmd.provider_payment_id);
  s.service.settle_withdrawal(std::move(cmd),
                              [&s, ex, by = who.id](actors::money_result r) { s.answer_money(ex, by, std::move(r)); });
}

}  // namespace

void add_withdrawal_routes(router& r, handler_support& s) {
  r.add({"POST", "/v1/withdrawals", access::principal, rate_class::write, param_kind::integer, true,
         [&s](const exchange_ptr& ex, const principal& who, const path_params&) { withdraw(s, ex, who); }});
  r.add({"GET", "/v1/withdrawals/{id}", access::principal, rate_class::read, param_kind::text, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           get_withdrawal(s, ex, who, p.text);
         }});
  r.add(
      {"POST", "/v1/withdrawals/{id}/confirm", access::operator_, rate_class::write, param_kind::text, false,
       [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { settle(s, ex, who, p.text, true); }});
  r.add({"POST", "/v1/withdrawals/{id}/fail", access::operator_, rate_class::write, param_kind::text, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           settle(s, ex, who, p.text, false);
         }});
}

}  // namespace api::handlers
