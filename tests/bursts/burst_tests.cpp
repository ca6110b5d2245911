// Bursts (issue 5) against real wallet-server processes, PostgreSQL and Redis: per-user rate
// limits (429) shared through Redis and failing open without it, and saturation shedding (503)
// that answers in time and never acknowledges what was not committed.

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <latch>
#include <map>
#include <mutex>
#include <optional>
#include <ratio>
#include <set>
#include <thread>

#include "tests/ratelimit/redis_client.hpp"
#include "tests/support/net.hpp"
#include "tests/support/services.hpp"
#include "tests/support/support.hpp"

namespace ts = test_support;
using test_support::transfer_body;
using namespace std::chrono_literals;

namespace {

using clock = std::chrono::steady_clock;

// Limits no test here reaches except on purpose.
void generous_limits(ts::server_process::options& o) {
  for (const auto& [name, value] : ts::unlimited_rates()) o.env[name] = value;
}

// Money-moving requests: 5 at once, then 1 per second (a 5 s window). Reads stay generous,
// since creating principals and accounts counts as reads.
// With the default leases (ratelimit.lease_tokens = 8) and local allowance (local_tokens = 4),
// neither of which a limit this small takes (ratelimit::lease_size, local_share_for): every
// decision is Redis's, so these tests count exactly, however slow the client. A lease of the whole burst of 5, expiring with one token spent, would refuse the
// next write of a client that came back after the lease.
// A busy machine's stall must not turn a decision into a fallback either: Redis is given 5 s a
// command (the outage tests, which want the fallback, set their own).
void small_write_limits(ts::server_process::options& o) {
  generous_limits(o);
  o.env["WALLET_RATELIMIT_RATE_PER_SECOND"] = "1";
  o.env["WALLET_RATELIMIT_BURST"] = "5";
  o.env["WALLET_REDIS_COMMAND_TIMEOUT_MS"] = "5000";
}
constexpr int write_burst = 5;

// The write window of small_write_limits is 5 s, aligned to the epoch by Redis's clock: a burst
// that straddled a boundary by more than a second would see the last window weigh less, and let
// one request more through. Returns once at least 4 s of the current window are left.
void with_the_window_ahead() {
  ratelimit_test::wait_for_window_room(ts::redis_url(), 5'000, std::chrono::milliseconds(4'000));
}

// This suite does not test shutdown: a server that is slow to drain at the end of a test is
// killed after 3 s, which is not the test's failure, instead of costing it the 30 s default.
ts::server_process::options stopping_quickly(ts::server_process::options o) {
  o.stop_timeout = 3s;
  o.stop_timeout_fails = false;
  return o;
}

struct outcome {
  int status = 0;
  std::string code;  // problem code for errors
  std::string key;   // Idempotency-Key sent
  long long latency_ms = 0;
  ts::response response;
};

std::string code_of(const ts::response& r) {
  if (r.status < 400) return {};
  try {
    return std::string(r.json().as_object().at("code").as_string());
  } catch (const std::exception&) {
    return "<no problem body: " + r.body + ">";
  }
}

// Runs `count` requests at once: one thread and one connection each, connected (via /healthz)
// before a latch releases them together. `send(client, i)` makes request i.
template <typename Send>
std::vector<outcome> fire_together(int port, int count, Send send) {
  std::vector<outcome> out(static_cast<std::size_t>(count));
  std::latch ready(count);
  std::latch go(1);
  std::vector<std::thread> threads;
  for (int i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      ts::http_client client(port, 30s);
      client.request("GET", "/healthz");
      ready.count_down();
      go.wait();
      const auto started = clock::now();
      auto [key, r] = send(client, i);
      auto& o = out[static_cast<std::size_t>(i)];
      o.latency_ms = ts::elapsed_ms(started);
      o.status = r.status;
      o.code = code_of(r);
      o.key = key;
      o.response = std::move(r);
    });
  }
  ready.wait();
  go.count_down();
  for (auto& t : threads) t.join();
  return out;
}

int count_status(const std::vector<outcome>& v, int status) {
  return static_cast<int>(std::count_if(v.begin(), v.end(), [&](const outcome& o) { return o.status == status; }));
}

// Journal transactions of `principal` under any of `keys`.
int journal_count(std::int64_t principal, const std::vector<std::string>& keys) {
  if (keys.empty()) return 0;
  return std::stoi(
      ts::query_value("SELECT count(*) FROM journal_transaction WHERE principal_id = " + std::to_string(principal) +
                      " AND idempotency_key = ANY(" + ts::sql_text_array(keys) + ")"));
}

// A fresh operator for one test: its rate-limit counters in the shared Redis start empty
// (the bootstrap operator is shared by every server and suite using this database).
ts::principal fresh_operator(ts::http_client&, const ts::server_process&) { return ts::create_operator(); }

// What most tests here start from: a server of their own with `o` (stopped quickly), a client to
// it and a fresh operator.
struct own_server {
  explicit own_server(ts::server_process::options o)
      : server(stopping_quickly(std::move(o))), c(server.port()), op(fresh_operator(c, server)) {}
  ts::server_process server;
  ts::http_client c;
  ts::principal op;
};

// The checks every 429 must pass: problem+json rate_limited, Retry-After in whole seconds
// within the window, RateLimit-Policy naming the limit and window, RateLimit with nothing
// remaining and reset equal to Retry-After.
void expect_rate_limited(const outcome& o, int burst, int window_s) {
  const auto& r = o.response;
  ASSERT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(o.code, "rate_limited");
  EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
  const std::string retry_after = r.header("Retry-After");
  ASSERT_FALSE(retry_after.empty());
  const int seconds = std::stoi(retry_after);
  EXPECT_GE(seconds, 1);
  EXPECT_LE(seconds, window_s + 1);
  EXPECT_EQ(r.header("RateLimit-Policy"), std::to_string(burst) + ";w=" + std::to_string(window_s));
  EXPECT_EQ(r.header("RateLimit"), "limit=" + std::to_string(burst) + ", remaining=0, reset=" + retry_after);
}

// ---------------------------------------------------------------------------------------------
// Rate limits (429)
// ---------------------------------------------------------------------------------------------

