# Every third-party library the wallet server uses, found once, exposed as imported targets.
find_package(Threads REQUIRED)
set(Boost_NO_WARN_NEW_VERSIONS ON)
find_package(Boost 1.81 EXACT REQUIRED COMPONENTS json)
find_package(OpenSSL REQUIRED)
add_library(wallet_boost INTERFACE)
target_link_libraries(wallet_boost INTERFACE Boost::headers Boost::json Threads::Threads)
target_compile_definitions(wallet_boost INTERFACE BOOST_ASIO_NO_DEPRECATED BOOST_BEAST_USE_STD_STRING_VIEW)

# The fuzz build (scripts/fuzz.sh) compiles only ledger/ and http/'s input code: nothing below.
if(WALLET_FUZZ)
  return()
endif()

find_package(PkgConfig REQUIRED)
pkg_check_modules(PQXX REQUIRED IMPORTED_TARGET libpqxx)
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
find_package(spdlog REQUIRED)
find_package(GTest REQUIRED)

# CAF 0.17 ships no CMake config.
find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
find_library(CAF_CORE_LIBRARY caf_core REQUIRED)
find_library(CAF_IO_LIBRARY caf_io REQUIRED)
add_library(caf::core INTERFACE IMPORTED)
target_include_directories(caf::core INTERFACE ${CAF_INCLUDE_DIR})
target_link_libraries(caf::core INTERFACE ${CAF_CORE_LIBRARY} Threads::Threads)
# The middleman (libcaf-io): actor messages between nodes (docs/scaling.md).
add_library(caf::io INTERFACE IMPORTED)
target_link_libraries(caf::io INTERFACE ${CAF_IO_LIBRARY} caf::core)

find_path(TOMLPP_INCLUDE_DIR toml++/toml.h REQUIRED)
find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
add_library(wallet_tomlpp INTERFACE)
target_include_directories(wallet_tomlpp SYSTEM INTERFACE ${TOMLPP_INCLUDE_DIR})
add_library(wallet_cli11 INTERFACE)
target_include_directories(wallet_cli11 SYSTEM INTERFACE ${CLI11_INCLUDE_DIR})

