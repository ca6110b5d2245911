// A short run of wallet-loadgen against the real server binary of this build, on the services of
// the test command. A missing server binary is a failure, not a reason to skip: the test would
// otherwise pass a build that never runs it.

#include "tools/loadgen/loadgen.hpp"

#include "tests/support/support.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

namespace {

namespace ts = test_support;

// A three-second open-loop hot-merchant run against the real server ends in PASS: every 201 is in
// the ledger once, balances moved exactly, and the server's reconciliation is clean.
TEST(e2e, short_run_against_the_real_server_passes) {
  ASSERT_TRUE(std::filesystem::exists(ts::server_binary()))
      << "no wallet-server binary at " << ts::server_binary()
      << ": build the wallet-server target first (WALLET_BUILD_DIR names the build directory)";
  ts::server_process::options server_options;
  server_options.bootstrap_key = "loadgen-e2e-operator-key-0123456789";
  // The per-user rate limit stays out of the way: the run checks correctness, not throttling.
  server_options.env["WALLET_RATELIMIT_RATE_PER_SECOND"] = "100000";
  server_options.env["WALLET_RATELIMIT_BURST"] = "200000";
  ts::server_process server(server_options);
  ts::http_client c(server.port());
  ASSERT_TRUE(ts::eventually([&] { return c.request("GET", "/readyz").status == 200; }, std::chrono::seconds(30),
                             std::chrono::milliseconds(100)))
      << "the server was not ready (its database and Redis answering) within 30 s:\n"
      << server.log();

  loadgen::options o;
  o.port = server.port();
  o.operator_key = server.operator_key();
  o.workload = loadgen::workload_kind::hot_merchant;
  o.accounts = 50;
  o.hot_shards = 4;
  o.rate = 100;
  o.duration_s = 3;
  o.quiet = true;
  o.retries = true;
  std::ostringstream out, err;
  const auto outcome = loadgen::run_loadgen(o, out, err);
  ASSERT_TRUE(outcome.verdict) << err.str();
  EXPECT_TRUE(outcome.verdict->pass) << out.str() << err.str();
  EXPECT_GT(outcome.total.classes.count("201") ? outcome.total.classes.at("201").count : 0, 0) << out.str();
}

}  // namespace