// One user sends three times its burst at once: exactly the burst passes, the rest get 429
// with Retry-After, RateLimit and RateLimit-Policy; a second user sending at the same moment
// is unaffected; after Retry-After seconds the first user passes again; the ledger holds
// exactly the transfers that were let through.
TEST(RateLimit, ThreeTimesTheBurstLetsExactlyTheBurstThrough) {
  ts::server_process::options o;
  small_write_limits(o);
  own_server s(o);
  auto& [server, c, op] = s;
  auto alice = ts::create_principal(c, op.key);
  auto bob = ts::create_principal(c, op.key);
  const auto a = ts::create_account(c, op.key, alice.id);
  const auto b = ts::create_account(c, op.key, bob.id);
  ts::deposit(c, op.key, a, 10000);
  ts::deposit(c, op.key, b, 10000);

  const int alice_sends = 3 * write_burst;
  const int bob_sends = write_burst;
  with_the_window_ahead();
  auto results = fire_together(server.port(), alice_sends + bob_sends, [&](ts::http_client& client, int i) {
    const bool is_alice = i < alice_sends;
    const std::string key = ts::unique_key(is_alice ? "burst-alice" : "burst-bob");
    auto r = client.post("/v1/transfers", is_alice ? alice.key : bob.key,
                         is_alice ? transfer_body(a, b, 1) : transfer_body(b, a, 1), key);
    return std::make_pair(key, r);
  });
  std::vector<outcome> alice_results(results.begin(), results.begin() + alice_sends);
  std::vector<outcome> bob_results(results.begin() + alice_sends, results.end());

  EXPECT_EQ(count_status(alice_results, 201), write_burst);
  EXPECT_EQ(count_status(alice_results, 429), 2 * write_burst);
  EXPECT_EQ(count_status(bob_results, 201), bob_sends) << "the second user was limited by the first one's burst";

  int retry_after_max = 0;
  std::vector<std::string> alice_passed;
  std::vector<std::string> alice_refused;
  for (const auto& r : alice_results) {
    if (r.status == 201) {
      alice_passed.push_back(r.key);
      // Successful answers carry the headers too, so clients can pace themselves.
      EXPECT_EQ(r.response.header("RateLimit-Policy"), "5;w=5");
      EXPECT_EQ(r.response.header("RateLimit").rfind("limit=5, remaining=", 0), 0u) << r.response.header("RateLimit");
    } else {
      alice_refused.push_back(r.key);
      expect_rate_limited(r, write_burst, 5);
      retry_after_max = std::max(retry_after_max, std::stoi(r.response.header("Retry-After")));
    }
  }
  ASSERT_GT(retry_after_max, 0);

  // A refused request left nothing behind; a passed one is in the ledger.
  EXPECT_EQ(journal_count(alice.id, alice_passed), write_burst);
  EXPECT_EQ(journal_count(alice.id, alice_refused), 0);

  // Still limited right now (nothing freed yet), and free again after Retry-After seconds.
  auto still = c.post("/v1/transfers", alice.key, transfer_body(a, b, 1), ts::unique_key("burst-still"));
  EXPECT_EQ(still.status, 429) << still.body;
  std::this_thread::sleep_for(std::chrono::seconds(retry_after_max) + 50ms);
  auto again = c.post("/v1/transfers", alice.key, transfer_body(a, b, 1), ts::unique_key("burst-again"));
  EXPECT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(again.header("RateLimit-Policy"), "5;w=5");

  EXPECT_EQ(ts::balance(c, alice.key, a), 10000 - (write_burst + 1) + bob_sends);
  EXPECT_EQ(ts::balance(c, bob.key, b), 10000 + (write_burst + 1) - bob_sends);
}

// Two server processes sharing one Redis share one allowance per user: ten requests to each
// at once let exactly one burst through in total, not one per process.
TEST(RateLimit, TwoServersShareOneAllowance) {
  ts::server_process::options o;
  small_write_limits(o);
  ts::server_process first(stopping_quickly(o));
  ts::server_process second(stopping_quickly(o));
  ts::http_client c(first.port());
  const auto op = fresh_operator(c, first);
  auto alice = ts::create_principal(c, op.key);
  auto bob = ts::create_principal(c, op.key);
  const auto a = ts::create_account(c, op.key, alice.id);
  const auto b = ts::create_account(c, op.key, bob.id);
  ts::deposit(c, op.key, a, 10000);
  // Every check is decided in Redis or from a token leased from it (ratelimit.lease_tokens).
  const auto shared_decisions = [](int port) {
    return ts::metric_value(port, "wallet_ratelimit_redis_decisions_total", 0) +
           ts::metric_value(port, "wallet_ratelimit_local_spends_total", 0);
  };
  const double first_before = shared_decisions(first.port());
  const double second_before = shared_decisions(second.port());

  const int per_server = 2 * write_burst;
  std::vector<outcome> results;
  with_the_window_ahead();
  {
    auto on_first = std::async(std::launch::async, [&] {
      return fire_together(first.port(), per_server, [&](ts::http_client& client, int) {
        const std::string key = ts::unique_key("shared");
        return std::make_pair(key, client.post("/v1/transfers", alice.key, transfer_body(a, b, 1), key));
      });
    });
    auto on_second = fire_together(second.port(), per_server, [&](ts::http_client& client, int) {
      const std::string key = ts::unique_key("shared");
      return std::make_pair(key, client.post("/v1/transfers", alice.key, transfer_body(a, b, 1), key));
    });
    results = on_first.get();
    results.insert(results.end(), on_second.begin(), on_second.end());
  }
  EXPECT_EQ(count_status(results, 201), write_burst);
  EXPECT_EQ(count_status(results, 429), 2 * per_server - write_burst);
  for (const auto& r : results) {
    if (r.status == 429) expect_rate_limited(r, write_burst, 5);
  }
  // Both processes decided in Redis (not in process, which would allow a burst each).
  EXPECT_GE(shared_decisions(first.port()), first_before + per_server);
  EXPECT_GE(shared_decisions(second.port()), second_before + per_server);
  EXPECT_EQ(ts::balance(c, alice.key, a), 10000 - write_burst);
}

enum class redis_outage { killed, paused };

class RedisOutage : public ::testing::TestWithParam<redis_outage> {};

// Redis killed (connections refused) or paused (SIGSTOP: connected but silent) in the middle of
// a steady stream of requests: every request is still served (the in-process limiter decides,
// with the same limits: a burst of three times the allowance still lets exactly the allowance
// through), no request waits anywhere near long, /readyz names Redis promptly, and the fallback
// is counted in /metrics; Redis back: decisions are made in Redis again.
TEST_P(RedisOutage, FailsOpenToTheSameLimitsAndRecovers) {
  const bool paused = GetParam() == redis_outage::paused;
  ts::redis_process redis(ts::free_port());
  redis.start();
  ts::server_process::options o;
  small_write_limits(o);
  o.env["WALLET_REDIS_URL"] = redis.url();
  o.env["WALLET_REDIS_RETRY_INTERVAL_MS"] = "200";
  o.env["WALLET_REDIS_COMMAND_TIMEOUT_MS"] = "50";
  own_server s(o);
  auto& [server, c, op] = s;
  auto alice = ts::create_principal(c, op.key);
  auto carol = ts::create_principal(c, op.key);
  const auto a = ts::create_account(c, op.key, alice.id);
  const auto k = ts::create_account(c, op.key, carol.id);
  ts::deposit(c, op.key, k, 10000);

  // A steady stream of reads from four clients, each request timed.
  std::atomic<bool> stop{false};
  std::atomic<long long> slowest_ms{0};
  std::atomic<int> served{0};
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      ts::http_client client(server.port(), 30s);
      while (!stop) {
        const auto started = clock::now();
        auto r = client.get("/v1/accounts/" + std::to_string(a), alice.key);
        const auto ms = ts::elapsed_ms(started);
        long long seen = slowest_ms.load();
        while (ms > seen && !slowest_ms.compare_exchange_weak(seen, ms)) {}
        if (r.status == 200) {
          ++served;
        } else {
          std::lock_guard lock(failures_mutex);
          failures.push_back(std::to_string(r.status) + " " + r.body);
        }
      }
    });
  }
  const std::string redis_decisions = "wallet_ratelimit_redis_decisions_total";
  const std::string fallback_decisions = "wallet_ratelimit_fallback_decisions_total";
  EXPECT_TRUE(ts::eventually([&] { return served.load() >= 50; }, 20s, 50ms));
  auto page = ts::metrics_page(server.port());
  EXPECT_GT(ts::metric(page, redis_decisions).value_or(0), 0) << page;
  EXPECT_EQ(ts::metric(page, fallback_decisions).value_or(-1), 0) << page;

  if (paused) {
    redis.pause();
  } else {
    redis.kill();
  }
  const int served_at_kill = served.load();
  EXPECT_TRUE(ts::eventually([&] { return served.load() >= served_at_kill + 100; }, 20s, 50ms))
      << "requests stopped being served after Redis was killed";
  page = ts::metrics_page(server.port());
  EXPECT_GT(ts::metric(page, fallback_decisions).value_or(0), 0) << page;
  EXPECT_EQ(ts::metric(page, "wallet_ratelimit_fallback_active").value_or(0), 1) << page;
  EXPECT_GE(ts::metric(page, "wallet_ratelimit_fallback_transitions_total").value_or(0), 1) << page;
  {
    const auto started = clock::now();
    auto ready = c.request("GET", "/readyz");
    EXPECT_EQ(ready.status, 503) << ready.body;
    EXPECT_EQ(code_of(ready), "redis_unavailable") << ready.body;
    EXPECT_LT(ts::elapsed_ms(started), 2000);
  }

  // The in-process limiter keeps the same limits: a burst of three times the allowance.
  auto results = fire_together(server.port(), 3 * write_burst, [&](ts::http_client& client, int) {
    const std::string key = ts::unique_key("fallback");
    return std::make_pair(key, client.post("/v1/transfers", carol.key, transfer_body(k, a, 1), key));
  });
  EXPECT_EQ(count_status(results, 201), write_burst);
  EXPECT_EQ(count_status(results, 429), 2 * write_burst);
  for (const auto& r : results) {
    if (r.status == 429) expect_rate_limited(r, write_burst, 5);
  }

  if (paused) {
    redis.resume();
  } else {
    redis.start();
  }
  const double redis_at_restart = ts::metric_value(server.port(), redis_decisions, 0);
  EXPECT_TRUE(
      ts::eventually([&] { return ts::metric_value(server.port(), redis_decisions, 0) > redis_at_restart; }, 30s, 50ms))
      << "rate limits were not counted in Redis again after it came back";
  EXPECT_TRUE(ts::eventually(
      [&] { return ts::metric_value(server.port(), "wallet_ratelimit_fallback_active", 0) == 0; }, 10s, 50ms));

  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_TRUE(failures.empty()) << failures.size() << " reads failed, e.g. " << failures.front();
  // The command timeout is 50 ms; a request that waited for Redis would take far longer than
  // this bound, which only absorbs a loaded machine.
  EXPECT_LT(slowest_ms.load(), 2000) << "a request waited " << slowest_ms.load() << " ms";
}

