#pragma once

// Everything wallet-loadgen can be told, with its defaults. Values come from, in increasing
// precedence: these defaults, a TOML scenario file (`--scenario`, keys named like the flags with
// underscores, e.g. `spike_multiplier = 10`), environment variables for the operator key, and
// command-line flags.

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

namespace loadgen {

enum class workload_kind { hot_merchant, payday, p2p, mix };
enum class run_mode { open, closed, search };
enum class profile_kind { constant, ramp, spike };

struct options {
  // Target.
  std::string host = "127.0.0.1";
  std::int64_t port = 8080;
  std::string operator_key;

  // Workload and setup.
  workload_kind workload = workload_kind::hot_merchant;
  std::int64_t accounts = 1'000;  // payers, salary receivers or P2P accounts
  std::int64_t hot_shards = 16;   // shards of the merchant / employer account; 0: not hot
  std::string currency = "EUR";
  std::int64_t fund_amount_minor = 10'000'000;  // deposited into each funded account
  std::int64_t amount_min_minor = 1;
  std::int64_t amount_max_minor = 100;
  double read_fraction = 0;  // share of operations that are balance reads instead of transfers
  // The mix workload's relative weights of payments into the hot merchant, P2P transfers and
  // salaries from the hot employer.
  double mix_payments = 0.7;
  double mix_p2p = 0.2;
  double mix_salaries = 0.1;
  std::uint64_t seed = 1;
  std::int64_t setup_concurrency = 64;
  std::string setup_file;  // written after setup; reused (not recreated) when it exists
  bool setup_only = false;

  // Load shape.
  run_mode mode = run_mode::open;
  profile_kind profile = profile_kind::constant;
  double rate = 100;  // the baseline arrival rate per second
  double duration_s = 30;
  double ramp_from_rate = 0;
  double ramp_s = 5;
  double spike_multiplier = 10;
  double spike_start_s = 10;
  double spike_duration_s = 10;  // held at the peak this long
  double spike_ramp_s = 2;
  std::int64_t concurrency = 64;  // closed loop: virtual users
  // Payday through POST /v1/transfers/batch: salaries per request (0: single transfers).
  std::int64_t batch_size = 0;
  double think_time_ms = 0;

  // Search for the highest rate within the latency target (open-loop steps).
  double search_start_rate = 100;
  double search_step_factor = 1.5;
  double search_max_rate = 200'000;
  double search_step_seconds = 10;
  std::int64_t search_refine = 2;   // bisection steps between the last good and first bad rate
  double search_pause_seconds = 3;  // idle time before each step, so a step after an overload starts calm
  double p99_target_ms = 100;

  // HTTP client.
  std::int64_t connections = 256;
  std::int64_t io_threads = 1;
  std::int64_t timeout_ms = 10'000;
  // Open loop: arrivals due within one quantum are sent together when it starts, so the client
  // wakes once per quantum rather than once per request. Latency still counts from each
  // request's own scheduled time; 0 wakes for every arrival.
  std::int64_t send_quantum_us = 1'000;
  std::int64_t queue_max = 200'000;  // requests waiting for a free connection, per I/O thread
  bool retries = false;
  std::int64_t retries_max = 5;
  double retry_after_max_s = 30;
  double drain_timeout_s = 30;

  // Verification.
  bool verify = true;
  std::string database_url;
  std::string database_verify_query =
      "SELECT id::text, count(*) FROM journal_transaction WHERE id = ANY($1::uuid[]) GROUP BY id";
  std::int64_t verify_concurrency = 64;

  // Output.
  std::string out_dir;  // summary.json, timeseries.json and report.html go here
  bool quiet = false;
  double warmup_s = 2;  // excluded from the spike's baseline latency
};

class options_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct parse_result {
  options values;
  bool exit_now = false;
  int exit_code = 0;
};

using environment = std::map<std::string, std::string>;
environment process_environment();

// Reads flags, the scenario file they name and the environment. Throws options_error on any bad
// value, unknown scenario key or inconsistent combination.
parse_result parse_options(int argc, const char* const* argv, const environment& env);

// Applies a TOML scenario to `values` (keys as the flags, underscores for dashes); throws on an
// unknown key or a wrong type. For tests and for parse_options.
void apply_scenario(const std::string& toml_text, options& values);

// Checks bounds and combinations; throws options_error naming the first problem.
void validate(const options& values);

std::string to_string(workload_kind kind);
std::string to_string(run_mode mode);
std::string to_string(profile_kind kind);

}  // namespace loadgen
