// Holds (docs/money-flows.md, "Holds"): the owner of the payer places one (201 the hold; it lowers
// the payer's available money, not its balance), the owner of the payee or an operator captures it
// once (201 the CAPTURE receipt; the rest of the hold is released), either party or an operator
// voids it (200 the hold), and either party or an operator reads it. Another principal's hold
// answers 404.

#include "http/crypto.hpp"
#include "http/handlers/handlers.hpp"
#include "http/presenters.hpp"
#include "http/url.hpp"
#include "ledger/holds.hpp"

namespace api::handlers {
namespace {

// The longest a hold may live: thirty days.
constexpr std::int64_t k_hold_seconds_max = 30LL * 24 * 3600;

std::string not_found(const std::string& id) { return "hold " + id + " was not found"; }

// {"fromAccountId","toAccountId","amount","expiresInSeconds"}.
void place(handler_support& s, const exchange_ptr& ex, const principal& who) {
  auto key = s.idempotency_key(ex);
  if (!key) return;
  auto object = s.body(ex);
  if (!object) return;
  field_reader f(*object);
  f.allow_only({"fromAccountId", "toAccountId", "amount", "expiresInSeconds"});
  actors::hold_command cmd;
  cmd.from = f.id("fromAccountId");
  cmd.to = f.id("toAccountId");
  cmd.amount = f.amount("amount", s.settings.ledger.amount_minor_max);
  // A hold always names when it ends.
  cmd.expires_in_seconds = f.integer("expiresInSeconds", 1, k_hold_seconds_max);
  if (!f.ok()) return s.invalid(ex, f.error());
  if (cmd.from == cmd.to) return s.fail(ex, ledger::error_code::same_account, "an account cannot pay itself");
  cmd.principal = who.id;
  cmd.idempotency_key = *key;
  cmd.request_id = ex->request_id;
  cmd.request_hash = sha256_hex("hold\n" + std::to_string(cmd.from) + "\n" + std::to_string(cmd.to) + "\n" +
                                std::to_string(cmd.amount) + "\n" + std::to_string(cmd.expires_in_seconds));
  s.service.place_hold(std::move(cmd),
                       [&s, ex, by = who.id](actors::money_result r) { s.answer_money(ex, by, std::move(r)); });
}

// {"amount"?}: all of the hold by default; an empty body is allowed.
void capture(handler_support& s, const exchange_ptr& ex, const principal& who, const std::string& text) {
  actors::hold_capture_command cmd;
  if (!open_amount_command(s, ex, who, text, not_found(text), cmd)) return;
  const auto id = canonical_uuid(text);
  cmd.hold_id = id;
  cmd.request_hash = sha256_hex("hold_capture\n" + id + "\n" + (cmd.amount ? std::to_string(*cmd.amount) : "all"));
  s.service.capture_hold(std::move(cmd),
                         [&s, ex, by = who.id](actors::money_result r) { s.answer_money(ex, by, std::move(r)); });
}

// No body; voiding a voided hold answers it again.
void void_hold(handler_support& s, const exchange_ptr& ex, const principal& who, const std::string& text) {
  if (!is_valid_uuid(text)) return s.fail(ex, ledger::error_code::not_found, not_found(text));
  actors::hold_void_command cmd;
  cmd.principal = who.id;
  cmd.by_operator = who.role == ledger::role::operator_role;
  cmd.hold_id = canonical_uuid(text);
  cmd.request_id = ex->request_id;
  s.service.void_hold(std::move(cmd),
                      [&s, ex, by = who.id](actors::money_result r) { s.answer_money(ex, by, std::move(r)); });
}

void get_hold(handler_support& s, const exchange_ptr& ex, const principal& who, const std::string& text) {
  if (!is_valid_uuid(text)) return s.fail(ex, ledger::error_code::not_found, not_found(text));
  const auto id = canonical_uuid(text);
  s.service.find_hold(id, [&s, ex, who, id](actors::query_result<std::optional<actors::hold_view>> r) {
    if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
    if (!r.value || !r.value->visible_to(who.id, who.role)) {
      return s.fail(ex, ledger::error_code::not_found, not_found(id));
    }
    const auto& h = *r.value;
    reply out;
    out.status = 200;
    out.body = ledger::holds::hold_json({h.id, h.status, h.from, h.to, h.currency, h.amount, h.captured, h.expires_at,
                                         h.created_at, h.capture_transaction_id});
    ex->respond(std::move(out));
  });
}

}  // namespace

void add_hold_routes(router& r, handler_support& s) {
  r.add({"POST", "/v1/holds", access::principal, rate_class::write, param_kind::integer, true,
         [&s](const exchange_ptr& ex, const principal& who, const path_params&) { place(s, ex, who); }});
  r.add({"GET", "/v1/holds/{id}", access::principal, rate_class::read, param_kind::text, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { get_hold(s, ex, who, p.text); }});
  r.add({"POST", "/v1/holds/{id}/capture", access::principal, rate_class::write, param_kind::text, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { capture(s, ex, who, p.text); }});
  r.add({"POST", "/v1/holds/{id}/void", access::principal, rate_class::write, param_kind::text, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { void_hold(s, ex, who, p.text); }});
}

}  // namespace api::handlers
