#pragma once

// Sending the load and recording its answers: the driver walks an open-loop arrival schedule or
// keeps closed-loop users busy, retries when told to, and keeps per I/O thread what the
// verification needs (acknowledged transfers, transfers whose outcome is unknown). Beside it the
// progress line and the wait for one phase of the load to drain.

#include "tools/loadgen/http_client.hpp"
#include "tools/loadgen/options.hpp"
#include "tools/loadgen/schedule.hpp"
#include "tools/loadgen/setup.hpp"
#include "tools/loadgen/stats.hpp"
#include "tools/loadgen/verify.hpp"
#include "tools/loadgen/workload.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

namespace loadgen {

double seconds_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to);
// Milliseconds with two decimals below 10 ms and one above, for progress and search lines.
std::string format_ms(std::int64_t us);

// Sends the load and records every answer. Each I/O thread has its own generator and result
// lists, touched only on that thread; they are read after the client's threads have stopped.
class driver {
 public:
  driver(const options& o, http_client& client, const setup_data& setup, run_stats& stats, std::string run_id);

  void set_origin(std::chrono::steady_clock::time_point t0) { t0_ = t0; }
  std::chrono::steady_clock::time_point origin() const { return t0_; }
  double now_s() const { return seconds_between(t0_, std::chrono::steady_clock::now()); }

  // Starts one open-loop phase: the profile's arrivals from `start`, split over the threads.
  void start_open(const rate_profile& profile, std::chrono::steady_clock::time_point start);
  // Starts one closed-loop phase: `concurrency` users until `end`.
  void start_closed(std::int64_t users, std::chrono::steady_clock::time_point end);

  std::int64_t senders_active() const { return senders_active_.load(); }
  // Ends the load now: no request is scheduled or sent from here on (retries of those sent go
  // on); the requests in flight are still waited for, resolved and verified.
  void stop_sending() {
    if (!stop_sending_.exchange(true)) stopped_at_s_ = now_s();
  }
  bool stopped_sending() const { return stop_sending_.load(); }
  double stopped_at_s() const { return stopped_at_s_; }  // since the origin, once stopped
  std::int64_t in_flight() const { return in_flight_.load(); }
  std::int64_t malformed_acknowledgements() const { return malformed_201_.load(); }
  std::int64_t retries_found_committed() const { return retry_found_committed_.load(); }

  // Only after the client has stopped.
  std::vector<committed_transfer> committed() const;
  // Transfers whose outcome is unknown: answered with a transport error or 5xx, or still
  // unanswered when the client stopped (their handlers are kept, not run, until the client is
  // destroyed, so the pointers in `pending` are still valid here).
  std::vector<std::shared_ptr<operation>> unknown() const;

  http_request request_for(const operation& op) const;

  // Records an acknowledged transfer; false when the answer does not name a transaction.
  static bool acknowledge(std::vector<committed_transfer>& into, const operation& op, const std::string& body);

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
  struct open_sender;

  void dispatch(std::size_t t, std::chrono::steady_clock::time_point scheduled, int closed_user);
  void send(std::size_t t, const std::shared_ptr<operation>& op);
  void on_answer(std::size_t t, const std::shared_ptr<operation>& op, http_response&& r);
  // A closed-loop user's next request: after its think time when `think`, none once the loop
  // has ended or sending stopped.
  void next_closed(std::size_t t, int user, bool think = true);

  const options& options_;
  http_client& client_;
  const setup_data& setup_;
  run_stats& stats_;
  std::string run_id_;
  std::vector<std::int64_t> account_ids_;
  std::vector<std::unique_ptr<thread_state>> threads_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point closed_end_;
  std::atomic<std::int64_t> senders_active_{0};
  std::atomic<bool> stop_sending_{false};
  double stopped_at_s_ = 0;
  std::atomic<std::int64_t> in_flight_{0};
  std::atomic<std::int64_t> malformed_201_{0};
  std::atomic<std::int64_t> retry_found_committed_{0};
};

// One progress line a second on stderr, rewritten in place on a terminal.
class progress_printer {
 public:
  progress_printer(std::ostream& err, bool quiet);

  void print(driver& d, run_stats& stats, const std::string& label);
  void end_line();

 private:
  std::ostream& err_;
  bool quiet_;
  bool tty_;
  bool dirty_ = false;
};

// While the load of an open- or closed-loop run is sent, the first SIGINT or SIGTERM ends it early (wait_phase stops the driver's
// sending; what was sent is waited for, resolved and verified as at the end of its schedule); a
// second one ends the program.
void catch_interrupts();
void release_interrupts();  // back to the signals' default actions
bool interrupted();

// Waits for a phase to finish sending and for its answers, printing progress once a second.
// Returns the requests still unanswered when the drain timeout ran out.
std::int64_t wait_phase(const options& o, driver& d, run_stats& stats, progress_printer& progress,
                        std::chrono::steady_clock::time_point schedule_end, const std::string& label);

}  // namespace loadgen
