#pragma once

// Which malloc the process runs on, for its startup log: jemalloc (what wallet-server and
// wallet-loadgen link unless built with a sanitizer; cmake/wallet_helpers.cmake) when its mallctl
// is there and counts an allocation made here on this thread, so that a jemalloc that is loaded
// but not the one malloc calls is not named. Looked up at run time: an LD_PRELOADed one counts too.

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace base {

inline std::string allocator_name() {
  using mallctl_fn = int (*)(const char*, void*, std::size_t*, void*, std::size_t);
  auto* mallctl = reinterpret_cast<mallctl_fn>(dlsym(RTLD_DEFAULT, "mallctl"));
  if (mallctl == nullptr) return "glibc malloc";
  const auto allocated = [&] {
    std::uint64_t bytes = 0;
    std::size_t size = sizeof(bytes);
    return mallctl("thread.allocated", &bytes, &size, nullptr, 0) == 0 ? bytes : 0;
  };
  const std::uint64_t before = allocated();
  void* volatile block = std::malloc(1 << 16);  // volatile: the allocation is not optimized away
  const std::uint64_t after = allocated();
  std::free(block);
  if (after < before + (1 << 16)) return "glibc malloc (jemalloc loaded, not in use)";
  const char* version = nullptr;
  std::size_t size = sizeof(version);
  if (mallctl("version", static_cast<void*>(&version), &size, nullptr, 0) == 0 && version != nullptr) {
    return std::string("jemalloc ") + version;
  }
  return "jemalloc";
}

}  // namespace base
