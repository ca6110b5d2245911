// SIGTERM under load: whatever is in flight when it arrives (requests waiting for their
// rate-limit check, at the actors, at the database, being answered), the server exits 0 and the
// ledger stays exact. Run under the sanitizers (scripts/sanitize.sh), these tests are what proves
// that nothing of a request runs on the routes, the limiter or the service after they are gone.

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/http_client.hpp"
#include "tests/support/net.hpp"
#include "tests/support/services.hpp"
#include "tests/support/support.hpp"

namespace ts = test_support;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t funds = 1'000'000;
constexpr int load_threads = 8;

// What the load threads saw, across every server of a test.
struct load_record {
  std::mutex mutex;
  std::set<int> statuses;
  std::vector<std::string> committed_keys;  // transfers answered 201
  std::atomic<int> answers{0};
};

// Two funded users paying each other 1 (and reading their balances) from `load_threads` threads
// until stopped; connection errors (the server stopping) are expected and not recorded.
class load {
 public:
  load(int port, const ts::principal& alice, std::int64_t a, const ts::principal& bob, std::int64_t b,
       load_record& record) {
    for (int t = 0; t < load_threads; ++t) {
      threads_.emplace_back([=, this, &record] {
        ts::http_client c(port, 30s);
        for (int i = 0; !stop_.load(); ++i) {
          const bool from_alice = (i + t) % 2 == 0;
          const auto& payer = from_alice ? alice : bob;
          try {
            if (i % 4 == 3) {
              const auto r = c.get("/v1/accounts/" + std::to_string(from_alice ? a : b), payer.key);
              std::lock_guard lock(record.mutex);
              record.statuses.insert(r.status);
            } else {
              const auto key = ts::unique_key("sigterm-load");
              const auto r =
                  c.post("/v1/transfers", payer.key, ts::transfer_body(from_alice ? a : b, from_alice ? b : a, 1), key);
              std::lock_guard lock(record.mutex);
              record.statuses.insert(r.status);
              if (r.status == 201) record.committed_keys.push_back(key);
            }
            ++record.answers;
          } catch (const std::exception&) {
            // Refused or closed: the server is stopping. Do not spin on a closed port.
            std::this_thread::sleep_for(5ms);
          }
        }
      });
    }
  }
  ~load() { stop(); }
  void stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

class HttpShutdownUnderLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    ts::server_process server(options());
    ts::http_client c(server.port());
    alice_ = ts::create_principal(c, server.operator_key());
    bob_ = ts::create_principal(c, server.operator_key());
    a_ = ts::create_account(c, server.operator_key(), alice_.id);
    b_ = ts::create_account(c, server.operator_key(), bob_.id);
    ts::deposit(c, server.operator_key(), a_, funds);
    ts::deposit(c, server.operator_key(), b_, funds);
  }

  // Writes limited enough that some requests meet 429; reads and setup are not limited.
  static ts::server_process::options options() {
    ts::server_process::options o;
    o.env = ts::unlimited_rates();
    o.env["WALLET_RATELIMIT_RATE_PER_SECOND"] = "100";
    o.env["WALLET_RATELIMIT_BURST"] = "20";
    return o;
  }

  // On a fresh server: the reconciliation is clean, every transfer answered 201 is in the journal
  // exactly once, and the two balances still add up to what was deposited.
  void expect_ledger_exact() {
    ts::server_process server(options());
    ts::http_client c(server.port());
    EXPECT_TRUE(ts::reconciliation_ok(c, server.operator_key()));
    EXPECT_EQ(ts::balance(c, alice_.key, a_) + ts::balance(c, bob_.key, b_), 2 * funds);
    std::lock_guard lock(record_.mutex);
    ASSERT_FALSE(record_.committed_keys.empty());
    EXPECT_EQ(ts::query_value("SELECT count(*) FROM journal_transaction WHERE principal_id IN (" +
                              std::to_string(alice_.id) + "," + std::to_string(bob_.id) +
                              ") AND idempotency_key = ANY(" + ts::sql_text_array(record_.committed_keys) + ")"),
              std::to_string(record_.committed_keys.size()));
  }

  void expect_only_known_statuses() {
    std::lock_guard lock(record_.mutex);
    for (int status : record_.statuses) {
      EXPECT_TRUE(status == 200 || status == 201 || status == 429 || status == 503) << status;
    }
  }

  ts::principal alice_, bob_;
  std::int64_t a_ = 0, b_ = 0;
  load_record record_;
};

