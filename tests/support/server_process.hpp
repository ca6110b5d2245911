#pragma once

// The wallet-server as a child process of a test, and the GoogleTest fixture whose suite shares
// one.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace test_support {

// The wallet-server binary of this build: build_dir()/tools/server/wallet-server.
std::string server_binary();

// Rate limits high enough that a suite about something else never meets them.
std::map<std::string, std::string> unlimited_rates();

// A wallet-server child process on a free port, stopped (SIGTERM) when destroyed. The
// constructor throws std::runtime_error when the binary is missing or the server does not start.
class server_process {
 public:
  struct options {
    std::map<std::string, std::string> env;  // extra WALLET_* settings
    std::vector<std::string> args;
    std::string bootstrap_key = "test-operator-key";
    bool wait_ready = true;
    // How long the destructor waits for the server to exit after SIGTERM before it kills it.
    // Killing it then fails the test (a hang at shutdown is a bug) unless `stop_timeout_fails`
    // is false: a suite that does not test shutdown may choose a short wait that does not fail,
    // so that a server slow to drain costs it seconds rather than a failure it cannot explain.
    std::chrono::milliseconds stop_timeout = std::chrono::seconds(30);
    bool stop_timeout_fails = true;
    // > 0: the server's open files limit, soft and hard (so the server cannot raise it).
    std::uint64_t open_files_max = 0;
  };
  server_process();
  explicit server_process(options opts);
  ~server_process();
  server_process(const server_process&) = delete;
  server_process& operator=(const server_process&) = delete;

  int port() const { return port_; }
  const std::string& operator_key() const { return operator_key_; }
  // Sends SIGTERM and waits; returns the exit status (or -1 on a signal / timeout). When the
  // destructor does this, anything but exit status 0 (or a test's own SIGKILL) fails the test.
  int terminate(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // SIGKILL and reap: a crash, with no chance to finish anything in flight.
  void kill();
  // Sends a signal to the running server and returns at once, without reaping it: e.g. SIGKILL
  // while another thread waits in terminate(), which then reaps it.
  void send_signal(int signal_number) const;
  // Starts the server again on the same port with the same options (after kill() or
  // terminate()); its log continues in the same file. With `wait_ready`, returns once /healthz
  // answers (at most 30 s, else throws); without, returns at once.
  void restart(bool wait_ready = true);
  bool running() const { return pid_ > 0; }
  const std::string& log_path() const { return log_path_; }
  std::string log() const;

 private:
  void spawn(bool truncate_log);
  void wait_until_ready();

  options options_;
  // Atomic: send_signal() may read it while another thread's terminate() reaps the process.
  std::atomic<int> pid_{-1};
  int port_ = 0;
  std::string operator_key_;
  std::string log_path_;
  std::string exit_description_;
  int exit_signal_ = 0;
};

// A GoogleTest fixture whose suite shares one wallet-server, started with Derived::options():
// by default with unlimited_rates(); a suite that needs other settings declares its own
// `static server_process::options options()`.
template <typename Derived>
class shared_server_test : public ::testing::Test {
 public:
  static server_process::options options() {
    server_process::options o;
    o.env = unlimited_rates();
    return o;
  }

 protected:
  static void SetUpTestSuite() { server_ = new server_process(Derived::options()); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  int port() const { return server_->port(); }
  const std::string& op() const { return server_->operator_key(); }
  static inline server_process* server_ = nullptr;
};

}  // namespace test_support
