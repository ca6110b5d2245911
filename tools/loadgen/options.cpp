#include "tools/loadgen/options.hpp"

#include <CLI/CLI.hpp>
#include <toml++/toml.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <functional>
#include <sstream>
#include <variant>
#include <vector>

extern char** environ;

namespace loadgen {
namespace {

struct int_target {
  std::int64_t* value;
  std::int64_t min;
  std::int64_t max;
};
struct uint_target {
  std::uint64_t* value;
};
struct real_target {
  double* value;
  double min;
  double max;
};
struct text_target {
  std::string* value;
};
// A boolean is a flag without a value: `--retries` sets true, `--no-verify` sets false.
struct flag_target {
  bool* value;
  bool when_given;
};
// An enumeration spelled as one of a few words.
struct choice_target {
  std::function<void(const std::string&)> set;
  std::vector<std::string> words;
};

struct descriptor {
  std::string name;  // flag name without dashes; the scenario key is the same with underscores
  std::string doc;
  std::variant<int_target, uint_target, real_target, text_target, flag_target, choice_target> target;
};

constexpr std::int64_t k_int_max = INT64_MAX;

std::vector<descriptor> describe(options& o) {
  auto workload = [&o](const std::string& w) {
    o.workload = w == "payday" ? workload_kind::payday
                 : w == "p2p"  ? workload_kind::p2p
                 : w == "mix"  ? workload_kind::mix
                               : workload_kind::hot_merchant;
  };
  auto mode = [&o](const std::string& m) {
    o.mode = m == "closed" ? run_mode::closed : m == "search" ? run_mode::search : run_mode::open;
  };
  auto profile = [&o](const std::string& p) {
    o.profile = p == "ramp" ? profile_kind::ramp : p == "spike" ? profile_kind::spike : profile_kind::constant;
  };
  return {
      {"host", "Server address.", text_target{&o.host}},
      {"port", "Server HTTP port.", int_target{&o.port, 1, 65535}},
      {"operator-key", "Operator API key (default: $WALLET_LOADGEN_OPERATOR_KEY, then $WALLET_AUTH_BOOTSTRAP_KEY).",
       text_target{&o.operator_key}},
      {"workload",
       "hot-merchant: N payers pay one hot merchant; payday: one hot employer pays N salaries; "
       "p2p: random payer and payee among N accounts; mix: payments, P2P and salaries together "
       "(weights --mix-*).",
       choice_target{workload, {"hot-merchant", "payday", "p2p", "mix"}}},
      {"mix-payments", "Mix: weight of payments into the hot merchant.", real_target{&o.mix_payments, 0, 1'000}},
      {"mix-p2p", "Mix: weight of P2P transfers.", real_target{&o.mix_p2p, 0, 1'000}},
      {"mix-salaries", "Mix: weight of salaries from the hot employer.", real_target{&o.mix_salaries, 0, 1'000}},
      {"accounts", "Payers (hot-merchant), salary accounts (payday) or accounts (p2p).",
       int_target{&o.accounts, 2, 10'000'000}},
      {"hot-shards", "Shards of the merchant / employer account; 0 makes it an ordinary account.",
       int_target{&o.hot_shards, 0, 1024}},
      {"currency", "Currency of every account.", text_target{&o.currency}},
      {"fund-amount", "Minor units deposited into each paying account (the employer gets this times N).",
       int_target{&o.fund_amount_minor, 1, 1'000'000'000'000}},
      {"amount-min", "Smallest transfer amount in minor units.", int_target{&o.amount_min_minor, 1, k_int_max}},
      {"amount-max", "Largest transfer amount in minor units.", int_target{&o.amount_max_minor, 1, k_int_max}},
      {"read-fraction", "Share of operations that read the payer's balance instead of transferring.",
       real_target{&o.read_fraction, 0, 1}},
      {"seed", "Seed of every random choice, so runs are reproducible.", uint_target{&o.seed}},
      {"setup-concurrency", "Setup requests in flight at once.", int_target{&o.setup_concurrency, 1, 4096}},
      {"setup-file", "Where the setup (ids and keys) is saved; reused instead of recreated when it exists.",
       text_target{&o.setup_file}},
      {"setup-only", "Create the setup and stop.", flag_target{&o.setup_only, true}},
      {"mode",
       "open: arrivals at a scheduled rate; closed: N users, each waiting for its answer; "
       "search: open-loop steps up to the highest rate within --p99-target-ms.",
       choice_target{mode, {"open", "closed", "search"}}},
      {"profile", "Open-loop rate profile: constant, ramp or spike.",
       choice_target{profile, {"constant", "ramp", "spike"}}},
      {"rate", "Baseline arrival rate per second (open loop).", real_target{&o.rate, 0.01, 10'000'000}},
      {"duration", "Run length in seconds.", real_target{&o.duration_s, 0.1, 86'400}},
      {"ramp-from-rate", "Ramp profile: rate at the start.", real_target{&o.ramp_from_rate, 0, 10'000'000}},
      {"ramp-seconds", "Ramp profile: seconds to reach --rate.", real_target{&o.ramp_s, 0, 86'400}},
      {"spike-multiplier", "Spike profile: peak rate as a multiple of --rate.",
       real_target{&o.spike_multiplier, 1, 1'000}},
      {"spike-start", "Spike profile: seconds at baseline before the spike.", real_target{&o.spike_start_s, 0, 86'400}},
      {"spike-duration", "Spike profile: seconds held at the peak.", real_target{&o.spike_duration_s, 0, 86'400}},
      {"spike-ramp-seconds", "Spike profile: seconds to ramp up (and again down).",
       real_target{&o.spike_ramp_s, 0, 3'600}},
      {"concurrency", "Closed loop: virtual users.", int_target{&o.concurrency, 1, 100'000}},
      {"batch-size",
       "Payday through POST /v1/transfers/batch with this many salaries per request, closed loop of "
       "--concurrency users for --duration seconds (0: single transfers).",
       int_target{&o.batch_size, 0, 10'000}},
      {"think-time-ms", "Closed loop: pause of a user between an answer and its next request.",
       real_target{&o.think_time_ms, 0, 3'600'000}},
      {"search-start-rate", "Search: first rate.", real_target{&o.search_start_rate, 1, 10'000'000}},
      {"search-step-factor", "Search: each step's rate is the previous one times this.",
       real_target{&o.search_step_factor, 1.01, 10}},
      {"search-max-rate", "Search: highest rate tried.", real_target{&o.search_max_rate, 1, 10'000'000}},
      {"search-step-seconds", "Search: seconds per step.", real_target{&o.search_step_seconds, 1, 3'600}},
      {"search-refine", "Search: bisection steps between the last good and the first bad rate.",
       int_target{&o.search_refine, 0, 10}},
      {"search-pause-seconds",
       "Search: idle seconds before each step, so that one step's backlog does not "
       "spill into the next.",
       real_target{&o.search_pause_seconds, 0, 600}},
      {"p99-target-ms", "Search: latency target for the p99 of accepted transfers.",
       real_target{&o.p99_target_ms, 0.1, 600'000}},
      {"connections", "Keep-alive connections at most (spread over the I/O threads).",
       int_target{&o.connections, 1, 60'000}},
      {"io-threads", "Threads running the HTTP client (1 or 2 suffice).", int_target{&o.io_threads, 1, 16}},
      {"timeout-ms", "Deadline of one HTTP exchange; past it the request counts as a timeout.",
       int_target{&o.timeout_ms, 10, 600'000}},
      {"send-quantum-us",
       "Open loop: arrivals due within this many microseconds are sent together (0: one wake-up per arrival).",
       int_target{&o.send_quantum_us, 0, 100'000}},
      {"queue-max", "Requests waiting for a free connection per I/O thread; beyond it they fail at once.",
       int_target{&o.queue_max, 1, 10'000'000}},
      {"retries", "After 429/503 wait Retry-After and retry with the same Idempotency-Key.",
       flag_target{&o.retries, true}},
      {"retries-max", "Retries of one request at most.", int_target{&o.retries_max, 0, 100}},
      {"retry-after-max", "Longest Retry-After honoured, in seconds.", real_target{&o.retry_after_max_s, 0, 3'600}},
      {"drain-timeout", "Seconds to wait for answers after the last request was sent.",
       real_target{&o.drain_timeout_s, 0, 3'600}},
      {"no-verify", "Skip the verification at the end.", flag_target{&o.verify, false}},
      {"database-url", "Verify transactions with a direct query on this database instead of the API.",
       text_target{&o.database_url}},
      {"database-verify-query",
       "Query for --database-url: given $1 (text[] of transaction ids), one row (id, count) per id found.",
       text_target{&o.database_verify_query}},
      {"verify-concurrency", "Verification requests in flight at once.", int_target{&o.verify_concurrency, 1, 4096}},
      {"out-dir", "Directory for summary.json, timeseries.json and report.html.", text_target{&o.out_dir}},
      {"quiet", "No live progress line.", flag_target{&o.quiet, true}},
      {"warmup", "Seconds at the start excluded from the spike's baseline latency.",
       real_target{&o.warmup_s, 0, 3'600}},
  };
}

std::string key_of(const std::string& flag) {
  std::string key = flag;
  for (auto& c : key) c = c == '-' ? '_' : c;
  return key;
}

// Sets one value from its text form (a flag's argument or a scenario value turned into text).
void assign(const descriptor& d, const std::string& text, const std::string& origin) {
  auto fail = [&](const std::string& why) { throw options_error(origin + " " + d.name + " = '" + text + "': " + why); };
  std::visit(
      [&](const auto& t) {
        using target = std::decay_t<decltype(t)>;
        if constexpr (std::is_same_v<target, int_target>) {
          std::int64_t v = 0;
          const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
          if (ec != std::errc() || end != text.data() + text.size()) fail("not an integer");
          if (v < t.min || v > t.max) fail("must be within " + std::to_string(t.min) + ".." + std::to_string(t.max));
          *t.value = v;
        } else if constexpr (std::is_same_v<target, uint_target>) {
          std::uint64_t v = 0;
          const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
          if (ec != std::errc() || end != text.data() + text.size()) fail("not a non-negative integer");
          *t.value = v;
        } else if constexpr (std::is_same_v<target, real_target>) {
          double v = 0;
          const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
          if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) fail("not a number");
          if (v < t.min || v > t.max) {
            std::ostringstream range;
            range << "must be within " << t.min << ".." << t.max;
            fail(range.str());
          }
          *t.value = v;
        } else if constexpr (std::is_same_v<target, text_target>) {
          *t.value = text;
        } else if constexpr (std::is_same_v<target, flag_target>) {
          if (text == "true") {
            *t.value = t.when_given;
          } else if (text == "false") {
            *t.value = !t.when_given;
          } else {
            fail("not true or false");
          }
        } else {
          if (std::find(t.words.begin(), t.words.end(), text) == t.words.end()) {
            std::string allowed;
            for (const auto& w : t.words) allowed += (allowed.empty() ? "" : ", ") + w;
            fail("must be one of " + allowed);
          }
          t.set(text);
        }
      },
      d.target);
}

std::string type_name(const descriptor& d) {
  if (const auto* c = std::get_if<choice_target>(&d.target)) {
    std::string words;
    for (const auto& w : c->words) words += (words.empty() ? "" : "|") + w;
    return words;
  }
  if (std::holds_alternative<text_target>(d.target)) return "TEXT";
  return std::holds_alternative<real_target>(d.target) ? "NUMBER" : "INT";
}

// The value a descriptor holds now, for the help text's defaults.
std::string current_text(const descriptor& d) {
  return std::visit(
      [](const auto& t) -> std::string {
        using target = std::decay_t<decltype(t)>;
        if constexpr (std::is_same_v<target, int_target> || std::is_same_v<target, uint_target>) {
          return std::to_string(*t.value);
        } else if constexpr (std::is_same_v<target, real_target>) {
          std::ostringstream number;
          number << *t.value;
          return number.str();
        } else if constexpr (std::is_same_v<target, text_target>) {
          return *t.value;
        } else {
          return "";
        }
      },
      d.target);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw options_error("cannot read scenario file " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

environment process_environment() {
  environment env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry = *e;
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

void apply_scenario(const std::string& toml_text, options& values) {
  toml::table table;
  try {
    table = toml::parse(toml_text);
  } catch (const toml::parse_error& e) {
    throw options_error(std::string("scenario file: ") + std::string(e.description()));
  }
  auto table_of = describe(values);
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    const auto it = std::find_if(table_of.begin(), table_of.end(),
                                 [&](const descriptor& d) { return key_of(d.name) == name || d.name == name; });
    if (it == table_of.end()) throw options_error("scenario file: unknown key '" + name + "'");
    // A boolean key reads like its flag: `no_verify = true` is `--no-verify`.
    std::string text;
    if (const auto* b = node.as_boolean()) {
      text = b->get() ? "true" : "false";
    } else if (const auto* i = node.as_integer()) {
      text = std::to_string(i->get());
    } else if (const auto* f = node.as_floating_point()) {
      std::ostringstream number;
      number.precision(17);
      number << f->get();
      text = number.str();
    } else if (const auto* s = node.as_string()) {
      text = s->get();
    } else {
      throw options_error("scenario file: key '" + name + "' must be a number, a string or a boolean");
    }
    if (std::holds_alternative<flag_target>(it->target) && !node.is_boolean()) {
      throw options_error("scenario file: key '" + name + "' must be true or false");
    }
    assign(*it, text, "scenario file:");
  }
}

parse_result parse_options(int argc, const char* const* argv, const environment& env) {
  parse_result result;
  options& o = result.values;
  // The flag values are captured as text first, so the scenario file (named by a flag) can be
  // applied before them and the flags still win.
  CLI::App app{"wallet-loadgen: drives a wallet server through a payday spike and verifies the ledger afterwards"};
  app.set_help_flag("-h,--help", "Print this help and exit.");
  std::string scenario_path;
  app.add_option("--scenario", scenario_path, "TOML scenario file; its keys are the flags' names with underscores.");
  auto table = describe(o);
  std::vector<std::string> raw(table.size());
  std::vector<CLI::Option*> given(table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    // The description is set apart: CLI11 would bind a flag to a string passed with it.
    if (std::holds_alternative<flag_target>(table[i].target)) {
      given[i] = app.add_flag("--" + table[i].name)->description(table[i].doc);
    } else {
      given[i] = app.add_option("--" + table[i].name, raw[i], std::string(table[i].doc));
      given[i]->type_name(type_name(table[i]));
      given[i]->default_str(current_text(table[i]));
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    result.exit_now = true;
    std::ostringstream out;
    std::ostringstream err;
    result.exit_code = app.exit(e, out, err);
    if (result.exit_code != 0) throw options_error(err.str().empty() ? e.what() : err.str());
    std::fputs(out.str().c_str(), stdout);
    return result;
  }

  if (!scenario_path.empty()) apply_scenario(read_file(scenario_path), o);
  if (o.operator_key.empty()) {
    if (auto it = env.find("WALLET_LOADGEN_OPERATOR_KEY"); it != env.end()) {
      o.operator_key = it->second;
    } else if (auto boot = env.find("WALLET_AUTH_BOOTSTRAP_KEY"); boot != env.end()) {
      o.operator_key = boot->second;
    }
  }
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (given[i]->count() == 0) continue;
    assign(table[i], std::holds_alternative<flag_target>(table[i].target) ? "true" : raw[i], "flag");
  }
  validate(o);
  return result;
}

void validate(const options& o) {
  if (o.operator_key.empty()) {
    throw options_error("no operator key: pass --operator-key or set WALLET_LOADGEN_OPERATOR_KEY");
  }
  if (o.amount_min_minor > o.amount_max_minor) throw options_error("--amount-min exceeds --amount-max");
  if (o.batch_size > 0 && o.workload != workload_kind::payday) {
    throw options_error("--batch-size needs --workload payday (one employer paying salaries)");
  }
  if (o.currency.size() != 3) throw options_error("--currency must be a three-letter code");
  if (o.mode == run_mode::search && o.search_start_rate > o.search_max_rate) {
    throw options_error("--search-start-rate exceeds --search-max-rate");
  }
  if (o.workload == workload_kind::mix && o.mix_payments + o.mix_p2p + o.mix_salaries <= 0) {
    throw options_error("the mix weights sum to zero");
  }
  if (o.database_url.find("://") == std::string::npos && !o.database_url.empty() &&
      o.database_url.find('=') == std::string::npos) {
    throw options_error("--database-url must be a PostgreSQL URL or key=value connection string");
  }
}

std::string to_string(workload_kind kind) {
  switch (kind) {
    case workload_kind::hot_merchant: return "hot-merchant";
    case workload_kind::payday: return "payday";
    case workload_kind::p2p: return "p2p";
    case workload_kind::mix: return "mix";
  }
  return "unknown";
}

std::string to_string(run_mode mode) {
  switch (mode) {
    case run_mode::open: return "open";
    case run_mode::closed: return "closed";
    case run_mode::search: return "search";
  }
  return "unknown";
}

std::string to_string(profile_kind kind) {
  switch (kind) {
    case profile_kind::constant: return "constant";
    case profile_kind::ramp: return "ramp";
    case profile_kind::spike: return "spike";
  }
  return "unknown";
}

}  // namespace loadgen
