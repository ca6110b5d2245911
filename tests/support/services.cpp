#include "tests/support/services.hpp"

#include "tests/support/net.hpp"
#include "tests/support/process.hpp"
#include "tests/support/support.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <vector>

extern char** environ;

namespace test_support {

bool redis_answers(int port, std::chrono::milliseconds timeout) {
  try {
    raw_connection c(port);
    if (!c.send("PING\r\n")) return false;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (c.received().find("+PONG\r\n") != std::string::npos) return true;
      if (c.peer_closed()) return c.received().find("+PONG\r\n") != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  } catch (const std::runtime_error&) {
    return false;  // not listening (yet, or any more)
  }
}

redis_process::redis_process(int port) : port_(port) {}

redis_process::~redis_process() { kill(); }

void redis_process::start() {
  if (pid_ > 0) throw std::runtime_error("redis-server on port " + std::to_string(port_) + " is already running");
  std::vector<std::string> args = {
      "redis-server", "--port", std::to_string(port_), "--bind", "127.0.0.1",  "--save",  "",      "--appendonly", "no",
      "--daemonize",  "no",     "--logfile",           "",       "--loglevel", "warning", "--dir", "/tmp"};
  auto argv = c_array(args);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, "redis-server", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot spawn redis-server: " + std::string(std::strerror(rc)));
  pid_ = pid;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (redis_answers(port_)) return;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("redis-server on port " + std::to_string(port_) + " exited during start");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill();
  throw std::runtime_error("redis-server on port " + std::to_string(port_) + " did not answer within 10 s");
}

void redis_process::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void redis_process::pause() {
  if (pid_ <= 0) throw std::runtime_error("redis-server on port " + std::to_string(port_) + " is not running");
  ::kill(pid_, SIGSTOP);
}

void redis_process::resume() {
  if (pid_ <= 0) throw std::runtime_error("redis-server on port " + std::to_string(port_) + " is not running");
  ::kill(pid_, SIGCONT);
}

std::string redis_process::url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

namespace {

namespace fs = std::filesystem;
constexpr auto k_script_timeout = std::chrono::seconds(120);

// The newest installed PostgreSQL's bin directory, chosen as scripts/services.sh chooses it.
std::string pg_bin_dir() {
  std::vector<std::pair<int, std::string>> found;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql")) {
    const auto name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    if (fs::exists(entry.path() / "bin" / "pg_ctl"))
      found.emplace_back(std::stoi(name), (entry.path() / "bin").string());
  }
  if (found.empty()) throw std::runtime_error("no PostgreSQL under /usr/lib/postgresql");
  return std::max_element(found.begin(), found.end())->second;
}

std::map<std::string, std::string> read_env_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::map<std::string, std::string> values;
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) values[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return values;
}

// The environment of a helper program: ours, without anything that would make services.sh skip
// a service or point a tool at the shared services.
std::map<std::string, std::string> tool_environment() {
  auto env = current_environment();
  env.erase("WALLET_SERVICES_SKIP_PG");
  env.erase("WALLET_SERVICES_SKIP_REDIS");
  return env;
}

}  // namespace

private_services::private_services(std::string dir) : dir_(std::move(dir)) {
  fs::create_directories(dir_);
  // A run that was killed leaves its services running on ports nobody knows any more; the
  // services.env it wrote names them, so stop them first.
  if (fs::exists(dir_ + "/services.env")) services_script("stop", false);
  // Ports from free_port(): no outgoing connection takes one while its service is down.
  pg_port_ = free_port();
  redis_port_ = free_port();
  while (redis_port_ == pg_port_) redis_port_ = free_port();
  services_script("start", true);
  services_script("reset-db", false);
  const auto written = read_env_file(dir_ + "/services.env");
  for (const char* key : {"WALLET_DATABASE_URL", "WALLET_DATABASE_OWNER_URL", "WALLET_REDIS_URL"}) {
    env_[key] = written.at(key);
  }
  auto env = tool_environment();
  for (const auto& [k, v] : env_) env[k] = v;
  const auto migrated = run_program(build_dir() + "/tools/admin/wallet-admin", {"migrate"}, env, k_script_timeout);
  if (migrated.exit_code != 0) throw std::runtime_error("wallet-admin migrate failed:\n" + migrated.output);
}

private_services::~private_services() {
  try {
    services_script("stop", false);
  } catch (const std::exception& e) {
    // A destructor cannot throw; the next run's constructor stops what is left.
    std::fprintf(stderr, "stopping the private services under %s failed: %s\n", dir_.c_str(), e.what());
  }
}

void private_services::services_script(const std::string& command, bool with_ports) const {
  std::vector<std::string> args{source_dir() + "/scripts/services.sh", command, dir_};
  if (with_ports) {
    args.insert(args.end(), {std::to_string(pg_port_), std::to_string(redis_port_), "--fast"});
  }
  const auto r = run_program("/bin/bash", args, tool_environment(), k_script_timeout);
  if (r.exit_code != 0) {
    throw std::runtime_error("scripts/services.sh " + command + " " + dir_ + " failed:\n" + r.output);
  }
}

void private_services::stop_postgres_immediately() {
  const std::string pg_ctl = pg_bin_dir() + "/pg_ctl";
  const std::string data = (fs::canonical(dir_ + "/postgres") / "data").string();
  // PostgreSQL refuses to run as root: as root, act as the postgres user, as services.sh does.
  std::vector<std::string> args;
  std::string binary = pg_ctl;
  if (::geteuid() == 0) {
    binary = "/usr/sbin/runuser";
    args = {"-u", "postgres", "--", pg_ctl};
  }
  args.insert(args.end(), {"-D", data, "-m", "immediate", "-w", "-t", "60", "stop"});
  const auto r = run_program(binary, args, tool_environment(), k_script_timeout);
  if (r.exit_code != 0) throw std::runtime_error("pg_ctl stop -m immediate failed:\n" + r.output);
}

void private_services::kill_redis() {
  std::ifstream in(dir_ + "/redis/redis.pid");
  pid_t pid = 0;
  if (!(in >> pid) || pid <= 1) throw std::runtime_error("no redis pid under " + dir_ + "/redis");
  if (::kill(pid, SIGKILL) != 0) throw std::runtime_error("cannot kill redis-server " + std::to_string(pid));
  // It is not our child (services.sh daemonizes it): wait for its port to go quiet. Bounded: 500
  // checks of at least 20 ms.
  for (int check = 0; check < 500; ++check) {
    if (!redis_answers(redis_port_, std::chrono::milliseconds(100))) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("redis-server still answers after SIGKILL");
}

void private_services::start() { services_script("start", true); }

bool private_services::reconcile_clean(std::string& report) const {
  auto env = tool_environment();
  for (const auto& [k, v] : env_) env[k] = v;
  const auto r = run_program(build_dir() + "/tools/admin/wallet-admin", {"reconcile"}, env, k_script_timeout);
  report = r.output;
  return r.exit_code == 0;
}

}  // namespace test_support
