#pragma once

// The Wallet-Signature of a provider event and of a webhook delivery: "t=<unix seconds>,v1=<hex
// HMAC-SHA256(secret, t + "." + body)>", with one v1 per secret that signs (two while a rotated
// secret's predecessor still signs, docs/events.md). Pure functions, so that the check can be
// tested and fuzzed on its own.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace api {

// How far a signature's time may be from now, either way.
inline constexpr std::int64_t k_signature_tolerance_s = 300;

// The most v1 signatures one header may carry.
inline constexpr std::size_t k_signatures_max = 4;

struct signature_header {
  std::int64_t timestamp = 0;
  std::vector<std::string> v1;  // each 64 lower-case hex digits; at least one
};

// The header's parts; nullopt when it is not of that shape (other schemes are ignored; one to
// k_signatures_max v1 are required, and one t).
std::optional<signature_header> parse_signature_header(std::string_view header);

// The header value that signs `body` at `timestamp` with `secret`.
std::string sign(std::string_view secret, std::int64_t timestamp, std::string_view body);
// The same with each of `secrets` (one to k_signatures_max, none empty): one v1 each, in order.
std::string sign_with_secrets(const std::vector<std::string_view>& secrets, std::int64_t timestamp,
                              std::string_view body);

// True when one of the header's v1 signs exactly `body` with `secret`, at a time within the
// tolerance of `now` (unix seconds). Compared in constant time.
bool verify_signature(std::string_view header, std::string_view secret, std::string_view body, std::int64_t now);

}  // namespace api
