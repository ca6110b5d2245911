#pragma once

// Helpers for the HTTP and burst suites that tests/support does not give: a private
// redis-server child the test may stop and start, a raw TCP connection for bytes no HTTP
// client would send, Prometheus text parsing, a one-shot child process, and a TCP relay whose
// traffic the test can cut to fake a database outage without touching the shared PostgreSQL.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace http_test {

// A redis-server child on 127.0.0.1:port, no persistence. The destructor kills it.
class redis_child {
 public:
  explicit redis_child(int port);
  ~redis_child();
  redis_child(const redis_child&) = delete;
  redis_child& operator=(const redis_child&) = delete;

  // Starts it and waits (at most 10 s) until it answers PING; throws otherwise.
  void start();
  // SIGKILL and reap: the port closes at once.
  void stop();
  // SIGSTOP / SIGCONT: connections stay open (new ones even complete their handshake) but
  // nothing answers: a hung Redis rather than a dead one.
  void pause();
  void resume();
  bool running() const { return pid_ > 0; }
  int port() const { return port_; }
  std::string url() const;

 private:
  int port_;
  pid_t pid_ = -1;
};

// True when something on 127.0.0.1:port answers "PING" with "+PONG" within `timeout`.
bool redis_answers(int port, std::chrono::milliseconds timeout = std::chrono::milliseconds(500));

// One blocking TCP connection to 127.0.0.1:port for hand-written bytes.
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
  };
  read_result read_until_closed(std::chrono::milliseconds timeout);
  // Non-blocking: true when the peer has closed (EOF or reset) by now; received bytes are kept.
  bool peer_closed();
  const std::string& received() const { return received_; }

 private:
  int fd_ = -1;
  std::string received_;
};

// The value of one Prometheus series, e.g.
// metric(text, "wallet_http_requests_total{route=\"/healthz\",status=\"200\"}"); nullopt if absent.
std::optional<double> metric(const std::string& text, const std::string& series);

// Runs a program to its end (at most `timeout`, then SIGKILL) with exactly `env`; captures
// stdout and stderr together. exit_code is -1 when it did not exit by itself.
struct run_result {
  int exit_code = -1;
  std::string output;
};
run_result run_program(const std::string& binary, const std::vector<std::string>& args,
                       const std::map<std::string, std::string>& env, std::chrono::milliseconds timeout);

// The current process environment as a map.
std::map<std::string, std::string> current_environment();

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

// Pids of this process's own children whose command name is `name` (from /proc), zombies
// included: a way to reach a wallet-server child that support's server_process does not expose.
std::vector<pid_t> child_pids(const std::string& name);

// SIGTERM to every wallet-server child of this process, then SIGKILL to any that has not exited
// within `grace`; the children are left for their server_process to reap (at once). Returns how
// many needed SIGKILL. For suites that do not test shutdown: a server that hangs on SIGTERM
// must not cost them the server_process destructor's 10 s wait.
int stop_child_servers(std::chrono::milliseconds grace);

// Declared after a test's server_process objects, so that it runs before their destructors.
struct stop_servers_first {
  ~stop_servers_first() { stop_child_servers(std::chrono::seconds(3)); }
};

// Milliseconds since `start`.
inline long long elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace http_test
