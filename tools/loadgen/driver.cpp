#include "tools/loadgen/driver.hpp"

#include "http/url.hpp"

#include "tools/loadgen/api.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <iomanip>
#include <optional>
#include <ostream>
#include <sstream>
#include <thread>

namespace loadgen {

namespace asio = boost::asio;
using steady = std::chrono::steady_clock;

namespace {

// Arrivals dispatched in one go before the sender yields to answers waiting on the same thread.
constexpr int k_dispatch_batch_max = 256;

}  // namespace

double seconds_between(steady::time_point from, steady::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

std::string format_ms(std::int64_t us) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(us < 10'000 ? 2 : 1) << static_cast<double>(us) / 1000.0;
  return s.str();
}

struct driver::open_sender : std::enable_shared_from_this<open_sender> {
  open_sender(driver& d, std::size_t t, arrival_schedule s, steady::time_point start)
      : owner(d), thread(t), schedule(std::move(s)), phase_start(start), timer(d.client_.context(t)) {}

  void start() {
    next_ns = schedule.next();
    tick();
  }

  void tick() {
    if (owner.stop_sending_.load()) next_ns.reset();
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

driver::driver(const options& o, http_client& client, const setup_data& setup, run_stats& stats, std::string run_id)
    : options_(o),
      client_(client),
      setup_(setup),
      stats_(stats),
      run_id_(std::move(run_id)),
      account_ids_(setup.account_ids()) {
  for (std::size_t t = 0; t < client.threads(); ++t) {
    threads_.push_back(std::make_unique<thread_state>(o, setup, t));
  }
}

void driver::start_open(const rate_profile& profile, steady::time_point start) {
  const auto n = client_.threads();
  senders_active_ += static_cast<std::int64_t>(n);
  for (std::size_t t = 0; t < n; ++t) {
    auto sender = std::make_shared<open_sender>(*this, t, arrival_schedule(profile, t, n), start);
    asio::post(client_.context(t), [sender] { sender->start(); });
  }
}

void driver::start_closed(std::int64_t users, steady::time_point end) {
  closed_end_ = end;
  senders_active_ += users;
  for (std::int64_t u = 0; u < users; ++u) {
    const auto t = static_cast<std::size_t>(u) % client_.threads();
    asio::post(client_.context(t), [this, t, u] { next_closed(t, static_cast<int>(u), false); });
  }
}

std::vector<committed_transfer> driver::committed() const {
  std::vector<committed_transfer> all;
  for (const auto& t : threads_) all.insert(all.end(), t->committed.begin(), t->committed.end());
  return all;
}

std::vector<std::shared_ptr<operation>> driver::unknown() const {
  std::vector<std::shared_ptr<operation>> all;
  for (const auto& t : threads_) {
    all.insert(all.end(), t->unknown.begin(), t->unknown.end());
    for (const auto* op : t->pending) {
      if (op->transfer) all.push_back(std::make_shared<operation>(*op));
    }
  }
  return all;
}

http_request driver::request_for(const operation& op) const {
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

bool driver::acknowledge(std::vector<committed_transfer>& into, const operation& op, const std::string& body) {
  const auto o = parse_object(body);
  const auto id = o ? string_field(*o, "transactionId") : std::nullopt;
  if (!id || !api::is_valid_uuid(*id)) return false;
  into.push_back({*id, op.from, op.to, op.amount_minor});
  return true;
}

void driver::dispatch(std::size_t t, steady::time_point scheduled, int closed_user) {
  auto& state = *threads_[t];
  auto op = std::make_shared<operation>(state.generator.next());
  op->scheduled = scheduled;
  op->attempt_due = scheduled;
  op->closed_user = closed_user;
  op->key = "lg-" + run_id_ + "-" + std::to_string(t) + "-" + std::to_string(state.sequence++);
  const auto lag_us = std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - scheduled).count();
  stats_.on_scheduled(seconds_between(t0_, scheduled), lag_us);
  state.pending.insert(op.get());
  ++in_flight_;
  send(t, op);
}

void driver::send(std::size_t t, const std::shared_ptr<operation>& op) {
  ++op->attempts;
  client_.pool(t).submit(request_for(*op), [this, t, op](http_response&& r) { on_answer(t, op, std::move(r)); });
}

void driver::on_answer(std::size_t t, const std::shared_ptr<operation>& op, http_response&& r) {
  const auto status_class = classify(r);
  stats_.on_attempt(status_class, op->attempts == 1);
  if (options_.retries && (r.status == 429 || r.status == 503) && op->attempts <= options_.retries_max) {
    // Follow the server's advice, with the same Idempotency-Key: a 503 whose transfer did
    // commit is then answered from the stored result instead of being applied again.
    const double wait_s = r.retry_after_s >= 0 ? std::min(r.retry_after_s, options_.retry_after_max_s) : 1.0;
    stats_.on_retry();
    auto timer = std::make_shared<asio::steady_timer>(client_.context(t));
    timer->expires_after(std::chrono::microseconds(static_cast<std::int64_t>(wait_s * 1e6)));
    op->attempt_due = timer->expiry();
    timer->async_wait([this, t, op, timer](boost::system::error_code ec) {
      if (!ec) send(t, op);
    });
    return;
  }
  const auto now = steady::now();
  const auto latency_us = std::chrono::duration_cast<std::chrono::microseconds>(now - op->scheduled).count();
  const auto attempt_us = std::chrono::duration_cast<std::chrono::microseconds>(now - op->attempt_due).count();
  stats_.on_finished(status_class, latency_us, attempt_us, seconds_between(t0_, op->scheduled),
                     seconds_between(t0_, now), op->attempts > 1);
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

void driver::next_closed(std::size_t t, int user, bool think) {
  if (stop_sending_.load() || steady::now() >= closed_end_) {
    --senders_active_;
    return;
  }
  if (!think || options_.think_time_ms <= 0) return dispatch(t, steady::now(), user);
  auto timer = std::make_shared<asio::steady_timer>(client_.context(t));
  timer->expires_after(std::chrono::microseconds(static_cast<std::int64_t>(options_.think_time_ms * 1000)));
  timer->async_wait([this, t, user, timer](boost::system::error_code ec) {
    if (!ec) next_closed(t, user, false);
  });
}

progress_printer::progress_printer(std::ostream& err, bool quiet)
    : err_(err), quiet_(quiet), tty_(::isatty(STDERR_FILENO) == 1) {}

void progress_printer::print(driver& d, run_stats& stats, const std::string& label) {
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

void progress_printer::end_line() {
  if (dirty_) err_ << "\n";
  dirty_ = false;
}

namespace {
std::atomic<bool> interrupt_seen{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

extern "C" void on_interrupt(int signal_number) {
  interrupt_seen.store(true);
  std::signal(signal_number, SIG_DFL);  // the next one ends the program
}
}  // namespace

void catch_interrupts() {
  interrupt_seen = false;
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
}

void release_interrupts() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

bool interrupted() { return interrupt_seen.load(); }

std::int64_t wait_phase(const options& o, driver& d, run_stats& stats, progress_printer& progress,
                        steady::time_point schedule_end, const std::string& label) {
  auto next_print = steady::now() + std::chrono::seconds(1);
  auto drain_deadline = schedule_end + std::chrono::microseconds(static_cast<std::int64_t>(o.drain_timeout_s * 1e6));
  // Bounded by the drain deadline: a phase that does not drain is given up.
  while (d.senders_active() > 0 || d.in_flight() > 0) {
    // An interrupt while the schedule is still sending ends it; once only answers are awaited
    // there is nothing to end early (and a second interrupt ends the program).
    if (interrupted() && !d.stopped_sending() && d.senders_active() > 0) {
      d.stop_sending();
      schedule_end = steady::now();
      drain_deadline = std::min(
          drain_deadline, schedule_end + std::chrono::microseconds(static_cast<std::int64_t>(o.drain_timeout_s * 1e6)));
    }
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

}  // namespace loadgen
