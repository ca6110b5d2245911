#pragma once

// WALLET_ASSERT(cond, message): an invariant check that stays on in every build type.
// A broken money invariant must stop the process loudly rather than continue quietly.

#include <cstdio>
#include <cstdlib>

namespace ledger::detail {
[[noreturn]] inline void assertion_failed(const char* condition, const char* message, const char* file, int line) {
  std::fprintf(stderr, "wallet: assertion failed: %s (%s) at %s:%d\n", condition, message, file, line);
  std::fflush(stderr);
  std::abort();
}
}  // namespace ledger::detail

#define WALLET_ASSERT(cond, message)                                                   \
  do {                                                                                 \
    if (!(cond)) [[unlikely]] {                                                        \
      ::ledger::detail::assertion_failed(#cond, message, __FILE__, __LINE__);          \
    }                                                                                  \
  } while (false)
