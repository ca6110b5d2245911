#pragma once

// SHA-256 and random tokens (OpenSSL). API keys are only ever stored and compared as hashes.

#include <string>
#include <string_view>

namespace api {

std::string sha256_hex(std::string_view data);
// A new API key: "wk_" followed by 43 URL-safe characters (256 random bits).
std::string new_api_key();
// What is kept of a key in clear to tell a principal's keys apart: its last four characters
// (24 of its 256 random bits; the other 232 stay unknown).
std::string api_key_hint(std::string_view api_key);
// A provider's signing secret: 32 random bytes, base64url, prefixed "whsec_".
std::string new_signing_secret();
// HMAC-SHA256 of `data` with `key`, as 64 lower-case hex digits.
std::string hmac_sha256_hex(std::string_view key, std::string_view data);
// Equality whose time does not depend on where the two differ (only on their lengths).
bool constant_time_equal(std::string_view a, std::string_view b);
// A short random id for a request: 16 hex digits.
std::string new_request_id();

}  // namespace api
