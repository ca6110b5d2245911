#include "http/request.hpp"

#include <boost/beast/http/field.hpp>

#include "base/networks.hpp"
#include "http/crypto.hpp"

namespace api {

namespace bhttp = boost::beast::http;

namespace {

// A client's X-Request-Id is echoed in the X-Request-Id header of the answer, in its problem+json
// body and in every log line of the request, so only 1 to 64 visible ASCII characters are taken:
// nothing empty, no spaces or controls, no bytes that are not valid UTF-8 in a JSON body.
bool usable_request_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

void apply_limits(request_parser& parser, const config::http_settings& settings) {
  apply_header_limit(parser, settings);
  apply_body_limit(parser, settings.body_bytes_max);
}

void apply_header_limit(request_parser& parser, const config::http_settings& settings) {
  parser.header_limit(static_cast<std::uint32_t>(settings.header_bytes_max));
  // Beast compares a Content-Length with the body limit as soon as it reads the header: until the
  // route is known there is none, and apply_body_limit makes that comparison itself.
  parser.body_limit(boost::none);
}

bool apply_body_limit(request_parser& parser, std::int64_t body_bytes_max) {
  const auto limit = static_cast<std::uint64_t>(body_bytes_max);
  parser.body_limit(limit);
  const auto length = parser.is_header_done() ? parser.content_length() : boost::none;
  return !length || *length <= limit;
}

std::size_t read_buffer_bytes_max(const config::http_settings& settings) {
  // The server's first read of a request asks for 4096 bytes, so the buffer must hold at least
  // that; a header (up to header_bytes_max) must fit whole, for Beast to find its end.
  return static_cast<std::size_t>(settings.header_bytes_max) + 4096;
}

const char* fill_exchange(exchange& ex, bhttp::request<bhttp::string_body>& req) {
  const auto client_id = req.find("X-Request-Id");
  ex.request_id = client_id != req.end() && usable_request_id(client_id->value()) ? std::string(client_id->value())
                                                                                  : new_request_id();
  ex.method = std::string(req.method_string());
  ex.target = std::string(req.target());
  const auto q = ex.target.find('?');
  ex.path = ex.target.substr(0, q);
  ex.query = q == std::string::npos ? "" : ex.target.substr(q + 1);
  ex.body = std::move(req.body());
  if (auto it = req.find(bhttp::field::authorization); it != req.end()) ex.authorization = std::string(it->value());
  if (auto it = req.find("Idempotency-Key"); it != req.end()) {
    ex.has_idempotency_key = true;
    ex.idempotency_key = std::string(it->value());
  }
  if (auto it = req.find(bhttp::field::content_type); it != req.end()) ex.content_type = std::string(it->value());
  if (auto it = req.find("Wallet-Signature"); it != req.end()) ex.wallet_signature = std::string(it->value());
  if (req.count(bhttp::field::authorization) > 1) return "Authorization";
  if (ex.has_idempotency_key && req.count("Idempotency-Key") > 1) return "Idempotency-Key";
  if (req.count(bhttp::field::content_type) > 1) return "Content-Type";
  if (!ex.wallet_signature.empty() && req.count("Wallet-Signature") > 1) return "Wallet-Signature";
  return nullptr;
}

std::string forwarded_client(const bhttp::request<bhttp::string_body>& req, const std::string& peer) {
  std::string_view last;
  bool found = false;
  for (auto [it, end] = req.equal_range("X-Forwarded-For"); it != end; ++it) {
    last = it->value();
    found = true;
  }
  if (!found) return peer;
  const auto comma = last.rfind(',');
  if (comma != std::string_view::npos) last.remove_prefix(comma + 1);
  while (!last.empty() && (last.front() == ' ' || last.front() == '\t')) last.remove_prefix(1);
  while (!last.empty() && (last.back() == ' ' || last.back() == '\t')) last.remove_suffix(1);
  auto address = base::canonical_address(last);
  return address ? *address : peer;
}

}  // namespace api
