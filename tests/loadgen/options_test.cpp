#include "tools/loadgen/options.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace {

using namespace loadgen;

// A scenario file sets values by the flags' names, and a flag given on the command line wins over
// the file; the operator key falls back to the server's bootstrap key variable.
TEST(options, scenario_file_then_flags_then_defaults) {
  const std::string path = ::testing::TempDir() + "loadgen_scenario.toml";
  {
    std::ofstream f(path);
    f << "workload = \"payday\"\nrate = 250.5\nspike_multiplier = 8\nretries = true\nduration = 12\n";
  }
  const char* argv[] = {"wallet-loadgen", "--scenario", path.c_str(), "--rate", "400", "--profile", "spike"};
  const auto r = parse_options(7, argv, {{"WALLET_AUTH_BOOTSTRAP_KEY", "boot"}});
  EXPECT_EQ(r.values.workload, workload_kind::payday);
  EXPECT_DOUBLE_EQ(r.values.rate, 400);
  EXPECT_DOUBLE_EQ(r.values.spike_multiplier, 8);
  EXPECT_TRUE(r.values.retries);
  EXPECT_DOUBLE_EQ(r.values.duration_s, 12);
  EXPECT_EQ(r.values.profile, profile_kind::spike);
  EXPECT_EQ(r.values.operator_key, "boot");
  std::remove(path.c_str());
}

// Unknown scenario keys, values out of range and a missing operator key are refused with a message
// naming the problem, instead of running a test nobody asked for.
TEST(options, bad_values_are_refused) {
  options o;
  EXPECT_THROW(apply_scenario("rate_per_sec = 3\n", o), options_error);
  EXPECT_THROW(apply_scenario("rate = -1\n", o), options_error);
  EXPECT_THROW(apply_scenario("workload = \"black-friday\"\n", o), options_error);
  EXPECT_THROW(apply_scenario("retries = 1\n", o), options_error);
  const char* argv[] = {"wallet-loadgen", "--rate", "100"};
  EXPECT_THROW(parse_options(3, argv, {}), options_error);
}

// Payday through the batch endpoint is asked for by --batch-size with the payday workload; with
// another workload it is refused rather than ignored.
TEST(options, batch_size_needs_the_payday_workload) {
  const char* payday[] = {"wallet-loadgen", "--operator-key", "k", "--workload", "payday", "--batch-size", "1000"};
  EXPECT_EQ(parse_options(7, payday, {}).values.batch_size, 1000);
  const char* merchant[] = {"wallet-loadgen", "--operator-key", "k", "--batch-size", "1000"};
  EXPECT_THROW(parse_options(5, merchant, {}), options_error);
}

}  // namespace
