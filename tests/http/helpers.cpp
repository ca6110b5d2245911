#include "tests/http/helpers.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace http_test {
namespace {

using clock = std::chrono::steady_clock;

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error("cannot connect to 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(err));
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

int listen_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 64) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error("cannot listen on 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(err));
  }
  return fd;
}

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

redis_child::redis_child(int port) : port_(port) {}

redis_child::~redis_child() { stop(); }

void redis_child::start() {
  if (pid_ > 0) throw std::runtime_error("redis child already running");
  std::vector<std::string> args = {"redis-server", "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                   "--save", "", "--appendonly", "no", "--daemonize", "no",
                                   "--logfile", "", "--loglevel", "warning", "--dir", "/tmp"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, "redis-server", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot spawn redis-server: " + std::string(std::strerror(rc)));
  pid_ = pid;
  const auto deadline = clock::now() + std::chrono::seconds(10);
  while (clock::now() < deadline) {
    if (redis_answers(port_)) return;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("redis-server on port " + std::to_string(port_) + " exited during start");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop();
  throw std::runtime_error("redis-server on port " + std::to_string(port_) + " did not answer within 10 s");
}

void redis_child::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void redis_child::pause() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void redis_child::resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

std::string redis_child::url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

bool redis_answers(int port, std::chrono::milliseconds timeout) {
  try {
    raw_connection c(port);
    if (!c.send("PING\r\n")) return false;
    const auto deadline = clock::now() + timeout;
    while (clock::now() < deadline) {
      if (c.received().find("+PONG\r\n") != std::string::npos) return true;
      if (c.peer_closed()) return c.received().find("+PONG\r\n") != std::string::npos;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  } catch (const std::runtime_error&) {
    return false;  // not listening (yet, or any more)
  }
}

raw_connection::raw_connection(int port) : fd_(connect_loopback(port)) {}

raw_connection::~raw_connection() {
  if (fd_ >= 0) ::close(fd_);
}

bool raw_connection::send(const std::string& bytes) { return write_all(fd_, bytes.data(), bytes.size()); }

raw_connection::read_result raw_connection::read_until_closed(std::chrono::milliseconds timeout) {
  const auto deadline = clock::now() + timeout;
  read_result out;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      out.closed = true;
      break;
    }
    received_.append(buf, static_cast<std::size_t>(n));
  }
  out.bytes = received_;
  return out;
}

bool raw_connection::peer_closed() {
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, 0);
    if (ready <= 0) return false;
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    if (n <= 0) return true;
    received_.append(buf, static_cast<std::size_t>(n));
  }
}

std::optional<double> metric(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 && line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::nullopt;
}

std::map<std::string, std::string> current_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

run_result run_program(const std::string& binary, const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env, std::chrono::milliseconds timeout) {
  // One file per call: a test may run several programs at once from different threads.
  static std::atomic<int> calls{0};
  const std::string out_path =
      "/tmp/wallet-http-test-run-" + std::to_string(::getpid()) + "-" + std::to_string(calls++) + ".log";
  std::vector<std::string> arg_strings{binary};
  arg_strings.insert(arg_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : arg_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot spawn " + binary + ": " + std::strerror(rc));

  run_result result;
  const auto deadline = clock::now() + timeout;
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      break;
    }
    if (clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::ifstream in(out_path);
  std::ostringstream text;
  text << in.rdbuf();
  result.output = text.str();
  ::unlink(out_path.c_str());
  return result;
}

namespace {

// (command name, state, parent pid) of /proc/<pid>/stat; nullopt when it is gone.
struct proc_stat {
  std::string name;
  char state = '?';
  pid_t parent = 0;
};
std::optional<proc_stat> read_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto open = text.find('(');
  const auto close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 4 >= text.size()) return std::nullopt;
  proc_stat s;
  s.name = text.substr(open + 1, close - open - 1);
  std::istringstream rest(text.substr(close + 2));
  rest >> s.state >> s.parent;
  return s;
}

}  // namespace

std::vector<pid_t> child_pids(const std::string& name) {
  std::vector<pid_t> out;
  const pid_t me = ::getpid();
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string file = entry.path().filename().string();
    if (file.empty() || !std::all_of(file.begin(), file.end(), ::isdigit)) continue;
    const auto s = read_stat(static_cast<pid_t>(std::stol(file)));
    if (s && s->parent == me && s->name == name) out.push_back(static_cast<pid_t>(std::stol(file)));
  }
  return out;
}

