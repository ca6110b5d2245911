#pragma once

// An invariant check that stays on in every build type. The project's single WALLET_ASSERT macro
// does not exist yet outside this module; once it does, this header should forward to it.

#include <cstdio>
#include <cstdlib>

#define RATELIMIT_INVARIANT(cond, what)                                                      \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: invariant failed: %s (%s)\n", __FILE__, __LINE__, #cond, \
                   what);                                                                    \
      std::abort();                                                                          \
    }                                                                                        \
  } while (false)
