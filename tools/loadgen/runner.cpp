#include "tools/loadgen/api.hpp"
#include "tools/loadgen/loadgen.hpp"
#include "tools/loadgen/schedule.hpp"
#include "tools/loadgen/setup.hpp"
#include "tools/loadgen/stats.hpp"
#include "tools/loadgen/workload.hpp"

#include "base/assert.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <memory>
#include <ostream>
#include <sstream>
#include <thread>
#include <unordered_set>

namespace loadgen {

namespace asio = boost::asio;
using steady = std::chrono::steady_clock;

namespace {

// Arrivals dispatched in one go before the sender yields to answers waiting on the same thread.
constexpr int k_dispatch_batch_max = 256;
// Replays of one request whose outcome is unknown, at the end of the run.
constexpr int k_resolve_attempts_max = 10;

double seconds_between(steady::time_point from, steady::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

bool looks_like_uuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

cpu_usage cpu_now() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  cpu_usage c;
  c.user_s = static_cast<double>(usage.ru_utime.tv_sec) + static_cast<double>(usage.ru_utime.tv_usec) / 1e6;
  c.system_s = static_cast<double>(usage.ru_stime.tv_sec) + static_cast<double>(usage.ru_stime.tv_usec) / 1e6;
  return c;
}

// Sends the load and records every answer. Each I/O thread has its own generator and result
// lists, touched only on that thread; they are read after the client's threads have stopped.
class driver {
 public:
  driver(const options& o, http_client& client, const setup_data& setup, run_stats& stats, std::string run_id)
      : options_(o), client_(client), setup_(setup), stats_(stats), run_id_(std::move(run_id)),
        account_ids_(setup.account_ids()) {
    for (std::size_t t = 0; t < client.threads(); ++t) {
      threads_.push_back(std::make_unique<thread_state>(o, setup, t));
    }
  }

  void set_origin(steady::time_point t0) { t0_ = t0; }
  steady::time_point origin() const { return t0_; }
  double now_s() const { return seconds_between(t0_, steady::now()); }

  // Starts one open-loop phase: the profile's arrivals from `start`, split over the threads.
  void start_open(const rate_profile& profile, steady::time_point start) {
    const auto n = client_.threads();
    senders_active_ += static_cast<std::int64_t>(n);
    for (std::size_t t = 0; t < n; ++t) {
      auto sender = std::make_shared<open_sender>(*this, t, arrival_schedule(profile, t, n), start);
      asio::post(client_.context(t), [sender] { sender->start(); });
    }
  }

  // Starts one closed-loop phase: `concurrency` users until `end`.
  void start_closed(std::int64_t users, steady::time_point end) {
    closed_end_ = end;
    senders_active_ += users;
    for (std::int64_t u = 0; u < users; ++u) {
      const auto t = static_cast<std::size_t>(u) % client_.threads();
      asio::post(client_.context(t), [this, t, u] { dispatch(t, steady::now(), static_cast<int>(u)); });
    }
  }

  std::int64_t senders_active() const { return senders_active_.load(); }
  std::int64_t in_flight() const { return in_flight_.load(); }
  std::int64_t malformed_acknowledgements() const { return malformed_201_.load(); }
  std::int64_t retries_found_committed() const { return retry_found_committed_.load(); }

  // Only after the client has stopped.
  std::vector<committed_transfer> committed() const {
    std::vector<committed_transfer> all;
    for (const auto& t : threads_) all.insert(all.end(), t->committed.begin(), t->committed.end());
    return all;
  }
  // Transfers whose outcome is unknown: answered with a transport error or 5xx, or still
  // unanswered when the client stopped (their handlers are kept, not run, until the client is
  // destroyed, so the pointers in `pending` are still valid here).
  std::vector<std::shared_ptr<operation>> unknown() const {
    std::vector<std::shared_ptr<operation>> all;
    for (const auto& t : threads_) {
      all.insert(all.end(), t->unknown.begin(), t->unknown.end());
      for (const auto* op : t->pending) {
        if (op->transfer) all.push_back(std::make_shared<operation>(*op));
      }
    }
    return all;
  }

  http_request request_for(const operation& op) const {
    http_request r;
    r.api_key = setup_.party_at(op.from).api_key;
    if (!op.transfer) {
      r.method = http_method::get;
      r.target = "/v1/accounts/" + std::to_string(account_ids_[op.from]);
      return r;
    }
    r.method = http_method::post;
    r.target = "/v1/transfers";
    r.idempotency_key = op.key;
    char body[160];
    std::snprintf(body, sizeof body, "{\"fromAccountId\":%" PRId64 ",\"toAccountId\":%" PRId64 ",\"amount\":%" PRId64 "}",
                  account_ids_[op.from], account_ids_[op.to], op.amount_minor);
    r.body = body;
    return r;
  }

