#pragma once

// TCP on 127.0.0.1 for the tests: a free port, a raw connection for bytes no HTTP client would
// send, and a relay whose traffic a test can cut or hold to fake an outage of what is behind it
// (the database, Redis) without touching the service itself.

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace test_support {

// A TCP port on 127.0.0.1 that nothing listens on right now. It comes from bind() to port 0:
// Linux hands out odd ports there and even ones to connect(), so no outgoing connection takes
// the port while a service meant for it is down and restarting.
int free_port();

// One blocking TCP connection to 127.0.0.1:port for hand-written bytes. The constructor throws
// std::runtime_error when nothing accepts the connection.
class raw_connection {
 public:
  explicit raw_connection(int port);
  ~raw_connection();
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;

  // False once the peer closed or reset the connection (the bytes were not all sent).
  bool send(const std::string& bytes);
  // Reads until the peer closes or `timeout` passes; `closed` tells which one happened.
  struct read_result {
    std::string bytes;
    bool closed = false;
    bool reset = false;  // closed by a reset (ECONNRESET) rather than an orderly close
  };
  read_result read_until_closed(std::chrono::milliseconds timeout);
  // Non-blocking: true when the peer has closed (EOF or reset) by now; received bytes are kept.
  bool peer_closed();
  const std::string& received() const { return received_; }

 private:
  int fd_ = -1;
  std::string received_;
};

// A TCP relay 127.0.0.1:listen_port -> 127.0.0.1:target_port on its own thread. cut() closes
// every relayed connection and refuses new ones (the peer sees a dead server). blackhole()
// keeps every connection open and accepts new ones, but forwards nothing in either direction:
// what the peers send waits in the socket buffers, as in a network partition where packets are
// delayed rather than refused. restore() passes traffic again; after a blackhole, what was held
// is delivered then, in order. Stops on destruction.
class tcp_relay {
 public:
  explicit tcp_relay(int target_port);
  ~tcp_relay();
  tcp_relay(const tcp_relay&) = delete;
  tcp_relay& operator=(const tcp_relay&) = delete;

  int port() const { return port_; }
  // Each returns once the relay thread has applied the change.
  void cut();
  void blackhole();
  void restore();

 private:
  enum class mode { pass, cut, blackhole };
  void set_mode(mode m);
  void run();
  int target_port_;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_fds_[2] = {-1, -1};
  std::atomic<bool> stopping_{false};
  std::atomic<mode> mode_{mode::pass};
  std::atomic<int> generation_{0};
  std::thread thread_;
};

}  // namespace test_support
