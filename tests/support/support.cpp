#include "tests/support/support.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace test_support {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

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

int free_port() {
  asio::io_context ioc;
  tcp::acceptor acceptor(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return acceptor.local_endpoint().port();
}

boost::json::value response::json() const { return boost::json::parse(body); }

std::string response::header(const std::string& name) const {
  std::string lower = name;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto it = headers.find(lower);
  return it == headers.end() ? std::string() : it->second;
}

struct http_client::impl {
  int port;
  std::chrono::milliseconds timeout;
  asio::io_context ioc;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  void connect() {
    stream.emplace(ioc);
    stream->expires_after(timeout);
    stream->connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    buffer.clear();
  }
};

http_client::http_client(int port, std::chrono::milliseconds timeout) : impl_(std::make_unique<impl>()) {
  impl_->port = port;
  impl_->timeout = timeout;
}

http_client::~http_client() = default;

response http_client::request(const std::string& method, const std::string& target, const std::string& body,
                              const std::map<std::string, std::string>& headers) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      if (!impl_->stream) impl_->connect();
      bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
      req.set(bhttp::field::host, "127.0.0.1");
      req.keep_alive(true);
      for (const auto& [k, v] : headers) req.set(k, v);
      req.body() = body;
      req.prepare_payload();
      impl_->stream->expires_after(impl_->timeout);
      bhttp::write(*impl_->stream, req);
      bhttp::response_parser<bhttp::string_body> parser;
      parser.body_limit(64 * 1024 * 1024);
      bhttp::read(*impl_->stream, impl_->buffer, parser);
      auto res = parser.release();
      response out;
      out.status = static_cast<int>(res.result_int());
      for (const auto& field : res) {
        std::string name(field.name_string());
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        out.headers[name] = std::string(field.value());
      }
      out.body = std::move(res.body());
      if (!res.keep_alive()) impl_->stream.reset();
      return out;
    } catch (const boost::system::system_error& e) {
      // A kept-alive connection the server closed meanwhile: one fresh attempt.
      impl_->stream.reset();
      if (attempt == 1) throw;
    }
  }
  throw std::runtime_error("unreachable");
}

response http_client::get(const std::string& target, const std::string& key) {
  return request("GET", target, {}, {{"Authorization", "Bearer " + key}});
}

response http_client::post(const std::string& target, const std::string& key, const std::string& body,
                           const std::string& idempotency_key) {
  std::map<std::string, std::string> headers{{"Authorization", "Bearer " + key}, {"Content-Type", "application/json"}};
  if (!idempotency_key.empty()) headers["Idempotency-Key"] = idempotency_key;
  return request("POST", target, body, headers);
}

server_process::server_process() : server_process(options{}) {}

server_process::server_process(options opts) : options_(std::move(opts)) {
  port_ = free_port();
  operator_key_ = options_.bootstrap_key;
  log_path_ = "/tmp/wallet-test-server-" + std::to_string(::getpid()) + "-" + std::to_string(port_) + ".log";
  spawn(true);
  if (options_.wait_ready) wait_until_ready();
}

void server_process::spawn(bool truncate_log) {
  const std::string binary = build_dir() + "/tools/server/wallet-server";

  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  env["WALLET_HTTP_PORT"] = std::to_string(port_);
  env["WALLET_AUTH_BOOTSTRAP_KEY"] = options_.bootstrap_key;
  env["WALLET_DATABASE_URL"] = database_url();
  env["WALLET_DATABASE_OWNER_URL"] = owner_database_url();
  env["WALLET_REDIS_URL"] = redis_url();
  // No timer-driven reconciliation unless a test asks for it: runs start when a test POSTs.
  if (env.find("WALLET_LEDGER_RECONCILE_INTERVAL_S") == env.end()) env["WALLET_LEDGER_RECONCILE_INTERVAL_S"] = "0";
  if (env.find("WALLET_LEDGER_RECONCILE_FULL_INTERVAL_S") == env.end()) {
    env["WALLET_LEDGER_RECONCILE_FULL_INTERVAL_S"] = "0";
  }
  for (const auto& [k, v] : options_.env) env[k] = v;

  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> arg_strings{binary};
  for (const auto& a : options_.args) arg_strings.push_back(a);
  std::vector<char*> argv;
  for (auto& s : arg_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  const int log_flags = O_WRONLY | O_CREAT | (truncate_log ? O_TRUNC : O_APPEND);
  pid_ = ::fork();
  if (pid_ == 0) {
    // A test process that dies (a crash, a timeout's SIGKILL) takes its server with it: a server
    // left behind keeps sweeping and reconciling the shared test database under later suites.
    // (The signal follows the forking thread; every test spawns from its own main thread.)
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() == 1) ::_exit(127);
    int fd = ::open(log_path_.c_str(), log_flags, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execve(binary.c_str(), argv.data(), envp.data());
    ::_exit(127);
  }
}

void server_process::wait_until_ready() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("wallet-server exited during start:\n" + log());
    }
    try {
      http_client c(port_, std::chrono::seconds(2));
      if (c.request("GET", "/healthz").status == 200) return;
    } catch (const std::exception&) {
      // not listening yet
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("wallet-server did not start in 30 s:\n" + log());
}