INSTANTIATE_TEST_SUITE_P(KilledAndPaused, RedisOutage, ::testing::Values(redis_outage::killed, redis_outage::paused),
                         [](const ::testing::TestParamInfo<redis_outage>& info) {
                           return std::string(info.param == redis_outage::killed ? "Killed" : "Paused");
                         });

// ---------------------------------------------------------------------------------------------
// Shedding (503)
// ---------------------------------------------------------------------------------------------

class AccountFlood : public ::testing::TestWithParam<int> {};

// One account (plain, or hot with shards) flooded with concurrent transfers beyond
// actors.account_inflight_max = 2 (the writer holds postings 100 ms to keep them in flight):
// the excess answers 503 account_busy with Retry-After at once, every 201 is in the ledger and
// nothing else is, balances match, and reconciliation is clean.
TEST_P(AccountFlood, ExcessGets503AccountBusyAndEveryAcceptedOneCommits) {
  const int shards = GetParam();
  ts::server_process::options o;
  generous_limits(o);
  o.env["WALLET_ACTORS_ACCOUNT_INFLIGHT_MAX"] = "2";
  o.env["WALLET_WRITER_BATCH_WAIT_US"] = "100000";
  own_server s(o);
  auto& [server, c, op] = s;
  auto payer = ts::create_principal(c, op.key, "merchant");
  auto payee = ts::create_principal(c, op.key);
  const auto from = ts::create_account(c, op.key, payer.id, "EUR", shards);
  const auto to = ts::create_account(c, op.key, payee.id);
  const std::int64_t funded = 1'000'000;
  ts::deposit(c, op.key, from, funded);
  const std::int64_t amount = 7;

  std::vector<outcome> all;
  for (int round = 0; round < 3; ++round) {
    auto results = fire_together(server.port(), 40, [&](ts::http_client& client, int) {
      const std::string key = ts::unique_key("flood");
      return std::make_pair(key, client.post("/v1/transfers", payer.key, transfer_body(from, to, amount), key));
    });
    all.insert(all.end(), results.begin(), results.end());
  }

  std::vector<std::string> accepted;
  std::vector<std::string> shed;
  for (const auto& r : all) {
    if (r.status == 201) {
      accepted.push_back(r.key);
    } else {
      ASSERT_EQ(r.status, 503) << r.response.body;
      EXPECT_EQ(r.code, "account_busy") << r.response.body;
      EXPECT_GE(std::stoi(r.response.header("Retry-After")), 1);
      EXPECT_EQ(r.response.header("Content-Type"), "application/problem+json");
      // "At once": well before any database work or deadline could have passed.
      EXPECT_LT(r.latency_ms, 2000);
      shed.push_back(r.key);
    }
  }
  EXPECT_GE(accepted.size(), 2u);
  EXPECT_GE(shed.size(), 1u) << "the per-account bound never shed anything";
  EXPECT_EQ(journal_count(payer.id, accepted), static_cast<int>(accepted.size()));
  EXPECT_EQ(journal_count(payer.id, shed), 0);
  EXPECT_EQ(ts::balance(c, payer.key, from), funded - amount * static_cast<std::int64_t>(accepted.size()));
  EXPECT_EQ(ts::balance(c, payee.key, to), amount * static_cast<std::int64_t>(accepted.size()));
  EXPECT_TRUE(ts::reconciliation_ok(c, op.key));
}

INSTANTIATE_TEST_SUITE_P(PlainAndHot, AccountFlood, ::testing::Values(0, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == 0 ? std::string("Plain")
                                                  : "Hot" + std::to_string(info.param) + "Shards";
                         });

// A server whose database is unreachable (a closed port) still starts (no migrations, no
// bootstrap operator), and answers promptly and honestly: authenticated reads, transfers and
// deposits 503 database_unavailable with Retry-After within the connection-wait bound, also
// twenty at once; /readyz 503 naming the database; /healthz 200.
TEST(Shedding, DatabaseUnreachableAnswers503WithinTheBound) {
  ts::server_process::options o;
  generous_limits(o);
  o.bootstrap_key = "";
  o.env["WALLET_DATABASE_URL"] = "postgresql://wallet_app@127.0.0.1:" + std::to_string(ts::free_port()) + "/wallet";
  o.env["WALLET_DATABASE_MIGRATE_ON_START"] = "false";
  o.env["WALLET_DATABASE_CONNECTION_WAIT_MS"] = "300";
  ts::server_process server(o);
  // Connection wait plus a margin for a loaded machine; a hang would take the client's 30 s.
  const long long bound_ms = 300 + 1700;
  ts::http_client c(server.port());

  EXPECT_EQ(c.request("GET", "/healthz").status, 200);
  auto check = [&](const char* what, auto send) {
    const auto started = clock::now();
    ts::response r = send(c);
    const auto ms = ts::elapsed_ms(started);
    EXPECT_EQ(r.status, 503) << what << ": " << r.body;
    EXPECT_EQ(code_of(r), "database_unavailable") << what << ": " << r.body;
    EXPECT_GE(std::stoi(r.header("Retry-After").empty() ? "0" : r.header("Retry-After")), 1) << what;
    EXPECT_LT(ms, bound_ms) << what;
  };
  const std::string key = "some-api-key-the-server-cannot-check";
  check("read", [&](ts::http_client& h) { return h.get("/v1/accounts/1", key); });
  check("transfer", [&](ts::http_client& h) {
    return h.post("/v1/transfers", key, transfer_body(1, 2, 100), ts::unique_key("dbdown"));
  });
  check("deposit", [&](ts::http_client& h) {
    return h.post("/v1/deposits", key, R"({"accountId":1,"amount":100})", ts::unique_key("dbdown"));
  });

  auto ready = c.request("GET", "/readyz");
  ASSERT_EQ(ready.status, 503) << ready.body;
  EXPECT_EQ(code_of(ready), "database_unavailable");
  const std::string detail(ready.json().as_object().at("detail").as_string());
  EXPECT_NE(detail.find("database"), std::string::npos) << detail;
  EXPECT_FALSE(ready.header("Retry-After").empty());

  auto many = fire_together(server.port(), 20, [&](ts::http_client& client, int i) {
    const std::string k = ts::unique_key("dbdown-many");
    return std::make_pair(k, i % 2 == 0 ? client.get("/v1/accounts/1", key)
                                        : client.post("/v1/transfers", key, transfer_body(1, 2, 1), k));
  });
  for (const auto& r : many) {
    EXPECT_EQ(r.status, 503) << r.response.body;
    EXPECT_EQ(r.code, "database_unavailable");
    EXPECT_LT(r.latency_ms, bound_ms);
  }
}

