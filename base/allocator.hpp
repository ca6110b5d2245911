#pragma once

// Which malloc the process runs on, for its startup log: jemalloc (what wallet-server and
// wallet-loadgen link unless built with a sanitizer; cmake/wallet_helpers.cmake) announces itself
// through mallctl, looked up at run time so that an LD_PRELOADed one is named too.

#include <dlfcn.h>

#include <string>

namespace base {

inline std::string allocator_name() {
  using mallctl_fn = int (*)(const char*, void*, std::size_t*, void*, std::size_t);
  if (auto* mallctl = reinterpret_cast<mallctl_fn>(dlsym(RTLD_DEFAULT, "mallctl"))) {
    const char* version = nullptr;
    std::size_t size = sizeof(version);
    if (mallctl("version", static_cast<void*>(&version), &size, nullptr, 0) == 0 && version != nullptr) {
      return std::string("jemalloc ") + version;
    }
    return "jemalloc";
  }
  return "glibc malloc";
}

}  // namespace base