  // Records an acknowledged transfer; false when the answer does not name a transaction.
  static bool acknowledge(std::vector<committed_transfer>& into, const operation& op, const std::string& body) {
    const auto o = parse_object(body);
    const auto id = o ? string_field(*o, "transactionId") : std::nullopt;
    if (!id || !looks_like_uuid(*id)) return false;
    into.push_back({*id, op.from, op.to, op.amount_minor});
    return true;
  }

 private:
  struct thread_state {
    thread_state(const options& o, const setup_data& setup, std::size_t t) : generator(o, setup, t) {}
    workload_generator generator;
    std::vector<committed_transfer> committed;
    std::vector<std::shared_ptr<operation>> unknown;
    std::unordered_set<const operation*> pending;  // sent, no final answer yet
    std::uint64_t sequence = 0;
  };

  // Walks one thread's share of the arrival schedule with a timer.
  struct open_sender : std::enable_shared_from_this<open_sender> {
    open_sender(driver& d, std::size_t t, arrival_schedule s, steady::time_point start)
        : owner(d), thread(t), schedule(std::move(s)), phase_start(start), timer(d.client_.context(t)) {}

    void start() {
      next_ns = schedule.next();
      tick();
    }

    void tick() {
      const auto now = steady::now();
      int batch = 0;
      while (next_ns && phase_start + std::chrono::nanoseconds(*next_ns) <= now) {
        if (batch++ == k_dispatch_batch_max) {
          asio::post(owner.client_.context(thread), [self = shared_from_this()] { self->tick(); });
          return;
        }
        owner.dispatch(thread, phase_start + std::chrono::nanoseconds(*next_ns), -1);
        next_ns = schedule.next();
      }
      if (!next_ns) {
        --owner.senders_active_;
        return;
      }
      // Wake at the end of the quantum holding the next arrival: every arrival due by then goes
      // out in one pass, each a little late (counted in its latency and in the send lag).
      auto wake_ns = *next_ns;
      if (const std::int64_t quantum_ns = owner.options_.send_quantum_us * 1000; quantum_ns > 0) {
        wake_ns = (wake_ns / quantum_ns + 1) * quantum_ns;
      }
      timer.expires_at(phase_start + std::chrono::nanoseconds(wake_ns));
      timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (!ec) self->tick();
      });
    }

    driver& owner;
    std::size_t thread;
    arrival_schedule schedule;
    steady::time_point phase_start;
    asio::steady_timer timer;
    std::optional<std::int64_t> next_ns;
  };

  void dispatch(std::size_t t, steady::time_point scheduled, int closed_user) {
    auto& state = *threads_[t];
    auto op = std::make_shared<operation>(state.generator.next());
    op->scheduled = scheduled;
    op->closed_user = closed_user;
    op->key = "lg-" + run_id_ + "-" + std::to_string(t) + "-" + std::to_string(state.sequence++);
    const auto lag_us = std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - scheduled).count();
    stats_.on_scheduled(seconds_between(t0_, scheduled), lag_us);
    state.pending.insert(op.get());
    ++in_flight_;
    send(t, op);
  }

  void send(std::size_t t, const std::shared_ptr<operation>& op) {
    ++op->attempts;
    client_.pool(t).submit(request_for(*op), [this, t, op](http_response&& r) { on_answer(t, op, std::move(r)); });
  }

  void on_answer(std::size_t t, const std::shared_ptr<operation>& op, http_response&& r) {
    const auto status_class = classify(r);
    stats_.on_attempt(status_class, op->attempts == 1);
    if (options_.retries && (r.status == 429 || r.status == 503) && op->attempts <= options_.retries_max) {
      // Follow the server's advice, with the same Idempotency-Key: a 503 whose transfer did
      // commit is then answered from the stored result instead of being applied again.
      const double wait_s = r.retry_after_s >= 0 ? std::min(r.retry_after_s, options_.retry_after_max_s) : 1.0;
      stats_.on_retry();
      auto timer = std::make_shared<asio::steady_timer>(client_.context(t));
      timer->expires_after(std::chrono::microseconds(static_cast<std::int64_t>(wait_s * 1e6)));
      timer->async_wait([this, t, op, timer](boost::system::error_code ec) {
        if (!ec) send(t, op);
      });
      return;
    }
    const auto now = steady::now();
    const auto latency_us = std::chrono::duration_cast<std::chrono::microseconds>(now - op->scheduled).count();
    stats_.on_finished(status_class, latency_us, seconds_between(t0_, op->scheduled), seconds_between(t0_, now),
                       op->attempts > 1);
    auto& state = *threads_[t];
    state.pending.erase(op.get());
    if (op->transfer) {
      if (r.status == 201) {
        if (!acknowledge(state.committed, *op, r.body)) ++malformed_201_;
        // A retry answered from the stored result: an earlier attempt had committed although
        // its answer said 503 (e.g. the deadline passed while its COMMIT was still under way).
        if (op->attempts > 1 && r.idempotent_replayed) ++retry_found_committed_;
      } else if (is_outcome_unknown(r)) {
        state.unknown.push_back(op);
      }
    }
    --in_flight_;
    if (op->closed_user >= 0) next_closed(t, op->closed_user);
  }

  void next_closed(std::size_t t, int user) {
    if (steady::now() >= closed_end_) {
      --senders_active_;
      return;
    }
    if (options_.think_time_ms <= 0) return dispatch(t, steady::now(), user);
    auto timer = std::make_shared<asio::steady_timer>(client_.context(t));
    timer->expires_after(std::chrono::microseconds(static_cast<std::int64_t>(options_.think_time_ms * 1000)));
    timer->async_wait([this, t, user, timer](boost::system::error_code ec) {
      if (!ec) dispatch(t, steady::now(), user);
    });
  }

  const options& options_;
  http_client& client_;
  const setup_data& setup_;
  run_stats& stats_;
  std::string run_id_;
  std::vector<std::int64_t> account_ids_;
  std::vector<std::unique_ptr<thread_state>> threads_;
  steady::time_point t0_ = steady::now();
  steady::time_point closed_end_;
  std::atomic<std::int64_t> senders_active_{0};
  std::atomic<std::int64_t> in_flight_{0};
  std::atomic<std::int64_t> malformed_201_{0};
  std::atomic<std::int64_t> retry_found_committed_{0};
};

