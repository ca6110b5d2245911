#pragma once

// WALLET_ASSERT(cond, message): the project's one invariant check, on in every build type. A broken
// money invariant must stop the process loudly rather than continue quietly. Every folder links
// the `wallet_base` library for it.

#include <cstdio>
#include <cstdlib>

namespace base::detail {
[[noreturn]] inline void assertion_failed(const char* condition, const char* message, const char* file, int line) {
  std::fprintf(stderr, "wallet: assertion failed: %s (%s) at %s:%d\n", condition, message, file, line);
  std::fflush(stderr);
  std::abort();
}
}  // namespace base::detail

#define WALLET_ASSERT(cond, message)                                        \
  do {                                                                      \
    if (!(cond)) [[unlikely]] {                                             \
      ::base::detail::assertion_failed(#cond, message, __FILE__, __LINE__); \
    }                                                                       \
  } while (false)