int stop_child_servers(std::chrono::milliseconds grace) {
  const auto pids = child_pids("wallet-server");
  for (pid_t pid : pids) ::kill(pid, SIGTERM);
  const auto deadline = clock::now() + grace;
  auto exited = [](pid_t pid) {
    const auto s = read_stat(pid);
    return !s || s->state == 'Z' || s->state == 'X';
  };
  for (pid_t pid : pids) {
    while (!exited(pid) && clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  int killed = 0;
  for (pid_t pid : pids) {
    if (exited(pid)) continue;
    ::kill(pid, SIGKILL);
    ++killed;
  }
  return killed;
}

tcp_relay::tcp_relay(int target_port) : target_port_(target_port) {
  // Port 0 first, to learn a free port; later listeners (after restore) bind that same port.
  listen_fd_ = listen_loopback(0);
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  if (::pipe2(wake_fds_, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe2() failed");
  thread_ = std::thread([this] { run(); });
}

tcp_relay::~tcp_relay() {
  stopping_ = true;
  const char c = 's';
  [[maybe_unused]] auto ignored = ::write(wake_fds_[1], &c, 1);
  thread_.join();
  ::close(wake_fds_[0]);
  ::close(wake_fds_[1]);
}

void tcp_relay::cut() { set_mode(mode::cut); }

void tcp_relay::blackhole() { set_mode(mode::blackhole); }

void tcp_relay::restore() { set_mode(mode::pass); }

void tcp_relay::set_mode(mode m) {
  const int target = generation_.load() + 1;
  mode_ = m;
  const char c = 'm';
  [[maybe_unused]] auto ignored = ::write(wake_fds_[1], &c, 1);
  // The relay thread applies it within one poll round; wait for that so the caller knows the
  // change is in force (e.g. the connections are gone after cut()) when this returns.
  while (generation_.load() < target) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void tcp_relay::run() {
  struct link {
    int client;
    int upstream;
  };
  std::vector<link> links;
  mode applied = mode::pass;
  auto close_all = [&] {
    for (auto& l : links) {
      ::close(l.client);
      ::close(l.upstream);
    }
    links.clear();
  };
  while (!stopping_) {
    const mode wanted = mode_.load();
    if (wanted != applied) {
      if (wanted == mode::cut) {
        ::close(listen_fd_);
        listen_fd_ = -1;
        close_all();
      } else if (listen_fd_ < 0) {
        try {
          listen_fd_ = listen_loopback(port_);
        } catch (const std::runtime_error&) {
          // The port is briefly taken (e.g. as some connection's ephemeral port): next round.
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          continue;
        }
      }
      applied = wanted;
      ++generation_;
    }
    std::vector<pollfd> fds;
    fds.push_back({wake_fds_[0], POLLIN, 0});
    if (listen_fd_ >= 0) fds.push_back({listen_fd_, POLLIN, 0});
    const std::size_t first_link = fds.size();
    // In a blackhole nothing is read, so nothing is forwarded and the peers' bytes stay queued
    // in their sockets until the relay passes again.
    if (applied == mode::pass) {
      for (const auto& l : links) {
        fds.push_back({l.client, POLLIN, 0});
        fds.push_back({l.upstream, POLLIN, 0});
      }
    }
    if (::poll(fds.data(), fds.size(), 100) <= 0) continue;
    if (fds[0].revents != 0) {
      char buf[64];
      while (::read(wake_fds_[0], buf, sizeof(buf)) > 0) {
      }
    }
    if (listen_fd_ >= 0 && fds[1].revents != 0) {
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        try {
          links.push_back({client, connect_loopback(target_port_)});
        } catch (const std::runtime_error&) {
          ::close(client);  // the target is down: the client sees the connection end
        }
      }
    }
    if (fds.size() == first_link) continue;
    std::vector<bool> dead(links.size(), false);
    for (std::size_t i = 0; i < (fds.size() - first_link) / 2; ++i) {
      for (int side = 0; side < 2; ++side) {
        const auto& p = fds[first_link + 2 * i + static_cast<std::size_t>(side)];
        if (p.revents == 0 || dead[i]) continue;
        const int from = side == 0 ? links[i].client : links[i].upstream;
        const int to = side == 0 ? links[i].upstream : links[i].client;
        char buf[65536];
        const ssize_t n = ::recv(from, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (n <= 0 || !write_all(to, buf, static_cast<std::size_t>(n))) dead[i] = true;
      }
    }
    for (std::size_t i = links.size(); i-- > 0;) {
      if (!dead[i]) continue;
      ::close(links[i].client);
      ::close(links[i].upstream);
      links.erase(links.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  close_all();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

}  // namespace http_test
