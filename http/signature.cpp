#include "http/signature.hpp"

#include "base/assert.hpp"
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
      if (value.size() != 64 || out.v1.size() == k_signatures_max) return std::nullopt;
      for (char c : value) {
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
      }
      out.v1.emplace_back(value);
    }
  }
  if (!has_t || out.v1.empty()) return std::nullopt;
  return out;
}

namespace {

std::string signed_payload(const std::string& t, std::string_view body) {
  std::string payload;
  payload.reserve(t.size() + 1 + body.size());
  payload += t;
  payload += '.';
  payload += body;
  return payload;
}

}  // namespace

std::string sign(std::string_view secret, std::int64_t timestamp, std::string_view body) {
  return sign_with_secrets({secret}, timestamp, body);
}

std::string sign_with_secrets(const std::vector<std::string_view>& secrets, std::int64_t timestamp,
                              std::string_view body) {
  WALLET_ASSERT(!secrets.empty() && secrets.size() <= k_signatures_max, "one to four secrets sign");
  const auto t = std::to_string(timestamp);
  const auto payload = signed_payload(t, body);
  std::string out = "t=" + t;
  for (const auto secret : secrets) {
    WALLET_ASSERT(!secret.empty(), "a secret that signs is not empty");
    out += ",v1=";
    out += hmac_sha256_hex(secret, payload);
  }
  return out;
}

bool verify_signature(std::string_view header, std::string_view secret, std::string_view body, std::int64_t now) {
  const auto parsed = parse_signature_header(header);
  if (!parsed || secret.empty()) return false;
  const auto age = now - parsed->timestamp;
  if (age > k_signature_tolerance_s || age < -k_signature_tolerance_s) return false;
  const auto expected = hmac_sha256_hex(secret, signed_payload(std::to_string(parsed->timestamp), body));
  // Every v1 is compared, so the time taken does not say which one matched.
  bool match = false;
  for (const auto& v1 : parsed->v1) match = constant_time_equal(expected, v1) || match;
  return match;
}

}  // namespace api
