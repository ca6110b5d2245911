#include "tests/events/webhook_receiver.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <stdexcept>

namespace events_test {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

}  // namespace

webhook_receiver::webhook_receiver(std::function<int(int)> answer, std::string cert_file, std::string key_file)
    : answer_(std::move(answer)), cert_file_(std::move(cert_file)), key_file_(std::move(key_file)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listen_fd_ < 0) throw std::runtime_error("receiver: socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 64) != 0) {
    throw std::runtime_error("receiver: bind or listen failed");
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] {
    for (;;) {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      std::lock_guard lock(mutex_);
      if (stopping_) {
        if (fd >= 0) ::close(fd);
        return;
      }
      if (fd < 0) continue;
      open_fds_.push_back(fd);
      connections_.emplace_back([this, fd] { serve(fd); });
    }
  });
}

webhook_receiver::~webhook_receiver() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    // Wakes the connections' blocking reads and the acceptor.
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    ::shutdown(listen_fd_, SHUT_RDWR);
  }
  released_.notify_all();
  acceptor_.join();
  for (auto& t : connections_) t.join();
  ::close(listen_fd_);
}

std::string webhook_receiver::url(const std::string& path) const {
  return std::string(cert_file_.empty() ? "http" : "https") + "://127.0.0.1:" + std::to_string(port_) + path;
}

int webhook_receiver::failed_handshakes() const {
  std::lock_guard lock(mutex_);
  return failed_handshakes_;
}

std::vector<received_request> webhook_receiver::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

void webhook_receiver::serve(int fd) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io, asio::ip::tcp::v4(), fd);
  beast::error_code ec;
  if (cert_file_.empty()) {
    exchange(socket);
  } else {
    asio::ssl::context tls(asio::ssl::context::tls_server);
    tls.use_certificate_chain_file(cert_file_);
    tls.use_private_key_file(key_file_, asio::ssl::context::pem);
    asio::ssl::stream<asio::ip::tcp::socket&> stream(socket, tls);
    stream.handshake(asio::ssl::stream_base::server, ec);
    if (ec) {
      std::lock_guard lock(mutex_);
      ++failed_handshakes_;
    } else {
      exchange(stream);
    }
  }
  socket.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  std::lock_guard lock(mutex_);
  open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd), open_fds_.end());
}

template <typename Stream>
void webhook_receiver::exchange(Stream& stream) {
  beast::flat_buffer buffer;
  http::request<http::string_body> request;
  beast::error_code ec;
  http::read(stream, buffer, request, ec);
  if (ec) return;
  received_request r;
  r.target = std::string(request.target());
  for (const auto& field : request) {
    std::string name(field.name_string());
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    r.headers[name] = std::string(field.value());
  }
  r.body = request.body();
  int n = 0;
  {
    std::lock_guard lock(mutex_);
    n = ++count_;
  }
  r.answered = answer_(n);
  {
    std::lock_guard lock(mutex_);
    requests_.push_back(r);
  }
  if (r.answered == 0) {
    // Held: no answer until the receiver goes away (the sender gives up at its deadline).
    std::unique_lock lock(mutex_);
    released_.wait(lock, [this] { return stopping_; });
    return;
  }
  http::response<http::string_body> response(static_cast<http::status>(r.answered), 11);
  response.set(http::field::content_type, "text/plain");
  if (r.answered != 204 && r.answered != 304) response.body() = "ok";
  response.keep_alive(false);
  response.prepare_payload();
  http::write(stream, response, ec);
}

}  // namespace events_test
