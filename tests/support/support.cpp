#include "tests/support/support.hpp"

#include "tests/support/process.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <random>

namespace test_support {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}
std::string database_url() { return env_or("WALLET_DATABASE_URL", "postgresql://wallet_app@127.0.0.1:55433/wallet"); }
std::string owner_database_url() {
  return env_or("WALLET_DATABASE_OWNER_URL", "postgresql://wallet_owner@127.0.0.1:55433/wallet");
}
namespace {
// The same server, another database: the URL with its path (the database name) replaced.
std::string with_database(const std::string& url, const std::string& database) {
  const auto scheme = url.find("://");
  const auto slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  if (slash == std::string::npos) return url + "/" + database;
  const auto query = url.find('?', slash);
  return url.substr(0, slash + 1) + database + (query == std::string::npos ? "" : url.substr(query));
}
}  // namespace
std::string scratch_database_url() {
  return env_or("WALLET_SCRATCH_DATABASE_URL", with_database(database_url(), "wallet_scratch"));
}
std::string scratch_owner_database_url() {
  return env_or("WALLET_SCRATCH_DATABASE_OWNER_URL", with_database(owner_database_url(), "wallet_scratch"));
}
std::string redis_url() { return env_or("WALLET_REDIS_URL", "redis://127.0.0.1:56380"); }
std::string build_dir() { return env_or("WALLET_BUILD_DIR", "build"); }
std::string source_dir() { return env_or("WALLET_SOURCE_DIR", "."); }

principal create_principal(http_client& c, const std::string& operator_key, const std::string& role) {
  auto r =
      c.post("/v1/principals", operator_key, R"({"name":"test )" + unique_key(role) + R"(","role":")" + role + "\"}");
  EXPECT_EQ(r.status, 201) << r.body;
  auto j = r.json().as_object();
  return {j.at("id").as_int64(), std::string(j.at("apiKey").as_string())};
}

principal create_operator() {
  const auto made = run_program(build_dir() + "/tools/admin/wallet-admin",
                                {"create-operator", "--name", "test " + unique_key("operator")}, current_environment(),
                                std::chrono::seconds(60));
  // "operator <id> (<name>): API key <key>"
  const auto key_at = made.output.rfind("API key ");
  if (made.exit_code != 0 || made.output.rfind("operator ", 0) != 0 || key_at == std::string::npos) {
    ADD_FAILURE() << "wallet-admin create-operator failed: " << made.output;
    return {};
  }
  auto key = made.output.substr(key_at + 8);
  key.erase(key.find_last_not_of(" \r\n") + 1);
  return {std::stoll(made.output.substr(9)), key};
}

std::int64_t create_account(http_client& c, const std::string& operator_key, std::int64_t owner,
                            const std::string& currency, int hot_shards) {
  std::string body = R"({"ownerId":)" + std::to_string(owner) + R"(,"currency":")" + currency + "\"";
  if (hot_shards > 0) body += R"(,"hot":true,"shards":)" + std::to_string(hot_shards);
  body += "}";
  auto r = c.post("/v1/accounts", operator_key, body);
  EXPECT_EQ(r.status, 201) << r.body;
  return r.json().as_object().at("id").as_int64();
}

std::string deposit(http_client& c, const std::string& operator_key, std::int64_t account, std::int64_t amount) {
  auto r = c.post("/v1/deposits", operator_key,
                  R"({"accountId":)" + std::to_string(account) + R"(,"amount":)" + std::to_string(amount) + "}",
                  unique_key("deposit"));
  EXPECT_EQ(r.status, 201) << r.body;
  if (r.status != 201) return {};
  return std::string(r.json().as_object().at("transactionId").as_string());
}

std::int64_t balance(http_client& c, const std::string& key, std::int64_t account) {
  auto r = c.get("/v1/accounts/" + std::to_string(account), key);
  EXPECT_EQ(r.status, 200) << r.body;
  return std::stoll(std::string(r.json().as_object().at("balance").as_string()));
}

namespace {
// Polls of a reconciliation run, and the pause between them (growing to the maximum): a run over
// the test database takes well under a second; the bound is generous for a loaded machine.
constexpr int k_run_polls_max = 1'200;
constexpr std::chrono::milliseconds k_run_poll_first{5};
constexpr std::chrono::milliseconds k_run_poll_max{100};
// POSTs that may each find another caller's run in progress before one starts a run of its own.
constexpr int k_run_starts_max = 20;
}  // namespace

boost::json::object wait_for_reconciliation_run(http_client& c, const std::string& operator_key, std::int64_t run_id) {
  auto pause = k_run_poll_first;
  for (int poll = 0; poll < k_run_polls_max; ++poll) {
    auto r = c.get("/v1/admin/reconciliation/runs/" + std::to_string(run_id), operator_key);
    if (r.status != 200) {
      ADD_FAILURE() << "GET reconciliation run " << run_id << ": " << r.status << " " << r.body;
      return {};
    }
    auto run = r.json().as_object();
    if (run.at("status").as_string() != "running") return run;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, k_run_poll_max);
  }
  ADD_FAILURE() << "reconciliation run " << run_id << " was still running after " << k_run_polls_max << " polls";
  return {};
}

boost::json::object fresh_reconciliation(http_client& c, const std::string& operator_key, bool full) {
  const std::string body = full ? R"({"full":true})" : "{}";
  for (int start = 0; start < k_run_starts_max; ++start) {
    auto r = c.post("/v1/admin/reconciliation", operator_key, body);
    if (r.status != 202) {
      ADD_FAILURE() << "POST /v1/admin/reconciliation: " << r.status << " " << r.body;
      return {};
    }
    const auto claim = r.json().as_object();
    const auto run = wait_for_reconciliation_run(c, operator_key, claim.at("runId").as_int64());
    if (run.empty() || claim.at("started").as_bool()) return run;
  }
  ADD_FAILURE() << "no reconciliation run of this caller started in " << k_run_starts_max << " attempts";
  return {};
}

bool reconciliation_ok(http_client& c, const std::string& operator_key, bool full) {
  const auto run = fresh_reconciliation(c, operator_key, full);
  const auto* ok = run.if_contains("ok");
  const bool clean = run.if_contains("status") && run.at("status").as_string() == "finished" && ok != nullptr &&
                     ok->is_bool() && ok->as_bool();
  EXPECT_TRUE(clean) << boost::json::serialize(run);
  return clean;
}

std::string unique_key(const std::string& prefix) {
  static std::atomic<std::uint64_t> counter{0};
  thread_local std::mt19937_64 random{std::random_device{}()};
  return prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
         std::to_string(random() % 1000000);
}

std::string transfer_body(std::int64_t from, std::int64_t to, std::int64_t amount) {
  return R"({"fromAccountId":)" + std::to_string(from) + R"(,"toAccountId":)" + std::to_string(to) + R"(,"amount":)" +
         std::to_string(amount) + "}";
}

void transfer_tally::count(const response& r) {
  if (r.status == 201) {
    ++created;
  } else if (r.status == 422 && r.json().as_object().at("code").as_string() == "insufficient_funds") {
    ++refused;
  } else {
    ++other;
    ADD_FAILURE() << r.status << " " << r.body;
  }
}

void expect_done_once(const std::vector<response>& answers, int status) {
  ASSERT_FALSE(answers.empty());
  int fresh = 0;
  for (const auto& a : answers) {
    EXPECT_EQ(a.status, status) << a.body;
    EXPECT_EQ(a.body, answers.front().body);
    if (a.header("idempotent-replayed").empty()) ++fresh;
  }
  EXPECT_EQ(fresh, 1);
}

}  // namespace test_support
