#pragma once

// What the service facade answers to reads: the facts a client may be shown, shaped for the API
// and free of how they are stored. http/ sees these and never the persistence records, so a
// change of schema or query stays below the facade.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ledger/fees.hpp"
#include "ledger/types.hpp"

namespace actors {

struct principal_view {
  ledger::principal_id id = 0;
  std::string name;
  ledger::role role = ledger::role::user;
};

struct shard_view {
  ledger::account_id id = 0;
  int shard_no = 0;
  ledger::amount_minor balance = 0;
};

struct account_view {
  ledger::account_id id = 0;
  std::optional<ledger::principal_id> owner_id;
  std::string currency;
  ledger::account_kind kind = ledger::account_kind::user;
  ledger::account_status status = ledger::account_status::active;
  std::int64_t status_version = 0;         // how often the status changed (migration 020)
  ledger::amount_minor main_balance = 0;   // the main row only
  ledger::amount_minor total_balance = 0;  // main row plus shards
  ledger::account_id parent_id = 0;        // 0: not a shard
  std::vector<shard_view> shards;          // a hot account's credit shards, by shard number
  std::string created_at;
  std::optional<ledger::fee_schedule> fees;  // of the payments it receives; nullopt: never set
  ledger::amount_minor held = 0;             // what its active holds keep (not spendable)

  bool hot() const { return !shards.empty(); }
  // Whether `who` may see this account: an operator sees every account, a principal its own
  // user accounts (never a system account or a shard).
  bool visible_to(ledger::principal_id who, ledger::role role) const;
};

struct entry_view {
  std::int64_t id = 0;
  std::string transaction_id;
  ledger::account_id account_id = 0;
  std::string currency;
  ledger::amount_minor amount = 0;
  ledger::amount_minor balance_after = 0;
  std::string created_at;
  std::optional<ledger::principal_id> account_owner;  // set in a transaction's entries
  std::string transaction_type;                       // set in an account's entries
};

struct entries_view {
  std::vector<entry_view> entries;
  std::optional<std::int64_t> next_after;  // the `after` of the next page
};

struct transaction_view {
  std::string id;
  std::optional<ledger::principal_id> principal_id;
  std::string type;
  std::string status;
  std::string created_at;
  std::vector<entry_view> entries;
  // A payment (TRANSFER): what was refunded of it and its refunds, oldest first.
  std::optional<ledger::amount_minor> refunded_amount;
  std::vector<std::string> refunds;
  std::string refunded_transfer;  // a REFUND: the payment it gave back
  // Reversals (docs/corrections.md): the reversal of this transaction, or the one it reverses.
  std::string reversed_by;
  std::string reverses;

