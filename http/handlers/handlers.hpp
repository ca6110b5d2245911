#pragma once

// The routes of each resource, added to the router by routes.cpp. One file a resource:
// principals.cpp, accounts.cpp, deposits.cpp, transfers.cpp, withdrawals.cpp, providers.cpp,
// transactions.cpp, admin.cpp, payments.cpp (merchant flows: fees and refunds of payments), settlements.cpp, events.cpp, and
// server.cpp for what describes the server itself (health, readiness, metrics).

#include <cstdint>
#include <optional>
#include <string>

#include "http/handler_support.hpp"
#include "http/json_input.hpp"
#include "http/pipeline.hpp"
#include "http/router.hpp"
#include "http/url.hpp"

namespace api::handlers {

void add_principal_routes(router& r, handler_support& s);
void add_account_routes(router& r, handler_support& s);
void add_deposit_routes(router& r, handler_support& s);
void add_transfer_routes(router& r, handler_support& s);
void add_transaction_routes(router& r, handler_support& s);
void add_admin_routes(router& r, handler_support& s);
void add_withdrawal_routes(router& r, handler_support& s);
void add_provider_routes(router& r, handler_support& s);
void add_payment_routes(router& r, handler_support& s);
void add_hold_routes(router& r, handler_support& s);
void add_settlement_routes(router& r, handler_support& s);
// keys.cpp (a principal's API keys) and audit.cpp (the audit log).
void add_key_routes(router& r, handler_support& s);
void add_audit_routes(router& r, handler_support& s);
void add_event_routes(router& r, handler_support& s);
// corrections.cpp: reversals, adjustments, exchange rates, quotes and exchanges.
void add_correction_routes(router& r, handler_support& s);
// webhooks.cpp: webhook endpoints and their deliveries.
void add_webhook_routes(router& r, handler_support& s);
// The readiness probe asks Redis through the pipeline's limiter, and /metrics shows its counters.
void add_server_routes(router& r, handler_support& s, pipeline& p);

// The opening that a hold's capture (holds.cpp) and a payment's refund (payments.cpp) share: each
// takes part or all of what the UUID `text` names, idempotently, for its principal or an operator.
// In this order: a `text` that is no UUID answers 404 with `not_found`, as an unknown id does; the
// Idempotency-Key is required; the body is optional and names at most "amount" (none: all there
// is). Then fills in `cmd` what comes from the request and its principal; the command's id and
// request hash are the caller's. False when the request was answered already.
template <typename Command>
bool open_amount_command(handler_support& s, const exchange_ptr& ex, const principal& who, const std::string& text,
                         const std::string& not_found, Command& cmd) {
  if (!is_valid_uuid(text)) {
    s.fail(ex, ledger::error_code::not_found, not_found);
    return false;
  }
  auto key = s.idempotency_key(ex);
  if (!key) return false;
  if (!ex->body.empty()) {
    auto object = s.body(ex);
    if (!object) return false;
    field_reader f(*object);
    f.allow_only({"amount"});
    cmd.amount = f.optional_amount("amount", s.settings.ledger.amount_minor_max);
    if (!f.ok()) {
      s.invalid(ex, f.error());
      return false;
    }
  }
  cmd.principal = who.id;
  cmd.by_operator = who.role == ledger::role::operator_role;
  cmd.idempotency_key = *key;
  cmd.request_id = ex->request_id;
  return true;
}

// The body of a signing secret's rotation (webhooks.cpp, providers.cpp):
// {"previousSecretExpiresInSeconds"?}, or none at all. How long the secret replaced goes on
// signing: a day unless the body says, at most a week, 0 for not at all. nullopt when the request
// was answered (400, 415) already.
inline constexpr std::int64_t k_previous_secret_s_default = 24 * 3600;
inline constexpr std::int64_t k_previous_secret_s_max = 7 * 24 * 3600;
inline std::optional<std::int64_t> previous_secret_window(handler_support& s, const exchange_ptr& ex) {
  if (ex->body.empty()) return k_previous_secret_s_default;
  auto object = s.body(ex);
  if (!object) return std::nullopt;
  field_reader f(*object);
  f.allow_only({"previousSecretExpiresInSeconds"});
  const auto seconds = f.optional_int("previousSecretExpiresInSeconds", 0, k_previous_secret_s_max);
  if (!f.ok()) {
    s.invalid(ex, f.error());
    return std::nullopt;
  }
  return seconds.value_or(k_previous_secret_s_default);
}

}  // namespace api::handlers
