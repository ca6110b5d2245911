#pragma once

// Webhook endpoints and their deliveries (migration 010, docs/events.md "Webhooks"): what the API
// reads and writes (endpoints of a principal, the deliveries of an endpoint, an operator's retry)
// and what the dispatcher (events/webhooks.*) does: turn feed events into delivery rows after an
// endpoint's cursor, claim due deliveries (FOR UPDATE SKIP LOCKED, then a lease), and record what
// each attempt got.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ledger/types.hpp"
#include "persistence/audit.hpp"
#include "persistence/pqxx_fwd.hpp"
#include "persistence/replays.hpp"

namespace persistence {

struct webhook_endpoint_record {
  std::int64_t id = 0;
  ledger::principal_id owner = 0;
  bool all_accounts = false;  // made by an operator: every event, as the feed shows an operator
  std::optional<ledger::account_id> account;
  std::string url;
  std::vector<std::string> event_types;  // ["*"] or transaction types
  std::int64_t feed_cursor = 0;
  std::string created_at;
  std::string disabled_at;                 // empty: enabled
  std::string disabled_reason;             // empty: enabled
  std::string secret_rotated_at;           // empty: never rotated
  std::string previous_secret_expires_at;  // empty: only the current secret signs
};

struct new_webhook_endpoint {
  ledger::principal_id owner = 0;
  bool all_accounts = false;
  std::optional<ledger::account_id> account;
  std::string url;
  std::vector<std::string> event_types;
  std::string signing_secret;
};

// nullopt: the owner has `live_max` live endpoints already, or (`replay->stored` set) the request's
// Idempotency-Key was taken already. The endpoint starts at the end of the feed: it gets the events
// sequenced after it was made. `audit` and the answer under `replay` (when not null) are written in
// the same transaction.
std::optional<webhook_endpoint_record> create_webhook_endpoint(pqxx::connection& conn, const new_webhook_endpoint& e,
                                                               std::int64_t live_max, const audit_entry* audit,
                                                               replayable<webhook_endpoint_record>* replay = nullptr);

// The live endpoints of `owner` (every principal's when nullopt), by id, after the id `after`, at
// most `limit`.
std::vector<webhook_endpoint_record> list_webhook_endpoints(pqxx::connection& conn,
                                                            std::optional<ledger::principal_id> owner,
                                                            std::int64_t after, int limit);

// A live endpoint of `owner` (any when nullopt); nullopt: there is no such live endpoint.
std::optional<webhook_endpoint_record> find_webhook_endpoint(pqxx::connection& conn, std::int64_t id,
                                                             std::optional<ledger::principal_id> owner);

// Deletes a live endpoint of `owner` (any when nullopt): it gets no further attempt. False: there
// is no such live endpoint.
bool delete_webhook_endpoint(pqxx::connection& conn, std::int64_t id, std::optional<ledger::principal_id> owner,
                             const audit_entry* audit);

// Disables or enables a live endpoint of `owner` (any when nullopt). Disabling keeps the reason of
// an endpoint disabled already; enabling makes the delivery that disabled it PENDING again, due now,
// with a new retry span, when it is still FAILED. The audit row is written only when the state
// changed. nullopt: there is no such live endpoint.
std::optional<webhook_endpoint_record> disable_webhook_endpoint(pqxx::connection& conn, std::int64_t id,
                                                                std::optional<ledger::principal_id> owner,
                                                                const std::string& reason, const audit_entry* audit);
std::optional<webhook_endpoint_record> enable_webhook_endpoint(pqxx::connection& conn, std::int64_t id,
                                                               std::optional<ledger::principal_id> owner,
                                                               const audit_entry* audit);

// Replaces the signing secret of a live endpoint of `owner` (any when nullopt) by `new_secret`.
// The secret it replaces goes on signing deliveries beside it for `previous_valid_s` seconds (0:
// not at all); a previous secret still signing is dropped. nullopt: there is no such live endpoint,
// or (`replay->stored` set) the request's Idempotency-Key was taken already.
std::optional<webhook_endpoint_record> rotate_webhook_secret(pqxx::connection& conn, std::int64_t id,
                                                             std::optional<ledger::principal_id> owner,
                                                             const std::string& new_secret,
                                                             std::int64_t previous_valid_s, const audit_entry* audit,
                                                             replayable<webhook_endpoint_record>* replay = nullptr);

// Changes the URL, the event types and/or the account (`account` given; nullopt inside: any account)
// of a live endpoint of `owner` (any when nullopt); what is not given stays. Every attempt claimed
// after the commit goes to the new URL (pending deliveries included); deliveries made already keep
// their events, and the types and the account apply to the events not yet made into deliveries.
// An endpoint that is not an operator's takes only an account of its owner's.
struct webhook_update_result {
  enum class kind : std::uint8_t { updated, not_found, account_not_owners };
  kind outcome = kind::not_found;
  webhook_endpoint_record endpoint;  // as it is now (unchanged when refused)
};
webhook_update_result update_webhook_endpoint(pqxx::connection& conn, std::int64_t id,
                                              std::optional<ledger::principal_id> owner,
                                              const std::optional<std::string>& url,
                                              const std::optional<std::vector<std::string>>& event_types,
                                              const std::optional<std::optional<ledger::account_id>>& account,
                                              const audit_entry* audit);

enum class webhook_delivery_status : std::uint8_t { pending, delivered, failed };
std::string_view to_string(webhook_delivery_status s);

struct webhook_delivery_record {
  std::int64_t id = 0;
  std::int64_t endpoint_id = 0;
  std::int64_t event_cursor = 0;
  std::string event_id;
  std::string event_type;
  webhook_delivery_status status = webhook_delivery_status::pending;
  int attempts = 0;
  std::optional<int> last_status_code;
  std::string last_error;       // empty: none
  std::string next_attempt_at;  // empty unless pending
  std::string last_attempt_at;  // empty: never attempted
  std::string completed_at;     // empty while pending
  std::string created_at;
};

struct webhook_deliveries_page {
  std::vector<webhook_delivery_record> deliveries;
  std::optional<std::int64_t> next_after;
};

// The deliveries of a live endpoint of `owner` (any when nullopt), oldest first, after the id
// `after`; nullopt when there is no such endpoint.
std::optional<webhook_deliveries_page> list_webhook_deliveries(pqxx::connection& conn, std::int64_t endpoint_id,
                                                               std::optional<ledger::principal_id> owner,
                                                               std::int64_t after, int limit);

enum class delivery_retry_outcome : std::uint8_t { retried, no_delivery, not_failed };
struct delivery_retry_result {
  delivery_retry_outcome outcome = delivery_retry_outcome::retried;
  webhook_delivery_record delivery;
};

// Makes a FAILED delivery of a live endpoint PENDING again, due now, with a new retry span.
delivery_retry_result retry_webhook_delivery(pqxx::connection& conn, std::int64_t endpoint_id, std::int64_t delivery_id,
                                             const audit_entry* audit);

// --- The dispatcher's side ---

// A delivery to make: one feed event, as its JSON document.
struct new_webhook_delivery {
  std::int64_t event_cursor = 0;
  std::string event_id;
  std::string event_type;
  std::string body;
};

// Where the fan-out stands (migration 029).
struct webhook_fan_out_state {
  std::int64_t feed_end = 0;  // the cursor of the feed's last event now (of the highest position given; 0: none)
  std::int64_t position = 0;  // the shared position: where every following endpoint stands at least
  bool lagging = false;       // an enabled endpoint does not follow the position
};
webhook_fan_out_state read_webhook_fan_out_state(pqxx::connection& conn);

// Enabled endpoints that do not follow the shared position (they stand at their own cursors), by
// cursor and id, after (`after_cursor`, `after_id`), at most `limit`.
std::vector<webhook_endpoint_record> lagging_webhook_endpoints(pqxx::connection& conn, std::int64_t after_cursor,
                                                               std::int64_t after_id, int limit);

// One endpoint's fan-out step: its deliveries, and its cursor moved from `from` to `to`.
struct webhook_fan_out_step {
  std::int64_t endpoint_id = 0;
  std::int64_t from = 0;
  std::int64_t to = 0;
  std::vector<std::string> event_types;       // those the deliveries were chosen by
  std::optional<ledger::account_id> account;  // the account they were chosen by (nullopt: any)
  std::vector<new_webhook_delivery> deliveries;
};

// In one statement and one transaction, the steps of several endpoints that do not follow the
// shared position: each endpoint's cursor is moved from `from` to `to` and its deliveries inserted
// (an event already made into a delivery of it is skipped), or, when its cursor is no longer `from`
// (another server moved it), it was deleted or disabled, it follows the position now, or its event
// types or account are no longer those of the step, nothing of its step is written. The endpoints
// are locked in id order. Returns the ids of the endpoints whose steps were written.
std::vector<std::int64_t> add_webhook_deliveries(pqxx::connection& conn, std::span<const webhook_fan_out_step> steps);

// One step of the shared position, from `from` to `to`, in one transaction: the position's row is
// locked, and nothing is written when it no longer stands at `from` (another server moved it:
// nullopt). Otherwise the following endpoints of `owners` and every operator's are read, `steps_of`
// gives their steps (each from where the endpoint stands, to `to`; endpoints with nothing in the
// step may be left out), their deliveries are inserted, at most `deliveries_per_statement` a
// statement (an event already made into a delivery of an endpoint is skipped), and the position
// moves to `to`. No endpoint's row is written. Returns the deliveries made.
std::optional<std::size_t> take_shared_fan_out_step(
    pqxx::connection& conn, std::int64_t from, std::int64_t to, const std::vector<ledger::principal_id>& owners,
    std::size_t deliveries_per_statement,
    const std::function<std::vector<webhook_fan_out_step>(const std::vector<webhook_endpoint_record>&)>& steps_of);

// Enabled endpoints that do not follow the shared position and whose cursors have reached it
// follow it from now on. Returns how many joined.
std::int64_t join_webhook_fan_out(pqxx::connection& conn);

// A delivery attempt this server now holds (its lease): what to send where.
struct claimed_webhook_delivery {
  std::int64_t id = 0;
  std::int64_t endpoint_id = 0;
  int attempts = 0;                  // this attempt's number: the lease's fence for recording its outcome
  int span_attempts = 0;             // this attempt's number in the current retry span
  std::int64_t span_elapsed_ms = 0;  // since the span's first attempt (0 for that one)
  std::string event_id;
  std::string url;
  std::string signing_secret;
  std::string previous_signing_secret;  // empty unless a rotated-out secret still signs
  std::string body;
};

// Claims at most `limit` due deliveries, each the oldest pending one of its live endpoint (not
// disabled), none
// of `busy_endpoints`, none leased by anyone: FOR UPDATE SKIP LOCKED, then a lease of `lease_ms`
// and the attempt counted, in one statement.
std::vector<claimed_webhook_delivery> claim_webhook_deliveries(pqxx::connection& conn, int limit,
                                                               const std::vector<std::int64_t>& busy_endpoints,
                                                               std::int64_t lease_ms);

// What an attempt got. `delay_ms`: nullopt when it was delivered or is given up (FAILED);
// otherwise the pause before the next attempt. Written only while the attempt is still the
// delivery's latest (its number is `attempts`) and the delivery pending. A delivery given up
// disables its endpoint (unless it is disabled or deleted already), in the same transaction.
struct webhook_attempt_outcome {
  std::int64_t delivery_id = 0;
  int attempts = 0;
  bool delivered = false;
  std::optional<int> status_code;
  std::string error;
  std::optional<std::int64_t> retry_delay_ms;
};
enum class webhook_attempt_recorded : std::uint8_t {
  fenced_out,         // not this attempt's to write (its lease expired and another followed): nothing written
  recorded,           // delivered, or another attempt scheduled, or given up
  endpoint_disabled,  // given up, and its endpoint disabled by it
};
webhook_attempt_recorded record_webhook_attempt(pqxx::connection& conn, const webhook_attempt_outcome& o);

// Deletes at most `limit` DELIVERED or FAILED deliveries that ended more than `retention_days` ago,
// oldest first, except one its endpoint names as the delivery that disabled it; how many it deleted.
// Rows locked by someone else (an operator's retry) are skipped.
std::int64_t prune_webhook_deliveries(pqxx::connection& conn, std::int64_t retention_days, int limit);

void prepare_webhook_statements(pqxx::connection& conn);

}  // namespace persistence