  // An operator sees every transaction; a principal the ones it made or that touch its accounts.
  bool visible_to(ledger::principal_id who, ledger::role role) const;
};

// A reconciliation run as the API shows it: each check under its answer name, with its verdict
// (nullopt when the run did not make it).
struct reconciliation_check_view {
  std::string name;
  std::optional<bool> passed;
};

struct reconciliation_finding_view {
  std::string check;
  std::optional<std::int64_t> account_id;
  std::string transaction_id;  // empty when none
  std::string currency;        // empty when none
  std::optional<std::int64_t> entry_id;
  std::string detail;
};

struct reconciliation_run_view {
  std::int64_t id = 0;
  std::string kind;    // incremental, full
  std::string status;  // running, finished, failed
  std::string phase;   // empty when none
  std::string requested_by;
  std::string started_at;
  std::string finished_at;  // empty while running
  std::optional<std::int64_t> from_entry_id;
  std::optional<std::int64_t> through_entry_id;
  std::optional<bool> ok;
  std::vector<reconciliation_check_view> checks;
  std::vector<reconciliation_finding_view> findings;
  std::int64_t accounts_checked = 0;
  std::int64_t entries_checked = 0;
  std::int64_t transactions_checked = 0;
  double duration_ms = 0;
  std::string error;  // empty unless failed
};

// The latest run with a verdict, and the run in progress if there is one.
struct reconciliation_status {
  std::optional<reconciliation_run_view> latest;
  std::optional<std::int64_t> running_run_id;
};

// The answer to a request for a run: the run that now runs (`started`: this request began it).
struct reconciliation_claim_view {
  std::int64_t run_id = 0;
  bool started = false;
  std::string kind;
};

// A payment provider. The signing secret is for verifying its events; answers show it once, when
// the provider is created.
struct provider_view {
  std::int64_t id = 0;
  std::string name;
  ledger::principal_id principal_id = 0;
  std::string signing_secret;  // empty: the provider sends no events
  std::string created_at;
  // The secret the last rotation replaced, while it verifies (until the unix second given); empty:
  // none.
  std::string previous_signing_secret;
  std::int64_t previous_secret_expires_unix = 0;
  std::string previous_secret_expires_at;  // empty: no previous secret
  std::string secret_rotated_at;           // empty: never rotated
};

struct webhook_endpoint_view;

// A management request sent with an Idempotency-Key (persistence/replays.hpp): its key, which
// request it is, and how its answer's body is written from what it made or changed (a `View`). The
// answer commits with the request's effect; the same request under the key is answered from it.
template <typename View>
struct replay_ticket {
  std::string key;
  std::string request_hash;
  std::function<std::string(const View&)> render;
};
using webhook_replay_ticket = replay_ticket<webhook_endpoint_view>;

// The answer stored under a request's Idempotency-Key.
struct replayed_answer {
  bool same_request = false;  // false: the key names another request (422 idempotency_key_reused)
  int status = 0;
  std::string body;
};

struct account_create_view {
  std::optional<account_view> account;      // nullopt (and nothing replayed): the owner does not exist
  std::optional<replayed_answer> replayed;  // the key was taken: this is its answer
};

enum class provider_rotation_outcome : std::uint8_t { rotated, no_provider, no_secret };
struct provider_rotation_view {
  provider_rotation_outcome outcome = provider_rotation_outcome::rotated;
  provider_view provider;
  std::optional<replayed_answer> replayed;  // the key was taken: this is its answer
};

struct withdrawal_view {
  std::string id;
  ledger::account_id account_id = 0;
  ledger::principal_id principal_id = 0;
  std::string provider;
  std::string currency;
  ledger::amount_minor amount = 0;
  ledger::amount_minor fee = 0;
  std::string destination;             // empty: none
  std::string status;                  // PENDING, PAID, FAILED
  std::string transaction_id;          // the WITHDRAWAL
  std::string settled_transaction_id;  // the PAYOUT or PAYOUT_FAILED; empty while PENDING
  std::string provider_payment_id;     // empty: none
  std::string created_at;
  std::string settled_at;  // empty while PENDING

  // The owner of the account it came from, or an operator.
  bool visible_to(ledger::principal_id who, ledger::role role) const {
    return role == ledger::role::operator_role || principal_id == who;
  }
};

// A hold (docs/money-flows.md, "Holds").
struct hold_view {
  std::string id;
  std::string status;  // ACTIVE, CAPTURED, VOIDED, EXPIRED
  ledger::account_id from = 0;
  ledger::account_id to = 0;
  std::string currency;
  ledger::amount_minor amount = 0;
  ledger::amount_minor captured = 0;
  std::string expires_at;
  std::string created_at;
  std::string capture_transaction_id;  // empty unless CAPTURED
  std::optional<ledger::principal_id> payer_owner;
  std::optional<ledger::principal_id> payee_owner;

