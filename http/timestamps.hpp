#pragma once

// Times a client sends in a query string (GET /v1/accounts/{id}/balance?asOf=...): an RFC 3339
// date-time, read strictly, as microseconds since the Unix epoch. Pure functions with no I/O, so
// that they can be tested and fuzzed on their own (tests/http/timestamp_tests.cpp).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace api {

// An RFC 3339 date-time ("2026-11-30T01:59:00Z", "2026-11-30T02:59:00.123456+01:00"; 'T' and 'Z'
// in either case) as microseconds since 1970-01-01T00:00:00Z. Years 0001 to 9999; a fraction of 1
// to 9 digits, of which digits past the microsecond are cut off (never rounded up: a time "at or
// before" it stays so); no leap second (:60), no missing offset. nullopt: not such a date-time.
std::optional<std::int64_t> parse_rfc3339_us(std::string_view text);

// A query value with its %XX escapes decoded ('+' stays '+': query strings here are not form
// encoded). nullopt: a '%' not followed by two hex digits.
std::optional<std::string> percent_decode(std::string_view text);

}  // namespace api
