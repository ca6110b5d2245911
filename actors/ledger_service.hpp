#pragma once

// The front door of the actor system for the HTTP layer: money-moving commands go to the
// account actors and ledger writers; reads and administration go to the reader pool.
//
// Every method returns at once and never blocks; its callback runs later on an actor or
// reader thread, so it must only hand the result over (e.g. asio::post to a strand).
// This header is free of CAF and libpqxx on purpose: http/ includes it everywhere.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/commands.hpp"
#include "actors/corrections.hpp"
#include "actors/query_result.hpp"
#include "actors/views.hpp"
#include "config/settings.hpp"

namespace actors {

struct service_stats {
  std::int64_t live_account_actors = 0;
  std::int64_t writer_queued = 0;
  std::int64_t writer_run_postings_queued = 0;
  std::uint64_t batches = 0;
  std::uint64_t postings = 0;
  std::uint64_t writer_failures = 0;
  std::int64_t reader_queued = 0;
  std::uint64_t reader_jobs = 0;
  std::uint64_t preloaded_keys = 0;
  std::uint64_t preloaded_accounts = 0;
  bool writers_connected = false;
  std::uint64_t sweeps_committed = 0;
  std::uint64_t sweeps_deferred = 0;  // skipped: one in flight already, or the writer at its bound
  std::uint64_t sweeper_ticks = 0;
  std::uint64_t holds_expired = 0;
  std::uint64_t replays_pruned = 0;  // kept answers deleted past ledger.replay_retention_hours
  std::uint64_t unknown_keys_cached = 0;
  std::uint64_t reconcile_runs = 0;
  std::uint64_t reconcile_failures = 0;
  std::uint64_t reconcile_errors = 0;
  bool reconcile_last_ok = true;
  double reconcile_last_ms = 0;
  std::int64_t reconcile_watermark = 0;
  // Cluster mode (docs/scaling.md).
  bool cluster_enabled = false;
  int partitions_held = 0;
  int cluster_nodes = 0;
  std::uint64_t leases_lost = 0;          // taken over by another node while held here
  std::uint64_t lease_failures = 0;       // lease rounds the database did not answer
  bool node_id_in_use_elsewhere = false;  // another live process speaks for this node id
  std::uint64_t writer_busy_us = 0;       // time the writers spent committing, summed
  std::uint64_t fenced_postings = 0;      // debits refused at commit: the node had lost the lease
  std::uint64_t relocked_batches = 0;     // batches read unlocked, then redone under the rows' locks
};

// Cluster mode (docs/scaling.md): a request passed, at the HTTP level, to the node that holds the
// partition of the account it debits; and that node's answer.
struct forwarded_request {
  std::string method;
  std::string target;
  std::string request_id;
  std::string body;
  // Only the headers the routes read: Authorization, Idempotency-Key, Content-Type.
  std::vector<std::pair<std::string, std::string>> headers;
  // How long the holder has for it (what is left of the request's own deadline, less the answer's
  // way back); zero: the link's bound. The holder gives up on it after as long.
  std::chrono::milliseconds bound{0};
};
struct forwarded_reply {
  bool delivered = false;  // false: the holder could not be reached within the bound (`detail`)
  bool sent = false;       // ... but the request was sent: it may have been served
  std::string detail;
  int status = 0;
  std::string content_type;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};
using forward_handler = std::function<void(forwarded_request, std::function<void(forwarded_reply)>)>;

class ledger_service {
 public:
  explicit ledger_service(const config::settings& settings);
  ~ledger_service();
  ledger_service(const ledger_service&) = delete;
  ledger_service& operator=(const ledger_service&) = delete;

  // Starts the actor system, the writers, the registry, the sweeper and the reconciler.
  // Succeeds even when the database is down: requests then answer 503 until it is back.
  void start();
  // Stops timers, lets the actors finish what they hold, and stops the actor system.
  void stop();

