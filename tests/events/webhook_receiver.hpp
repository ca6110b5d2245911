#pragma once

// A webhook receiver for the tests: an HTTP server on 127.0.0.1 (Boost.Beast, blocking, a thread
// per connection) that records every request it gets and answers as the test says: a status, or
// nothing at all (it holds the connection open until it is destroyed).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace events_test {

struct received_request {
  std::string target;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  int answered = 0;  // the status answered; 0: none (held)
};

class webhook_receiver {
 public:
  // `answer(n)` decides the status of the n-th request (1-based); 0 holds it without an answer.
  // With `cert_file` and `key_file` (PEM) it speaks https.
  explicit webhook_receiver(std::function<int(int)> answer, std::string cert_file = {}, std::string key_file = {});
  ~webhook_receiver();
  webhook_receiver(const webhook_receiver&) = delete;
  webhook_receiver& operator=(const webhook_receiver&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& path = "/hook") const;
  // TLS handshakes that failed (the client refused the certificate, or sent no TLS).
  int failed_handshakes() const;
  std::vector<received_request> requests() const;

 private:
  void serve(int fd);
  template <typename Stream>
  void exchange(Stream& stream);

  std::function<int(int)> answer_;
  std::string cert_file_;
  std::string key_file_;
  int failed_handshakes_ = 0;
  int port_ = 0;
  int listen_fd_ = -1;
  mutable std::mutex mutex_;
  std::condition_variable released_;
  bool stopping_ = false;
  int count_ = 0;
  std::vector<received_request> requests_;
  std::vector<int> open_fds_;
  std::thread acceptor_;
  std::vector<std::thread> connections_;
};

}  // namespace events_test