// Settings under which a held row lock stalls a writer for as long as the test wants.
void patient_database(ts::server_process::options& o) {
  o.env["WALLET_DATABASE_LOCK_TIMEOUT_MS"] = "30000";
  o.env["WALLET_DATABASE_STATEMENT_TIMEOUT_MS"] = "30000";
  o.env["WALLET_HTTP_REQUEST_DEADLINE_MS"] = "30000";
}

// A server of ordinary limits on the same database, for the set-up of a test whose own server
// admits one or two requests at a time: there, requests that follow each other closely could be
// refused, since a request's place is given back when the last callback of its work is gone,
// just after its answer.
struct setup_server {
  setup_server() : server(stopping_quickly(generous())), c(server.port()) {}
  static ts::server_process::options generous() {
    ts::server_process::options o;
    generous_limits(o);
    return o;
  }
  ts::server_process server;
  ts::http_client c;
};

// With admission.inflight_requests_max = 2 and two transfers stalled on row locks, a third
// request answers 503 server_busy with Retry-After at once (before authentication or any
// database work), health probes still answer, and once the stalled two finish the server
// serves again; the stalled transfers commit.
TEST(Shedding, GlobalInflightBoundAnswers503ServerBusy) {
  ts::server_process::options o;
  generous_limits(o);
  patient_database(o);
  o.env["WALLET_ADMISSION_INFLIGHT_REQUESTS_MAX"] = "2";
  o.env["WALLET_WRITER_COUNT"] = "2";
  own_server s(o);
  auto& [server, c, op] = s;
  setup_server setup;
  auto payer = ts::create_principal(setup.c, op.key);
  auto payee = ts::create_principal(setup.c, op.key);
  const auto to = ts::create_account(setup.c, op.key, payee.id);
  // Two payer accounts on different ledger writers (writer = id % 2), so that both stalled
  // transfers wait in PostgreSQL where the test can see them (/metrics cannot be used to watch:
  // a scrape is itself a request in flight and would take one of the two places).
  std::vector<std::int64_t> from{ts::create_account(setup.c, op.key, payer.id)};
  for (int i = 0; i < 10 && from.size() < 2; ++i) {
    const auto next = ts::create_account(setup.c, op.key, payer.id);
    if (next % 2 != from[0] % 2) from.push_back(next);
  }
  ASSERT_EQ(from.size(), 2u);
  for (auto account : from) ts::deposit(setup.c, op.key, account, 1000);

  // The payee's row too: both writers credit it, and whichever locked it first would otherwise
  // be the one the other waits for.
  ts::account_lock lock({from[0], from[1], to});
  std::vector<std::string> keys{ts::unique_key("stalled"), ts::unique_key("stalled")};
  std::vector<std::future<ts::response>> stalled;
  for (int i = 0; i < 2; ++i) {
    stalled.push_back(std::async(std::launch::async, [&, i] {
      ts::http_client client(server.port(), 60s);
      return client.post("/v1/transfers", payer.key, transfer_body(from[static_cast<std::size_t>(i)], to, 100),
                         keys[static_cast<std::size_t>(i)]);
    }));
  }
  ASSERT_TRUE(ts::eventually([&] { return lock.waiters() >= 2; }, 15s, 20ms))
      << "the two transfers did not both reach the database";

  for (int i = 0; i < 3; ++i) {
    const auto started = clock::now();
    auto busy = i == 0   ? c.get("/v1/accounts/" + std::to_string(to), payee.key)
                : i == 1 ? c.post("/v1/transfers", payee.key, transfer_body(to, from[0], 1), ts::unique_key("busy"))
                         : c.get("/v1/accounts/1", "not-even-a-valid-key");
    EXPECT_EQ(busy.status, 503) << busy.body;
    EXPECT_EQ(code_of(busy), "server_busy") << busy.body;
    EXPECT_GE(std::stoi(busy.header("Retry-After").empty() ? "0" : busy.header("Retry-After")), 1);
    EXPECT_LT(ts::elapsed_ms(started), 2000);
  }
  EXPECT_EQ(c.request("GET", "/healthz").status, 200);

  lock.release();
  for (auto& f : stalled) {
    auto r = f.get();
    EXPECT_EQ(r.status, 201) << r.body;
  }
  EXPECT_EQ(journal_count(payer.id, keys), 2);
  EXPECT_TRUE(
      ts::eventually([&] { return c.get("/v1/accounts/" + std::to_string(to), payee.key).status == 200; }, 5s, 20ms));
  EXPECT_EQ(ts::balance(setup.c, payee.key, to), 200);
}

// A payer with 1,000 and a payee, each with an account, made through `setup`, and a transfer of
// 100 between them sent to the server on `port`, stalled on its rows: the test holds them locked
// until it releases `lock`. Constructed once the transfer waits in PostgreSQL (`reached`).
struct stalled_transfer {
  struct parties {
    ts::principal payer;
    ts::principal payee;
    std::int64_t from = 0;
    std::int64_t to = 0;
    std::string key;  // the transfer's Idempotency-Key
  };

  stalled_transfer(ts::http_client& setup, const std::string& operator_key, int port, const std::string& key_prefix)
      : who(make(setup, operator_key, key_prefix)), lock(std::in_place, std::vector<std::int64_t>{who.from, who.to}) {
    answer = std::async(std::launch::async, [this, port] {
      ts::http_client client(port, 60s);
      return client.post("/v1/transfers", who.payer.key, transfer_body(who.from, who.to, 100), who.key);
    });
    reached = ts::eventually([&] { return lock->waiters() >= 1; }, 15s, 20ms);
  }

  static parties make(ts::http_client& setup, const std::string& operator_key, const std::string& key_prefix) {
    parties p{ts::create_principal(setup, operator_key), ts::create_principal(setup, operator_key)};
    p.from = ts::create_account(setup, operator_key, p.payer.id);
    p.to = ts::create_account(setup, operator_key, p.payee.id);
    p.key = ts::unique_key(key_prefix);
    ts::deposit(setup, operator_key, p.from, 1000);
    return p;
  }

  const parties who;
  std::optional<ts::account_lock> lock;
  std::future<ts::response> answer;
  bool reached = false;
};

// A request answered at its deadline (503 deadline_exceeded) keeps its place among those in flight
// while its work goes on: here a transfer waiting for its rows. With admission.inflight_requests_max
// = 1 the next request is answered 503 server_busy until the transfer commits; were the place given
// back with the answer, the server would admit new work without bound while old work still ran.
TEST(Shedding, ARequestAnsweredAtItsDeadlineKeepsItsPlaceUntilItsWorkEnds) {
  ts::server_process::options o;
  generous_limits(o);
  patient_database(o);
  o.env["WALLET_HTTP_REQUEST_DEADLINE_MS"] = "3000";
  o.env["WALLET_ADMISSION_INFLIGHT_REQUESTS_MAX"] = "1";
  own_server s(o);
  auto& [server, c, op] = s;
  setup_server setup;
  stalled_transfer stalled(setup.c, op.key, server.port(), "outlived");
  ASSERT_TRUE(stalled.reached) << "the transfer did not reach the database";
  const auto& [payer, payee, from, to, key] = stalled.who;
  const auto late = stalled.answer.get();
  ASSERT_EQ(late.status, 503) << late.body;
  ASSERT_EQ(code_of(late), "deadline_exceeded") << late.body;
  ASSERT_GE(stalled.lock->waiters(), 1) << "the transfer's work ended before the test could look";

  const auto busy = c.get("/v1/accounts/" + std::to_string(to), payee.key);
  EXPECT_EQ(busy.status, 503) << busy.body;
  EXPECT_EQ(code_of(busy), "server_busy") << busy.body;

  stalled.lock->release();
  ASSERT_TRUE(ts::eventually([&] { return journal_count(payer.id, {key}) == 1; }, 30s, 20ms));
  EXPECT_TRUE(
      ts::eventually([&] { return c.get("/v1/accounts/" + std::to_string(to), payee.key).status == 200; }, 10s, 20ms));
  EXPECT_EQ(ts::balance(setup.c, payee.key, to), 100);
}