  // The money flows (docs/money-flows.md): each answers after COMMIT with its stored receipt.
  void transfer(transfer_command command, std::function<void(money_result)> done);
  // A batch of transfers: `status` 201 with `{"results":[...]}`, or the refusal of the whole batch.
  void transfer_batch(transfer_batch_command command, std::function<void(money_result)> done);
  void deposit(deposit_command command, std::function<void(money_result)> done);
  void withdraw(withdrawal_command command, std::function<void(money_result)> done);
  void settle_withdrawal(settle_command command, std::function<void(money_result)> done);
  void claim_deposit(deposit_claim_command command, std::function<void(money_result)> done);
  void refund_payment(payment_refund_command command, std::function<void(money_result)> done);
  // An event whose signature the caller verified with the provider's secret (find_provider).
  void provider_event(provider_event_command command, std::function<void(money_result)> done);

  // Corrections and currencies (docs/corrections.md).
  void reverse(reversal_command command, std::function<void(money_result)> done);
  void request_adjustment(adjustment_request_command command, query_callback<adjustment_created_view> done);
  void approve_adjustment(adjustment_decision_command command, std::function<void(money_result)> done);
  // not_found, same_approver or already_decided (with the adjustment as it stands), or the rejection.
  void reject_adjustment(adjustment_decision_command command, query_callback<std::optional<adjustment_view>> done);
  void find_adjustment(std::string id, query_callback<std::optional<adjustment_view>> done);
  void set_fx_rate(fx_rate_command command, query_callback<fx_rate_view> done);
  void quote_fx(fx_quote_command command, query_callback<fx_quote_view> done);
  void exchange(exchange_command command, std::function<void(money_result)> done);
  // Holds (docs/money-flows.md, "Holds"): placing answers 201 the hold, capturing 201 the CAPTURE
  // receipt, voiding 200 the hold; find_hold answers nullopt when there is none.
  void place_hold(hold_command command, std::function<void(money_result)> done);
  void capture_hold(hold_capture_command command, std::function<void(money_result)> done);
  void void_hold(hold_void_command command, std::function<void(money_result)> done);
  void find_hold(std::string id, query_callback<std::optional<hold_view>> done);

  // nullopt: a provider with this name exists already.
  void create_provider(request_origin origin, std::string name, std::string signing_secret,
                       query_callback<std::optional<provider_view>> done);
  // A provider with its signing secrets (cached for auth.key_cache_ttl_ms once read); nullopt when
  // there is none.
  void find_provider(std::string name, query_callback<std::optional<provider_view>> done);
  // Every provider, by id (never shown with its secrets).
  void list_providers(query_callback<std::vector<provider_view>> done);
  // Whether find_provider(name) would be answered from the cache, without a database read.
  bool provider_cached(const std::string& name);
  // Replaces a provider's signing secret by `new_secret`; the one replaced verifies its events for
  // `previous_valid_s` seconds more. With `replay`, the answer is kept under its Idempotency-Key.
  void rotate_provider_secret(request_origin origin, std::string name, std::string new_secret,
                              std::optional<replay_ticket<provider_view>> replay, std::int64_t previous_valid_s,
                              query_callback<provider_rotation_view> done);
  void find_withdrawal(std::string id, query_callback<std::optional<withdrawal_view>> done);

