#pragma once

// The server's settings: every limit, timeout, pool size and URL in one place.
//
// Values come from, in increasing precedence: built-in defaults, a TOML file (`--config PATH`),
// `WALLET_<SECTION>_<KEY>` environment variables, and `--<section>-<key>` command-line flags.
// `describe()` is the single table that names each key, documents it and bounds it; loading,
// validation, the flag list and `config/wallet.example.toml` all derive from it.

#include <cstdint>
#include <map>
#include <stdexcept>
#include <optional>
#include <string>
#include <vector>

namespace config {

struct http_settings {
  std::string host = "127.0.0.1";
  std::int64_t port = 8080;
  std::int64_t io_threads = 2;
  std::int64_t body_bytes_max = 64 * 1024;
  // POST /v1/admin/settlements carries a whole settlement report: it alone reads up to this.
  std::int64_t settlement_body_bytes_max = 64 * 1024 * 1024;
  std::int64_t header_bytes_max = 8 * 1024;
  std::int64_t read_timeout_ms = 10'000;
  std::int64_t keep_alive_timeout_ms = 30'000;
  std::int64_t connections_max = 4096;
  std::int64_t request_deadline_ms = 5'000;
  // A settlement report is matched while its request waits: its answer has a deadline of its own.
  std::int64_t settlement_deadline_ms = 120'000;
  // On SIGTERM, first this long of serving as usual while /readyz answers 503 and every answer
  // closes its connection: a load balancer takes the node out before its connections close.
  std::int64_t shutdown_drain_ms = 0;
  std::int64_t shutdown_grace_ms = 5'000;
  // An error answered before the body was read (413, 431, 400) is followed by reading and
  // discarding what the client still sends, up to these bounds, so that a client which sends its
  // whole body before reading sees the answer instead of a reset connection.
  std::int64_t linger_bytes_max = 64 * 1024 * 1024;
  std::int64_t linger_timeout_ms = 2'000;
  std::int64_t readyz_refresh_ms = 250;
  // A 503's Retry-After is booked into the first second with room for returns (http/retry_calendar.hpp):
  // a second holds this percentage of the answers (other than 503) of the best recent second, and
  // no return is sent further out than retry_after_max_s.
  std::int64_t retry_after_max_s = 30;
  std::int64_t retry_returns_percent = 25;
  // Peers whose X-Forwarded-For is believed (IP networks, comma-separated; base/networks.hpp):
  // behind them the client's address, for the per-address allowances, is the last address of
  // that header, the one the proxy added. Empty: every peer is the client.
  std::string trusted_proxies;
};

struct database_settings {
  std::string url = "postgresql://wallet_app@127.0.0.1:5432/wallet";
  std::string owner_url;
  bool migrate_on_start = true;
  std::int64_t readers = 8;
  std::int64_t reader_queue_max = 2'000;
  std::int64_t connect_timeout_ms = 2'000;
  std::int64_t connection_wait_ms = 300;
  std::int64_t statement_timeout_ms = 5'000;
  std::int64_t lock_timeout_ms = 2'000;
  std::int64_t reconnect_backoff_ms = 500;
};

struct writer_settings {
  std::int64_t count = 1;
  std::int64_t batch_postings_max = 500;
  std::int64_t batch_wait_us = 3'000;
  std::int64_t queue_postings_max = 1'000;
  std::int64_t queue_run_postings_max = 10'000;
};

struct actor_settings {
  std::int64_t scheduler_threads = 1;
  std::string scheduler_policy = "sharing";
  std::int64_t registry_shards = 4;
  std::int64_t accounts_live_max = 200'000;
  std::int64_t account_idle_ms = 60'000;
  std::int64_t account_inflight_max = 2'000;
};

struct ledger_settings {
  std::int64_t amount_minor_max = 1'000'000'000'000'000;
  std::int64_t hot_shards_max = 64;
  std::int64_t hot_shards_default = 16;
  std::int64_t sweep_interval_ms = 1'000;
  // Hot accounts one sweep reads and sweeps at once (a tick sweeps one such page; an operator's
  // sweep every page).
  std::int64_t sweep_accounts_per_page = 1'000;
  // How often due holds are released: an expired hold is released at most about this late.
  std::int64_t hold_expiry_interval_ms = 200;
  // Answers kept for management requests sent with an Idempotency-Key are deleted this long after
  // they were made (0: kept); a key whose answer was deleted names a new request.
  std::int64_t replay_retention_hours = 24;
  std::int64_t replay_prune_interval_ms = 60'000;
  std::int64_t reconcile_interval_s = 300;
  std::int64_t reconcile_full_interval_s = 86'400;
  std::int64_t reconcile_statement_timeout_ms = 600'000;
  std::int64_t reconcile_work_mem_mb = 64;
  std::int64_t entries_page_max = 500;
  // Transfers in one POST /v1/transfers/batch at most.
  std::int64_t batch_transfers_max = 1'000;
  // Transaction ids in one POST /v1/transactions/lookup at most.
  std::int64_t lookup_ids_max = 1'000;
  // The fee of a withdrawal, in minor units of its currency: "EUR:50,USD:30"; a currency not
  // named pays `withdrawal_fee_default`.
  std::string withdrawal_fees;
  std::int64_t withdrawal_fee_default = 0;
  // How long an exchange quote holds its rate (docs/corrections.md).
  std::int64_t fx_quote_ttl_ms = 30'000;

