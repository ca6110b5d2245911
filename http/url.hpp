#pragma once

// The pieces of a request that the routes read as text: the path's segments, an id in the path,
// a query parameter, a transaction id and an Idempotency-Key. Pure functions with no I/O, so that
// they can be tested and fuzzed on their own (tests/http/url_tests.cpp, fuzz/url_fuzz.cpp).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace api {

// The non-empty segments of a path after its first character (the leading '/'):
// "/v1//accounts/7/" gives {"v1", "accounts", "7"}. The views point into `path`.
std::vector<std::string_view> split_path(std::string_view path);

// A positive id written as 1 to 19 ASCII digits that fits in int64; nullopt otherwise.
std::optional<std::int64_t> parse_id(std::string_view text);

// The value of the first `name=value` pair of a query string ("a=1&b=2"), taken as sent (no
// percent-decoding); a pair without '=' has the empty value. nullopt when no pair has that name.
std::optional<std::string> query_param(std::string_view query, std::string_view name);

// 8-4-4-4-12 hexadecimal digits (either case) separated by dashes.
bool is_valid_uuid(std::string_view s);
// Whether a Content-Type names the media type `type` (lower case, e.g. "text/csv") in any case,
// with or without parameters (RFC 9110: type, subtype and parameter names are case-insensitive),
// e.g. "Application/JSON; charset=utf-8" names "application/json".
bool has_media_type(std::string_view content_type, std::string_view type);
inline bool is_json_media_type(std::string_view content_type) {
  return has_media_type(content_type, "application/json");
}

// The token of an "Authorization: Bearer <token>" header; the scheme in any case (RFC 9110
// §11.1), one or more spaces before a non-empty token. nullopt otherwise.
std::optional<std::string_view> bearer_token(std::string_view authorization);

// The same UUID as the database writes it (lower case); `s` must be a valid UUID.
std::string canonical_uuid(std::string_view s);

// 1 to 255 printable ASCII characters without spaces (0x21 to 0x7e).
bool is_valid_idempotency_key(std::string_view key);

}  // namespace api