  // The principal of a key, or nullopt when it is unknown; unknown keys are remembered for
  // `auth.unknown_key_cache_ms`, so repeating one costs no database read.
  void authenticate(std::string key_hash_hex, query_callback<std::optional<principal_view>> done);
  // The principal of a key already in the cache and confirmed within auth.key_cache_ttl_ms,
  // without any database work.
  std::optional<principal_view> cached_principal(const std::string& key_hash_hex);
  // Whether this server has seen the key valid, however long ago (a returning client whose key is
  // read again once its time to live has passed, rather than a guess).
  bool knows_key(const std::string& key_hash_hex);
  // `key_hint`: the key's last four characters, kept to tell a principal's keys apart.
  void create_principal(request_origin origin, std::string name, ledger::role role, std::string key_hash_hex,
                        std::string key_hint, query_callback<principal_view> done);
  // With `replay`, the answer is kept under its Idempotency-Key.
  void create_account(request_origin origin, ledger::principal_id owner, std::string currency, int shards,
                      std::optional<replay_ticket<account_view>> replay, query_callback<account_create_view> done);
  void find_account(ledger::account_id id, query_callback<std::optional<account_view>> done);
  // The amount of the account's debits in flight (reserved by its actor, not yet committed).
  void reserved(ledger::account_id id, std::function<void(ledger::amount_minor)> done);
  void make_hot(request_origin origin, ledger::account_id id, int shards,
                query_callback<std::optional<account_view>> done);
  // Freezes (frozen) or unfreezes (active) an account; nullopt: no such user account. A closed
  // account is refused (account_closed).
  void set_status(request_origin origin, ledger::account_id id, ledger::account_status status,
                  query_callback<std::optional<account_view>> done);
  // Closes an account for good (persistence::close_account); nullopt: no such user account.
  // Refused with account_not_empty (the detail says what to do first), or forbidden when it is
  // frozen and `closer` is not an operator; a closed account is answered as it is.
  void close_account(request_origin origin, ledger::account_id id, ledger::role closer,
                     query_callback<std::optional<account_view>> done);
  // Sets the fee schedule of the payments a user account receives; nullopt: no such user account.
  void set_fees(request_origin origin, ledger::account_id id, ledger::fee_schedule schedule,
                query_callback<std::optional<account_view>> done);
  void list_entries(ledger::account_id id, std::int64_t after, int limit, query_callback<entries_view> done);
  void find_transaction(std::string id, query_callback<std::optional<transaction_view>> done);
  // The transactions among `ids` (lower-case UUIDs) that exist, as find_transaction shows each, in
  // a bounded few queries on one reader connection; in no particular order.
  void lookup_transactions(std::vector<std::string> ids, query_callback<std::vector<transaction_view>> done);
  // The event feed after the cursor `after` (docs/events.md): every event, or those that move
  // money on accounts of `owner` and/or on `account`; at most `limit`, looking at no more than
  // `events.feed_scan_max` events.
  void list_events(std::int64_t after, int limit, std::optional<ledger::principal_id> owner,
                   std::optional<ledger::account_id> account, query_callback<events_view> done);
  // Starts a reconciliation run on the reconciler's own connection, or names the one in progress
  // (here or in another process). Answers once the run is claimed, never after the run.
  // Its audit row is written once the run is claimed, before the answer.
  void start_reconciliation(request_origin origin, bool full, std::string requested_by,
                            query_callback<reconciliation_claim_view> done);
  void find_reconciliation_run(std::int64_t id, query_callback<std::optional<reconciliation_run_view>> done);
  void latest_reconciliation(query_callback<reconciliation_status> done);
  void ping_database(query_callback<bool> done);
  // Sweeps every hot account's shards into its main row now; the value is the sweeps committed,
  // the accounts skipped and the sweeps that failed (the outcome is then not ok). Its audit row is
  // written once the sweeps are done, before the answer, whenever a sweep was committed or failed.
  void sweep_now(request_origin origin, query_callback<sweep_view> done);

  // API keys (docs/keys-and-audit.md). A new key for `principal`, whose SHA-256 and last four
  // characters the caller made; at most auth.active_keys_max active keys a principal.
  void create_key(request_origin origin, ledger::principal_id principal, std::string key_hash_hex, std::string key_hint,
                  query_callback<key_change_view> done);
  // Revoking a key: refused here from the answer on, on other servers within auth.key_cache_ttl_ms.
  void revoke_key(request_origin origin, ledger::principal_id principal, std::int64_t key_id,
                  query_callback<key_change_view> done);
  // Every active key of `principal` at once, in one transaction (an operator locking it out).
  void revoke_all_keys(request_origin origin, ledger::principal_id principal, query_callback<keys_revoked_view> done);
  // nullopt: no such principal.
  void list_keys(ledger::principal_id principal, std::int64_t after, int limit,
                 query_callback<std::optional<api_keys_view>> done);
  // The audit log after the row id `after`, oldest first.
  void list_audit(std::int64_t after, int limit, query_callback<audit_page_view> done);
  // An account's balance (main + shards) as of `as_of_us` (microseconds since the Unix epoch;
  // nullopt or later than now: now), from the balance_after of its entries.
  void balance_as_of(ledger::account_id id, std::optional<std::int64_t> as_of_us, query_callback<balance_view> done);

