#pragma once

// Payday through POST /v1/transfers/batch (--batch-size N > 0 with --workload payday): closed-loop
// users, each sending batches of N salaries from the hot employer to random salary accounts and
// waiting for the answer, for --duration seconds. Reports salaries committed per second and the
// latency of one batch request (p50, p99, max), and checks that every item of every answered batch
// was answered (201 or 422).

#include "tools/loadgen/http_client.hpp"
#include "tools/loadgen/options.hpp"
#include "tools/loadgen/setup.hpp"

#include <cstdint>
#include <iosfwd>

namespace loadgen {

struct batch_run_result {
  std::int64_t requests = 0;         // batches answered 201
  std::int64_t failed_requests = 0;  // any other answer
  std::int64_t salaries = 0;         // items committed (201 inside a 201 batch)
  std::int64_t refused_items = 0;    // items answered 422
  double wall_s = 0;
  std::int64_t p50_us = 0;
  std::int64_t p99_us = 0;
  std::int64_t max_us = 0;
  int exit_code = 0;  // 0: every batch answered 201 with one result per item
};

batch_run_result run_payday_batches(const options& o, http_client& client, const setup_data& setup, std::ostream& out,
                                    std::ostream& err);

}  // namespace loadgen
