#pragma once

// The Wallet-Signature of a provider event: "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." +
// body)>". Pure functions, so that the check can be tested and fuzzed on its own.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace api {

// How far a signature's time may be from now, either way.
inline constexpr std::int64_t k_signature_tolerance_s = 300;

struct signature_header {
  std::int64_t timestamp = 0;
  std::string v1;  // 64 lower-case hex digits
};

// The header's parts; nullopt when it is not of that shape (other schemes are ignored, a v1 is
// required).
std::optional<signature_header> parse_signature_header(std::string_view header);

// The header value that signs `body` at `timestamp` with `secret`.
std::string sign(std::string_view secret, std::int64_t timestamp, std::string_view body);

// True when the header signs exactly `body` with `secret`, at a time within the tolerance of
// `now` (unix seconds). Compared in constant time.
bool verify_signature(std::string_view header, std::string_view secret, std::string_view body, std::int64_t now);

}  // namespace api
