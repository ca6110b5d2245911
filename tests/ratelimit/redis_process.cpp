#include "redis_process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ratelimit/redis_url.hpp"

extern char** environ;

namespace ratelimit_test {
namespace {

struct context_deleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct reply_deleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};

std::string reply_text(const redisReply& reply) {
  switch (reply.type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
      return std::string(reply.str, static_cast<std::size_t>(reply.len));
    case REDIS_REPLY_INTEGER:
      return std::to_string(reply.integer);
    case REDIS_REPLY_NIL:
      return "";
    case REDIS_REPLY_ARRAY: {
      std::string joined;
      for (std::size_t i = 0; i < reply.elements; ++i) {
        if (i > 0) joined += ' ';
        joined += reply_text(*reply.element[i]);
      }
      return joined;
    }
    default:
      throw std::runtime_error("redis error reply: " +
                               std::string(reply.str, static_cast<std::size_t>(reply.len)));
  }
}

}  // namespace

std::string shared_redis_url() {
  const char* url = std::getenv("WALLET_REDIS_URL");
  return url != nullptr && *url != '\0' ? url : "redis://127.0.0.1:56380";
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot find a free port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

redis_process::redis_process(int port) : port_(port) {}

redis_process::~redis_process() {
  // SIGKILL also ends a paused (SIGSTOPped) server, so a failed test never leaves one behind.
  kill();
}

void redis_process::start() {
  ASSERT_LT(pid_, 0) << "already running";
  const std::string port = std::to_string(port_);
  std::vector<std::string> args = {"redis-server", "--port",    port,  "--bind",
                                   "127.0.0.1",    "--save",    "",    "--appendonly",
                                   "no",           "--logfile", "",    "--loglevel",
                                   "warning",      "--dir",     "/tmp"};
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, "redis-server", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ASSERT_EQ(rc, 0) << "cannot start redis-server";
  pid_ = pid;
  // Bounded wait: 100 tries of 50 ms.
  for (int attempt = 0; attempt < 100; ++attempt) {
    try {
      if (redis_command(url(), "PING") == "PONG") return;
    } catch (const std::runtime_error&) {
      // Not listening yet: expected while it starts; the next attempt tells.
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  FAIL() << "redis-server on port " << port_ << " did not answer within 5 s";
}

void redis_process::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

void redis_process::pause() {
  ASSERT_GT(pid_, 0);
  ::kill(pid_, SIGSTOP);
}

void redis_process::resume() {
  ASSERT_GT(pid_, 0);
  ::kill(pid_, SIGCONT);
}

std::string redis_process::url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

std::string redis_command(const std::string& url, const std::string& command) {
  const ratelimit::redis_endpoint endpoint = ratelimit::parse_redis_url(url);
  const timeval timeout{1, 0};
  std::unique_ptr<redisContext, context_deleter> context(
      redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port, timeout));
  if (!context || context->err != 0) {
    throw std::runtime_error("cannot connect to " + url + ": " +
                             (context ? context->errstr : "out of memory"));
  }
  redisSetTimeout(context.get(), timeout);
  if (!endpoint.password.empty()) {
    std::unique_ptr<redisReply, reply_deleter> auth(
        static_cast<redisReply*>(redisCommand(context.get(), "AUTH %s", endpoint.password.c_str())));
    if (!auth) throw std::runtime_error("AUTH failed");
  }
  // Split on spaces: test commands have no quoted arguments.
  std::vector<std::string> words;
  std::size_t start = 0;
  while (start < command.size()) {
    const std::size_t end = command.find(' ', start);
    words.push_back(command.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const auto& word : words) {
    argv.push_back(word.c_str());
    lengths.push_back(word.size());
  }
  std::unique_ptr<redisReply, reply_deleter> reply(static_cast<redisReply*>(redisCommandArgv(
      context.get(), static_cast<int>(argv.size()), argv.data(), lengths.data())));
  if (!reply) throw std::runtime_error("no reply from " + url + ": " + context->errstr);
  return reply_text(*reply);
}

std::int64_t redis_time_ms(const std::string& url) {
  const std::string time = redis_command(url, "TIME");
  const auto space = time.find(' ');
  return std::stoll(time.substr(0, space)) * 1000 + std::stoll(time.substr(space + 1)) / 1000;
}

void wait_for_window_room(const std::string& url, std::int64_t window_ms,
                          std::chrono::milliseconds margin) {
  const std::int64_t now = redis_time_ms(url);
  const std::int64_t left = window_ms - now % window_ms;
  if (left >= margin.count()) return;
  // Step just past the boundary: the next window then has almost all of its length left.
  std::this_thread::sleep_for(std::chrono::milliseconds(left + 20));
}

std::int64_t unique_principal() {
  static std::mt19937_64 generator{std::random_device{}()};
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  // Positive and far from small ids a developer might use by hand.
  return static_cast<std::int64_t>(generator() >> 2) + 1'000'000'000;
}

}  // namespace ratelimit_test