// admission.queue_target_ms bounds requests in flight by what the server has shown it answers:
// with a target of 1 ms, a floor of 1 and a server that has answered a few requests a second, one
// stalled transfer fills it, and the next requests are answered 503 server_busy at once. Their
// Retry-After comes from the return calendar: with the least room (one return per 10 ms phase of
// a second), no two refusals in the same phase are told the same wait, so a clump of refusals
// is told to come back one second after another instead of all at once.
TEST(Shedding, TheQueueTargetBoundsRequestsInFlightAndRefusalsAreToldToComeBackApart) {
  ts::server_process::options o;
  generous_limits(o);
  patient_database(o);
  o.env["WALLET_ADMISSION_QUEUE_TARGET_MS"] = "1";
  o.env["WALLET_ADMISSION_INFLIGHT_REQUESTS_MIN"] = "1";
  own_server s(o);
  auto& [server, c, op] = s;
  setup_server setup;
  stalled_transfer stalled(setup.c, op.key, server.port(), "stalled");
  ASSERT_TRUE(stalled.reached) << "the transfer did not reach the database";
  const auto& [payer, payee, from, to, key] = stalled.who;

  constexpr int refusals = 20;
  std::map<int, int> told;  // Retry-After -> refusals told it
  using phase = std::chrono::duration<std::int64_t, std::centi>;
  const auto first_phase = std::chrono::duration_cast<phase>(clock::now().time_since_epoch()).count();
  for (int i = 0; i < refusals; ++i) {
    const auto busy = c.get("/v1/accounts/" + std::to_string(to), payee.key);
    ASSERT_EQ(busy.status, 503) << busy.body;
    EXPECT_EQ(code_of(busy), "server_busy") << busy.body;
    EXPECT_NE(busy.body.find("than it answers in 1 ms"), std::string::npos) << busy.body;
    ++told[std::stoi(busy.header("Retry-After"))];
  }
  const auto last_phase = std::chrono::duration_cast<phase>(clock::now().time_since_epoch()).count();
  // The refusals were answered within these phases: each wait is told at most once per phase.
  const auto phases = static_cast<int>(last_phase - first_phase + 1);
  for (const auto& [wait, n] : told) {
    EXPECT_GE(wait, 1);
    EXPECT_LE(wait, 30);
    EXPECT_LE(n, phases) << "Retry-After " << wait << " told " << n << " times within " << phases << " phases";
  }
  if (phases == 1) {
    EXPECT_EQ(told.size(), static_cast<std::size_t>(refusals));
  }
  EXPECT_EQ(c.request("GET", "/healthz").status, 200);

  stalled.lock->release();
  const auto done = stalled.answer.get();
  EXPECT_EQ(done.status, 201) << done.body;
  EXPECT_TRUE(
      ts::eventually([&] { return c.get("/v1/accounts/" + std::to_string(to), payee.key).status == 200; }, 10s, 20ms));
  EXPECT_EQ(ts::balance(setup.c, payee.key, to), 100);
}

// Payers (three by default) with 1,000 each in an account of their own, and a payee with an empty
// account.
struct payers_and_payee {
  std::vector<ts::principal> payers;
  std::vector<std::int64_t> accounts;
  ts::principal payee;
  std::int64_t to = 0;
};

payers_and_payee payers_and_a_payee(ts::http_client& c, const std::string& operator_key, int payers = 3) {
  payers_and_payee out;
  for (int i = 0; i < payers; ++i) {
    out.payers.push_back(ts::create_principal(c, operator_key));
    out.accounts.push_back(ts::create_account(c, operator_key, out.payers.back().id));
    ts::deposit(c, operator_key, out.accounts.back(), 1000);
  }
  out.payee = ts::create_principal(c, operator_key);
  out.to = ts::create_account(c, operator_key, out.payee.id);
  return out;
}

// An answer refused at once because a ledger writer's queue is full.
void expect_writer_busy(const ts::response& r) {
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(code_of(r), "writer_busy") << r.body;
  EXPECT_GE(std::stoi(r.header("Retry-After").empty() ? "0" : r.header("Retry-After")), 1);
}

// With one ledger writer whose queue holds at most 2 postings, and that writer stalled on a
// row lock with 2 postings queued, a further transfer (from another account) and a deposit
// answer 503 writer_busy with Retry-After at once and leave no trace; after the release the
// queued ones commit and the refused one succeeds when retried.
TEST(Shedding, WriterQueueBoundAnswers503WriterBusy) {
  ts::server_process::options o;
  generous_limits(o);
  patient_database(o);
  o.env["WALLET_WRITER_COUNT"] = "1";
  o.env["WALLET_WRITER_QUEUE_POSTINGS_MAX"] = "2";
  own_server s(o);
  auto& [server, c, op] = s;
  const auto [payers, accounts, payee, to] = payers_and_a_payee(c, op.key);
  const std::string queued = "wallet_writer_postings_queued";

  ts::account_lock lock({accounts[0]});
  std::vector<std::string> keys{ts::unique_key("queued"), ts::unique_key("queued")};
  std::vector<std::future<ts::response>> waiting;
  waiting.push_back(std::async(std::launch::async, [&] {
    ts::http_client client(server.port(), 60s);
    return client.post("/v1/transfers", payers[0].key, transfer_body(accounts[0], to, 100), keys[0]);
  }));
  ASSERT_TRUE(ts::eventually([&] { return lock.waiters() >= 1; }, 15s, 20ms));
  waiting.push_back(std::async(std::launch::async, [&] {
    ts::http_client client(server.port(), 60s);
    return client.post("/v1/transfers", payers[1].key, transfer_body(accounts[1], to, 100), keys[1]);
  }));
  ASSERT_TRUE(ts::eventually([&] { return ts::metric_value(server.port(), queued, 0) >= 2; }, 15s, 20ms))
      << ts::metrics_page(server.port());

  const std::string refused_key = ts::unique_key("writer-busy");
  const auto started = clock::now();
  auto busy = c.post("/v1/transfers", payers[2].key, transfer_body(accounts[2], to, 100), refused_key);
  expect_writer_busy(busy);
  EXPECT_LT(ts::elapsed_ms(started), 2000);
  const std::string deposit_key = ts::unique_key("writer-busy-deposit");
  auto busy_deposit =
      c.post("/v1/deposits", op.key, R"({"accountId":)" + std::to_string(accounts[2]) + R"(,"amount":5})", deposit_key);
  EXPECT_EQ(busy_deposit.status, 503) << busy_deposit.body;
  EXPECT_EQ(code_of(busy_deposit), "writer_busy") << busy_deposit.body;
  EXPECT_EQ(journal_count(payers[2].id, {refused_key}), 0);
  EXPECT_EQ(journal_count(op.id, {deposit_key}), 0);

  lock.release();
  for (auto& f : waiting) {
    auto r = f.get();
    EXPECT_EQ(r.status, 201) << r.body;
  }
  EXPECT_EQ(journal_count(payers[0].id, {keys[0]}), 1);
  EXPECT_EQ(journal_count(payers[1].id, {keys[1]}), 1);
  auto retried = c.post("/v1/transfers", payers[2].key, transfer_body(accounts[2], to, 100), refused_key);
  EXPECT_EQ(retried.status, 201) << retried.body;
  EXPECT_EQ(retried.header("Idempotent-Replayed"), "");
  EXPECT_EQ(ts::balance(c, payee.key, to), 300);
  EXPECT_TRUE(ts::reconciliation_ok(c, op.key));
}

