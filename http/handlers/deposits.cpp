// Deposits: an operator credits a user account from a provider's clearing account (provider
// `manual` unless named), and refunds or charges back a deposit. Idempotent by the
// Idempotency-Key; answered after COMMIT.

#include <algorithm>
#include <iterator>
#include <string>

#include "http/crypto.hpp"
#include "http/handlers/handlers.hpp"
#include "http/url.hpp"

namespace api::handlers {
namespace {

// The request's hash: its fields joined by newlines, as it has always been made, so that a retry
// across an upgrade still matches. Three fields are free text; when one of them holds a newline
// itself, two different requests could join alike, so such a request is hashed with each text
// field prefixed by its length instead (a form no newline join takes: "deposit\x01...").
std::string deposit_hash(const actors::deposit_command& cmd) {
  const std::string numbers = std::to_string(cmd.account) + "\n" + std::to_string(cmd.amount);
  const std::string* texts[] = {&cmd.external_ref, &cmd.provider, &cmd.provider_payment_id};
  const bool plain =
      std::none_of(std::begin(texts), std::end(texts), [](const std::string* t) { return t->find('\n') != t->npos; });
  if (plain)
    return sha256_hex("deposit\n" + numbers + "\n" + cmd.external_ref + "\n" + cmd.provider + "\n" +
                      cmd.provider_payment_id);
  std::string framed = "deposit\x01" + numbers;
  for (const auto* t : texts) framed += "\n" + std::to_string(t->size()) + ":" + *t;
  return sha256_hex(framed);
}

constexpr std::size_t k_external_ref_max = 255;
constexpr std::size_t k_provider_name_max = 40;
constexpr std::size_t k_payment_id_max = 255;
constexpr std::size_t k_reason_max = 500;

void deposit(handler_support& s, const exchange_ptr& ex, const principal& who) {
  auto key = s.idempotency_key(ex);
  if (!key) return;
  auto object = s.body(ex);
  if (!object) return;
  field_reader f(*object);
  f.allow_only({"accountId", "amount", "externalRef", "provider", "providerPaymentId"});
  actors::deposit_command cmd;
  cmd.account = f.id("accountId");
  cmd.amount = f.amount("amount", s.settings.ledger.amount_minor_max);
  auto external_ref = f.optional_string("externalRef", k_external_ref_max);
  auto provider = f.optional_string("provider", k_provider_name_max);
  auto payment_id = f.optional_string("providerPaymentId", k_payment_id_max);
  if (!f.ok()) return s.invalid(ex, f.error());
  if (payment_id && payment_id->empty()) return s.invalid(ex, "field \"providerPaymentId\" must not be empty");
  cmd.principal = who.id;
  cmd.idempotency_key = *key;
  cmd.request_id = ex->request_id;
  cmd.external_ref = external_ref.value_or("");
  cmd.provider = provider.value_or("manual");
  cmd.provider_payment_id = payment_id.value_or("");
  cmd.request_hash = deposit_hash(cmd);
  s.service.deposit(std::move(cmd),
                    [&s, ex, by = who.id](actors::money_result r) { s.answer_money(ex, by, std::move(r)); });
}

// A refund (or the chargeback) of deposit `id`: {"amount"?, "reason"?}; the amount defaults to
// all that is left of the deposit.
void claim(handler_support& s, const exchange_ptr& ex, const principal& who, const std::string& text, bool chargeback) {
  if (!is_valid_uuid(text)) return s.fail(ex, ledger::error_code::not_found, "deposit " + text + " was not found");
  const auto id = canonical_uuid(text);
  auto key = s.idempotency_key(ex);
  if (!key) return;
  actors::deposit_claim_command cmd;
  if (!ex->body.empty()) {
    auto object = s.body(ex);
    if (!object) return;
    field_reader f(*object);
    f.allow_only({"amount", "reason"});
    cmd.amount = f.optional_amount("amount", s.settings.ledger.amount_minor_max);
    cmd.reason = f.optional_string("reason", k_reason_max).value_or("");
    if (!f.ok()) return s.invalid(ex, f.error());
  }
  cmd.principal = who.id;
  cmd.deposit_transaction_id = id;
  cmd.chargeback = chargeback;
  cmd.idempotency_key = *key;
  cmd.request_id = ex->request_id;
  cmd.request_hash = sha256_hex(std::string(chargeback ? "chargeback\n" : "deposit_refund\n") + id + "\n" +
                                (cmd.amount ? std::to_string(*cmd.amount) : "rest") + "\n" + cmd.reason);
  s.service.claim_deposit(std::move(cmd),
                          [&s, ex, by = who.id](actors::money_result r) { s.answer_money(ex, by, std::move(r)); });
}

}  // namespace

void add_deposit_routes(router& r, handler_support& s) {
  r.add({"POST", "/v1/deposits", access::operator_, rate_class::write, param_kind::integer, true,
         [&s](const exchange_ptr& ex, const principal& who, const path_params&) { deposit(s, ex, who); }});
  r.add(
      {"POST", "/v1/deposits/{id}/refunds", access::operator_, rate_class::write, param_kind::text, false,
       [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { claim(s, ex, who, p.text, false); }});
  r.add(
      {"POST", "/v1/deposits/{id}/chargebacks", access::operator_, rate_class::write, param_kind::text, false,
       [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { claim(s, ex, who, p.text, true); }});
}

}  // namespace api::handlers
