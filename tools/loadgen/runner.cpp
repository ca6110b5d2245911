#include "tools/loadgen/batches.hpp"
#include "tools/loadgen/driver.hpp"
#include "tools/loadgen/loadgen.hpp"
#include "tools/loadgen/resolve.hpp"
#include "tools/loadgen/schedule.hpp"
#include "tools/loadgen/search.hpp"
#include "tools/loadgen/setup.hpp"
#include "tools/loadgen/stats.hpp"
#include "tools/loadgen/workload.hpp"

#include <sys/resource.h>

#include <chrono>
#include <iomanip>
#include <memory>
#include <ostream>
#include <sstream>
#include <thread>

namespace loadgen {

using steady = std::chrono::steady_clock;

namespace {

cpu_usage cpu_now() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  cpu_usage c;
  c.user_s = static_cast<double>(usage.ru_utime.tv_sec) + static_cast<double>(usage.ru_utime.tv_usec) / 1e6;
  c.system_s = static_cast<double>(usage.ru_stime.tv_sec) + static_cast<double>(usage.ru_stime.tv_usec) / 1e6;
  return c;
}

std::string make_run_id(std::uint64_t seed) {
  // The run id keeps the Idempotency-Keys of two runs apart, even with the same seed.
  const auto now = std::chrono::system_clock::now().time_since_epoch().count();
  std::ostringstream id;
  id << std::hex << (static_cast<std::uint64_t>(now) ^ (seed << 20)) % 0xFFFFFFFFFFULL;
  return id.str();
}

}  // namespace

