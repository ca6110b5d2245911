#pragma once

// Shared helpers for the suites that run against real services: the environment the test
// command provides, a wallet-server child process, a synchronous HTTP client, and shortcuts
// for the API calls most tests need.

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <atomic>
#include <thread>

namespace test_support {

// WALLET_DATABASE_URL, WALLET_DATABASE_OWNER_URL, WALLET_REDIS_URL from the test command.
std::string env_or(const char* name, const std::string& fallback);
std::string database_url();
std::string owner_database_url();
// The scratch database (scripts/services.sh reset-db makes it empty next to the shared one): for
// tests that break a ledger on purpose. WALLET_SCRATCH_DATABASE_[OWNER_]URL, or the shared URLs
// with the database name replaced by wallet_scratch.
std::string scratch_database_url();
std::string scratch_owner_database_url();
std::string redis_url();
std::string build_dir();
std::string source_dir();

// A TCP port on 127.0.0.1 that nothing listens on right now.
int free_port();

struct response {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  boost::json::value json() const;
  std::string header(const std::string& name) const;
};

// One keep-alive connection; reconnects when the server closed it.
class http_client {
 public:
  explicit http_client(int port, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~http_client();
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  response request(const std::string& method, const std::string& target, const std::string& body = {},
                   const std::map<std::string, std::string>& headers = {});
  response get(const std::string& target, const std::string& key);
  response post(const std::string& target, const std::string& key, const std::string& body,
                const std::string& idempotency_key = {});

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// A wallet-server child process on a free port, stopped (SIGTERM) when destroyed.
class server_process {
 public:
  struct options {
    std::map<std::string, std::string> env;  // extra WALLET_* settings
    std::vector<std::string> args;
    std::string bootstrap_key = "test-operator-key";
    bool wait_ready = true;
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
  int pid_ = -1;
  int port_ = 0;
  std::string operator_key_;
  std::string log_path_;
  std::string exit_description_;
  int exit_signal_ = 0;
};

// A metric's value from /metrics (the first series of that exact name); -1 when it is missing.
std::int64_t metric_value(http_client& c, const std::string& name);

// Rate limits high enough that a suite about something else never meets them.
std::map<std::string, std::string> unlimited_rates();

// A GoogleTest fixture whose suite shares one wallet-server, started with Derived::options().
template <typename Derived>
class shared_server_test : public ::testing::Test {
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

// API shortcuts (operator key for the administrative ones). Each asserts its expected status.
struct principal {
  std::int64_t id = 0;
  std::string key;
};
principal create_principal(http_client& c, const std::string& operator_key, const std::string& role = "user");
std::int64_t create_account(http_client& c, const std::string& operator_key, std::int64_t owner,
                             const std::string& currency = "EUR", int hot_shards = 0);
void deposit(http_client& c, const std::string& operator_key, std::int64_t account, std::int64_t amount);
// Balance (main + shards) as the API reports it.
std::int64_t balance(http_client& c, const std::string& key, std::int64_t account);
// Starts a reconciliation run that begins after this call (POST /v1/admin/reconciliation; a run
// already in progress may have begun before the caller's writes, so it is waited out and the POST
// repeated) and polls it until it has ended. Returns the ended run (GET .../runs/{id}); a run that
// does not end within the polls is a test failure.
boost::json::object fresh_reconciliation(http_client& c, const std::string& operator_key, bool full = false);
// Polls GET /v1/admin/reconciliation/runs/{id} until the run is no longer running.
boost::json::object wait_for_reconciliation_run(http_client& c, const std::string& operator_key, std::int64_t run_id);
// fresh_reconciliation(...) ended with a verdict and it is clean (the run is printed when not).
bool reconciliation_ok(http_client& c, const std::string& operator_key, bool full = false);
std::string unique_key(const std::string& prefix);
// The body of POST /v1/transfers.
std::string transfer_body(std::int64_t from, std::int64_t to, std::int64_t amount);

// Runs fn(i, thread) for i in [0, count) on `threads` threads at once: real concurrency.
template <typename Fn>
void concurrently(int count, int threads, Fn fn) {
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = next++; i < count; i = next++) fn(i, t);
    });
  }
  for (auto& worker : pool) worker.join();
}

// Count of backends waiting, directly or through other waiters, on the backend `blocker_pid`
// (PostgreSQL queues a second waiter for a row behind the first one, not behind the holder).
int backends_blocked_by(int blocker_pid);

// Waits until `condition()` holds, checking every few milliseconds, at most `bound` in all (a
// bound on a condition, never a measure of speed); returns whether it holds.
template <typename Condition>
bool eventually(Condition condition, std::chrono::milliseconds bound = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!condition() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

// Runs a SQL query with the owner role and returns the first column of the first row as text.
std::string query_value(const std::string& sql);
void execute_sql(const std::string& sql, bool as_owner = true);

}  // namespace test_support
