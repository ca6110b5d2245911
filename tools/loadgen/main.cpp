// wallet-loadgen: drives a wallet server through a payday spike and verifies the ledger after.
// Exit codes: 0 PASS (or verification skipped), 1 FAIL, 2 bad options or the run could not start.

#include "tools/loadgen/loadgen.hpp"
#include "tools/loadgen/options.hpp"

#include <iostream>

int main(int argc, char** argv) {
  loadgen::parse_result parsed;
  try {
    parsed = loadgen::parse_options(argc, argv, loadgen::process_environment());
  } catch (const loadgen::options_error& e) {
    std::cerr << "wallet-loadgen: " << e.what() << "\n";
    return 2;
  }
  if (parsed.exit_now) return parsed.exit_code;
  try {
    return loadgen::run_loadgen(parsed.values, std::cout, std::cerr).exit_code;
  } catch (const std::exception& e) {
    // The top of the program: report what went wrong instead of an uncaught-exception abort.
    std::cerr << "wallet-loadgen: " << e.what() << "\n";
    return 2;
  }
}
