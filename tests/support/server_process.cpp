#include "tests/support/server_process.hpp"

#include "tests/support/http_client.hpp"
#include "tests/support/net.hpp"
#include "tests/support/process.hpp"
#include "tests/support/support.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace test_support {

std::string server_binary() { return build_dir() + "/tools/server/wallet-server"; }

std::map<std::string, std::string> unlimited_rates() {
  return {{"WALLET_RATELIMIT_RATE_PER_SECOND", "1000000"},        {"WALLET_RATELIMIT_BURST", "1000000"},
          {"WALLET_RATELIMIT_READ_RATE_PER_SECOND", "1000000"},   {"WALLET_RATELIMIT_READ_BURST", "1000000"},
          {"WALLET_AUTH_UNAUTHENTICATED_PER_SECOND", "1000000"},  {"WALLET_AUTH_UNAUTHENTICATED_BURST", "1000000"},
          {"WALLET_AUTH_UNKNOWN_ACCOUNTS_PER_SECOND", "1000000"}, {"WALLET_AUTH_UNKNOWN_ACCOUNTS_BURST", "1000000"}};
}

server_process::server_process() : server_process(options{}) {}

server_process::server_process(options opts) : options_(std::move(opts)) {
  if (!std::filesystem::exists(server_binary())) {
    throw std::runtime_error("no wallet-server binary at " + server_binary() +
                             ": build the wallet-server target (WALLET_BUILD_DIR names the build directory)");
  }
  port_ = free_port();
  operator_key_ = options_.bootstrap_key;
  log_path_ = "/tmp/wallet-test-server-" + std::to_string(::getpid()) + "-" + std::to_string(port_) + ".log";
  spawn(true);
  if (options_.wait_ready) wait_until_ready();
}

void server_process::spawn(bool truncate_log) {
  const std::string binary = server_binary();

  auto env = current_environment();
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

  auto env_strings = environment_strings(env);
  auto envp = c_array(env_strings);
  std::vector<std::string> arg_strings{binary};
  arg_strings.insert(arg_strings.end(), options_.args.begin(), options_.args.end());
  auto argv = c_array(arg_strings);

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
    if (options_.open_files_max > 0) {
      const rlimit limit{options_.open_files_max, options_.open_files_max};
      if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) ::_exit(126);
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

void server_process::send_signal(int signal_number) const {
  const int pid = pid_;
  if (pid > 0) ::kill(pid, signal_number);
}

void server_process::restart(bool wait_ready) {
  if (pid_ > 0) throw std::runtime_error("wallet-server is still running; kill() or terminate() it first");
  spawn(false);
  if (wait_ready) wait_until_ready();
}

// A server that does not stop cleanly fails the test that owned it: a crash, a sanitizer's
// abort or a leak report at exit would otherwise go unnoticed once the test's checks passed.
// SIGKILL is the exception: only a test sends it (kill(), send_signal()), on purpose.
server_process::~server_process() {
  if (pid_ <= 0) return;
  const int code = terminate(options_.stop_timeout);
  if (pid_ > 0) {
    kill();
    if (options_.stop_timeout_fails) {
      ADD_FAILURE() << "wallet-server did not exit within " << options_.stop_timeout.count()
                    << " ms of SIGTERM; killed. Log:\n"
                    << log();
    }
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

}  // namespace test_support