// Batches count each of their transfers towards their writer's bound on queued batch transfers
// (writer.queue_run_postings_max, here 3). One writer, stalled on a row lock while it commits a
// batch of 2: a second batch of 2 would make 4, and is answered 503 writer_busy at once with
// Retry-After and leaves no trace; a single transfer is not a batch's and is still taken. After the
// release the first batch commits, and the refused one succeeds when retried. Two batches of one
// transfer sent at once find 2 queued: exactly one of them fits, whichever counts first.
TEST(Shedding, BatchTransfersQueuedAtAWriterAreBounded) {
  ts::server_process::options o;
  generous_limits(o);
  patient_database(o);
  o.env["WALLET_WRITER_COUNT"] = "1";
  o.env["WALLET_WRITER_QUEUE_RUN_POSTINGS_MAX"] = "3";
  own_server s(o);
  auto& [server, c, op] = s;
  const auto [payers, accounts, payee, to] = payers_and_a_payee(c, op.key, 5);
  const auto batch_of = [&](std::int64_t from, int transfers) {
    const std::string item =
        R"({"fromAccountId":)" + std::to_string(from) + R"(,"toAccountId":)" + std::to_string(to) + R"(,"amount":100})";
    std::string items = item;
    for (int i = 1; i < transfers; ++i) items += "," + item;
    return R"({"atomic":false,"transfers":[)" + items + "]}";
  };
  const auto batch_of_two = [&](std::int64_t from) { return batch_of(from, 2); };

  ts::account_lock lock({accounts[0]});
  const std::string first_key = ts::unique_key("queued-batch");
  auto first = std::async(std::launch::async, [&] {
    ts::http_client client(server.port(), 60s);
    return client.post("/v1/transfers/batch", payers[0].key, batch_of_two(accounts[0]), first_key);
  });
  ASSERT_TRUE(ts::eventually([&] { return lock.waiters() >= 1; }, 15s, 20ms));
  EXPECT_EQ(ts::metric_value(server.port(), "wallet_writer_batch_transfers_queued", 0), 2)
      << ts::metrics_page(server.port());

  const std::string refused_key = ts::unique_key("batch-writer-busy");
  auto busy = c.post("/v1/transfers/batch", payers[1].key, batch_of_two(accounts[1]), refused_key);
  expect_writer_busy(busy);
  EXPECT_EQ(journal_count(payers[1].id, {refused_key}), 0);
  // A single transfer queues at the same writer behind the stalled batch; it is answered once the
  // batch commits.
  const std::string single_key = ts::unique_key("single");
  auto single = std::async(std::launch::async, [&] {
    ts::http_client client(server.port(), 60s);
    return client.post("/v1/transfers", payers[2].key, transfer_body(accounts[2], to, 100), single_key);
  });
  ASSERT_TRUE(ts::eventually([&] { return ts::metric_value(server.port(), "wallet_writer_postings_queued", 0) >= 2; },
                             15s, 20ms))
      << ts::metrics_page(server.port());
  std::vector<std::future<ts::response>> pair;
  for (const std::size_t i : {3u, 4u}) {
    pair.push_back(std::async(std::launch::async, [&, i] {
      ts::http_client client(server.port(), 60s);
      return client.post("/v1/transfers/batch", payers[i].key, batch_of(accounts[i], 1), ts::unique_key("pair"));
    }));
  }
  // The refused one is answered at once; the other waits behind the stalled batch.
  ASSERT_TRUE(ts::eventually(
      [&] {
        return std::any_of(pair.begin(), pair.end(), [](const auto& f) {
          return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
        });
      },
      15s, 20ms));

  lock.release();
  const auto committed = first.get();
  EXPECT_EQ(committed.status, 201) << committed.body;
  EXPECT_EQ(single.get().status, 201);
  std::vector<ts::response> answers;
  for (auto& f : pair) answers.push_back(f.get());
  const auto status_count = [&](int status) {
    return std::count_if(answers.begin(), answers.end(), [&](const ts::response& r) { return r.status == status; });
  };
  EXPECT_EQ(status_count(201), 1) << answers[0].body << answers[1].body;
  EXPECT_EQ(status_count(503), 1) << answers[0].body << answers[1].body;
  for (const auto& r : answers) {
    if (r.status == 503) expect_writer_busy(r);
  }
  EXPECT_TRUE(ts::eventually(
      [&] { return ts::metric_value(server.port(), "wallet_writer_batch_transfers_queued", -1) == 0; }, 15s, 20ms));
  auto retried = c.post("/v1/transfers/batch", payers[1].key, batch_of_two(accounts[1]), refused_key);
  EXPECT_EQ(retried.status, 201) << retried.body;
  EXPECT_EQ(retried.header("Idempotent-Replayed"), "");
  EXPECT_EQ(ts::balance(c, payee.key, to), 600);
  EXPECT_TRUE(ts::reconciliation_ok(c, op.key));
}

// The server's only reader, stalled: an operator's freeze of `account` waits on that row's lock,
// held here. The lock is held from construction until release() (or destruction); the freeze
// then completes.
class stalled_reader {
 public:
  stalled_reader(const ts::server_process& server, const std::string& operator_key, std::int64_t account)
      : lock_({account}) {
    freeze_ = std::async(std::launch::async, [port = server.port(), operator_key, account] {
      ts::http_client client(port, 60s);
      return client.post("/v1/accounts/" + std::to_string(account) + "/freeze", operator_key, "{}");
    });
    stalled_ = ts::eventually([&] { return lock_.waiters() >= 1; }, 15s, 20ms);
  }
  bool stalled() const { return stalled_; }
  // Releases the lock and returns the freeze's answer.
  ts::response release() {
    lock_.release();
    return freeze_.get();
  }

 private:
  ts::account_lock lock_;
  std::future<ts::response> freeze_;
  bool stalled_ = false;
};

// A refusal decided by the account actor before the database (here: insufficient funds) is only
// final once the key is known not to be committed. When that lookup cannot run (the only reader
// is stalled, so the read waits past database.connection_wait_ms), the answer is 503
// outcome_unknown with Retry-After, never the refusal: the key could hide a committed transfer.
// The retry, once the reader is free, gets the true outcome.
TEST(Shedding, ARefusalWhoseKeyCannotBeCheckedIsNotFinal) {
  ts::server_process::options o;
  generous_limits(o);
  patient_database(o);
  o.env["WALLET_DATABASE_READERS"] = "1";
  o.env["WALLET_DATABASE_CONNECTION_WAIT_MS"] = "100";
  own_server s(o);
  auto& [server, c, op] = s;
  auto alice = ts::create_principal(c, op.key);
  auto bob = ts::create_principal(c, op.key);
  const auto a = ts::create_account(c, op.key, alice.id);
  const auto b = ts::create_account(c, op.key, bob.id);
  const auto stalled_account = ts::create_account(c, op.key, bob.id);
  ts::deposit(c, op.key, a, 1000);
  // The payer's actor learns its committed balance from this payment's answer.
  ASSERT_EQ(c.post("/v1/transfers", alice.key, transfer_body(a, b, 100), ts::unique_key("first")).status, 201);

  stalled_reader reader(server, op.key, stalled_account);
  ASSERT_TRUE(reader.stalled()) << "the reader never stalled";

  const std::string key = ts::unique_key("too-much");
  auto unknown = c.post("/v1/transfers", alice.key, transfer_body(a, b, 5000), key);
  EXPECT_EQ(unknown.status, 503) << unknown.body;
  EXPECT_EQ(code_of(unknown), "outcome_unknown") << unknown.body;
  EXPECT_FALSE(unknown.header("Retry-After").empty());

  EXPECT_EQ(reader.release().status, 200);
  auto retried = c.post("/v1/transfers", alice.key, transfer_body(a, b, 5000), key);
  EXPECT_EQ(retried.status, 422) << retried.body;
  EXPECT_EQ(code_of(retried), "insufficient_funds") << retried.body;
  EXPECT_EQ(ts::balance(c, alice.key, a), 900);
}

