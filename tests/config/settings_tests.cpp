// Settings: defaults, the precedence file < environment < flags, the refusal of every kind of bad
// value with a message naming key, value and what is allowed, and the committed example file.

#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/networks.hpp"
#include "config/settings.hpp"

namespace config {
namespace {

using field_list = std::vector<std::pair<std::string, std::string>>;

// Every setting as "section.key" -> text, in the order of the example file. The test
// `fields_cover_every_documented_key` keeps this list complete.
field_list fields(const settings& s) {
  auto i = [](std::int64_t v) { return std::to_string(v); };
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  return {
      {"http.host", s.http.host},
      {"http.port", i(s.http.port)},
      {"http.io_threads", i(s.http.io_threads)},
      {"http.body_bytes_max", i(s.http.body_bytes_max)},
      {"http.settlement_body_bytes_max", i(s.http.settlement_body_bytes_max)},
      {"http.header_bytes_max", i(s.http.header_bytes_max)},
      {"http.read_timeout_ms", i(s.http.read_timeout_ms)},
      {"http.keep_alive_timeout_ms", i(s.http.keep_alive_timeout_ms)},
      {"http.connections_max", i(s.http.connections_max)},
      {"http.request_deadline_ms", i(s.http.request_deadline_ms)},
      {"http.settlement_deadline_ms", i(s.http.settlement_deadline_ms)},
      {"http.shutdown_drain_ms", i(s.http.shutdown_drain_ms)},
      {"http.shutdown_grace_ms", i(s.http.shutdown_grace_ms)},
      {"http.linger_bytes_max", i(s.http.linger_bytes_max)},
      {"http.linger_timeout_ms", i(s.http.linger_timeout_ms)},
      {"http.readyz_refresh_ms", i(s.http.readyz_refresh_ms)},
      {"http.retry_after_max_s", i(s.http.retry_after_max_s)},
      {"http.retry_returns_percent", i(s.http.retry_returns_percent)},
      {"http.trusted_proxies", s.http.trusted_proxies},
      {"database.url", s.database.url},
      {"database.owner_url", s.database.owner_url},
      {"database.migrate_on_start", b(s.database.migrate_on_start)},
      {"database.readers", i(s.database.readers)},
      {"database.reader_queue_max", i(s.database.reader_queue_max)},
      {"database.connect_timeout_ms", i(s.database.connect_timeout_ms)},
      {"database.connection_wait_ms", i(s.database.connection_wait_ms)},
      {"database.statement_timeout_ms", i(s.database.statement_timeout_ms)},
      {"database.lock_timeout_ms", i(s.database.lock_timeout_ms)},
      {"database.reconnect_backoff_ms", i(s.database.reconnect_backoff_ms)},
      {"writer.count", i(s.writer.count)},
      {"writer.batch_postings_max", i(s.writer.batch_postings_max)},
      {"writer.batch_wait_us", i(s.writer.batch_wait_us)},
      {"writer.queue_postings_max", i(s.writer.queue_postings_max)},
      {"writer.queue_run_postings_max", i(s.writer.queue_run_postings_max)},
      {"actors.scheduler_threads", i(s.actors.scheduler_threads)},
      {"actors.scheduler_policy", s.actors.scheduler_policy},
      {"actors.registry_shards", i(s.actors.registry_shards)},
      {"actors.accounts_live_max", i(s.actors.accounts_live_max)},
      {"actors.account_idle_ms", i(s.actors.account_idle_ms)},
      {"actors.account_inflight_max", i(s.actors.account_inflight_max)},
      {"ledger.amount_minor_max", i(s.ledger.amount_minor_max)},
      {"ledger.hot_shards_max", i(s.ledger.hot_shards_max)},
      {"ledger.hot_shards_default", i(s.ledger.hot_shards_default)},
      {"ledger.sweep_interval_ms", i(s.ledger.sweep_interval_ms)},
      {"ledger.sweep_accounts_per_page", i(s.ledger.sweep_accounts_per_page)},
      {"ledger.hold_expiry_interval_ms", i(s.ledger.hold_expiry_interval_ms)},
      {"ledger.replay_retention_hours", i(s.ledger.replay_retention_hours)},
      {"ledger.replay_prune_interval_ms", i(s.ledger.replay_prune_interval_ms)},
      {"ledger.reconcile_interval_s", i(s.ledger.reconcile_interval_s)},
      {"ledger.reconcile_full_interval_s", i(s.ledger.reconcile_full_interval_s)},
      {"ledger.reconcile_statement_timeout_ms", i(s.ledger.reconcile_statement_timeout_ms)},
      {"ledger.reconcile_work_mem_mb", i(s.ledger.reconcile_work_mem_mb)},
      {"ledger.entries_page_max", i(s.ledger.entries_page_max)},
      {"ledger.batch_transfers_max", i(s.ledger.batch_transfers_max)},
      {"ledger.lookup_ids_max", i(s.ledger.lookup_ids_max)},
      {"ledger.withdrawal_fees", s.ledger.withdrawal_fees},
      {"ledger.withdrawal_fee_default", i(s.ledger.withdrawal_fee_default)},
      {"ledger.fx_quote_ttl_ms", i(s.ledger.fx_quote_ttl_ms)},
      {"redis.url", s.redis.url},
      {"redis.command_timeout_ms", i(s.redis.command_timeout_ms)},
      {"redis.connections", i(s.redis.connections)},
      {"redis.batch_wait_us", i(s.redis.batch_wait_us)},
      {"redis.retry_interval_ms", i(s.redis.retry_interval_ms)},
      {"ratelimit.enabled", b(s.ratelimit.enabled)},
      {"ratelimit.algorithm", s.ratelimit.algorithm},
      {"ratelimit.rate_per_second", i(s.ratelimit.rate_per_second)},
      {"ratelimit.burst", i(s.ratelimit.burst)},
      {"ratelimit.read_rate_per_second", i(s.ratelimit.read_rate_per_second)},
      {"ratelimit.read_burst", i(s.ratelimit.read_burst)},
      {"ratelimit.lease_tokens", i(s.ratelimit.lease_tokens)},
      {"ratelimit.lease_ms", i(s.ratelimit.lease_ms)},
      {"ratelimit.local_tokens", i(s.ratelimit.local_tokens)},
      {"ratelimit.processes_max", i(s.ratelimit.processes_max)},
      {"events.enabled", b(s.events.enabled)},
      {"events.batch_rows_max", i(s.events.batch_rows_max)},
      {"events.stream_maxlen", i(s.events.stream_maxlen)},
      {"events.poll_interval_ms", i(s.events.poll_interval_ms)},
      {"events.redis_url", s.events.redis_url},
      {"events.redis_timeout_ms", i(s.events.redis_timeout_ms)},
      {"events.backoff_ms_max", i(s.events.backoff_ms_max)},
      {"events.feed_page_max", i(s.events.feed_page_max)},
      {"events.feed_scan_max", i(s.events.feed_scan_max)},
      {"events.feed_retention_days", i(s.events.feed_retention_days)},
      {"events.prune_interval_ms", i(s.events.prune_interval_ms)},
      {"cluster.enabled", b(s.cluster.enabled)},
      {"cluster.node_id", s.cluster.node_id},
      {"cluster.partitions", i(s.cluster.partitions)},
      {"cluster.lease_ttl_ms", i(s.cluster.lease_ttl_ms)},
      {"cluster.lease_renew_ms", i(s.cluster.lease_renew_ms)},
      {"cluster.advertise_address", s.cluster.advertise_address},
      {"webhooks.enabled", b(s.webhooks.enabled)},
      {"webhooks.timeout_ms", i(s.webhooks.timeout_ms)},
      {"webhooks.retry_span_ms", i(s.webhooks.retry_span_ms)},
      {"webhooks.backoff_base_ms", i(s.webhooks.backoff_base_ms)},
      {"webhooks.backoff_cap_ms", i(s.webhooks.backoff_cap_ms)},
      {"webhooks.concurrency", i(s.webhooks.concurrency)},
      {"webhooks.poll_interval_ms", i(s.webhooks.poll_interval_ms)},
      {"webhooks.endpoints_per_owner_max", i(s.webhooks.endpoints_per_owner_max)},
      {"webhooks.allow_loopback", b(s.webhooks.allow_loopback)},
      {"webhooks.ca_file", s.webhooks.ca_file},
      {"webhooks.delivery_retention_days", i(s.webhooks.delivery_retention_days)},
      {"webhooks.prune_interval_ms", i(s.webhooks.prune_interval_ms)},
      {"admission.inflight_requests_max", i(s.admission.inflight_requests_max)},
      {"admission.queue_target_ms", i(s.admission.queue_target_ms)},
      {"admission.inflight_requests_min", i(s.admission.inflight_requests_min)},
      {"auth.bootstrap_key", s.auth.bootstrap_key},
      {"auth.key_cache_max", i(s.auth.key_cache_max)},
      {"auth.key_cache_ttl_ms", i(s.auth.key_cache_ttl_ms)},
      {"auth.active_keys_max", i(s.auth.active_keys_max)},
      {"auth.unknown_key_cache_ms", i(s.auth.unknown_key_cache_ms)},
      {"auth.unknown_key_cache_max", i(s.auth.unknown_key_cache_max)},
      {"auth.unauthenticated_per_second", i(s.auth.unauthenticated_per_second)},
      {"auth.unauthenticated_burst", i(s.auth.unauthenticated_burst)},
      {"auth.unknown_accounts_per_second", i(s.auth.unknown_accounts_per_second)},
      {"auth.unknown_accounts_burst", i(s.auth.unknown_accounts_burst)},
      {"log.level", s.log.level},
      {"log.format", s.log.format},
  };
}

// The documented defaults (config/wallet.example.toml, docs/design.md §6), written out by hand so that
// a changed default is a deliberate edit here too.
const field_list& documented_defaults() {
  static const field_list values = {
      {"http.host", "127.0.0.1"},
      {"http.port", "8080"},
      {"http.io_threads", "2"},
      {"http.body_bytes_max", "65536"},
      {"http.settlement_body_bytes_max", "67108864"},
      {"http.header_bytes_max", "8192"},
      {"http.read_timeout_ms", "10000"},
      {"http.keep_alive_timeout_ms", "30000"},
      {"http.connections_max", "4096"},
      {"http.request_deadline_ms", "5000"},
      {"http.settlement_deadline_ms", "120000"},
      {"http.shutdown_drain_ms", "0"},
      {"http.shutdown_grace_ms", "5000"},
      {"http.linger_bytes_max", "67108864"},
      {"http.linger_timeout_ms", "2000"},
      {"http.readyz_refresh_ms", "250"},
      {"http.retry_after_max_s", "30"},
      {"http.retry_returns_percent", "25"},
      {"http.trusted_proxies", ""},
      {"database.url", "postgresql://wallet_app@127.0.0.1:5432/wallet"},
      {"database.owner_url", ""},
      {"database.migrate_on_start", "true"},
      {"database.readers", "8"},
      {"database.reader_queue_max", "2000"},
      {"database.connect_timeout_ms", "2000"},
      {"database.connection_wait_ms", "300"},
      {"database.statement_timeout_ms", "5000"},
      {"database.lock_timeout_ms", "2000"},
      {"database.reconnect_backoff_ms", "500"},
      {"writer.count", "1"},
      {"writer.batch_postings_max", "500"},
      {"writer.batch_wait_us", "3000"},
      {"writer.queue_postings_max", "1000"},
      {"writer.queue_run_postings_max", "10000"},
      {"actors.scheduler_threads", "1"},
      {"actors.scheduler_policy", "sharing"},
      {"actors.registry_shards", "4"},
      {"actors.accounts_live_max", "200000"},
      {"actors.account_idle_ms", "60000"},
      {"actors.account_inflight_max", "2000"},
      {"ledger.amount_minor_max", "1000000000000000"},
      {"ledger.hot_shards_max", "64"},
      {"ledger.hot_shards_default", "16"},
      {"ledger.sweep_interval_ms", "1000"},
      {"ledger.sweep_accounts_per_page", "1000"},
      {"ledger.hold_expiry_interval_ms", "200"},
      {"ledger.replay_retention_hours", "24"},
      {"ledger.replay_prune_interval_ms", "60000"},
      {"ledger.reconcile_interval_s", "300"},
      {"ledger.reconcile_full_interval_s", "86400"},
      {"ledger.reconcile_statement_timeout_ms", "600000"},
      {"ledger.reconcile_work_mem_mb", "64"},
      {"ledger.entries_page_max", "500"},
      {"ledger.batch_transfers_max", "1000"},
      {"ledger.lookup_ids_max", "1000"},
      {"ledger.withdrawal_fees", ""},
      {"ledger.withdrawal_fee_default", "0"},
      {"ledger.fx_quote_ttl_ms", "30000"},
      {"redis.url", "redis://127.0.0.1:6379"},
      {"redis.command_timeout_ms", "50"},
      {"redis.connections", "1"},
      {"redis.batch_wait_us", "500"},
      {"redis.retry_interval_ms", "1000"},
      {"ratelimit.enabled", "true"},
      {"ratelimit.algorithm", "sliding"},
      {"ratelimit.rate_per_second", "100"},
      {"ratelimit.burst", "200"},
      {"ratelimit.read_rate_per_second", "500"},
      {"ratelimit.read_burst", "1000"},
      {"ratelimit.lease_tokens", "8"},
      {"ratelimit.lease_ms", "2000"},
      {"ratelimit.local_tokens", "4"},
      {"ratelimit.processes_max", "4"},
      {"events.enabled", "true"},
      {"events.batch_rows_max", "50"},
      {"events.stream_maxlen", "1000000"},
      {"events.poll_interval_ms", "100"},
      {"events.redis_url", ""},
      {"events.redis_timeout_ms", "2000"},
      {"events.backoff_ms_max", "5000"},
      {"events.feed_page_max", "1000"},
      {"events.feed_scan_max", "10000"},
      {"events.feed_retention_days", "30"},
      {"events.prune_interval_ms", "60000"},
      {"cluster.enabled", "false"},
      {"cluster.node_id", ""},
      {"cluster.partitions", "64"},
      {"cluster.lease_ttl_ms", "5000"},
      {"cluster.lease_renew_ms", "1000"},
      {"cluster.advertise_address", ""},
      {"webhooks.enabled", "true"},
      {"webhooks.timeout_ms", "10000"},
      {"webhooks.retry_span_ms", "86400000"},
      {"webhooks.backoff_base_ms", "1000"},
      {"webhooks.backoff_cap_ms", "3600000"},
      {"webhooks.concurrency", "64"},
      {"webhooks.poll_interval_ms", "200"},
      {"webhooks.endpoints_per_owner_max", "20"},
      {"webhooks.allow_loopback", "false"},
      {"webhooks.ca_file", ""},
      {"webhooks.delivery_retention_days", "30"},
      {"webhooks.prune_interval_ms", "60000"},
      {"admission.inflight_requests_max", "8000"},
      {"admission.queue_target_ms", "100"},
      {"admission.inflight_requests_min", "512"},
      {"auth.bootstrap_key", ""},
      {"auth.key_cache_max", "100000"},
      {"auth.key_cache_ttl_ms", "5000"},
      {"auth.active_keys_max", "10"},
      {"auth.unknown_key_cache_ms", "2000"},
      {"auth.unknown_key_cache_max", "10000"},
      {"auth.unauthenticated_per_second", "20"},
      {"auth.unauthenticated_burst", "40"},
      {"auth.unknown_accounts_per_second", "10"},
      {"auth.unknown_accounts_burst", "20"},
      {"log.level", "info"},
      {"log.format", "text"},
  };
  return values;
}

// A TOML file that exists for the life of one test.
class temp_file {
 public:
  explicit temp_file(const std::string& contents) {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("wallet-config-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".toml"))
                .string();
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out << contents;
  }
  ~temp_file() { std::filesystem::remove(path_); }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Calls config::load with argv = {"wallet-server", args...}.
load_result load_with(const std::vector<std::string>& args, const environment& env = {}) {
  std::vector<const char*> argv{"wallet-server"};
  for (const auto& a : args) argv.push_back(a.c_str());
  return load(static_cast<int>(argv.size()), argv.data(), env);
}

// The message of the config_error that `step` throws; a test failure if it throws none.
template <typename Step>
std::string error_of(Step step) {
  try {
    step();
  } catch (const config_error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a config_error";
  return {};
}

std::string file_error(const std::string& toml_text) {
  return error_of([&] { load_from(toml_text, {}); });
}

std::string env_error(const std::string& name, const std::string& value) {
  return error_of([&] { load_from("", {{name, value}}); });
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string source_dir() {
  const char* dir = std::getenv("WALLET_SOURCE_DIR");
  return dir != nullptr ? dir : WALLET_TEST_SOURCE_DIR;
}

TEST(defaults, equal_the_documented_ones) {
  // A default-constructed settings, an empty file with an empty environment, and a command line
  // without flags all give exactly the documented defaults, which pass validation.
  EXPECT_EQ(fields(settings{}), documented_defaults());
  EXPECT_EQ(fields(load_from("", {})), documented_defaults());
  const load_result loaded = load_with({});
  EXPECT_FALSE(loaded.exit_now);
  EXPECT_EQ(fields(loaded.values), documented_defaults());
  EXPECT_NO_THROW(validate(settings{}));
}

TEST(defaults, fields_cover_every_documented_key) {
  // The example file lists every key the loader knows; the test's field list names the same keys
  // in the same order, so no setting escapes the checks of this suite.
  const toml::table doc = toml::parse(example_toml());
  std::vector<std::string> documented;
  for (auto&& [section, node] : doc) {
    ASSERT_TRUE(node.is_table()) << section.str();
    for (auto&& [key, value] : *node.as_table()) {
      documented.push_back(std::string(section.str()) + "." + std::string(key.str()));
    }
  }
  std::vector<std::string> listed;
  for (const auto& [key, value] : fields(settings{})) listed.push_back(key);
  // toml++ iterates tables in key order; compare as sorted sets.
  std::sort(documented.begin(), documented.end());
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, documented);
}

TEST(precedence, file_then_environment_then_flags) {
  // Each key takes its value from the strongest source that sets it: flag over environment over
  // file over default; keys no source names keep their defaults.
  temp_file file(
      "[http]\nport = 1111\nio_threads = 3\nhost = \"10.0.0.1\"\n"
      "[log]\nlevel = \"debug\"\n"
      "[writer]\ncount = 3\n"
      "[redis]\nurl = \"redis://file:1\"\n");
  const environment env = {{"WALLET_HTTP_PORT", "2222"},
                           {"WALLET_HTTP_IO_THREADS", "4"},
                           {"WALLET_LOG_LEVEL", "warn"},
                           {"WALLET_REDIS_CONNECTIONS", "5"}};
  const load_result loaded = load_with({"--config", file.path(), "--http-port", "3333", "--redis-connections=6"}, env);
  const settings& s = loaded.values;
  EXPECT_FALSE(loaded.exit_now);
  EXPECT_EQ(s.http.port, 3333);              // file, env and flag: the flag wins
  EXPECT_EQ(s.redis.connections, 6);         // env and flag: the flag wins
  EXPECT_EQ(s.http.io_threads, 4);           // file and env: the env wins
  EXPECT_EQ(s.log.level, "warn");            // file and env: the env wins
  EXPECT_EQ(s.http.host, "10.0.0.1");        // file only
  EXPECT_EQ(s.writer.count, 3);              // file only
  EXPECT_EQ(s.redis.url, "redis://file:1");  // file only
  EXPECT_EQ(s.log.format, "text");           // nobody: default
  EXPECT_EQ(s.database.url, "postgresql://wallet_app@127.0.0.1:5432/wallet");

  // The same file without environment or flags gives the file's values.
  const settings file_only = load_with({"--config", file.path()}).values;
  EXPECT_EQ(file_only.http.port, 1111);
  EXPECT_EQ(file_only.log.level, "debug");
  // Environment without a file.
  EXPECT_EQ(load_with({}, env).values.http.port, 2222);
}

TEST(precedence, a_flag_overrides_an_invalid_environment_value_only_if_it_is_valid_itself) {
  // Sources are applied in order and each is checked as it is applied: a bad environment value
  // stops the start even when a flag would override it, so no typo goes unnoticed.
  const environment env = {{"WALLET_HTTP_PORT", "eighty"}};
  const std::string message = error_of([&] { load_with({"--http-port", "8081"}, env); });
  EXPECT_EQ(message,
            "invalid setting http.port = \"eighty\" (from WALLET_HTTP_PORT): must be an integer from 1 to 65535");
}

TEST(environment, names_follow_the_key_rule_of_the_design) {
  // [section] key <-> WALLET_SECTION_KEY, as docs/design.md §6 fixes for the named variables.
  EXPECT_EQ(env_name("http", "port"), "WALLET_HTTP_PORT");
  EXPECT_EQ(env_name("database", "url"), "WALLET_DATABASE_URL");
  EXPECT_EQ(env_name("database", "owner_url"), "WALLET_DATABASE_OWNER_URL");
  EXPECT_EQ(env_name("redis", "url"), "WALLET_REDIS_URL");
  EXPECT_EQ(env_name("ratelimit", "rate_per_second"), "WALLET_RATELIMIT_RATE_PER_SECOND");
  EXPECT_EQ(env_name("ratelimit", "burst"), "WALLET_RATELIMIT_BURST");
  EXPECT_EQ(env_name("ratelimit", "lease_tokens"), "WALLET_RATELIMIT_LEASE_TOKENS");
  EXPECT_EQ(env_name("auth", "bootstrap_key"), "WALLET_AUTH_BOOTSTRAP_KEY");

  const settings s = load_from("", {{"WALLET_DATABASE_URL", "postgresql://a@h:1/db"},
                                    {"WALLET_DATABASE_OWNER_URL", "postgresql://o@h:1/db"},
                                    {"WALLET_REDIS_URL", "redis://r:2"},
                                    {"WALLET_RATELIMIT_RATE_PER_SECOND", "7"},
                                    {"WALLET_RATELIMIT_BURST", "9"},
                                    {"WALLET_AUTH_BOOTSTRAP_KEY", "secret"},
                                    {"WALLET_HTTP_HOST", "0.0.0.0"}});
  EXPECT_EQ(s.database.url, "postgresql://a@h:1/db");
  EXPECT_EQ(s.database.owner_url, "postgresql://o@h:1/db");
  EXPECT_EQ(s.redis.url, "redis://r:2");
  EXPECT_EQ(s.ratelimit.rate_per_second, 7);
  EXPECT_EQ(s.ratelimit.burst, 9);
  EXPECT_EQ(s.auth.bootstrap_key, "secret");
  EXPECT_EQ(s.http.host, "0.0.0.0");
}

TEST(environment, unrelated_variables_are_ignored) {
  // Other variables, including WALLET_* ones that name no setting (the test harness sets
  // WALLET_BUILD_DIR), and lower-case spellings leave the defaults alone.
  const settings s = load_from(
      "", {{"WALLET_BUILD_DIR", "/tmp"}, {"wallet_http_port", "1"}, {"HTTP_PORT", "1"}, {"PATH", "/usr/bin"}});
  EXPECT_EQ(fields(s), documented_defaults());
}

TEST(booleans, text_forms_from_environment_and_flags) {
  // true/1/yes/on and false/0/no/off, in any case, are booleans; the TOML file takes real booleans.
  for (const char* yes : {"true", "TRUE", "True", "1", "yes", "on", "ON"}) {
    EXPECT_TRUE(load_from("[ratelimit]\nenabled = false\n", {{"WALLET_RATELIMIT_ENABLED", yes}}).ratelimit.enabled)
        << yes;
  }
  for (const char* no : {"false", "FALSE", "0", "no", "off", "Off"}) {
    EXPECT_FALSE(load_from("", {{"WALLET_RATELIMIT_ENABLED", no}}).ratelimit.enabled) << no;
  }
  EXPECT_FALSE(load_with({"--database-migrate-on-start", "off"}).values.database.migrate_on_start);
  EXPECT_FALSE(load_from("[database]\nmigrate_on_start = false\n", {}).database.migrate_on_start);
}

TEST(invalid, out_of_range_integers_from_every_source) {
  // Below the minimum or above the maximum is refused from the file, the environment and a flag,
  // and the message names the key, the value, the source and the allowed range.
  EXPECT_EQ(file_error("[http]\nport = 70000\n"),
            "invalid setting http.port = \"70000\" (from configuration): must be an integer from 1 to 65535");
  EXPECT_EQ(file_error("[writer]\ncount = 0\n"),
            "invalid setting writer.count = \"0\" (from configuration): must be an integer from 1 to 64");
  EXPECT_EQ(file_error("[writer]\nbatch_wait_us = -1\n"),
            "invalid setting writer.batch_wait_us = \"-1\" (from configuration): must be an integer from 0 to 1000000");
  EXPECT_EQ(env_error("WALLET_HTTP_PORT", "0"),
            "invalid setting http.port = \"0\" (from WALLET_HTTP_PORT): must be an integer from 1 to 65535");
  EXPECT_EQ(env_error("WALLET_ACTORS_ACCOUNTS_LIVE_MAX", "15"),
            "invalid setting actors.accounts_live_max = \"15\" (from WALLET_ACTORS_ACCOUNTS_LIVE_MAX): "
            "must be an integer from 16 to 100000000");
  EXPECT_EQ(error_of([] {
              load_with({"--http-port", "65536"});
            }),
            "invalid setting http.port = \"65536\" (from --http-port): must be an integer from 1 to 65535");
  // The edges themselves are accepted.
  EXPECT_EQ(load_from("[http]\nport = 65535\n", {}).http.port, 65535);
  EXPECT_EQ(load_from("", {{"WALLET_HTTP_PORT", "1"}}).http.port, 1);
  EXPECT_EQ(load_from("", {{"WALLET_LEDGER_AMOUNT_MINOR_MAX", "9223372036854775807"}}).ledger.amount_minor_max,
            INT64_MAX);
}

TEST(settlement_limits, are_settings_of_their_own_within_their_bounds) {
  // The settlement report's body limit and deadline are set apart from http.body_bytes_max and
  // http.request_deadline_ms, from each source, within their bounds.
  EXPECT_EQ(load_from("[http]\nsettlement_body_bytes_max = 1048576\n", {}).http.settlement_body_bytes_max, 1'048'576);
  EXPECT_EQ(load_from("", {{"WALLET_HTTP_SETTLEMENT_BODY_BYTES_MAX", "256"}}).http.settlement_body_bytes_max, 256);
  EXPECT_EQ(load_with({"--http-settlement-body-bytes-max", "1073741824"}).values.http.settlement_body_bytes_max,
            1'073'741'824);
  EXPECT_EQ(load_from("", {{"WALLET_HTTP_SETTLEMENT_BODY_BYTES_MAX", "1048576"}}).http.body_bytes_max, 65'536);
  EXPECT_EQ(env_error("WALLET_HTTP_SETTLEMENT_BODY_BYTES_MAX", "1073741825"),
            "invalid setting http.settlement_body_bytes_max = \"1073741825\" (from "
            "WALLET_HTTP_SETTLEMENT_BODY_BYTES_MAX): must be an integer from 256 to 1073741824");
  EXPECT_EQ(
      file_error("[http]\nsettlement_body_bytes_max = 255\n"),
      "invalid setting http.settlement_body_bytes_max = \"255\" (from configuration): must be an integer from 256 "
      "to 1073741824");
  const auto s = load_from("", {{"WALLET_HTTP_SETTLEMENT_DEADLINE_MS", "600000"}});
  EXPECT_EQ(s.http.settlement_deadline_ms, 600'000);
  EXPECT_EQ(s.http.request_deadline_ms, 5'000);
  EXPECT_EQ(env_error("WALLET_HTTP_SETTLEMENT_DEADLINE_MS", "600001"),
            "invalid setting http.settlement_deadline_ms = \"600001\" (from WALLET_HTTP_SETTLEMENT_DEADLINE_MS): "
            "must be an integer from 10 to 600000");
}

TEST(invalid, non_integer_text_for_an_integer) {
  // Only a plain decimal integer is an integer: no units, spaces, signs, exponents, hex or overflow.
  for (const char* text : {"", "80a", "8080 ", " 8080", "+8080", "1e3", "0x50", "80.0", "eighty",
                           "99999999999999999999", "9223372036854775808"}) {
    const std::string message = env_error("WALLET_HTTP_PORT", text);
    EXPECT_EQ(message, "invalid setting http.port = \"" + std::string(text) +
                           "\" (from WALLET_HTTP_PORT): must be an integer from 1 to 65535");
  }
  EXPECT_EQ(error_of([] {
              load_with({"--writer-count", "two"});
            }),
            "invalid setting writer.count = \"two\" (from --writer-count): must be an integer from 1 to 64");
}

TEST(invalid, wrong_toml_type) {
  // The file must use the TOML type of the setting: a quoted number, a float or a boolean is not
  // an integer, a number is not a string, and a string is not a boolean.
  const std::string quoted = file_error("[http]\nport = \"8080\"\n");
  EXPECT_NE(quoted.find("invalid setting http.port = "), std::string::npos) << quoted;
  EXPECT_NE(quoted.find("8080"), std::string::npos) << quoted;
  EXPECT_NE(quoted.find("must be an integer from 1 to 65535"), std::string::npos) << quoted;
  EXPECT_EQ(file_error("[http]\nport = 8080.0\n"),
            "invalid setting http.port = \"8080.0\" (from configuration): must be an integer from 1 to 65535");
  EXPECT_EQ(file_error("[http]\nport = true\n"),
            "invalid setting http.port = \"true\" (from configuration): must be an integer from 1 to 65535");
  EXPECT_EQ(file_error("[http]\nhost = 5\n"),
            "invalid setting http.host = \"5\" (from configuration): must be a string");
  const std::string boolean = file_error("[ratelimit]\nenabled = \"yes\"\n");
  EXPECT_NE(boolean.find("invalid setting ratelimit.enabled = "), std::string::npos) << boolean;
  EXPECT_NE(boolean.find("yes"), std::string::npos) << boolean;
  EXPECT_NE(boolean.find("must be true or false"), std::string::npos) << boolean;
  EXPECT_EQ(file_error("[database]\nmigrate_on_start = 1\n"),
            "invalid setting database.migrate_on_start = \"1\" (from configuration): must be true or false");
  const std::string array = file_error("[log]\nlevel = [\"info\"]\n");
  EXPECT_NE(array.find("invalid setting log.level"), std::string::npos) << array;
  EXPECT_NE(array.find("must be a string"), std::string::npos) << array;
}

TEST(invalid, unknown_key_section_or_flag) {
  // A misspelt key, a section that does not exist, a key outside any section and an unknown flag
  // are all refused by name rather than silently ignored.
  EXPECT_EQ(file_error("[http]\nprot = 8080\n"), "unknown setting http.prot in configuration");
  EXPECT_EQ(file_error("[web]\nport = 8080\n"), "unknown section [web] in configuration");
  EXPECT_EQ(file_error("[htpp]\n"), "unknown section [htpp] in configuration");
  EXPECT_EQ(file_error("[http.tls]\ncert = \"x\"\n"), "unknown setting http.tls in configuration");
  EXPECT_EQ(file_error("port = 8080\n"),
            "unknown top-level key \"port\" in configuration: settings live in sections such as [http]");
  const std::string flag = error_of([] { load_with({"--http-prot", "8080"}); });
  EXPECT_EQ(flag.rfind("command line: ", 0), 0u) << flag;
  EXPECT_NE(flag.find("--http-prot"), std::string::npos) << flag;

  temp_file file("[http]\nprot = 8080\n");
  EXPECT_EQ(error_of([&] { load_with({"--config", file.path()}); }), "unknown setting http.prot in " + file.path());
}

TEST(invalid, enum_strings) {
  // log.format, log.level and ratelimit.algorithm accept only their listed words, case-sensitively.
  EXPECT_EQ(file_error("[log]\nformat = \"xml\"\n"),
            "invalid setting log.format = \"xml\" (from configuration): must be one of: text, json");
  EXPECT_EQ(env_error("WALLET_LOG_FORMAT", "JSON"),
            "invalid setting log.format = \"JSON\" (from WALLET_LOG_FORMAT): must be one of: text, json");
  EXPECT_EQ(env_error("WALLET_RATELIMIT_ALGORITHM", "token_bucket"),
            "invalid setting ratelimit.algorithm = \"token_bucket\" (from WALLET_RATELIMIT_ALGORITHM): "
            "must be one of: sliding, fixed");
  EXPECT_EQ(error_of([] {
              load_with({"--log-level", "verbose"});
            }),
            "invalid setting log.level = \"verbose\" (from --log-level): "
            "must be one of: trace, debug, info, warn, error, critical, off");
  EXPECT_EQ(load_from("", {{"WALLET_RATELIMIT_ALGORITHM", "fixed"}}).ratelimit.algorithm, "fixed");
  EXPECT_EQ(load_with({"--log-format", "json"}).values.log.format, "json");
}

TEST(invalid, empty_required_strings) {
  // URLs and the listen address must not be empty; the optional owner URL and bootstrap key may be.
  EXPECT_EQ(file_error("[database]\nurl = \"\"\n"),
            "invalid setting database.url = \"\" (from configuration): must not be empty");
  EXPECT_EQ(env_error("WALLET_REDIS_URL", ""),
            "invalid setting redis.url = \"\" (from WALLET_REDIS_URL): must not be empty");
  EXPECT_EQ(env_error("WALLET_HTTP_HOST", ""),
            "invalid setting http.host = \"\" (from WALLET_HTTP_HOST): must not be empty");
  EXPECT_EQ(env_error("WALLET_LOG_LEVEL", ""),
            "invalid setting log.level = \"\" (from WALLET_LOG_LEVEL): must not be empty");
  const settings s =
      load_from("[database]\nowner_url = \"\"\n[auth]\nbootstrap_key = \"\"\n", {{"WALLET_AUTH_BOOTSTRAP_KEY", ""}});
  EXPECT_EQ(s.database.owner_url, "");
  EXPECT_EQ(s.auth.bootstrap_key, "");
}

TEST(invalid, bad_boolean_text) {
  // Anything but the eight boolean words is refused, from the environment and from a flag.
  for (const char* text : {"", "maybe", "2", "-1", "y", "n", "enabled", "true "}) {
    EXPECT_EQ(env_error("WALLET_RATELIMIT_ENABLED", text),
              "invalid setting ratelimit.enabled = \"" + std::string(text) +
                  "\" (from WALLET_RATELIMIT_ENABLED): must be true or false");
  }
  EXPECT_EQ(error_of([] {
              load_with({"--database-migrate-on-start", "nope"});
            }),
            "invalid setting database.migrate_on_start = \"nope\" (from --database-migrate-on-start): "
            "must be true or false");
}

TEST(invalid, broken_file) {
  // A file that is not TOML, or cannot be read, stops the start with a message saying so.
  const std::string syntax = file_error("[http\nport = 1\n");
  EXPECT_EQ(syntax.rfind("cannot parse configuration: ", 0), 0u) << syntax;
  EXPECT_NE(syntax.find("line 1"), std::string::npos) << syntax;
  EXPECT_EQ(error_of([] {
              load_with({"--config", "/nonexistent/wallet.toml"});
            }),
            "cannot read configuration file /nonexistent/wallet.toml");
}

TEST(invalid, cross_field_bound) {
  // The default shard count of a hot account may not exceed the maximum; validate() checks the
  // struct as a whole, whatever source set the values.
  EXPECT_EQ(env_error("WALLET_LEDGER_HOT_SHARDS_DEFAULT", "65"),
            "invalid setting ledger.hot_shards_default = \"65\": must not exceed ledger.hot_shards_max (64)");
  EXPECT_EQ(load_from("[ledger]\nhot_shards_max = 8\nhot_shards_default = 8\n", {}).ledger.hot_shards_default, 8);
  // The relay's wait for Redis must end before PostgreSQL ends its idle transaction.
  EXPECT_EQ(env_error("WALLET_EVENTS_REDIS_TIMEOUT_MS", "10000"),
            "invalid setting events.redis_timeout_ms = \"10000\": must be less than twice "
            "database.statement_timeout_ms (10000)");
  EXPECT_EQ(env_error("WALLET_CLUSTER_NODE_ID", "node \"one\""),
            "invalid setting cluster.node_id = \"node \"one\"\": use at most 64 letters, digits, '.', '_' or '-'");
  EXPECT_EQ(env_error("WALLET_HTTP_TRUSTED_PROXIES", "10.0.0.0/8, haproxy"),
            "invalid setting http.trusted_proxies = \"10.0.0.0/8, haproxy\": write IP addresses or networks "
            "separated by commas, e.g. \"10.0.0.0/8, 127.0.0.1\"");
  // A lease is renewed at least three times per TTL.
  EXPECT_EQ(
      env_error("WALLET_CLUSTER_LEASE_RENEW_MS", "2000"),
      "invalid setting cluster.lease_renew_ms = \"2000\": must be at most a third of cluster.lease_ttl_ms (5000)");
  settings s;
  s.http.port = 0;
  EXPECT_EQ(error_of([&] { validate(s); }),
            "invalid setting http.port = \"0\" (from settings): must be an integer from 1 to 65535");
  settings t;
  t.log.format = "yaml";
  EXPECT_EQ(error_of([&] { validate(t); }),
            "invalid setting log.format = \"yaml\" (from settings): must be one of: text, json");
}

TEST(example_file, the_committed_file_is_the_generated_one_and_loads_to_the_defaults) {
  // config/wallet.example.toml is byte for byte config::example_toml() (regenerate it with
  // `wallet-server --print-example-config`), and loading it, as text or via --config, changes nothing.
  const std::string path = source_dir() + "/config/wallet.example.toml";
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  const std::string committed = read_text(path);
  EXPECT_EQ(committed, example_toml()) << "regenerate " << path << " with wallet-server --print-example-config";
  EXPECT_EQ(fields(load_from(committed, {})), documented_defaults());
  EXPECT_EQ(fields(load_with({"--config", path}).values), documented_defaults());
}

TEST(example_file, print_flag_asks_the_caller_to_print_and_exit) {
  // --print-example-config is handled before any other source, even with a broken environment.
  const load_result r = load_with({"--print-example-config"}, {{"WALLET_HTTP_PORT", "bad"}});
  EXPECT_TRUE(r.exit_now);
  EXPECT_EQ(r.exit_code, 0);
}

}  // namespace
}  // namespace config

namespace base {
namespace {

TEST(networks, parse_addresses_and_prefixes) {
  const auto list = parse_networks(" 10.0.0.0/8,127.0.0.1 , ::1, fd00::/8,192.168.1.7/32 ");
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 5u);
  EXPECT_EQ((*list)[0].prefix, 8);
  EXPECT_EQ((*list)[1].prefix, 32);
  EXPECT_TRUE((*list)[2].v6);
  EXPECT_EQ((*list)[2].prefix, 128);
  EXPECT_EQ((*list)[3].prefix, 8);
  ASSERT_TRUE(parse_networks(""));
  EXPECT_TRUE(parse_networks("  ")->empty());
  for (const char* bad : {"haproxy", "10.0.0.0/33", "::1/129", "10.0.0.1/", "10.0.0.1/-1", "10.0.0.1/8x", "10.0.0.1,",
                          ",10.0.0.1", "10.0.0.256", "1.2.3", "10.0.0.0/8,,127.0.0.1"}) {
    EXPECT_FALSE(parse_networks(bad)) << bad;
  }
}

TEST(networks, contains_matches_by_prefix) {
  const auto list = *parse_networks("10.0.0.0/8, 192.168.1.0/25, 127.0.0.1, fd00::/8");
  EXPECT_TRUE(contains(list, "10.255.1.2"));
  EXPECT_FALSE(contains(list, "11.0.0.1"));
  EXPECT_TRUE(contains(list, "192.168.1.127"));
  EXPECT_FALSE(contains(list, "192.168.1.128"));
  EXPECT_TRUE(contains(list, "127.0.0.1"));
  EXPECT_FALSE(contains(list, "127.0.0.2"));
  EXPECT_TRUE(contains(list, "fd12:3456::1"));
  EXPECT_FALSE(contains(list, "fe80::1"));
  // An IPv4 peer seen through an IPv6 socket is the IPv4 address.
  EXPECT_TRUE(contains(list, "::ffff:10.1.2.3"));
  EXPECT_FALSE(contains(list, "not an address"));
  EXPECT_FALSE(contains(list, ""));
  EXPECT_FALSE(contains({}, "127.0.0.1"));
  EXPECT_EQ(canonical_address("::FFFF:10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(canonical_address("2001:DB8:0:0::1"), "2001:db8::1");
  EXPECT_EQ(canonical_address(" 10.1.2.3"), std::nullopt);
  EXPECT_TRUE(contains(*parse_networks("0.0.0.0/0"), "203.0.113.9"));
  EXPECT_FALSE(contains(*parse_networks("0.0.0.0/0"), "2001:db8::1"));
}

}  // namespace
}  // namespace base
