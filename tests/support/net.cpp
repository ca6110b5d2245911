#include "tests/support/net.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace test_support {
namespace {

using clock = std::chrono::steady_clock;

sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  return addr;
}

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr = loopback(port);
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
  sockaddr_in addr = loopback(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 64) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error("cannot listen on 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(err));
  }
  return fd;
}

// The port a bound socket got.
int local_port(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error("getsockname() failed");
  return ntohs(addr.sin_port);
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

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr = loopback(0);
  socklen_t len = sizeof(addr);
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  if (!bound) throw std::runtime_error("cannot find a free port");
  return ntohs(addr.sin_port);
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
      out.reset = n < 0;
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

tcp_relay::tcp_relay(int target_port) : target_port_(target_port) {
  // Port 0 first, to learn a free port; later listeners (after restore) bind that same port.
  listen_fd_ = listen_loopback(0);
  port_ = local_port(listen_fd_);
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
      while (::read(wake_fds_[0], buf, sizeof(buf)) > 0) {}
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

}  // namespace test_support