void server_process::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void server_process::restart(bool wait_ready) {
  if (pid_ > 0) throw std::runtime_error("wallet-server is still running; kill() or terminate() it first");
  spawn(false);
  if (wait_ready) wait_until_ready();
}

// A server that does not stop cleanly fails the test that owned it: a crash, a sanitizer's
// abort or a leak report at exit would otherwise go unnoticed once the test's checks passed.
// SIGKILL is the exception: only a test sends it (e.g. http_test::stop_child_servers), on purpose.
server_process::~server_process() {
  if (pid_ <= 0) return;
  const int code = terminate(std::chrono::seconds(30));
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    ADD_FAILURE() << "wallet-server did not exit within 30 s of SIGTERM; killed. Log:\n" << log();
  } else if (code != 0 && exit_signal_ != SIGKILL) {
    ADD_FAILURE() << "wallet-server exited with " << exit_description_ << " after SIGTERM. Log:\n" << log();
  }
}

int server_process::terminate(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      if (WIFEXITED(status)) {
        exit_signal_ = 0;
        exit_description_ = "status " + std::to_string(WEXITSTATUS(status));
        return WEXITSTATUS(status);
      }
      exit_signal_ = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      exit_description_ = WIFSIGNALED(status) ? "signal " + std::to_string(exit_signal_) : "an unknown status";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

std::string server_process::log() const {
  std::ifstream in(log_path_);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

principal create_principal(http_client& c, const std::string& operator_key, const std::string& role) {
  auto r = c.post("/v1/principals", operator_key, R"({"name":"test )" + unique_key(role) + R"(","role":")" + role + "\"}");
  EXPECT_EQ(r.status, 201) << r.body;
  auto j = r.json().as_object();
  return {j.at("id").as_int64(), std::string(j.at("apiKey").as_string())};
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

void deposit(http_client& c, const std::string& operator_key, std::int64_t account, std::int64_t amount) {
  auto r = c.post("/v1/deposits", operator_key,
                  R"({"accountId":)" + std::to_string(account) + R"(,"amount":)" + std::to_string(amount) + "}",
                  unique_key("deposit"));
  EXPECT_EQ(r.status, 201) << r.body;
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
  return prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + std::to_string(random() % 1000000);
}

std::map<std::string, std::string> unlimited_rates() {
  return {{"WALLET_RATELIMIT_RATE_PER_SECOND", "1000000"},
          {"WALLET_RATELIMIT_BURST", "1000000"},
          {"WALLET_RATELIMIT_READ_RATE_PER_SECOND", "1000000"},
          {"WALLET_RATELIMIT_READ_BURST", "1000000"},
          {"WALLET_AUTH_UNAUTHENTICATED_PER_SECOND", "1000000"},
          {"WALLET_AUTH_UNAUTHENTICATED_BURST", "1000000"},
          {"WALLET_AUTH_UNKNOWN_ACCOUNTS_PER_SECOND", "1000000"},
          {"WALLET_AUTH_UNKNOWN_ACCOUNTS_BURST", "1000000"}};
}

std::string transfer_body(std::int64_t from, std::int64_t to, std::int64_t amount) {
  return R"({"fromAccountId":)" + std::to_string(from) + R"(,"toAccountId":)" + std::to_string(to) + R"(,"amount":)" +
         std::to_string(amount) + "}";
}

std::string query_value(const std::string& sql) {
  pqxx::connection conn(owner_database_url());
  pqxx::nontransaction txn(conn);
  auto r = txn.exec(sql);
  if (r.empty() || r[0][0].is_null()) return {};
  return r[0][0].as<std::string>();
}

void execute_sql(const std::string& sql, bool as_owner) {
  pqxx::connection conn(as_owner ? owner_database_url() : database_url());
  pqxx::work txn(conn);
  txn.exec(sql);
  txn.commit();
}

int backends_blocked_by(int blocker_pid) {
  return std::stoi(query_value(
      "WITH RECURSIVE waiting(pid) AS ("
      "  SELECT pid FROM pg_stat_activity WHERE " + std::to_string(blocker_pid) + " = ANY(pg_blocking_pids(pid))"
      "  UNION"
      "  SELECT a.pid FROM pg_stat_activity a JOIN waiting w ON w.pid = ANY(pg_blocking_pids(a.pid))"
      ") SELECT count(*) FROM waiting"));
}

std::int64_t metric_value(http_client& c, const std::string& name) {
  const auto r = c.request("GET", "/metrics");
  const std::string needle = "\n" + name + " ";
  const auto at = r.body.find(needle);
  if (at == std::string::npos) return -1;
  return std::stoll(r.body.substr(at + needle.size()));
}

}  // namespace test_support