// SIGTERM while eight clients keep paying and reading (some of them over their rate limit): the
// server drains and exits 0, three times in a row, and the ledger is exact afterwards.
TEST_F(HttpShutdownUnderLoad, SigtermWhileRequestsFlowExitsZero) {
  for (int round = 0; round < 3; ++round) {
    ts::server_process server(options());
    load clients(server.port(), alice_, a_, bob_, b_, record_);
    const int before = record_.answers.load();
    ASSERT_TRUE(ts::eventually([&] { return record_.answers.load() >= before + 200; }, 120s))
        << "the load was not served:\n"
        << server.log();
    EXPECT_EQ(server.terminate(120s), 0) << "round " << round << ":\n" << server.log();
    clients.stop();
  }
  expect_only_known_statuses();
  expect_ledger_exact();
}

// SIGTERM while every client waits for its rate-limit check (Redis paused, a long command
// timeout, no shutdown grace): the HTTP threads stop with those checks pending, the limiter
// delivers them while the routes and the service still exist, and the process exits 0.
TEST_F(HttpShutdownUnderLoad, SigtermWithRateLimitChecksPendingExitsZero) {
  ts::redis_process redis(ts::free_port());
  redis.start();
  auto o = options();
  o.env["WALLET_REDIS_URL"] = redis.url();
  o.env["WALLET_REDIS_COMMAND_TIMEOUT_MS"] = "10000";
  o.env["WALLET_HTTP_SHUTDOWN_GRACE_MS"] = "0";
  o.env["WALLET_HTTP_REQUEST_DEADLINE_MS"] = "60000";
  ts::server_process server(o);
  ts::http_client probe(server.port());
  load clients(server.port(), alice_, a_, bob_, b_, record_);
  ASSERT_TRUE(ts::eventually([&] { return record_.answers.load() >= 100; }, 120s)) << "the load was not served:\n"
                                                                                   << server.log();

  redis.pause();
  // Clients' requests now get stuck in their rate-limit checks (the probe's own request to
  // /metrics is in flight too, and passes no check). One stuck check is enough for what this
  // test proves; waiting for all of them at once raced the checks' own command timeout, after
  // which the limiter fails open and the clients flow again.
  ASSERT_TRUE(ts::eventually([&] { return ts::metric_value(probe, "wallet_http_inflight_requests") >= 2; }, 60s))
      << "no client's check got stuck behind the paused Redis";
  EXPECT_EQ(server.terminate(120s), 0) << server.log();
  // The HTTP threads did stop with the checks still pending (no grace to wait for them).
  EXPECT_NE(server.log().find("requests still in flight"), std::string::npos) << server.log();
  clients.stop();
  redis.resume();

  expect_only_known_statuses();
  expect_ledger_exact();
}

// The drain (http.shutdown_drain_ms): after SIGTERM the server goes on serving, on a connection
// kept alive from before the signal and on new ones, while /readyz answers 503 and every answer
// closes its connection, so that a load balancer sends the next requests elsewhere. A second
// SIGTERM ends the drain (here ten minutes long) and the server exits 0.
TEST(HttpShutdownDrain, ServesWhileReadyzSendsTrafficElsewhereUntilASecondSignal) {
  ts::server_process::options o;
  o.env = ts::unlimited_rates();
  o.env["WALLET_HTTP_SHUTDOWN_DRAIN_MS"] = "600000";
  ts::server_process server(o);
  ts::http_client c(server.port());
  const auto alice = ts::create_principal(c, server.operator_key());
  const auto bob = ts::create_principal(c, server.operator_key());
  const auto a = ts::create_account(c, server.operator_key(), alice.id);
  const auto b = ts::create_account(c, server.operator_key(), bob.id);
  ts::deposit(c, server.operator_key(), a, 100);
  ts::http_client kept(server.port());
  ASSERT_EQ(kept.request("GET", "/readyz").status, 200);

  server.send_signal(SIGTERM);
  ASSERT_TRUE(ts::eventually([&] {
    ts::http_client probe(server.port());
    return probe.request("GET", "/readyz").status == 503;
  })) << "/readyz still answers 200 after SIGTERM:\n"
      << server.log();

  const auto paid = kept.post("/v1/transfers", alice.key, ts::transfer_body(a, b, 1), ts::unique_key("drain"));
  EXPECT_EQ(paid.status, 201) << paid.body;
  EXPECT_EQ(paid.header("connection"), "close");
  ts::http_client fresh(server.port());
  const auto read = fresh.get("/v1/accounts/" + std::to_string(b), bob.key);
  EXPECT_EQ(read.status, 200) << read.body;
  EXPECT_EQ(read.header("connection"), "close");
  EXPECT_EQ(ts::balance(fresh, bob.key, b), 1);

  EXPECT_EQ(server.terminate(std::chrono::seconds(60)), 0) << "the second SIGTERM did not end the drain:\n"
                                                           << server.log();
}

}  // namespace
