#pragma once

// A minimal synchronous Redis client for the limiter tests' setup commands (TIME, SCRIPT FLUSH),
// and the clock and principals those tests need. The Redis processes themselves come from
// tests/support/services.hpp.

#include <chrono>
#include <cstdint>
#include <string>

namespace ratelimit_test {

// One synchronous command against `url`; returns the reply as text ("" for nil), or throws
// std::runtime_error on a connection or error reply.
std::string redis_command(const std::string& url, const std::string& command);

// Redis's clock in milliseconds since the epoch (the clock the limiter's scripts use).
std::int64_t redis_time_ms(const std::string& url);

// Sleeps until at least `margin` is left in the current fixed window of `window_ms` by Redis's
// clock, so a test that must fit in one fixed window does.
void wait_for_window_room(const std::string& url, std::int64_t window_ms, std::chrono::milliseconds margin);

// A principal id no earlier run of the tests used.
std::int64_t unique_principal();

}  // namespace ratelimit_test
