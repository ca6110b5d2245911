#pragma once

// The end of a run's load: every transfer whose outcome is unknown (a transport error, a 5xx, or
// no answer by the drain timeout) is replayed with its own Idempotency-Key until the server gives
// a definite answer, so an acknowledgement is never missed and nothing applies twice.

#include "tools/loadgen/driver.hpp"
#include "tools/loadgen/http_client.hpp"
#include "tools/loadgen/options.hpp"
#include "tools/loadgen/report.hpp"
#include "tools/loadgen/verify.hpp"
#include "tools/loadgen/workload.hpp"

#include <iosfwd>
#include <memory>
#include <vector>

namespace loadgen {

// Replays each request whose outcome is unknown with its own Idempotency-Key until the server
// gives a definite answer: a stored 201 is an acknowledgement like any other; a 4xx means it
// never applied. Counts what became of them. `d` only builds the requests again.
unknown_outcomes resolve_unknown(const options& o, http_client& client, driver& d,
                                 const std::vector<std::shared_ptr<operation>>& unknown,
                                 std::vector<committed_transfer>& committed, std::ostream& err);

}  // namespace loadgen
