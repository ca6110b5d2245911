#include "http/signature.hpp"

#include "http/crypto.hpp"

namespace api {

std::optional<signature_header> parse_signature_header(std::string_view header) {
  signature_header out;
  bool has_t = false;
  while (!header.empty()) {
    const auto comma = header.find(',');
    auto item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view{} : header.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    const auto name = item.substr(0, eq);
    const auto value = item.substr(eq + 1);
    if (name == "t") {
      if (value.empty() || value.size() > 12 || has_t) return std::nullopt;
      std::int64_t t = 0;
      for (char c : value) {
        if (c < '0' || c > '9') return std::nullopt;
        t = t * 10 + (c - '0');
      }
      out.timestamp = t;
      has_t = true;
    } else if (name == "v1") {
      if (value.size() != 64 || !out.v1.empty()) return std::nullopt;
      for (char c : value) {
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
      }
      out.v1 = std::string(value);
    }
  }
  if (!has_t || out.v1.empty()) return std::nullopt;
  return out;
}

std::string sign(std::string_view secret, std::int64_t timestamp, std::string_view body) {
  const auto t = std::to_string(timestamp);
  std::string payload;
  payload.reserve(t.size() + 1 + body.size());
  payload += t;
  payload += '.';
  payload += body;
  return "t=" + t + ",v1=" + hmac_sha256_hex(secret, payload);
}

bool verify_signature(std::string_view header, std::string_view secret, std::string_view body, std::int64_t now) {
  const auto parsed = parse_signature_header(header);
  if (!parsed || secret.empty()) return false;
  const auto age = now - parsed->timestamp;
  if (age > k_signature_tolerance_s || age < -k_signature_tolerance_s) return false;
  const auto expected = sign(secret, parsed->timestamp, body);
  return constant_time_equal(expected.substr(expected.find(",v1=") + 4), parsed->v1);
}

}  // namespace api