  // Either party, or an operator.
  bool visible_to(ledger::principal_id who, ledger::role role) const {
    return role == ledger::role::operator_role || payer_owner == who || payee_owner == who;
  }
};

// Settlement reconciliation (docs/settlements.md): an import of a provider's report, and what
// it found. Amounts are sums of minor units as strings of digits (a report may sum past int64).
struct settlement_import_view {
  std::int64_t import_id = 0;
  std::string provider;
  std::string file_hash;
  std::int64_t lines = 0;
  std::string settled_from;
  std::string settled_to;
  std::string checked_from;
  std::int64_t matched = 0;
  std::int64_t posted_not_settled = 0;
  std::int64_t settled_not_posted = 0;
  std::int64_t amount_mismatch = 0;
  std::int64_t new_exceptions = 0;
  std::int64_t resolved_exceptions = 0;
  std::string created_at;
};

struct settlement_exception_view {
  std::int64_t id = 0;
  std::int64_t import_id = 0;
  std::string kind;  // posted_not_settled, settled_not_posted, amount_mismatch
  std::string provider;
  std::string payment_id;     // empty: none
  std::string type;           // DEPOSIT, DEPOSIT_REFUND, CHARGEBACK, PAYOUT
  std::string ledger_amount;  // empty: none
  std::string report_amount;  // empty: none
  std::string currency;
  std::string report_currency;  // empty: none
  std::string transaction_id;   // empty: none
  std::string settled_at;       // empty: none
  std::string owner;            // empty: none
  std::string status;           // open, resolved
  std::string note;             // empty while open
  std::string resolved_by;      // empty while open
  std::string resolved_at;      // empty while open
  std::string created_at;
};

struct settlement_exceptions_view {
  std::vector<settlement_exception_view> exceptions;
  std::optional<std::int64_t> next_after;  // the `after` of the next page
};

// An API key as the API shows it: never the key, nor its hash.
struct api_key_view {
  std::int64_t id = 0;
  ledger::principal_id principal_id = 0;
  std::string hint;  // the key's last four characters; empty: not kept (keys older than this feature)
  std::string created_at;
  std::optional<ledger::principal_id> created_by;
  std::string revoked_at;  // empty: active
  std::optional<ledger::principal_id> revoked_by;
};

struct api_keys_view {
  std::vector<api_key_view> keys;
  std::optional<std::int64_t> next_after;  // the `after` of the next page
};

// What became of a request to add or revoke a key.
enum class key_change_outcome : std::uint8_t {
  done,
  no_principal,        // the principal does not exist
  provider_principal,  // a payment provider has no API keys
  another_operator,    // an operator's keys are made by that operator only
  too_many_keys,       // the principal has auth.active_keys_max active keys already
  no_key,              // the principal has no key with that id
  last_active_key,     // a principal may not revoke its own last active key
  caller_revoked,      // the key the request came with was revoked meanwhile
};

struct key_change_view {
  key_change_outcome outcome = key_change_outcome::done;
  api_key_view key;
  bool changed = false;  // false: a revocation of a key revoked already
};

struct keys_revoked_view {
  key_change_outcome outcome = key_change_outcome::done;  // done, no_principal or caller_revoked
  std::int64_t revoked = 0;                               // active keys this revoked
};

// What an operator's sweep of every hot account did (POST /v1/admin/sweeps).
struct sweep_view {
  int sweeps = 0;    // sweep transactions committed
  int deferred = 0;  // hot accounts skipped: a sweep of them already in flight, or their writer full
  int failed = 0;    // sweeps the writer could not commit (an operator's sweep then answers 503)
};

// An account's balance (with a hot account's shards) as of a time.
struct balance_view {
  ledger::amount_minor balance = 0;
  std::string as_of;  // the time it is the balance at (UTC, microseconds)
};

// One row of the audit log.
struct audit_view {
  std::int64_t id = 0;
  ledger::principal_id principal_id = 0;
  std::string action;
  std::string target;
  std::string detail_json;  // a JSON object
  std::string request_id;
  std::string created_at;
};

struct audit_page_view {
  std::vector<audit_view> entries;
  std::optional<std::int64_t> next_after;  // the `after` of the next page
};

// One event of the feed (GET /v1/events, docs/events.md): a committed journal transaction, the
// public accounts it moved money on and what it moved on each. Events carry no balances.
struct event_view {
  std::int64_t cursor = 0;     // its feed position; `after` continues past it
  std::string transaction_id;  // also its event id
  std::string type;
  std::string currency;  // the debited account's (compatibility: an exchange's legs have two)
  std::string created_at;
  struct leg {
    ledger::account_id account = 0;
    ledger::amount_minor amount = 0;
    std::string currency;  // the account's
  };
  std::vector<leg> legs;
};

struct events_view {
  std::vector<event_view> events;
  std::int64_t next = 0;            // the `after` of the next call
  bool more = false;                // false: the feed ended here when it was read
  std::int64_t pruned_through = 0;  // the cursor of the last event deleted past the retention
  bool expired = false;             // events after the `after` asked for were deleted unread
};

// Webhook endpoints and deliveries (docs/events.md, "Webhooks"). The signing secret is in the
// request to make an endpoint and in nothing read back.
struct webhook_endpoint_request {
  ledger::principal_id owner = 0;
  bool all_accounts = false;  // an operator's endpoint: every event
  std::optional<ledger::account_id> account;
  std::string url;
  std::vector<std::string> event_types;
  std::string signing_secret;
  std::optional<webhook_replay_ticket> replay;
};

struct webhook_endpoint_view {
  std::int64_t id = 0;
  ledger::principal_id owner_id = 0;
  std::optional<ledger::account_id> account_id;
  std::string url;
  std::vector<std::string> event_types;
  std::string created_at;
  std::string disabled_at;                 // empty: enabled
  std::string disabled_reason;             // empty: enabled
  std::string secret_rotated_at;           // empty: never rotated
  std::string previous_secret_expires_at;  // empty: only the current secret signs
};

// What PATCH /v1/webhook-endpoints/{id} changes; at least one of the two.
struct webhook_endpoint_change {
  std::optional<std::string> url;
  std::optional<std::vector<std::string>> event_types;
  // Given: the one account the endpoint's events are to name (nullopt inside: any account again).
  std::optional<std::optional<ledger::account_id>> account;
};

enum class webhook_update_outcome : std::uint8_t {
  updated,
  not_found,            // no such live endpoint (of the caller)
  destination_refused,  // the new URL's host does not resolve, or to an address deliveries may not go to
  account_not_owners,   // the account is not one of the endpoint's owner's (an operator changing another's)
};

struct webhook_update_view {
  webhook_update_outcome outcome = webhook_update_outcome::updated;
  std::string detail;  // why it was refused
  webhook_endpoint_view endpoint;
};

enum class webhook_create_outcome : std::uint8_t {
  created,
  destination_refused,  // the host does not resolve, or to an address deliveries may not go to
  too_many_endpoints,   // the owner has webhooks.endpoints_per_owner_max live endpoints
};

struct webhook_create_view {
  webhook_create_outcome outcome = webhook_create_outcome::created;
  std::string detail;  // why it was refused
  webhook_endpoint_view endpoint;
  std::optional<replayed_answer> replayed;  // the key was taken: this is its answer (outcome created)
};

struct webhook_rotate_view {
  std::optional<webhook_endpoint_view> endpoint;  // nullopt: no such live endpoint
  std::optional<replayed_answer> replayed;        // the key was taken: this is its answer
};

struct webhook_delivery_view {
  std::int64_t id = 0;
  std::int64_t endpoint_id = 0;
  std::int64_t event_cursor = 0;
  std::string event_id;
  std::string event_type;
  std::string status;  // PENDING, DELIVERED, FAILED
  int attempts = 0;
  std::optional<int> last_status_code;
  std::string last_error;       // empty: none
  std::string next_attempt_at;  // empty unless PENDING
  std::string last_attempt_at;  // empty: never attempted
  std::string completed_at;     // empty while PENDING
  std::string created_at;
};

struct webhook_deliveries_view {
  std::vector<webhook_delivery_view> deliveries;
  std::optional<std::int64_t> next_after;
};

enum class webhook_retry_outcome : std::uint8_t { retried, no_delivery, not_failed };

struct webhook_retry_view {
  webhook_retry_outcome outcome = webhook_retry_outcome::retried;
  webhook_delivery_view delivery;
};

}  // namespace actors