run_outcome run_loadgen(const options& o, std::ostream& out, std::ostream& err) {
  run_outcome outcome;
  pool_settings pool;
  pool.host = o.host;
  pool.port = static_cast<std::uint16_t>(o.port);
  pool.connections_max = static_cast<std::size_t>(o.connections);
  pool.queue_max = static_cast<std::size_t>(o.queue_max);
  pool.timeout = std::chrono::milliseconds(o.timeout_ms);

  setup_data setup;
  std::vector<std::optional<std::int64_t>> balances_before;
  run_stats stats;
  run_report report;
  report.opts = &o;
  std::vector<committed_transfer> committed;
  std::vector<std::shared_ptr<operation>> unknown;
  std::int64_t abandoned = 0;
  bool ended_early = false;
  std::int64_t malformed = 0;
  const std::string run_id = make_run_id(o.seed);

  {
    http_client client(pool, static_cast<std::size_t>(o.io_threads));
    try {
      setup = load_or_create_setup(o, client, err);
    } catch (const std::exception& e) {
      err << "wallet-loadgen: " << e.what() << "\n";
      outcome.exit_code = 2;
      return outcome;
    }
    if (o.setup_only) return outcome;
    if (o.batch_size > 0) {
      // Payday through the batch endpoint: its own closed loop and its own report line.
      outcome.exit_code = run_payday_batches(o, client, setup, out, err).exit_code;
      client.stop();
      return outcome;
    }
    if (o.verify) balances_before = read_balances(o, client, setup.account_ids());

    driver d(o, client, setup, stats, run_id);
    progress_printer progress(err, o.quiet);
    // A search's steps are judged against their planned length: an interrupt keeps its default
    // action there.
    if (o.mode != run_mode::search) catch_interrupts();
    const auto cpu_start = cpu_now();
    const double io_cpu_start = client.io_cpu_seconds();
    const auto wall_start = steady::now();
    d.set_origin(wall_start);

    std::ostringstream description;
    description << to_string(o.workload) << ", " << o.accounts << " accounts"
                << (o.workload != workload_kind::p2p && o.hot_shards > 0
                        ? ", hot account with " + std::to_string(o.hot_shards) + " shards"
                        : std::string());
    if (o.mode == run_mode::search) {
      bool first_step = true;
      report.search = search_highest_rate(o, [&](double rate) {
        // The previous step may have left the server with a backlog (queues, dirty pages, a
        // checkpoint); a pause keeps it from being charged to this step.
        if (!first_step) {
          std::this_thread::sleep_for(
              std::chrono::microseconds(static_cast<std::int64_t>(o.search_pause_seconds * 1e6)));
        }
        first_step = false;
        const auto start = steady::now();
        const auto end = start + std::chrono::microseconds(static_cast<std::int64_t>(o.search_step_seconds * 1e6));
        stats.begin_window("step " + std::to_string(static_cast<long long>(rate)) + "/s", d.now_s(),
                           d.now_s() + o.search_step_seconds);
        d.start_open(rate_profile::constant(rate, o.search_step_seconds), start);
        const auto unanswered =
            wait_phase(o, d, stats, progress, end, std::to_string(static_cast<long long>(rate)) + "/s");
        abandoned += unanswered;
        step_outcome outcome{evaluate_step(o, stats.windows().back(), rate), unanswered > 0};
        const auto& step = outcome.step;
        err << "search: " << rate << "/s -> " << std::fixed << std::setprecision(1) << step.achieved
            << "/s accepted, p99 " << format_ms(step.p99_us) << " ms, " << step.not_accepted
            << " not accepted: " << (step.ok ? "within target" : "missed") << "\n";
        return outcome;
      });
      description << ", search from " << o.search_start_rate << "/s, steps of " << o.search_step_seconds
                  << " s, p99 target " << o.p99_target_ms << " ms";
    } else if (o.mode == run_mode::closed) {
      const auto end = wall_start + std::chrono::microseconds(static_cast<std::int64_t>(o.duration_s * 1e6));
      stats.begin_window("closed loop", 0, o.duration_s);
      d.start_closed(o.concurrency, end);
      abandoned += wait_phase(o, d, stats, progress, end, "closed");
      description << ", closed loop, " << o.concurrency << " users for " << o.duration_s << " s";
    } else {
      rate_profile profile;
      switch (o.profile) {
        case profile_kind::constant: profile = rate_profile::constant(o.rate, o.duration_s); break;
        case profile_kind::ramp: profile = rate_profile::ramp(o.ramp_from_rate, o.rate, o.ramp_s, o.duration_s); break;
        case profile_kind::spike:
          profile = rate_profile::spike(o.rate, o.spike_multiplier, o.spike_start_s, o.spike_ramp_s, o.spike_duration_s,
                                        o.duration_s);
          break;
      }
      const auto end = wall_start + std::chrono::microseconds(static_cast<std::int64_t>(profile.duration_s() * 1e6));
      stats.begin_window("open loop", 0, profile.duration_s());
      d.start_open(profile, wall_start);
      abandoned += wait_phase(o, d, stats, progress, end, "open");
      description << ", open loop, " << profile.describe();
    }
    release_interrupts();
    ended_early = d.stopped_sending();
    if (ended_early) {
      err << "wallet-loadgen: interrupted: the load ended early, at " << std::fixed << std::setprecision(1)
          << d.stopped_at_s() << " s; what was sent is resolved and verified\n";
      description << ", ended early by a signal";
      stats.end_window_early(d.stopped_at_s());
    }
    const auto cpu_end = cpu_now();
    report.cpu.user_s = cpu_end.user_s - cpu_start.user_s;
    report.cpu.system_s = cpu_end.system_s - cpu_start.system_s;
    report.cpu.io_threads_s = client.io_cpu_seconds() - io_cpu_start;
    report.cpu.wall_s = seconds_between(wall_start, steady::now());
    report.reconnects = client.reconnects();
    report.retries_found_committed = d.retries_found_committed();
    report.description = description.str();
    client.stop();
    // The client's threads have stopped: the driver's per-thread lists are stable from here on.
    committed = d.committed();
    unknown = d.unknown();
    malformed = d.malformed_acknowledgements();
  }
  if (abandoned > 0) {
    err << "wallet-loadgen: " << abandoned
        << " requests were still unanswered after the drain timeout; their transfers are replayed below\n";
  }

  report.total = stats.total();
  // A spike is judged over its whole schedule: a run ended early is not.
  if (o.mode == run_mode::open && o.profile == profile_kind::spike && !ended_early) {
    report.spike = analyze_spike(o, stats);
  }

  if (o.verify) {
    http_client client(pool, static_cast<std::size_t>(o.io_threads));
    {
      // A fresh driver only to build the same requests again for the replays.
      run_stats unused;
      driver d(o, client, setup, unused, run_id);
      report.unknown = resolve_unknown(o, client, d, unknown, committed, err);
    }
    report.acknowledged = static_cast<std::int64_t>(committed.size());
    auto verdict = verify_run(o, client, setup, balances_before, committed, report.unknown->unresolved, err);
    if (abandoned > 0) {
      verdict.notes.push_back(std::to_string(abandoned) + " requests were unanswered after the drain timeout");
    }
    if (malformed > 0) verdict.fail(std::to_string(malformed) + " answers of 201 named no valid transactionId");
    report.verdict = verdict;
    client.stop();
  }

  print_table(out, report);
  if (!o.out_dir.empty()) {
    try {
      write_outputs(o.out_dir, report, stats);
      err << "wallet-loadgen: wrote " << o.out_dir << "/summary.json, timeseries.json and report.html\n";
    } catch (const std::exception& e) {
      err << "wallet-loadgen: " << e.what() << "\n";
    }
  }
  outcome.total = report.total;
  outcome.search = report.search;
  outcome.spike = report.spike;
  outcome.verdict = report.verdict;
  outcome.acknowledged = report.acknowledged;
  outcome.retries_found_committed = report.retries_found_committed;
  outcome.unknown = report.unknown;
  outcome.exit_code = report.verdict && !report.verdict->pass ? 1 : 0;
  return outcome;
}

}  // namespace loadgen