std::string format_ms(std::int64_t us) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(us < 10'000 ? 2 : 1) << static_cast<double>(us) / 1000.0;
  return s.str();
}

// One progress line a second on stderr, rewritten in place on a terminal.
class progress_printer {
 public:
  progress_printer(std::ostream& err, bool quiet) : err_(err), quiet_(quiet), tty_(::isatty(STDERR_FILENO) == 1) {}

  void print(driver& d, run_stats& stats, const std::string& label) {
    if (quiet_) return;
    const double now = d.now_s();
    const auto p = stats.progress(now);
    std::ostringstream line;
    line << "[" << std::fixed << std::setprecision(0) << std::setw(5) << now << "s] " << label << " rate "
         << p.scheduled_last_second << "/s intended, " << p.completed_last_second << "/s achieved | in flight "
         << d.in_flight() << " |";
    for (const auto& [name, count] : p.counts) line << " " << name << ": " << count;
    line << " | p99 " << format_ms(p.accepted_p99_us) << " ms";
    if (tty_) {
      err_ << "\r\033[K" << line.str() << std::flush;
      dirty_ = true;
    } else {
      err_ << line.str() << "\n";
    }
  }

  void end_line() {
    if (dirty_) err_ << "\n";
    dirty_ = false;
  }

 private:
  std::ostream& err_;
  bool quiet_;
  bool tty_;
  bool dirty_ = false;
};

