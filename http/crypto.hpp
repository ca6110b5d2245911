#pragma once

// SHA-256 and random tokens (OpenSSL). API keys are only ever stored and compared as hashes.

#include <string>
#include <string_view>

namespace api {

std::string sha256_hex(std::string_view data);
// A new API key: "wk_" followed by 43 URL-safe characters (256 random bits).
std::string new_api_key();
// A short random id for a request: 16 hex digits.
std::string new_request_id();

}  // namespace api
