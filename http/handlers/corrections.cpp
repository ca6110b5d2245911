// Corrections and currencies (docs/corrections.md): reversals of transactions and two-person
// adjustments by operators, exchange rates set by operators, quotes and exchanges by owners. Money
// moves are idempotent by the Idempotency-Key and answered after COMMIT.

#include <boost/json/object.hpp>

#include "http/crypto.hpp"
#include "http/handlers/handlers.hpp"
#include "http/presenters.hpp"
#include "http/url.hpp"
#include "ledger/fx.hpp"

namespace api::handlers {
namespace {

namespace json = boost::json;

constexpr std::size_t k_reason_max = 500;
constexpr std::size_t k_source_max = 100;
constexpr std::size_t k_rate_text_max = 40;

json::value text_or_null(const std::string& s) { return s.empty() ? json::value(nullptr) : json::value(s); }

json::object adjustment_json(const actors::adjustment_view& a) {
  json::object o;
  o["id"] = a.id;
  o["accountId"] = a.account_id;
  o["currency"] = a.currency;
  o["amount"] = std::to_string(a.amount);
  o["reason"] = a.reason;
  o["status"] = a.status;
  o["requestedBy"] = a.requested_by;
  o["decidedBy"] = a.decided_by ? json::value(*a.decided_by) : json::value(nullptr);
  o["decidedAt"] = text_or_null(a.decided_at);
  o["transactionId"] = text_or_null(a.transaction_id);
  o["createdAt"] = a.created_at;
  return o;
}

json::object rate_json(const actors::fx_rate_view& r) {
  json::object o;
  o["base"] = r.base;
  o["quote"] = r.quote;
  o["rate"] = r.rate;
  o["source"] = r.source;
  o["updatedAt"] = r.updated_at;
  return o;
}

json::object quote_json(const actors::fx_quote_view& q) {
  json::object o;
  o["id"] = q.id;
  o["fromAccountId"] = q.from_account;
  o["toAccountId"] = q.to_account;
  o["fromCurrency"] = q.from_currency;
  o["toCurrency"] = q.to_currency;
  o["rate"] = q.rate;
  o["source"] = q.source;
  o["fromAmount"] = std::to_string(q.from_amount);
  o["toAmount"] = std::to_string(q.to_amount);
  o["expiresAt"] = q.expires_at;
  return o;
}

// A signed amount of minor units, never 0: a JSON integer or a string of digits with an optional
// leading '-'. nullopt: `error` says why.
std::optional<ledger::amount_minor> signed_amount(const json_fields& object, std::int64_t max_minor,
                                                  std::string& error) {
  const json_scalar* v = object.find("amount");
  const std::string what = "field \"amount\" must be a non-zero integer number of minor units, at most " +
                           std::to_string(max_minor) +
                           " either way (a JSON integer, or a string of digits with an "
                           "optional leading '-')";
  std::optional<ledger::amount_minor> value;
  if (v == nullptr) {
    error = "field \"amount\" is required: " + what.substr(std::string("field \"amount\" must be ").size());
    return std::nullopt;
  }
  if (v->type == json_scalar::kind::integer) {
    if (v->integer > ledger::json_safe_integer_max || v->integer < -ledger::json_safe_integer_max) {
      error = "field \"amount\" is beyond 2^53-1 as a JSON number; send it as a string of digits";
      return std::nullopt;
    }
    value = v->integer;
  } else if (v->type == json_scalar::kind::string) {
    const bool negative = !v->text.empty() && v->text.front() == '-';
    auto digits = ledger::parse_digits(std::string_view(v->text).substr(negative ? 1 : 0));
    if (digits) value = negative ? -*digits : *digits;
  }
  if (!value || *value == 0 || *value > max_minor || *value < -max_minor) {
    error = what;
    return std::nullopt;
  }
  return value;
}

void reverse(handler_support& s, const exchange_ptr& ex, const principal& who, const std::string& text) {
  if (!is_valid_uuid(text)) return s.fail(ex, ledger::error_code::not_found, "transaction " + text + " was not found");
  auto key = s.idempotency_key(ex);
  if (!key) return;
  auto object = s.body(ex);
  if (!object) return;
  field_reader f(*object);
  f.allow_only({"reason"});
  actors::reversal_command cmd;
  cmd.reason = f.string("reason", k_reason_max);
  if (!f.ok()) return s.invalid(ex, f.error());
  cmd.principal = who.id;
  cmd.transaction_id = canonical_uuid(text);
  cmd.idempotency_key = *key;
  cmd.request_id = ex->request_id;
  cmd.request_hash = sha256_hex("reversal\n" + cmd.transaction_id + "\n" + cmd.reason);
  s.service.reverse(std::move(cmd),
                    [&s, ex, by = who.id](actors::money_result r) { s.answer_money(ex, by, std::move(r)); });
}

void request_adjustment(handler_support& s, const exchange_ptr& ex, const principal& who) {
  auto key = s.idempotency_key(ex);
  if (!key) return;
  auto object = s.body(ex);
  if (!object) return;
  field_reader f(*object);
  f.allow_only({"accountId", "amount", "reason"});
  actors::adjustment_request_command cmd;
  cmd.account = f.id("accountId");
  std::string amount_error;
  const auto amount = signed_amount(*object, s.settings.ledger.amount_minor_max, amount_error);
  cmd.reason = f.string("reason", k_reason_max);
  if (!f.ok()) return s.invalid(ex, f.error());
  if (!amount) return s.invalid(ex, amount_error);
  cmd.amount = *amount;
  cmd.principal = who.id;
  cmd.idempotency_key = *key;
  cmd.request_id = ex->request_id;
  cmd.request_hash =
      sha256_hex("adjustment\n" + std::to_string(cmd.account) + "\n" + std::to_string(cmd.amount) + "\n" + cmd.reason);
  s.service.request_adjustment(std::move(cmd), [&s, ex](actors::query_result<actors::adjustment_created_view> r) {
    if (r.outcome != ledger::error_code::ok) return s.fail(ex, r.outcome, r.detail);
    auto out = json_reply(201, adjustment_json(r.value.adjustment));
    if (!r.value.created) out.headers.emplace_back("Idempotent-Replayed", "true");
    ex->respond(std::move(out));
  });
}

void get_adjustment(handler_support& s, const exchange_ptr& ex, const std::string& text) {
  const std::string not_found = "adjustment " + text + " was not found";
  if (!is_valid_uuid(text)) return s.fail(ex, ledger::error_code::not_found, not_found);
  s.service.find_adjustment(canonical_uuid(text),
                            [&s, ex, not_found](actors::query_result<std::optional<actors::adjustment_view>> r) {
                              if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
                              if (!r.value) return s.fail(ex, ledger::error_code::not_found, not_found);
                              ex->respond(json_reply(200, adjustment_json(*r.value)));
                            });
}

// An approval posts the adjustment (Idempotency-Key required); a rejection only decides it. Either
// takes no body (an empty JSON object is accepted).
void decide_adjustment(handler_support& s, const exchange_ptr& ex, const principal& who, const std::string& text,
                       bool approve) {
  if (!is_valid_uuid(text)) return s.fail(ex, ledger::error_code::not_found, "adjustment " + text + " was not found");
  actors::adjustment_decision_command cmd;
  if (approve) {
    auto key = s.idempotency_key(ex);
    if (!key) return;
    cmd.idempotency_key = *key;
  }
  if (!ex->body.empty()) {
    auto object = s.body(ex);
    if (!object) return;
    field_reader f(*object);
    f.allow_only({});
    if (!f.ok()) return s.invalid(ex, f.error());
  }
  cmd.principal = who.id;
  cmd.adjustment_id = canonical_uuid(text);
  cmd.request_id = ex->request_id;
  cmd.request_hash = sha256_hex(std::string(approve ? "approve\n" : "reject\n") + cmd.adjustment_id);
  if (approve) {
    return s.service.approve_adjustment(
        std::move(cmd), [&s, ex, by = who.id](actors::money_result r) { s.answer_money(ex, by, std::move(r)); });
  }
  s.service.reject_adjustment(std::move(cmd), [&s, ex](actors::query_result<std::optional<actors::adjustment_view>> r) {
    if (r.outcome != ledger::error_code::ok) return s.fail(ex, r.outcome, r.detail);
    ex->respond(json_reply(200, adjustment_json(*r.value)));
  });
}

void set_rate(handler_support& s, const exchange_ptr& ex, const principal& who, const path_params& p) {
  if (!ledger::is_valid_currency(p.text) || !ledger::is_valid_currency(p.second_text) || p.text == p.second_text) {
    return s.invalid(ex,
                     "the path names two different currencies, each three upper-case letters: /v1/fx/rates/"
                     "{BASE}/{QUOTE}");
  }
  auto object = s.body(ex);
  if (!object) return;
  field_reader f(*object);
  f.allow_only({"rate", "source"});
  const auto text = f.string("rate", k_rate_text_max);
  actors::fx_rate_command cmd;
  cmd.source = f.string("source", k_source_max);
  if (!f.ok()) return s.invalid(ex, f.error());
  const auto rate = ledger::fx::parse_rate(text);
  if (!rate) {
    return s.invalid(ex,
                     "field \"rate\" must be a positive decimal string such as \"0.9215\": digits with at most "
                     "one '.', at most 12 significant digits and 18 decimals, no sign or exponent");
  }
  cmd.principal = who.id;
  cmd.base = p.text;
  cmd.quote = p.second_text;
  cmd.rate = ledger::fx::to_string(*rate);
  cmd.request_id = ex->request_id;
  s.service.set_fx_rate(std::move(cmd), [&s, ex](actors::query_result<actors::fx_rate_view> r) {
    if (r.outcome != ledger::error_code::ok) return s.unavailable(ex, r.outcome, r.detail);
    ex->respond(json_reply(200, rate_json(r.value)));
  });
}

void quote(handler_support& s, const exchange_ptr& ex, const principal& who) {
  auto object = s.body(ex);
  if (!object) return;
  field_reader f(*object);
  f.allow_only({"fromAccountId", "toAccountId", "amount"});
  actors::fx_quote_command cmd;
  cmd.from = f.id("fromAccountId");
  cmd.to = f.id("toAccountId");
  cmd.amount = f.amount("amount", s.settings.ledger.amount_minor_max);
  if (!f.ok()) return s.invalid(ex, f.error());
  cmd.principal = who.id;
  s.service.quote_fx(std::move(cmd), [&s, ex, who](actors::query_result<actors::fx_quote_view> r) {
    if (r.outcome == ledger::error_code::not_found) s.count_unknown_account(ex, who.id);
    if (r.outcome != ledger::error_code::ok) return s.fail(ex, r.outcome, r.detail);
    ex->respond(json_reply(201, quote_json(r.value)));
  });
}

void exchange(handler_support& s, const exchange_ptr& ex, const principal& who) {
  auto key = s.idempotency_key(ex);
  if (!key) return;
  auto object = s.body(ex);
  if (!object) return;
  field_reader f(*object);
  f.allow_only({"quoteId"});
  const auto id = f.string("quoteId", 36);
  if (!f.ok()) return s.invalid(ex, f.error());
  if (!is_valid_uuid(id)) return s.fail(ex, ledger::error_code::not_found, "quote " + id + " was not found");
  actors::exchange_command cmd;
  cmd.principal = who.id;
  cmd.quote_id = canonical_uuid(id);
  cmd.idempotency_key = *key;
  cmd.request_id = ex->request_id;
  cmd.request_hash = sha256_hex("exchange\n" + cmd.quote_id);
  s.service.exchange(std::move(cmd),
                     [&s, ex, by = who.id](actors::money_result r) { s.answer_money(ex, by, std::move(r)); });
}

}  // namespace

void add_correction_routes(router& r, handler_support& s) {
  r.add({"POST", "/v1/transactions/{id}/reversal", access::operator_, rate_class::write, param_kind::text, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { reverse(s, ex, who, p.text); }});
  r.add({"POST", "/v1/adjustments", access::operator_, rate_class::read, param_kind::integer, true,
         [&s](const exchange_ptr& ex, const principal& who, const path_params&) { request_adjustment(s, ex, who); }});
  r.add({"GET", "/v1/adjustments/{id}", access::operator_, rate_class::read, param_kind::text, false,
         [&s](const exchange_ptr& ex, const principal&, const path_params& p) { get_adjustment(s, ex, p.text); }});
  r.add({"POST", "/v1/adjustments/{id}/approve", access::operator_, rate_class::write, param_kind::text, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           decide_adjustment(s, ex, who, p.text, true);
         }});
  r.add({"POST", "/v1/adjustments/{id}/reject", access::operator_, rate_class::read, param_kind::text, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) {
           decide_adjustment(s, ex, who, p.text, false);
         }});
  r.add({"PUT", "/v1/fx/rates/{base}/{quote}", access::operator_, rate_class::read, param_kind::text, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params& p) { set_rate(s, ex, who, p); }});
  r.add({"POST", "/v1/fx/quotes", access::principal, rate_class::read, param_kind::integer, true,
         [&s](const exchange_ptr& ex, const principal& who, const path_params&) { quote(s, ex, who); }});
  r.add({"POST", "/v1/exchanges", access::principal, rate_class::write, param_kind::integer, false,
         [&s](const exchange_ptr& ex, const principal& who, const path_params&) { exchange(s, ex, who); }});
}

}  // namespace api::handlers
