#pragma once

// Test helpers that talk to real Redis servers: a private redis-server process the test can kill,
// pause and restart, and a minimal synchronous client for setup commands (TIME, SCRIPT FLUSH).

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace ratelimit_test {

// The shared test Redis: WALLET_REDIS_URL, or the test command's default port.
std::string shared_redis_url();

// A TCP port on 127.0.0.1 that nothing listens on right now.
int free_port();

// A redis-server child process on 127.0.0.1:port, without persistence.
class redis_process {
 public:
  explicit redis_process(int port);
  ~redis_process();
  redis_process(const redis_process&) = delete;
  redis_process& operator=(const redis_process&) = delete;

  void start();   // returns once it answers PING (or fails the test after 5 s)
  void kill();    // SIGKILL and reap: the port closes at once
  void pause();   // SIGSTOP: connections stay open but nothing answers
  void resume();  // SIGCONT
  std::string url() const;
  int port() const { return port_; }

 private:
  int port_;
  pid_t pid_ = -1;
};

// One synchronous command against `url`; returns the reply as text ("" for nil), or throws
// std::runtime_error on a connection or error reply.
std::string redis_command(const std::string& url, const std::string& command);

// Redis's clock in milliseconds since the epoch (the clock the limiter's scripts use).
std::int64_t redis_time_ms(const std::string& url);

// Sleeps until at least `margin` is left in the current fixed window of `window_ms` by Redis's
// clock, so a test that must fit in one fixed window does.
void wait_for_window_room(const std::string& url, std::int64_t window_ms,
                          std::chrono::milliseconds margin);

// A principal id no earlier run of the tests used.
std::int64_t unique_principal();

}  // namespace ratelimit_test
