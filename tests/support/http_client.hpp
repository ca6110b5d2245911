#pragma once

// A synchronous HTTP/1.1 client for the tests: one keep-alive connection to 127.0.0.1.

#include <boost/json/value.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <string>

namespace test_support {

struct response {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  boost::json::value json() const;
  std::string header(const std::string& name) const;
};

// Every answer a test receives is checked against docs/openapi.json (its status, headers and body
// schema); a mismatch is a test failure where the request was made. WALLET_TEST_OPENAPI_CHECK=0
// turns the check off (to look at a server whose document is not up to date yet).
bool answers_checked_against_openapi();
void check_against_openapi(const std::string& method, const std::string& target, const response& r);

// One keep-alive connection; reconnects when the server closed it. Throws
// boost::system::system_error when the server cannot be reached or does not answer in time.
class http_client {
 public:
  explicit http_client(int port, std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~http_client();
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  response request(const std::string& method, const std::string& target, const std::string& body = {},
                   const std::map<std::string, std::string>& headers = {});
  response get(const std::string& target, const std::string& key);
  response post(const std::string& target, const std::string& key, const std::string& body,
                const std::string& idempotency_key = {});

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace test_support