// The wait for a database connection is bounded even when every reader is busy: with one
// reader stalled (an operator's freeze waits on a row lock held from an owner connection), a
// read queued behind it answers 503 database_unavailable within database.connection_wait_ms
// (300 ms) plus a margin, not whenever the reader comes free.
TEST(Shedding, ReadQueuedBehindBusyReadersAnswers503WithinConnectionWait) {
  ts::server_process::options o;
  generous_limits(o);
  patient_database(o);
  o.env["WALLET_DATABASE_READERS"] = "1";
  o.env["WALLET_DATABASE_CONNECTION_WAIT_MS"] = "300";
  own_server s(o);
  auto& [server, c, op] = s;
  auto user = ts::create_principal(c, op.key);
  const auto stalled_account = ts::create_account(c, op.key, user.id);
  const auto other_account = ts::create_account(c, op.key, user.id);
  ASSERT_EQ(c.get("/v1/accounts/" + std::to_string(other_account), user.key).status, 200);  // key now cached

  stalled_reader reader(server, op.key, stalled_account);
  ASSERT_TRUE(reader.stalled()) << "the reader never stalled";

  auto read = std::async(std::launch::async, [&] {
    ts::http_client client(server.port(), 60s);
    const auto started = clock::now();
    auto r = client.get("/v1/accounts/" + std::to_string(other_account), user.key);
    return std::make_pair(r, ts::elapsed_ms(started));
  });
  // The lock is held until the read is answered (a minute at most): a 503 that arrives while the
  // reader is still stalled was decided by the connection-wait bound, not by the reader coming free.
  ASSERT_EQ(read.wait_for(60s), std::future_status::ready) << "the read waited for the stalled reader";
  const auto frozen = reader.release();
  const auto r = read.get().first;
  EXPECT_EQ(frozen.status, 200);
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(code_of(r), "database_unavailable") << r.body;
  EXPECT_FALSE(r.header("Retry-After").empty());
}

// Fixture for the row-lock tests: a server with a 1 s request deadline and a 3 s lock timeout,
// a payer holding exactly one transfer's worth, and an owner connection to hold its row lock.
class RowLock : public ts::shared_server_test<RowLock> {
 public:
  static constexpr int deadline_ms = 1000;
  static constexpr int lock_timeout_ms = 3000;
  static constexpr std::int64_t amount = 2500;

  static ts::server_process::options options() {
    ts::server_process::options o;
    generous_limits(o);
    o.env["WALLET_HTTP_REQUEST_DEADLINE_MS"] = std::to_string(deadline_ms);
    o.env["WALLET_DATABASE_LOCK_TIMEOUT_MS"] = std::to_string(lock_timeout_ms);
    return stopping_quickly(o);
  }

 protected:
  void SetUp() override {
    ts::http_client c(server_->port());
    op_ = fresh_operator(c, *server_);
    payer_ = ts::create_principal(c, op_.key);
    payee_ = ts::create_principal(c, op_.key);
    from_ = ts::create_account(c, op_.key, payer_.id);
    to_ = ts::create_account(c, op_.key, payee_.id);
    ts::deposit(c, op_.key, from_, amount);
  }

  // Sends the transfer while the caller holds the payer's row lock (an account_lock on from_);
  // asserts the in-time 503 and returns it.
  ts::response stalled_transfer(const std::string& key) {
    ts::http_client c(server_->port(), 30s);
    const auto started = clock::now();
    auto r = c.post("/v1/transfers", payer_.key, transfer_body(from_, to_, amount), key);
    const auto ms = ts::elapsed_ms(started);
    EXPECT_EQ(r.status, 503) << r.body;
    const auto code = code_of(r);
    // The request deadline answers first (deadline_exceeded); the actor bridge's deadline of
    // the same length may win the race (outcome_unknown). Both say: outcome unknown, retry.
    EXPECT_TRUE(code == "deadline_exceeded" || code == "outcome_unknown") << r.body;
    EXPECT_NE(r.body.find("Idempotency-Key"), std::string::npos) << r.body;
    EXPECT_GE(std::stoi(r.header("Retry-After").empty() ? "0" : r.header("Retry-After")), 1);
    EXPECT_GE(ms, deadline_ms - 50) << "answered before the deadline: the lock did not stall it";
    EXPECT_LT(ms, deadline_ms + 1500) << "the client was not answered within the request deadline";
    return r;
  }

  int journal_for(const std::string& key) { return journal_count(payer_.id, {key}); }

  ts::principal op_, payer_, payee_;
  std::int64_t from_ = 0, to_ = 0;
};