  // The withdrawal fee of `currency` (withdrawal_fees must have passed validate()).
  std::int64_t withdrawal_fee(std::string_view currency) const;
};

// "EUR:50,USD:30" as (currency, fee) pairs; nullopt when it is not of that shape (three upper-case
// letters, a colon, 0 to 10^15 minor units; no currency twice).
std::optional<std::vector<std::pair<std::string, std::int64_t>>> parse_fee_table(std::string_view text);

struct redis_settings {
  std::string url = "redis://127.0.0.1:6379";
  std::int64_t command_timeout_ms = 50;
  std::int64_t connections = 1;
  std::int64_t batch_wait_us = 500;
  std::int64_t retry_interval_ms = 1'000;
};

struct ratelimit_settings {
  bool enabled = true;
  std::string algorithm = "sliding";
  std::int64_t rate_per_second = 100;
  std::int64_t burst = 200;
  std::int64_t read_rate_per_second = 500;
  std::int64_t read_burst = 1'000;
  std::int64_t lease_tokens = 8;
  std::int64_t lease_ms = 2'000;
  std::int64_t local_tokens = 4;
  std::int64_t processes_max = 4;
};

// The outbox relay and the event feed (docs/events.md).
struct events_settings {
  bool enabled = true;
  std::int64_t batch_rows_max = 50;
  std::int64_t stream_maxlen = 1'000'000;
  std::int64_t poll_interval_ms = 100;
  std::string redis_url;  // empty: redis.url
  std::int64_t redis_timeout_ms = 2'000;
  std::int64_t backoff_ms_max = 5'000;
  std::int64_t feed_page_max = 1'000;
  std::int64_t feed_scan_max = 10'000;
  std::int64_t feed_retention_days = 30;    // the feed's events are deleted this long after (0: kept)
  std::int64_t prune_interval_ms = 60'000;  // how often the active relay deletes them
};

// Several server nodes on one ledger (docs/scaling.md). Off: this process is the only one that
// debits accounts, and no lease is taken or checked.
struct cluster_settings {
  bool enabled = false;
  std::string node_id;  // empty: "<hostname>-<http.port>"
  // Partitions of the account space; fixed per deployment (the first node stores it).
  std::int64_t partitions = 64;
  std::int64_t lease_ttl_ms = 5'000;
  std::int64_t lease_renew_ms = 1'000;
  // Where the other nodes reach this one's actors (host:port); empty: http.host:(http.port + 1000).
  std::string advertise_address;
};

// Webhook delivery (docs/events.md, "Webhooks").
struct webhooks_settings {
  bool enabled = true;                        // run the dispatcher and sender in this server
  std::int64_t timeout_ms = 10'000;           // one attempt: resolve, connect, TLS, send, answer
  std::int64_t retry_span_ms = 86'400'000;    // retries end this long after the first attempt
  std::int64_t backoff_base_ms = 1'000;       // the pause after the first failure; doubling
  std::int64_t backoff_cap_ms = 3'600'000;    // the longest pause between attempts
  std::int64_t concurrency = 64;              // attempts in flight in this server at most
  std::int64_t poll_interval_ms = 200;        // how often the dispatcher looks for work when idle
  std::int64_t endpoints_per_owner_max = 20;  // live endpoints a principal may have
  bool allow_loopback = false;                // let deliveries go to 127.0.0.0/8 and ::1 (tests)
  std::string ca_file;                        // PEM CA bundle for https (empty: the system store)
  std::int64_t delivery_retention_days = 30;  // finished deliveries are deleted this long after (0: kept)
  std::int64_t prune_interval_ms = 60'000;    // how often a dispatcher deletes them
};

struct admission_settings {
  std::int64_t inflight_requests_max = 8'000;
  // Requests in flight at most what the server answered in this long of its busiest recent second
  // (docs/backpressure.md), but never fewer than inflight_requests_min. 0: no such bound.
  std::int64_t queue_target_ms = 100;
  std::int64_t inflight_requests_min = 512;
};

struct auth_settings {
  std::string bootstrap_key;
  std::int64_t key_cache_max = 100'000;
  // A cached API key is trusted this long since it was last confirmed (docs/keys-and-audit.md):
  // a key revoked on another server is refused here within this time.
  std::int64_t key_cache_ttl_ms = 5'000;
  std::int64_t active_keys_max = 10;
  std::int64_t unknown_key_cache_ms = 2'000;
  std::int64_t unknown_key_cache_max = 10'000;
  std::int64_t unauthenticated_per_second = 20;
  std::int64_t unauthenticated_burst = 40;
  std::int64_t unknown_accounts_per_second = 10;
  std::int64_t unknown_accounts_burst = 20;
};

struct log_settings {
  std::string level = "info";
  std::string format = "text";
};

struct settings {
  http_settings http;
  database_settings database;
  writer_settings writer;
  actor_settings actors;
  ledger_settings ledger;
  redis_settings redis;
  ratelimit_settings ratelimit;
  events_settings events;
  cluster_settings cluster;
  webhooks_settings webhooks;
  admission_settings admission;
  auth_settings auth;
  log_settings log;
};

// A setting that cannot be used: names the key, the value, where it came from and what is allowed.
class config_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The environment as a map, so tests can pass their own instead of the process environment.
using environment = std::map<std::string, std::string>;
environment process_environment();

// Result of reading the command line: the settings, or a request to only print something.
struct load_result {
  settings values;
  bool exit_now = false;       // --help or --print-example-config was handled
  bool print_example = false;  // --print-example-config: the caller prints example_toml()
  int exit_code = 0;
};

// Loads defaults, then the file named by --config, then the environment, then flags.
// Throws config_error for any unknown key, wrong type or out-of-range value.
load_result load(int argc, const char* const* argv, const environment& env,
                 const std::string& program_name = "wallet-server");

// Loads from a TOML document and an environment only (no flags): for tools and tests.
settings load_from(const std::string& toml_text, const environment& env);

// Checks every value against its bounds; throws config_error naming the first bad key.
void validate(const settings& s);

// The example configuration file: every key, its default, and its documentation.
std::string example_toml();

// The environment variable name for a key: ("http", "port") -> "WALLET_HTTP_PORT".
std::string env_name(std::string_view section, std::string_view key);

}  // namespace config
