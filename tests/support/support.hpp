#pragma once

// The one support library of the test suites. This header gives what most suites against real
// services need: the environment the test command provides, the API shortcuts most tests need,
// bounded waits and real concurrency, and (through its includes) the HTTP client, the
// wallet-server child process, the /metrics reader and direct database access. The rest has a
// header of its own, included where it is used:
//
// - net.hpp: free_port(), a raw TCP connection, a TCP relay that fakes an outage;
// - services.hpp: a private redis-server, private PostgreSQL + Redis (scripts/services.sh);
// - process.hpp: running a program to its end, the current environment.

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/database.hpp"
#include "tests/support/http_client.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/server_process.hpp"

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
// WALLET_BUILD_DIR and WALLET_SOURCE_DIR, which CTest sets for every suite.
std::string build_dir();
std::string source_dir();

// API shortcuts (operator key for the administrative ones). Each asserts its expected status.
struct principal {
  std::int64_t id = 0;
  std::string key;
};
principal create_principal(http_client& c, const std::string& operator_key, const std::string& role = "user");
// A new operator, made as operators are (`wallet-admin create-operator` on the test database; the
// API makes none): its id and API key.
principal create_operator();
std::int64_t create_account(http_client& c, const std::string& operator_key, std::int64_t owner,
                            const std::string& currency = "EUR", int hot_shards = 0);
// A deposit by the operator; its transaction's id ("" when it was not made, a test failure).
std::string deposit(http_client& c, const std::string& operator_key, std::int64_t account, std::int64_t amount);
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
// A name no other test, thread or run uses: the prefix, the process id, a counter and a random part.
std::string unique_key(const std::string& prefix);
// The body of POST /v1/transfers.
std::string transfer_body(std::int64_t from, std::int64_t to, std::int64_t amount);

// The answers to concurrent transfers that race for one payer's money, counted from any number
// of threads: 201 created, 422 insufficient_funds refused; anything else is a test failure.
struct transfer_tally {
  std::atomic<int> created{0};
  std::atomic<int> refused{0};
  std::atomic<int> other{0};
  void count(const response& r);
};

// Answers to one request sent several times under one Idempotency-Key: each is `status` with the
// same body, and exactly one of them was not a replay (Idempotent-Replayed).
void expect_done_once(const std::vector<response>& answers, int status);

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

// Waits until `condition()` holds, checking it every `poll`, at most `bound` in all (a bound on
// a condition, never a measure of speed); returns whether it held. It is not asked again once it
// held: a condition that holds only for moments (a queue that empties between two sweeps) would
// otherwise be reported false when a second look came a moment too late. A condition that costs
// the server a request (a scrape, a read) deserves a longer `poll`.
template <typename Condition>
bool eventually(Condition condition, std::chrono::milliseconds bound = std::chrono::seconds(30),
                std::chrono::milliseconds poll = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(poll);
  }
}

// Milliseconds since `start`.
inline long long elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace test_support
