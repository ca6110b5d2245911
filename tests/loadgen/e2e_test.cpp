// A short run of wallet-loadgen against the real server binary. It needs the server (named by
// WALLET_SERVER_BIN) and the services of scripts/test.sh; without them it is skipped.

#include "tools/loadgen/http_client.hpp"
#include "tools/loadgen/loadgen.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// A free TCP port on 127.0.0.1, found by binding port 0.
std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// The status of GET /readyz, or 0 when the server does not answer (yet).
int readiness(std::uint16_t port) {
  loadgen::pool_settings settings;
  settings.port = port;
  settings.connections_max = 1;
  settings.timeout = std::chrono::milliseconds(1000);
  loadgen::http_client client(settings, 1);
  std::promise<int> status;
  auto answer = status.get_future();
  loadgen::http_request request;
  request.target = "/readyz";
  client.submit(0, request, [&status](loadgen::http_response&& r) { status.set_value(r.status); });
  return answer.get();
}

// The server process for one test; killed when the test ends.
class server_process {
 public:
  server_process(const std::string& binary, std::uint16_t port, const std::string& key) {
    const std::string port_text = std::to_string(port);
    std::vector<std::string> env_strings;
    for (char** e = environ; e && *e; ++e) env_strings.emplace_back(*e);
    env_strings.push_back("WALLET_AUTH_BOOTSTRAP_KEY=" + key);
    // The per-user rate limit stays out of the way: the run checks correctness, not throttling.
    env_strings.push_back("WALLET_RATELIMIT_RATE_PER_SECOND=100000");
    env_strings.push_back("WALLET_RATELIMIT_BURST=200000");
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args{binary, "--http-port", port_text};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::posix_spawn(&pid_, binary.c_str(), nullptr, nullptr, argv.data(), envp.data()) != 0) pid_ = -1;
  }
  ~server_process() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  }
  bool started() const { return pid_ > 0; }
  bool alive() const { return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0; }

 private:
  pid_t pid_ = -1;
};

// A three-second open-loop hot-merchant run against the real server ends in PASS: every 201 is in
// the ledger once, balances moved exactly, and the server's reconciliation is clean.
TEST(e2e, short_run_against_the_real_server_passes) {
  const auto binary = env_or_empty("WALLET_SERVER_BIN");
  if (binary.empty() || !std::filesystem::exists(binary)) {
    GTEST_SKIP() << "WALLET_SERVER_BIN is unset or names no file";
  }
  if (env_or_empty("WALLET_DATABASE_URL").empty()) GTEST_SKIP() << "WALLET_DATABASE_URL is unset";
  const std::string key = "loadgen-e2e-operator-key-0123456789";
  const auto port = free_port();
  server_process server(binary, port, key);
  ASSERT_TRUE(server.started());
  bool ready = false;
  for (int i = 0; i < 300 && !ready; ++i) {
    ASSERT_TRUE(server.alive()) << "the server exited during start-up";
    ready = readiness(port) == 200;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(ready) << "the server was not ready within 30 s";

  loadgen::options o;
  o.port = port;
  o.operator_key = key;
  o.workload = loadgen::workload_kind::hot_merchant;
  o.accounts = 50;
  o.hot_shards = 4;
  o.rate = 100;
  o.duration_s = 3;
  o.quiet = true;
  o.retries = true;
  std::ostringstream out, err;
  const auto outcome = loadgen::run_loadgen(o, out, err);
  ASSERT_TRUE(outcome.verdict) << err.str();
  EXPECT_TRUE(outcome.verdict->pass) << out.str() << err.str();
  EXPECT_GT(outcome.total.classes.count("201") ? outcome.total.classes.at("201").count : 0, 0) << out.str();
}

}  // namespace