// Waits for a phase to finish sending and for its answers, printing progress once a second.
// Returns the requests still unanswered when the drain timeout ran out.
std::int64_t wait_phase(const options& o, driver& d, run_stats& stats, progress_printer& progress,
                        steady::time_point schedule_end, const std::string& label) {
  auto next_print = steady::now() + std::chrono::seconds(1);
  const auto drain_deadline = schedule_end + std::chrono::microseconds(static_cast<std::int64_t>(o.drain_timeout_s * 1e6));
  // Bounded by the drain deadline: a phase that does not drain is given up.
  while (d.senders_active() > 0 || d.in_flight() > 0) {
    const auto now = steady::now();
    if (now >= drain_deadline && now >= schedule_end) break;
    if (now >= next_print) {
      progress.print(d, stats, label);
      next_print += std::chrono::seconds(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  progress.print(d, stats, label);
  progress.end_line();
  return d.senders_active() > 0 ? std::max<std::int64_t>(1, d.in_flight()) : d.in_flight();
}

search_step evaluate_step(const options& o, const window_stats& w, double rate) {
  search_step s;
  s.rate = rate;
  const auto accepted = w.accepted_us.count();
  const double length = w.end_s - w.start_s;
  s.achieved = length > 0 ? static_cast<double>(accepted) / length : 0;
  s.p50_us = w.accepted_us.value_at_percentile(50);
  s.p99_us = w.accepted_us.value_at_percentile(99);
  s.not_accepted = w.finished - accepted + (w.scheduled - w.finished);
  // A step is within target when the accepted requests' p99 is, nearly everything was accepted,
  // and the server kept up with the intended rate.
  s.ok = accepted > 0 && static_cast<double>(s.p99_us) <= o.p99_target_ms * 1000.0 &&
         static_cast<double>(s.not_accepted) <= 0.01 * static_cast<double>(w.scheduled) && s.achieved >= 0.9 * rate;
  return s;
}

// Replays each request whose outcome is unknown with its own Idempotency-Key until the server
// gives a definite answer: a stored 201 is an acknowledgement like any other; a 4xx means it
// never applied. Counts what became of them.
unknown_outcomes resolve_unknown(const options& o, http_client& client, driver& d,
                                 const std::vector<std::shared_ptr<operation>>& unknown,
                                 std::vector<committed_transfer>& committed, std::ostream& err) {
  unknown_outcomes counts;
  counts.replayed = static_cast<std::int64_t>(unknown.size());
  if (unknown.empty()) return counts;
  err << "resolve: replaying " << unknown.size() << " requests whose outcome was unknown\n";
  std::vector<http_response> answers(unknown.size());
  run_bulk(client, unknown.size(), static_cast<std::size_t>(o.verify_concurrency),
           [&](std::size_t i, std::size_t thread, std::function<void()> done) {
             call_with_retries(client, thread, d.request_for(*unknown[i]), k_resolve_attempts_max,
                               [&, i, done](http_response&& r) {
                                 answers[i] = std::move(r);
                                 done();
                               });
           });
  for (std::size_t i = 0; i < unknown.size(); ++i) {
    const auto& r = answers[i];
    if (r.status == 201) {
      if (!driver::acknowledge(committed, *unknown[i], r.body)) {
        ++counts.unresolved;
      } else if (r.idempotent_replayed) {
        ++counts.found_committed;
      } else {
        ++counts.applied_on_replay;
      }
    } else if (r.status < 400 || r.status >= 500 || r.status == 429) {
      ++counts.unresolved;
    } else {
      ++counts.refused;
    }
  }
  return counts;
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
    if (o.verify) balances_before = read_balances(o, client, setup.account_ids());

    driver d(o, client, setup, stats, run_id);
    progress_printer progress(err, o.quiet);
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
      // Steps up the rate until a step misses the target, then bisects between the last good
      // and the first bad rate. Bounded: rates grow geometrically up to search_max_rate.
      search_result search;
      std::optional<double> last_ok, first_bad;
      auto run_step = [&](double rate) {
        // The previous step may have left the server with a backlog (queues, dirty pages, a
        // checkpoint); a pause keeps it from being charged to this step.
        if (!search.steps.empty()) {
          std::this_thread::sleep_for(std::chrono::microseconds(static_cast<std::int64_t>(o.search_pause_seconds * 1e6)));
        }
        const auto start = steady::now();
        const auto end = start + std::chrono::microseconds(static_cast<std::int64_t>(o.search_step_seconds * 1e6));
        stats.begin_window("step " + std::to_string(static_cast<long long>(rate)) + "/s", d.now_s(),
                           d.now_s() + o.search_step_seconds);
        d.start_open(rate_profile::constant(rate, o.search_step_seconds), start);
        abandoned += wait_phase(o, d, stats, progress, end, std::to_string(static_cast<long long>(rate)) + "/s");
        auto step = evaluate_step(o, stats.windows().back(), rate);
        err << "search: " << rate << "/s -> " << std::fixed << std::setprecision(1) << step.achieved
            << "/s accepted, p99 " << format_ms(step.p99_us) << " ms, " << step.not_accepted << " not accepted: "
            << (step.ok ? "within target" : "missed") << "\n";
        search.steps.push_back(step);
        if (step.ok && (!search.best || step.achieved > search.best->achieved)) search.best = step;
        return step.ok;
      };
      for (double rate = o.search_start_rate; rate <= o.search_max_rate && abandoned == 0; rate *= o.search_step_factor) {
        // A missed step is tried once more before the climb stops: on a machine shared with
        // other work one bad step is often noise, and stopping there understates the server.
        if (run_step(rate) || (abandoned == 0 && run_step(rate))) {
          last_ok = rate;
        } else {
          first_bad = rate;
          break;
        }
      }
      for (std::int64_t i = 0; i < o.search_refine && last_ok && first_bad && abandoned == 0; ++i) {
        const double mid = (*last_ok + *first_bad) / 2;
        if (run_step(mid)) {
          last_ok = mid;
        } else {
          first_bad = mid;
        }
      }
      description << ", search from " << o.search_start_rate << "/s, steps of " << o.search_step_seconds
                  << " s, p99 target " << o.p99_target_ms << " ms";
      report.search = search;
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
  if (o.mode == run_mode::open && o.profile == profile_kind::spike) report.spike = analyze_spike(o, stats);

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
