#pragma once

// The whole of a wallet-loadgen run: setup, the load phases (open loop, closed loop or a search
// for the highest rate within the latency target), replaying requests whose outcome is unknown,
// verification, and the report. main() only parses options and calls run_loadgen().

#include "tools/loadgen/options.hpp"
#include "tools/loadgen/report.hpp"
#include "tools/loadgen/verify.hpp"

#include <iosfwd>
#include <optional>

namespace loadgen {

struct run_outcome {
  int exit_code = 0;  // 0: PASS (or verification skipped); 1: FAIL; 2: could not run
  std::optional<verification> verdict;
  std::int64_t acknowledged = 0;  // as in run_report
  std::int64_t retries_found_committed = 0;
  std::optional<unknown_outcomes> unknown;
  window_stats total;
  std::optional<search_result> search;
  std::optional<spike_result> spike;
};

// Runs against the server named in `o`. The report goes to `out`, progress and problems to `err`.
run_outcome run_loadgen(const options& o, std::ostream& out, std::ostream& err);

}  // namespace loadgen