  // Settlement reconciliation (docs/settlements.md). A report that is not one answers
  // invalid_request naming its first bad line, and nothing is imported; one import runs at a time
  // (server_busy meanwhile).
  // An import's audit row is written once it has committed, before the answer.
  void import_settlements(request_origin origin, std::shared_ptr<const std::string> report, std::string imported_by,
                          query_callback<settlement_import_view> done);
  // `status`: "open", "resolved", or empty for both; exceptions after the id `after`, in id order.
  void list_settlement_exceptions(std::string status, std::int64_t after, int limit,
                                  query_callback<settlement_exceptions_view> done);
  // Resolves once: nullopt when there is no such exception; conflict when it was resolved already.
  void resolve_settlement_exception(request_origin origin, std::int64_t id, std::int64_t seen_import_id,
                                    std::string note, std::optional<std::string> owner, std::string resolved_by,
                                    query_callback<std::optional<settlement_exception_view>> done);

  // Cluster mode. Where requests forwarded by other nodes are served (the HTTP routes); set before
  // start(). forwards(): whether this node forwards (cluster mode is on). forward(): passes
  // `request` to the node holding `partition`; `done` gets its answer, or delivered = false when
  // that node is unknown or does not answer within the request deadline.
  void set_forward_handler(forward_handler handler);
  bool forwards() const;
  void forward(int partition, forwarded_request request, std::function<void(forwarded_reply)> done);
  // Webhook endpoints (docs/events.md, "Webhooks"). `owner` nullopt: every principal's (an
  // operator); otherwise only that principal's, others' are not found. Making one resolves its
  // host and refuses destinations deliveries may not go to.
  void create_webhook_endpoint(request_origin origin, webhook_endpoint_request request,
                               query_callback<webhook_create_view> done);
  void list_webhook_endpoints(std::optional<ledger::principal_id> owner, std::int64_t after, int limit,
                              query_callback<std::vector<webhook_endpoint_view>> done);
  // nullopt: no such live endpoint.
  void find_webhook_endpoint(std::int64_t id, std::optional<ledger::principal_id> owner,
                             query_callback<std::optional<webhook_endpoint_view>> done);
  // False: no such live endpoint.
  void delete_webhook_endpoint(request_origin origin, std::int64_t id, std::optional<ledger::principal_id> owner,
                               query_callback<bool> done);
  // Disables (`enabled` false, for `reason`) or enables an endpoint; the endpoint as it is now.
  // nullopt: no such live endpoint.
  void set_webhook_endpoint_enabled(request_origin origin, std::int64_t id, std::optional<ledger::principal_id> owner,
                                    bool enabled, std::string reason,
                                    query_callback<std::optional<webhook_endpoint_view>> done);
  // Replaces an endpoint's signing secret; the one replaced signs beside it for
  // `previous_valid_s` seconds. With `replay`, the answer is kept under its Idempotency-Key.
  void rotate_webhook_secret(request_origin origin, std::int64_t id, std::optional<ledger::principal_id> owner,
                             std::string new_secret, std::int64_t previous_valid_s,
                             std::optional<webhook_replay_ticket> replay, query_callback<webhook_rotate_view> done);
  // Changes an endpoint's URL (its host judged as when it was made) and/or event types.
  void update_webhook_endpoint(request_origin origin, std::int64_t id, std::optional<ledger::principal_id> owner,
                               webhook_endpoint_change change, query_callback<webhook_update_view> done);
  // nullopt: no such live endpoint.
  void list_webhook_deliveries(std::int64_t endpoint_id, std::optional<ledger::principal_id> owner, std::int64_t after,
                               int limit, query_callback<std::optional<webhook_deliveries_view>> done);
  // Makes a FAILED delivery PENDING again, due now, with a new retry span (operators).
  void retry_webhook_delivery(request_origin origin, std::int64_t endpoint_id, std::int64_t delivery_id,
                              query_callback<webhook_retry_view> done);

  // Makes sure the bootstrap operator exists; blocks (call before serving, not on I/O threads).
  void ensure_operator_blocking(const std::string& key_hash_hex);

  service_stats stats() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace actors
