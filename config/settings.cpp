#include "config/settings.hpp"

#include <CLI/CLI.hpp>
#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <functional>
#include <sstream>
#include <variant>

#include "base/networks.hpp"

extern char** environ;

namespace config {
namespace {

struct int_rule {
  std::int64_t* target;
  std::int64_t min;
  std::int64_t max;
};
struct string_rule {
  std::string* target;
  std::vector<std::string> allowed;  // empty: any value
  bool may_be_empty;
};
struct bool_rule {
  bool* target;
};

// One row of the settings table.
struct descriptor {
  std::string_view section;
  std::string_view key;
  std::string_view doc;
  std::variant<int_rule, string_rule, bool_rule> rule;
};

constexpr std::int64_t k_int_max = INT64_MAX;

// The single table of settings. Bounds are generous but finite: a limit of zero or a timeout
// of an hour is always a typo.
std::vector<descriptor> describe(settings& s) {
  return {
      {"http", "host", "Address the HTTP server listens on.", string_rule{&s.http.host, {}, false}},
      {"http", "port", "TCP port of the HTTP server.", int_rule{&s.http.port, 1, 65535}},
      {"http", "io_threads", "Threads running the HTTP I/O context.", int_rule{&s.http.io_threads, 1, 64}},
      {"http", "body_bytes_max",
       "Largest request body accepted on every route but the settlement reports'; larger answers 413.",
       int_rule{&s.http.body_bytes_max, 256, 16 * 1024 * 1024}},
      {"http", "settlement_body_bytes_max",
       "Largest settlement report (POST /v1/admin/settlements) accepted; larger answers 413.",
       int_rule{&s.http.settlement_body_bytes_max, 256, 1024 * 1024 * 1024}},
      {"http", "header_bytes_max", "Largest request header block accepted.",
       int_rule{&s.http.header_bytes_max, 1024, 1024 * 1024}},
      {"http", "read_timeout_ms", "Deadline to read one whole request once it has started.",
       int_rule{&s.http.read_timeout_ms, 10, 600'000}},
      {"http", "keep_alive_timeout_ms", "How long an idle keep-alive connection is kept.",
       int_rule{&s.http.keep_alive_timeout_ms, 10, 3'600'000}},
      {"http", "connections_max", "Open connections at most; more are closed on accept.",
       int_rule{&s.http.connections_max, 1, 1'000'000}},
      {"http", "request_deadline_ms", "Deadline for the server's answer to one request.",
       int_rule{&s.http.request_deadline_ms, 10, 600'000}},
      {"http", "settlement_deadline_ms",
       "Deadline for the answer to a settlement report (POST /v1/admin/settlements), which it is matched within.",
       int_rule{&s.http.settlement_deadline_ms, 10, 600'000}},
      {"http", "shutdown_drain_ms",
       "On SIGTERM, how long requests are still served, each answer closing its connection, while /readyz "
       "answers 503 (for a load balancer to take the node out); a second SIGTERM ends it early.",
       int_rule{&s.http.shutdown_drain_ms, 0, 600'000}},
      {"http", "shutdown_grace_ms",
       "On SIGTERM, how long in-flight requests may still finish; any still in flight then are answered 503.",
       int_rule{&s.http.shutdown_grace_ms, 0, 600'000}},
      {"http", "linger_bytes_max",
       "After an error answered before the body was read, bytes still read and discarded at most.",
       int_rule{&s.http.linger_bytes_max, 0, 1024 * 1024 * 1024}},
      {"http", "linger_timeout_ms", "After such an error, how long the rest of the body is still read.",
       int_rule{&s.http.linger_timeout_ms, 0, 600'000}},
      {"http", "readyz_refresh_ms", "/readyz answers from a health state at most this old.",
       int_rule{&s.http.readyz_refresh_ms, 10, 60'000}},
      {"http", "retry_after_max_s", "Longest Retry-After of a 503 answer, in seconds.",
       int_rule{&s.http.retry_after_max_s, 1, 3'600}},
      {"http", "retry_returns_percent",
       "Clients answered 503 are told to come back spread over the seconds ahead: each second takes returns up to "
       "this percentage of the answers (other than 503) of the busiest of the last 10 seconds (at least 100 a second).",
       int_rule{&s.http.retry_returns_percent, 1, 100}},
      {"http", "trusted_proxies",
       "Proxies (IP networks, comma-separated, e.g. \"10.0.0.0/8, 127.0.0.1\") whose X-Forwarded-For names the "
       "client; empty: none.",
       string_rule{&s.http.trusted_proxies, {}, true}},

      {"database", "url", "PostgreSQL URL of the application role.", string_rule{&s.database.url, {}, false}},
      {"database", "owner_url", "PostgreSQL URL of the owner role that runs migrations (empty: none).",
       string_rule{&s.database.owner_url, {}, true}},
      {"database", "migrate_on_start", "Apply pending migrations (as the owner role) at start.",
       bool_rule{&s.database.migrate_on_start}},
      {"database", "readers", "Connections serving reads and account administration.",
       int_rule{&s.database.readers, 1, 256}},
      {"database", "reader_queue_max", "Queued read requests at most; more answer 503.",
       int_rule{&s.database.reader_queue_max, 1, 1'000'000}},
      {"database", "connect_timeout_ms", "Timeout to open one database connection.",
       int_rule{&s.database.connect_timeout_ms, 100, 60'000}},
      {"database", "connection_wait_ms", "Longest wait for a database connection before 503.",
       int_rule{&s.database.connection_wait_ms, 1, 60'000}},
      {"database", "statement_timeout_ms", "statement_timeout of every connection.",
       int_rule{&s.database.statement_timeout_ms, 10, 600'000}},
      {"database", "lock_timeout_ms", "lock_timeout of every connection.",
       int_rule{&s.database.lock_timeout_ms, 10, 600'000}},
      {"database", "reconnect_backoff_ms", "Pause between reconnection attempts.",
       int_rule{&s.database.reconnect_backoff_ms, 10, 60'000}},

      {"writer", "count", "Ledger writers, each with its own connection.", int_rule{&s.writer.count, 1, 64}},
      {"writer", "batch_postings_max", "Postings committed in one database transaction at most.",
       int_rule{&s.writer.batch_postings_max, 1, 10'000}},
      {"writer", "batch_wait_us", "How long a writer waits for more postings before committing.",
       int_rule{&s.writer.batch_wait_us, 0, 1'000'000}},
      {"writer", "queue_postings_max", "Postings queued per writer at most; more answer 503.",
       int_rule{&s.writer.queue_postings_max, 1, 10'000'000}},
      {"writer", "queue_run_postings_max",
       "Transfers of batches queued per writer at most; a batch that would pass it answers 503, unless none is "
       "queued.",
       int_rule{&s.writer.queue_run_postings_max, 1, 10'000'000}},

      {"actors", "scheduler_threads", "Threads of the CAF scheduler.", int_rule{&s.actors.scheduler_threads, 1, 256}},
      {"actors", "scheduler_policy",
       "Actor scheduler: sharing (idle workers sleep, actors/scheduler.hpp) or stealing (CAF's; idle workers poll).",
       string_rule{&s.actors.scheduler_policy, {"sharing", "stealing"}, false}},
      {"actors", "registry_shards", "Shards of the account registry.", int_rule{&s.actors.registry_shards, 1, 1024}},
      {"actors", "accounts_live_max", "Live account actors at most; idle ones are passivated first.",
       int_rule{&s.actors.accounts_live_max, 16, 100'000'000}},
      {"actors", "account_idle_ms", "An account actor idle this long passivates.",
       int_rule{&s.actors.account_idle_ms, 10, 86'400'000}},
      {"actors", "account_inflight_max", "Debits in flight per account at most; more answer 503.",
       int_rule{&s.actors.account_inflight_max, 1, 1'000'000}},

      {"ledger", "amount_minor_max", "Largest amount of one request, in minor units.",
       int_rule{&s.ledger.amount_minor_max, 1, k_int_max}},
      {"ledger", "hot_shards_max", "Credit shards of a hot account at most.",
       int_rule{&s.ledger.hot_shards_max, 1, 1024}},
      {"ledger", "hot_shards_default", "Credit shards of a hot account when the request names none.",
       int_rule{&s.ledger.hot_shards_default, 1, 1024}},
      {"ledger", "sweep_interval_ms", "How often shard balances are swept into the main account.",
       int_rule{&s.ledger.sweep_interval_ms, 10, 86'400'000}},
      {"ledger", "sweep_accounts_per_page",
       "Hot accounts one sweep reads and sweeps at once: a periodic sweep sweeps one such page (the next one "
       "at the next tick), an operator's sweep every page.",
       int_rule{&s.ledger.sweep_accounts_per_page, 1, 100'000}},
      {"ledger", "hold_expiry_interval_ms",
       "How often holds past their expiry are released (an expired hold is released at most about this late).",
       int_rule{&s.ledger.hold_expiry_interval_ms, 10, 600'000}},
      {"ledger", "replay_retention_hours",
       "How long the answer of a management request sent with an Idempotency-Key (webhook registration, secret "
       "rotations, account creation) is kept to answer its retries; after it the key names a new request (0: kept "
       "for good).",
       int_rule{&s.ledger.replay_retention_hours, 0, 87'600}},
      {"ledger", "replay_prune_interval_ms", "How often kept answers past their retention are deleted.",
       int_rule{&s.ledger.replay_prune_interval_ms, 10, 86'400'000}},
      {"ledger", "reconcile_interval_s",
       "How often the reconciler checks the entries added since its last run (0: never).",
       int_rule{&s.ledger.reconcile_interval_s, 0, 604'800}},
      {"ledger", "reconcile_full_interval_s",
       "How often the reconciler rechecks the whole ledger and its checkpoints (0: never).",
       int_rule{&s.ledger.reconcile_full_interval_s, 0, 31'536'000}},
      {"ledger", "reconcile_statement_timeout_ms",
       "Longest statement of a reconciliation run, and longest wait for older writers before it.",
       int_rule{&s.ledger.reconcile_statement_timeout_ms, 1'000, 86'400'000}},
      {"ledger", "reconcile_work_mem_mb",
       "PostgreSQL work_mem of a reconciliation run (its aggregates hold one group per account).",
       int_rule{&s.ledger.reconcile_work_mem_mb, 1, 65'536}},
      {"ledger", "entries_page_max", "Largest page of account entries.",
       int_rule{&s.ledger.entries_page_max, 1, 100'000}},
      {"ledger", "batch_transfers_max", "Transfers in one batch (POST /v1/transfers/batch) at most.",
       int_rule{&s.ledger.batch_transfers_max, 1, 10'000}},
      {"ledger", "lookup_ids_max", "Transaction ids in one POST /v1/transactions/lookup at most.",
       int_rule{&s.ledger.lookup_ids_max, 1, 10'000}},
      {"ledger", "withdrawal_fees", "Withdrawal fee per currency in minor units, e.g. \"EUR:50,USD:30\".",
       string_rule{&s.ledger.withdrawal_fees, {}, true}},
      {"ledger", "withdrawal_fee_default", "Withdrawal fee of a currency withdrawal_fees does not name.",
       int_rule{&s.ledger.withdrawal_fee_default, 0, 1'000'000'000'000'000}},
      {"ledger", "fx_quote_ttl_ms", "How long an exchange quote (POST /v1/fx/quotes) holds its rate, in ms.",
       int_rule{&s.ledger.fx_quote_ttl_ms, 1, 3'600'000}},

      {"redis", "url", "Redis URL for rate-limit counters.", string_rule{&s.redis.url, {}, false}},
      {"redis", "command_timeout_ms", "Timeout of one Redis command before failing open.",
       int_rule{&s.redis.command_timeout_ms, 1, 10'000}},
      {"redis", "connections", "Redis connections, each on its own thread.", int_rule{&s.redis.connections, 1, 64}},
      {"redis", "batch_wait_us",
       "How long a Redis connection waits for more rate-limit checks to send in one round trip.",
       int_rule{&s.redis.batch_wait_us, 0, 100'000}},
      {"redis", "retry_interval_ms", "While Redis is down, how often it is tried again.",
       int_rule{&s.redis.retry_interval_ms, 10, 600'000}},

      {"ratelimit", "enabled", "Rate-limit every authenticated request per principal.",
       bool_rule{&s.ratelimit.enabled}},
      {"ratelimit", "algorithm", "Counter kind: sliding (sliding window) or fixed (fixed window).",
       string_rule{&s.ratelimit.algorithm, {"sliding", "fixed"}, false}},
      {"ratelimit", "rate_per_second", "Money-moving requests per second per principal.",
       int_rule{&s.ratelimit.rate_per_second, 1, 10'000'000}},
      {"ratelimit", "burst", "Money-moving requests per principal allowed at once.",
       int_rule{&s.ratelimit.burst, 1, 10'000'000}},
      {"ratelimit", "read_rate_per_second", "Reads per second per principal.",
       int_rule{&s.ratelimit.read_rate_per_second, 1, 10'000'000}},
      {"ratelimit", "read_burst", "Reads per principal allowed at once.",
       int_rule{&s.ratelimit.read_burst, 1, 10'000'000}},
      {"ratelimit", "lease_tokens",
       "Tokens a server takes from Redis at once per principal and class, spent locally; fewer where expiring leases "
       "could strand half the limit (1: every request asks Redis).",
       int_rule{&s.ratelimit.lease_tokens, 1, 10'000}},
      {"ratelimit", "lease_ms",
       "How long tokens taken ahead from Redis stay spendable here, in ms; never past the end of the window they were "
       "counted in.",
       int_rule{&s.ratelimit.lease_ms, 1, 60'000}},
      {"ratelimit", "local_tokens",
       "Requests per principal and class a server admits in any window without asking Redis; the shared limit keeps "
       "them back for every server it counts, at most ratelimit.processes_max (0: every request spends the shared "
       "limit).",
       int_rule{&s.ratelimit.local_tokens, 0, 8}},
      {"ratelimit", "processes_max",
       "The most server processes sharing one Redis the limit keeps room for (it counts those running); with more, a "
       "principal may pass its limit by local_tokens per extra process and window.",
       int_rule{&s.ratelimit.processes_max, 1, 1'000}},

      {"events", "enabled", "Run the outbox relay: publish committed transactions to the Redis Stream wallet:events.",
       bool_rule{&s.events.enabled}},
      {"events", "batch_rows_max", "Outbox rows (one per committed batch) the relay claims in one round at most.",
       int_rule{&s.events.batch_rows_max, 1, 10'000}},
      {"events", "stream_maxlen", "Entries the stream wallet:events keeps, about (XADD MAXLEN ~).",
       int_rule{&s.events.stream_maxlen, 1'000, 1'000'000'000}},
      {"events", "poll_interval_ms", "How often an idle relay looks for new outbox rows.",
       int_rule{&s.events.poll_interval_ms, 1, 60'000}},
      {"events", "redis_url", "Redis URL of the event stream (empty: redis.url).",
       string_rule{&s.events.redis_url, {}, true}},
      {"events", "redis_timeout_ms", "Deadline of the relay's Redis work in one round (connecting, or all its XADDs).",
       int_rule{&s.events.redis_timeout_ms, 10, 60'000}},
      {"events", "backoff_ms_max", "Longest pause between the relay's attempts while Redis or the database fails.",
       int_rule{&s.events.backoff_ms_max, 10, 600'000}},
      {"events", "feed_page_max", "Largest page of GET /v1/events.", int_rule{&s.events.feed_page_max, 1, 100'000}},
      {"events", "feed_scan_max", "Events one GET /v1/events looks at most (a filtered page may come back short).",
       int_rule{&s.events.feed_scan_max, 1, 10'000'000}},
      {"events", "feed_retention_days",
       "Days the event feed (GET /v1/events) keeps an event; the relay deletes older ones (0: kept for good).",
       int_rule{&s.events.feed_retention_days, 0, 36'500}},
      {"events", "prune_interval_ms", "How often the active relay deletes the feed's events past their retention.",
       int_rule{&s.events.prune_interval_ms, 10, 86'400'000}},

      {"cluster", "enabled",
       "Run as one of several nodes on one ledger: debit only the accounts of partitions this node leases.",
       bool_rule{&s.cluster.enabled}},
      {"cluster", "node_id", "This node's name in the lease table (empty: <hostname>-<http.port>).",
       string_rule{&s.cluster.node_id, {}, true}},
      {"cluster", "partitions", "Partitions of the account space; fixed per deployment (the first node stores it).",
       int_rule{&s.cluster.partitions, 1, 4'096}},
      {"cluster", "lease_ttl_ms",
       "How long a partition lease lasts unless renewed; a dead node's partitions are "
       "taken over after this.",
       int_rule{&s.cluster.lease_ttl_ms, 100, 600'000}},
      {"cluster", "lease_renew_ms", "How often a node renews its leases and rebalances; at most a third of the TTL.",
       int_rule{&s.cluster.lease_renew_ms, 10, 200'000}},
      {"cluster", "advertise_address",
       "host:port where the other nodes reach this node's actors (empty: http.host and http.port + 1000).",
       string_rule{&s.cluster.advertise_address, {}, true}},
      {"webhooks", "enabled", "Run webhook delivery in this server (any number may; each attempt is claimed by one).",
       bool_rule{&s.webhooks.enabled}},
      {"webhooks", "timeout_ms",
       "Deadline of one delivery attempt: resolving, connecting, TLS, sending, the answer's head.",
       int_rule{&s.webhooks.timeout_ms, 10, 120'000}},
      {"webhooks", "retry_span_ms",
       "How long a delivery is retried after its first attempt before it is marked FAILED.",
       int_rule{&s.webhooks.retry_span_ms, 0, 30LL * 86'400'000}},
      {"webhooks", "backoff_base_ms", "Pause after a delivery's first failed attempt; it doubles with each failure.",
       int_rule{&s.webhooks.backoff_base_ms, 1, 3'600'000}},
      {"webhooks", "backoff_cap_ms", "Longest pause between two attempts of a delivery.",
       int_rule{&s.webhooks.backoff_cap_ms, 1, 86'400'000}},
      {"webhooks", "concurrency", "Delivery attempts in flight in this server at most (one per endpoint at a time).",
       int_rule{&s.webhooks.concurrency, 1, 10'000}},
      {"webhooks", "poll_interval_ms", "How often an idle dispatcher looks for new events and due retries.",
       int_rule{&s.webhooks.poll_interval_ms, 1, 60'000}},
      {"webhooks", "endpoints_per_owner_max", "Live webhook endpoints one principal may have.",
       int_rule{&s.webhooks.endpoints_per_owner_max, 1, 10'000}},
      {"webhooks", "allow_loopback", "Allow webhook URLs on loopback addresses (127.0.0.0/8, ::1): for tests only.",
       bool_rule{&s.webhooks.allow_loopback}},
      {"webhooks", "ca_file",
       "PEM file of CAs that https webhook destinations are verified against (empty: the system store).",
       string_rule{&s.webhooks.ca_file, {}, true}},
      {"webhooks", "delivery_retention_days",
       "Days a DELIVERED or FAILED delivery is kept after it ended before it is deleted (0: kept for good); a "
       "delivery that disabled its endpoint stays while the endpoint names it.",
       int_rule{&s.webhooks.delivery_retention_days, 0, 36'500}},
      {"webhooks", "prune_interval_ms", "How often a webhook dispatcher deletes the deliveries past their retention.",
       int_rule{&s.webhooks.prune_interval_ms, 10, 86'400'000}},

      {"admission", "inflight_requests_max",
       "Requests in flight in the whole server, counted until their work ends (answered at the deadline or not); more "
       "answer 503.",
       int_rule{&s.admission.inflight_requests_max, 1, 10'000'000}},
      {"admission", "queue_target_ms",
       "Requests in flight at most what the server answered (other than 503) in this many milliseconds of its busiest "
       "of the last 10 seconds; more answer 503 at once. 0: no such bound.",
       int_rule{&s.admission.queue_target_ms, 0, 60'000}},
      {"admission", "inflight_requests_min",
       "The bound of admission.queue_target_ms is never below this many requests.",
       int_rule{&s.admission.inflight_requests_min, 1, 10'000'000}},

      {"auth", "bootstrap_key", "API key of an operator ensured at start (empty: none).",
       string_rule{&s.auth.bootstrap_key, {}, true}},
      {"auth", "key_cache_max", "API keys cached in memory at most.", int_rule{&s.auth.key_cache_max, 1, 100'000'000}},
      {"auth", "key_cache_ttl_ms",
       "How long a cached API key is trusted since it was last confirmed: a key revoked on another server is "
       "refused here within this time. Revoked keys are looked for every third of it (one query).",
       int_rule{&s.auth.key_cache_ttl_ms, 100, 86'400'000}},
      {"auth", "active_keys_max", "Active (unrevoked) API keys a principal may have at once.",
       int_rule{&s.auth.active_keys_max, 1, 1'000}},
      {"auth", "unknown_key_cache_ms", "How long an unknown API key is answered 401 without a database read.",
       int_rule{&s.auth.unknown_key_cache_ms, 0, 3'600'000}},
      {"auth", "unknown_key_cache_max", "Unknown API keys remembered at most.",
       int_rule{&s.auth.unknown_key_cache_max, 1, 100'000'000}},
      {"auth", "unauthenticated_per_second",
       "Requests per second per client address whose key needs a database read (unknown or new keys); more answer 429.",
       int_rule{&s.auth.unauthenticated_per_second, 1, 10'000'000}},
      {"auth", "unauthenticated_burst", "Such requests per client address allowed at once.",
       int_rule{&s.auth.unauthenticated_burst, 1, 10'000'000}},
      {"auth", "unknown_accounts_per_second",
       "Lookups per second per principal of accounts that turn out not to exist; more answer 429.",
       int_rule{&s.auth.unknown_accounts_per_second, 1, 10'000'000}},
      {"auth", "unknown_accounts_burst",
       "Such lookups per principal allowed at once; those already under way when it runs out are paid back at the "
       "rate (up to a minute of it) before the next is allowed.",
       int_rule{&s.auth.unknown_accounts_burst, 1, 10'000'000}},

      {"log", "level", "Log level.",
       string_rule{&s.log.level, {"trace", "debug", "info", "warn", "error", "critical", "off"}, false}},
      {"log", "format", "Log line format: text, or json (one object per line).",
       string_rule{&s.log.format, {"text", "json"}, false}},
  };
}

std::string qualified(const descriptor& d) { return std::string(d.section) + "." + std::string(d.key); }

std::string flag_name(const descriptor& d) {
  std::string name = "--" + std::string(d.section) + "-" + std::string(d.key);
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

std::string join(const std::vector<std::string>& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : ", ") + v;
  return out;
}

[[noreturn]] void fail(const descriptor& d, std::string_view value, std::string_view source, std::string_view allowed) {
  std::ostringstream out;
  out << "invalid setting " << qualified(d) << " = \"" << value << "\" (from " << source << "): " << allowed;
  throw config_error(out.str());
}

std::string int_allowed(const int_rule& r) {
  return "must be an integer from " + std::to_string(r.min) + " to " + std::to_string(r.max);
}

void check_int(const descriptor& d, const int_rule& r, std::int64_t v, std::string_view source) {
  if (v < r.min || v > r.max) fail(d, std::to_string(v), source, int_allowed(r));
}

void check_string(const descriptor& d, const string_rule& r, const std::string& v, std::string_view source) {
  if (v.empty() && !r.may_be_empty) fail(d, v, source, "must not be empty");
  if (!r.allowed.empty() && std::find(r.allowed.begin(), r.allowed.end(), v) == r.allowed.end()) {
    fail(d, v, source, "must be one of: " + join(r.allowed));
  }
}

// Applies a textual value (from the environment or a flag) to one setting.
void apply_text(const descriptor& d, const std::string& text, std::string_view source) {
  std::visit(
      [&](const auto& r) {
        using rule = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<rule, int_rule>) {
          std::int64_t v = 0;
          const char* end = text.data() + text.size();
          auto [ptr, ec] = std::from_chars(text.data(), end, v);
          if (text.empty() || ec != std::errc{} || ptr != end) fail(d, text, source, int_allowed(r));
          check_int(d, r, v, source);
          *r.target = v;
        } else if constexpr (std::is_same_v<rule, string_rule>) {
          check_string(d, r, text, source);
          *r.target = text;
        } else {
          std::string lower = text;
          std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
          if (lower == "true" || lower == "1" || lower == "yes" || lower == "on") {
            *r.target = true;
          } else if (lower == "false" || lower == "0" || lower == "no" || lower == "off") {
            *r.target = false;
          } else {
            fail(d, text, source, "must be true or false");
          }
        }
      },
      d.rule);
}

// Applies one TOML node to one setting, insisting on the TOML type that matches.
void apply_toml(const descriptor& d, const toml::node& node, std::string_view source) {
  std::visit(
      [&](const auto& r) {
        using rule = std::decay_t<decltype(r)>;
        std::ostringstream shown;
        node.visit([&](const auto& leaf) { shown << leaf; });
        if constexpr (std::is_same_v<rule, int_rule>) {
          auto v = node.value_exact<std::int64_t>();
          if (!v) fail(d, shown.str(), source, int_allowed(r));
          check_int(d, r, *v, source);
          *r.target = *v;
        } else if constexpr (std::is_same_v<rule, string_rule>) {
          auto v = node.value_exact<std::string>();
          if (!v) fail(d, shown.str(), source, "must be a string");
          check_string(d, r, *v, source);
          *r.target = *v;
        } else {
          auto v = node.value_exact<bool>();
          if (!v) fail(d, shown.str(), source, "must be true or false");
          *r.target = *v;
        }
      },
      d.rule);
}

void apply_toml_document(settings& s, const std::string& text, const std::string& source) {
  toml::table doc;
  try {
    doc = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream out;
    out << "cannot parse " << source << ": " << e.description() << " at line " << e.source().begin.line;
    throw config_error(out.str());
  }
  auto table = describe(s);
  for (auto&& [section_key, section_node] : doc) {
    const auto* section = section_node.as_table();
    if (section == nullptr) {
      throw config_error("unknown top-level key \"" + std::string(section_key.str()) + "\" in " + source +
                         ": settings live in sections such as [http]");
    }
    const bool known_section =
        std::any_of(table.begin(), table.end(), [&](const descriptor& d) { return d.section == section_key.str(); });
    if (!known_section) {
      throw config_error("unknown section [" + std::string(section_key.str()) + "] in " + source);
    }
    for (auto&& [key, node] : *section) {
      auto it = std::find_if(table.begin(), table.end(),
                             [&](const descriptor& d) { return d.section == section_key.str() && d.key == key.str(); });
      if (it == table.end()) {
        throw config_error("unknown setting " + std::string(section_key.str()) + "." + std::string(key.str()) + " in " +
                           source);
      }
      apply_toml(*it, node, source);
    }
  }
}

void apply_environment(settings& s, const environment& env) {
  auto table = describe(s);
  for (const auto& d : table) {
    auto name = env_name(d.section, d.key);
    if (auto it = env.find(name); it != env.end()) apply_text(d, it->second, name);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw config_error("cannot read configuration file " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

std::string env_name(std::string_view section, std::string_view key) {
  std::string name = "WALLET_" + std::string(section) + "_" + std::string(key);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::toupper(c); });
  return name;
}

environment process_environment() {
  environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return env;
}

void validate(const settings& s) {
  settings copy = s;
  for (const auto& d : describe(copy)) {
    std::visit(
        [&](const auto& r) {
          using rule = std::decay_t<decltype(r)>;
          if constexpr (std::is_same_v<rule, int_rule>) {
            check_int(d, r, *r.target, "settings");
          } else if constexpr (std::is_same_v<rule, string_rule>) {
            check_string(d, r, *r.target, "settings");
          }
        },
        d.rule);
  }
  if (!base::parse_networks(s.http.trusted_proxies)) {
    throw config_error("invalid setting http.trusted_proxies = \"" + s.http.trusted_proxies +
                       "\": write IP addresses or networks separated by commas, e.g. \"10.0.0.0/8, 127.0.0.1\"");
  }
  if (!parse_fee_table(s.ledger.withdrawal_fees)) {
    throw config_error("invalid setting ledger.withdrawal_fees = \"" + s.ledger.withdrawal_fees +
                       "\": write CURRENCY:FEE pairs separated by commas, e.g. \"EUR:50,USD:30\"");
  }
  if (s.ledger.hot_shards_default > s.ledger.hot_shards_max) {
    throw config_error("invalid setting ledger.hot_shards_default = \"" + std::to_string(s.ledger.hot_shards_default) +
                       "\": must not exceed ledger.hot_shards_max (" + std::to_string(s.ledger.hot_shards_max) + ")");
  }
  // A node id names the node in the lease table and in the journal's metadata: a plain token.
  if (s.cluster.node_id.size() > 64 ||
      s.cluster.node_id.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
          std::string::npos) {
    throw config_error("invalid setting cluster.node_id = \"" + s.cluster.node_id +
                       "\": use at most 64 letters, digits, '.', '_' or '-'");
  }
  // A lease renewed less than three times per TTL lapses after one slow round.
  if (s.cluster.lease_renew_ms * 3 > s.cluster.lease_ttl_ms) {
    throw config_error("invalid setting cluster.lease_renew_ms = \"" + std::to_string(s.cluster.lease_renew_ms) +
                       "\": must be at most a third of cluster.lease_ttl_ms (" +
                       std::to_string(s.cluster.lease_ttl_ms) + ")");
  }
  // The relay's transaction waits for Redis between its claim and its COMMIT; PostgreSQL ends a
  // session idle in a transaction for twice the statement timeout (persistence::connect).
  if (s.events.redis_timeout_ms >= 2 * s.database.statement_timeout_ms) {
    throw config_error("invalid setting events.redis_timeout_ms = \"" + std::to_string(s.events.redis_timeout_ms) +
                       "\": must be less than twice database.statement_timeout_ms (" +
                       std::to_string(2 * s.database.statement_timeout_ms) + ")");
  }
}

std::optional<std::vector<std::pair<std::string, std::int64_t>>> parse_fee_table(std::string_view text) {
  std::vector<std::pair<std::string, std::int64_t>> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const auto item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    const auto colon = item.find(':');
    if (colon != 3) return std::nullopt;
    const std::string currency(item.substr(0, 3));
    for (char c : currency) {
      if (c < 'A' || c > 'Z') return std::nullopt;
    }
    const auto digits = item.substr(4);
    if (digits.empty() || digits.size() > 16) return std::nullopt;
    std::int64_t fee = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      fee = fee * 10 + (c - '0');
    }
    if (fee > 1'000'000'000'000'000) return std::nullopt;
    for (const auto& [known, _] : out) {
      if (known == currency) return std::nullopt;
    }
    out.emplace_back(currency, fee);
    if (comma != std::string_view::npos && text.empty()) return std::nullopt;  // a trailing comma
  }
  return out;
}

std::int64_t ledger_settings::withdrawal_fee(std::string_view currency) const {
  if (auto table = parse_fee_table(withdrawal_fees)) {
    for (const auto& [c, fee] : *table) {
      if (c == currency) return fee;
    }
  }
  return withdrawal_fee_default;
}

settings load_from(const std::string& toml_text, const environment& env) {
  settings s;
  apply_toml_document(s, toml_text, "configuration");
  apply_environment(s, env);
  validate(s);
  return s;
}

load_result load(int argc, const char* const* argv, const environment& env, const std::string& program_name) {
  load_result result;
  settings& s = result.values;

  CLI::App app{program_name + ": an actor-based double-entry wallet server", program_name};
  std::string config_path;
  bool print_example = false;
  app.add_option("--config", config_path, "TOML configuration file");
  app.add_flag("--print-example-config", print_example, "Print every setting with its default and exit");

  // Flags are collected as text first: the file and the environment must be applied before them.
  auto table = describe(s);
  std::vector<std::string> flag_values(table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    std::string doc(table[i].doc);
    doc += " [" + env_name(table[i].section, table[i].key) + "]";
    app.add_option(flag_name(table[i]), flag_values[i], doc);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    result.exit_now = true;
    result.exit_code = app.exit(e);
    return result;
  } catch (const CLI::ParseError& e) {
    throw config_error(std::string("command line: ") + e.what());
  }
  if (print_example) {
    result.exit_now = true;
    result.print_example = true;
    return result;
  }

  if (!config_path.empty()) apply_toml_document(s, read_file(config_path), config_path);
  apply_environment(s, env);
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (app.count(flag_name(table[i])) > 0) apply_text(table[i], flag_values[i], flag_name(table[i]));
  }
  validate(s);
  return result;
}

std::string example_toml() {
  settings defaults;
  std::ostringstream out;
  out << "# Wallet server configuration: every setting with its default.\n"
      << "# Precedence: this file (--config PATH) < WALLET_<SECTION>_<KEY> environment variables\n"
      << "# < --<section>-<key> command-line flags.\n";
  std::string_view section;
  for (const auto& d : describe(defaults)) {
    if (d.section != section) {
      section = d.section;
      out << "\n[" << section << "]\n";
    }
    out << "# " << d.doc << " (" << env_name(d.section, d.key);
    std::visit(
        [&](const auto& r) {
          using rule = std::decay_t<decltype(r)>;
          if constexpr (std::is_same_v<rule, int_rule>) {
            out << "; " << r.min << " to " << r.max << ")\n" << d.key << " = " << *r.target << "\n";
          } else if constexpr (std::is_same_v<rule, string_rule>) {
            if (!r.allowed.empty()) out << "; one of " << join(r.allowed);
            out << ")\n" << d.key << " = \"" << *r.target << "\"\n";
          } else {
            out << ")\n" << d.key << " = " << (*r.target ? "true" : "false") << "\n";
          }
        },
        d.rule);
  }
  return out.str();
}

}  // namespace config
