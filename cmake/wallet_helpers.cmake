# WALLET_SANITIZE=address builds every target of ours with AddressSanitizer and
# UndefinedBehaviorSanitizer (undefined behaviour stops the process instead of being reported
# and skipped); WALLET_SANITIZE=thread builds with ThreadSanitizer. scripts/sanitize.sh uses
# them in build dirs of their own. Frame pointers keep the reports' stacks whole. The runtimes
# are linked statically: with GCC's shared libasan and libubsan side by side, UBSan ignores
# its log_path and reports only to stderr, where a server child's report would be lost.
set(WALLET_SANITIZE "" CACHE STRING "Sanitizers for every target: empty, address (ASan+UBSan) or thread (TSan)")
set_property(CACHE WALLET_SANITIZE PROPERTY STRINGS "" address thread)
if(WALLET_SANITIZE STREQUAL "address")
  # -Wno-maybe-uninitialized: under -fsanitize=address GCC 12 reports the moves inside libstdc++'s
  # std::regex (which CAF's test DSL includes) as maybe uninitialized; the normal build keeps
  # the warning for our code.
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
    -Wno-maybe-uninitialized)
  add_link_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -static-libasan -static-libubsan)
elseif(WALLET_SANITIZE STREQUAL "thread")
  # -Wno-tsan: Boost.Asio's fenced blocks use std::atomic_thread_fence, which GCC warns TSan does
  # not model. Asio hands handlers between threads under its scheduler's mutex, which TSan does
  # see; the fences only order a handler run inline on the calling thread.
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer -Wno-tsan)
  add_link_options(-fsanitize=thread -static-libtsan)
elseif(NOT WALLET_SANITIZE STREQUAL "")
  message(FATAL_ERROR "WALLET_SANITIZE must be empty, address or thread, not '${WALLET_SANITIZE}'")
endif()
# jemalloc is the allocator of wallet-server and wallet-loadgen (bench/PROFILE.md, twenty-sixth
# part): a request is parsed on an HTTP thread and its parts are freed on the actors' and the
# writer's threads, which glibc's allocator pays for in its slow path on every request. The
# sanitizers bring allocators of their own, so their builds keep glibc's.
option(WALLET_JEMALLOC "link wallet-server and wallet-loadgen with jemalloc (not with a sanitizer)" ON)
add_library(wallet_allocator INTERFACE)
if(WALLET_JEMALLOC AND WALLET_SANITIZE STREQUAL "" AND NOT WALLET_FUZZ)
  find_library(JEMALLOC_LIBRARY jemalloc REQUIRED)
  target_link_libraries(wallet_allocator INTERFACE ${JEMALLOC_LIBRARY})
  set(WALLET_ALLOCATOR "jemalloc")
else()
  set(WALLET_ALLOCATOR "glibc malloc")
endif()
# Sanitized code runs several times slower (ThreadSanitizer the most): a suite's CTest timeout
# grows with it, so that a timeout still means a hang rather than the sanitizer's cost.
if(WALLET_SANITIZE STREQUAL "address")
  set(WALLET_TEST_TIMEOUT_SCALE 3)
elseif(WALLET_SANITIZE STREQUAL "thread")
  set(WALLET_TEST_TIMEOUT_SCALE 6)
else()
  set(WALLET_TEST_TIMEOUT_SCALE 1)
endif()

# Warnings for our own code; third-party headers are included as SYSTEM where we control it.
# GCC 12 at -O3 reports stringop-overflow/-overread inside libstdc++'s char_traits for code that
# is correct (GCC bug 105651 and relatives), so those two are warnings, not errors. Clang (the
# fuzz build) knows neither warning and would refuse the flags under -Werror.
function(wallet_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wno-missing-field-initializers
    "$<$<CXX_COMPILER_ID:GNU>:-Wno-error=stringop-overflow;-Wno-error=stringop-overread;-Wno-error=restrict>")
endfunction()

# wallet_library(name SOURCES ... DEPS ...): one library per module folder.
function(wallet_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} wallet_base)
  wallet_warnings(${name})
endfunction()

# wallet_test(name LABEL label [TIMEOUT seconds] [CAF_DSL] SOURCES ... DEPS ...):
# one test executable, registered with CTest as a single test with a label and a timeout. A
# GoogleTest suite by default; CAF_DSL: a suite written with CAF's own test DSL
# (caf/test/dsl.hpp: deterministic scheduling), which brings its own main.
function(wallet_test name)
  cmake_parse_arguments(ARG "CAF_DSL" "LABEL;TIMEOUT" "SOURCES;DEPS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  math(EXPR ARG_TIMEOUT "${ARG_TIMEOUT} * ${WALLET_TEST_TIMEOUT_SCALE}")
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  wallet_warnings(${name})
  if(ARG_CAF_DSL)
    target_link_libraries(${name} PRIVATE ${ARG_DEPS})
    add_test(NAME ${name} COMMAND ${name})
  else()
    target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
    add_test(NAME ${name} COMMAND ${name} --gtest_color=no)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS ${ARG_LABEL} TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "WALLET_BUILD_DIR=${PROJECT_BINARY_DIR};WALLET_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()
