#include "tests/support/http_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/parse.hpp>
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <optional>
#include <stdexcept>

#include "tests/support/openapi_check.hpp"

namespace test_support {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

boost::json::value response::json() const { return boost::json::parse(body); }

std::string response::header(const std::string& name) const {
  std::string lower = name;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto it = headers.find(lower);
  return it == headers.end() ? std::string() : it->second;
}

struct http_client::impl {
  int port;
  std::chrono::milliseconds timeout;
  asio::io_context ioc;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  void connect() {
    stream.emplace(ioc);
    stream->expires_after(timeout);
    stream->connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
    buffer.clear();
  }
};

http_client::http_client(int port, std::chrono::milliseconds timeout) : impl_(std::make_unique<impl>()) {
  impl_->port = port;
  impl_->timeout = timeout;
}

http_client::~http_client() = default;

void check_against_openapi(const std::string& method, const std::string& target, const response& r) {
  if (!answers_checked_against_openapi()) return;
  const auto& spec = openapi_spec::get();
  const std::string path = target.substr(0, target.find('?'));
  const auto content_type = r.header("content-type");
  header_map headers(r.headers.begin(), r.headers.end());
  const auto path_template = spec.match_template(method, path);
  const auto errors = path_template ? spec.validate(method, *path_template, r.status, content_type, r.body, headers)
                                    : spec.validate_unrouted(r.status, content_type, r.body, headers);
  for (const auto& e : errors) {
    ADD_FAILURE() << method << ' ' << target << " -> " << r.status << " does not match docs/openapi.json: " << e
                  << "\n  body: " << r.body.substr(0, 500);
  }
}

bool answers_checked_against_openapi() {
  static const bool enabled = [] {
    const char* v = std::getenv("WALLET_TEST_OPENAPI_CHECK");
    return v == nullptr || std::string(v) != "0";
  }();
  return enabled;
}

response http_client::request(const std::string& method, const std::string& target, const std::string& body,
                              const std::map<std::string, std::string>& headers) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      if (!impl_->stream) impl_->connect();
      bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
      req.set(bhttp::field::host, "127.0.0.1");
      req.keep_alive(true);
      for (const auto& [k, v] : headers) req.set(k, v);
      req.body() = body;
      req.prepare_payload();
      impl_->stream->expires_after(impl_->timeout);
      bhttp::write(*impl_->stream, req);
      bhttp::response_parser<bhttp::string_body> parser;
      parser.body_limit(64 * 1024 * 1024);
      bhttp::read(*impl_->stream, impl_->buffer, parser);
      auto res = parser.release();
      response out;
      out.status = static_cast<int>(res.result_int());
      for (const auto& field : res) {
        std::string name(field.name_string());
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        out.headers[name] = std::string(field.value());
      }
      out.body = std::move(res.body());
      if (!res.keep_alive()) impl_->stream.reset();
      check_against_openapi(method, target, out);
      return out;
    } catch (const boost::system::system_error& e) {
      // A kept-alive connection the server closed meanwhile: one fresh attempt.
      impl_->stream.reset();
      if (attempt == 1) throw;
    }
  }
  throw std::runtime_error("unreachable");
}

response http_client::get(const std::string& target, const std::string& key) {
  return request("GET", target, {}, {{"Authorization", "Bearer " + key}});
}

response http_client::post(const std::string& target, const std::string& key, const std::string& body,
                           const std::string& idempotency_key) {
  std::map<std::string, std::string> headers{{"Authorization", "Bearer " + key}, {"Content-Type", "application/json"}};
  if (!idempotency_key.empty()) headers["Idempotency-Key"] = idempotency_key;
  return request("POST", target, body, headers);
}

}  // namespace test_support
