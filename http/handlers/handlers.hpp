#pragma once

// The routes of each resource, added to the router by routes.cpp. One file a resource:
// principals.cpp, accounts.cpp, deposits.cpp, transfers.cpp, withdrawals.cpp, providers.cpp,
// transactions.cpp, admin.cpp, payments.cpp (merchant flows: fees and refunds of payments), settlements.cpp, events.cpp, and
// server.cpp for what describes the server itself (health, readiness, metrics).

#include "http/handler_support.hpp"
#include "http/pipeline.hpp"
#include "http/router.hpp"

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

}  // namespace api::handlers