// The lock is released before the lock timeout, so the stalled batch commits after the client
// was told "unknown": the retry with the same key returns that committed 201 (a replay), money
// moved exactly once, and a different body under the key is refused.
TEST_F(RowLock, StalledPastDeadlineThenCommittedRetryReturnsTheTrueOutcome) {
  const std::string key = ts::unique_key("rowlock-commit");
  {
    ts::account_lock lock({from_});
    stalled_transfer(key);
    EXPECT_EQ(journal_for(key), 0) << "committed while the row was locked";
    lock.release();
  }
  // The writer's batch was waiting for the lock and now commits.
  ts::eventually([&] { return journal_for(key) != 0; }, 10s, 20ms);
  ASSERT_EQ(journal_for(key), 1);

  ts::http_client c(server_->port());
  auto retry = c.post("/v1/transfers", payer_.key, transfer_body(from_, to_, amount), key);
  ASSERT_EQ(retry.status, 201) << retry.body;
  EXPECT_EQ(retry.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(retry.json().as_object().at("fromBalanceAfter").as_string(), "0");
  EXPECT_EQ(journal_for(key), 1);
  EXPECT_EQ(ts::balance(c, payer_.key, from_), 0);
  EXPECT_EQ(ts::balance(c, payee_.key, to_), amount);

  auto reused = c.post("/v1/transfers", payer_.key, transfer_body(from_, to_, amount - 1), key);
  EXPECT_EQ(reused.status, 422) << reused.body;
  EXPECT_EQ(code_of(reused), "idempotency_key_reused");
}

// A retry with the same key while the stalled original is still waiting on the lock must not
// claim an outcome it cannot know: it answers 503 (retry later), never 422 insufficient_funds
// (the payer's only funds are reserved by the original, which is about to commit) and never a
// second transfer. After the release, the key's true outcome is the original's 201.
TEST_F(RowLock, RetryWhileTheOriginalIsStillStalledDoesNotGuess) {
  const std::string key = ts::unique_key("rowlock-early");
  ts::response early;
  {
    ts::account_lock lock({from_});
    stalled_transfer(key);
    // Past the original's HTTP deadline: its client has been told "outcome unknown" already.
    std::this_thread::sleep_for(300ms);
    ts::http_client c(server_->port(), 30s);
    early = c.post("/v1/transfers", payer_.key, transfer_body(from_, to_, amount), key);
    lock.release();
  }
  ts::eventually([&] { return journal_for(key) != 0; }, 10s, 20ms);
  ts::http_client c(server_->port());
  auto settled = c.post("/v1/transfers", payer_.key, transfer_body(from_, to_, amount), key);
  EXPECT_EQ(settled.status, 201) << settled.body;
  EXPECT_EQ(journal_for(key), 1);
  EXPECT_EQ(ts::balance(c, payer_.key, from_), 0);
  EXPECT_EQ(early.status, 503) << early.body;
  EXPECT_FALSE(early.header("Retry-After").empty());
}

// The lock is held past the database lock timeout, so the stalled batch rolls back: nothing is
// in the ledger, and the retry with the same key (after the release) moves the money once,
// as a fresh 201.
TEST_F(RowLock, StalledPastLockTimeoutRolledBackRetryCommitsOnce) {
  const std::string key = ts::unique_key("rowlock-rollback");
  {
    ts::account_lock lock({from_});
    stalled_transfer(key);
    // Hold the lock until the writer's wait has hit lock_timeout and the batch has been rolled
    // back: nothing waits on the lock any more (the writer answers a timed-out batch, it does
    // not wait again).
    ASSERT_TRUE(ts::eventually([&] { return lock.waiters() == 0; }, 60s, 20ms)) << "the writer never gave up";
    EXPECT_EQ(journal_for(key), 0);
    lock.release();
  }
  EXPECT_EQ(journal_for(key), 0) << "the timed-out batch must not have committed";

  ts::http_client c(server_->port());
  ts::response retry;
  // The account actor may still be reloading after the failed batch: a 503 there is an honest
  // "retry", so retry a bounded number of times, as a client would.
  for (int attempt = 0; attempt < 20; ++attempt) {
    retry = c.post("/v1/transfers", payer_.key, transfer_body(from_, to_, amount), key);
    if (retry.status != 503) break;
    std::this_thread::sleep_for(std::chrono::seconds(std::stoi(retry.header("Retry-After"))));
  }
  ASSERT_EQ(retry.status, 201) << retry.body;
  EXPECT_EQ(retry.header("Idempotent-Replayed"), "");
  EXPECT_EQ(journal_for(key), 1);
  EXPECT_EQ(ts::balance(c, payer_.key, from_), 0);
  EXPECT_EQ(ts::balance(c, payee_.key, to_), amount);
  auto replay = c.post("/v1/transfers", payer_.key, transfer_body(from_, to_, amount), key);
  EXPECT_EQ(replay.status, 201) << replay.body;
  EXPECT_EQ(replay.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(journal_for(key), 1);
  EXPECT_TRUE(ts::reconciliation_ok(c, op_.key));
}

// PostgreSQL "stopped" under load, without touching the shared database: the server reaches it
// through a relay that the test cuts (every connection closed, new ones refused) and restores.
// Under a steady stream of transfers every answer is 201 or 503 and comes within the request
// deadline; service comes back without a restart; every 201 is in the ledger; every 503 key,
// retried after recovery, ends in exactly one journal transaction; reconciliation is clean.
TEST(Shedding, DatabaseOutageUnderLoadRecoversWithoutRestart) {
  const int pg_port = [] {
    const auto url = ts::database_url();
    const auto colon = url.rfind(':');
    return std::stoi(url.substr(colon + 1, url.find('/', colon) - colon - 1));
  }();
  ts::tcp_relay relay(pg_port);
  const int deadline_ms = 3000;
  ts::server_process::options o;
  generous_limits(o);
  o.env["WALLET_DATABASE_URL"] = "postgresql://wallet_app@127.0.0.1:" + std::to_string(relay.port()) + "/wallet";
  o.env["WALLET_DATABASE_RECONNECT_BACKOFF_MS"] = "200";
  o.env["WALLET_HTTP_REQUEST_DEADLINE_MS"] = std::to_string(deadline_ms);
  own_server s(o);
  auto& [server, c, op] = s;
  auto payer = ts::create_principal(c, op.key);
  auto payee = ts::create_principal(c, op.key);
  const auto from = ts::create_account(c, op.key, payer.id);
  const auto to = ts::create_account(c, op.key, payee.id);
  const std::int64_t funded = 1'000'000;
  ts::deposit(c, op.key, from, funded);

  std::mutex mutex;
  std::vector<outcome> answers;
  std::atomic<bool> stop{false};
  std::atomic<int> created_after_restore{0};
  std::atomic<bool> restored{false};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      ts::http_client client(server.port(), 30s);
      while (!stop) {
        outcome o;
        o.key = ts::unique_key("outage");
        const auto started = clock::now();
        o.response = client.post("/v1/transfers", payer.key, transfer_body(from, to, 1), o.key);
        o.latency_ms = ts::elapsed_ms(started);
        o.status = o.response.status;
        o.code = code_of(o.response);
        if (o.status == 201 && restored) ++created_after_restore;
        if (o.status == 503) std::this_thread::sleep_for(50ms);  // a client backing off a little
        std::lock_guard lock(mutex);
        answers.push_back(std::move(o));
      }
    });
  }
  // Under load first (some payments answered), then the database away until the server says so.
  const auto answered = [&] {
    std::lock_guard lock(mutex);
    return answers.size();
  };
  EXPECT_TRUE(ts::eventually([&] { return answered() >= 20; }, 60s, 20ms));
  relay.cut();
  ts::response ready;
  EXPECT_TRUE(ts::eventually(
      [&] {
        ready = c.request("GET", "/readyz");
        return ready.status == 503;
      },
      60s, 100ms))
      << ready.body;
  EXPECT_EQ(code_of(ready), "database_unavailable") << ready.body;
  // And the clients meet the outage before the database comes back.
  const auto refused = [&] {
    std::lock_guard lock(mutex);
    return std::count_if(answers.begin(), answers.end(), [](const outcome& a) { return a.status == 503; });
  };
  EXPECT_TRUE(ts::eventually([&] { return refused() > 0; }, 60s, 20ms));
  relay.restore();
  restored = true;
  ts::eventually([&] { return created_after_restore.load() >= 20; }, 30s, 50ms);
  stop = true;
  for (auto& t : clients) t.join();
  ASSERT_GE(created_after_restore.load(), 20) << "service did not recover after the database came back";

  std::vector<std::string> created;
  std::vector<std::string> unavailable;
  std::map<std::string, int> codes;
  for (const auto& a : answers) {
    EXPECT_LT(a.latency_ms, deadline_ms + 2000) << a.status << " " << a.response.body;
    if (a.status == 201) {
      created.push_back(a.key);
    } else {
      EXPECT_EQ(a.status, 503) << a.response.body;
      EXPECT_FALSE(a.response.header("Retry-After").empty());
      ++codes[a.code];
      unavailable.push_back(a.key);
    }
  }
  EXPECT_GT(unavailable.size(), 0u) << "the outage was never noticed";
  for (const auto& [code, n] : codes) {
    EXPECT_TRUE(code == "database_unavailable" || code == "outcome_unknown" || code == "deadline_exceeded" ||
                code == "account_busy")
        << n << " x " << code;
  }
  // No 2xx for anything not committed.
  EXPECT_EQ(journal_count(payer.id, created), static_cast<int>(created.size()));

  // Every refused key, retried with the same key, learns its true outcome: one transaction.
  for (const auto& key : unavailable) {
    ts::response r;
    for (int attempt = 0; attempt < 300; ++attempt) {  // a minute at most
      r = c.post("/v1/transfers", payer.key, transfer_body(from, to, 1), key);
      if (r.status != 503) break;
      std::this_thread::sleep_for(200ms);
    }
    EXPECT_EQ(r.status, 201) << key << ": " << r.body;
  }
  EXPECT_EQ(journal_count(payer.id, unavailable), static_cast<int>(unavailable.size()));
  // Reads go through the readers, each of which reconnects on its own backoff: once both accounts
  // read again (a minute at most), their balances are checked.
  for (const auto& [key, account] : {std::pair{payer.key, from}, std::pair{payee.key, to}}) {
    EXPECT_TRUE(
        ts::eventually([&] { return c.get("/v1/accounts/" + std::to_string(account), key).status == 200; }, 60s, 50ms));
  }
  const auto moved = static_cast<std::int64_t>(created.size() + unavailable.size());
  EXPECT_EQ(ts::balance(c, payer.key, from), funded - moved);
  EXPECT_EQ(ts::balance(c, payee.key, to), moved);
  EXPECT_TRUE(ts::reconciliation_ok(c, op.key));
}

}  // namespace
