#pragma once

// The end-of-run verdict. A load test that only measures speed cannot tell a fast server from one
// that loses money, so every run ends by checking the ledger against what the server answered:
//   1. the server's own reconciliation is clean (a run started after the last answer, polled to
//      its end);
//   2. every transfer answered 201 exists in the ledger exactly once (through the API, by
//      POST /v1/transactions/lookup in chunks of up to 1,000 ids, or with a direct query when a
//      database URL is given), and no two answers share a transaction id;
//   3. the closed system holds the same money as before, and each account's balance moved by
//      exactly the transfers that were answered 201.

#include "tools/loadgen/http_client.hpp"
#include "tools/loadgen/options.hpp"
#include "tools/loadgen/setup.hpp"

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace loadgen {

// A transfer the server acknowledged. `from` and `to` index setup_data::account_ids().
struct committed_transfer {
  std::string transaction_id;
  std::uint32_t from = 0;
  std::uint32_t to = 0;
  std::int64_t amount_minor = 0;
};

struct verification {
  bool pass = true;
  std::vector<std::string> failures;
  std::vector<std::string> notes;
  // How long each check took, in seconds, and the lookups the second one had answered (a retried
  // lookup counts once).
  double reconcile_s = 0;
  double transactions_s = 0;
  double balances_s = 0;
  std::int64_t lookup_requests = 0;
  void fail(std::string why) {
    pass = false;
    failures.push_back(std::move(why));
  }
};

// The balance of each account (GET /v1/accounts/{id} as the operator); nothing where it could
// not be read.
std::vector<std::optional<std::int64_t>> read_balances(const options& o, http_client& client,
                                                       const std::vector<std::int64_t>& account_ids);

// Runs the three checks. `unresolved` counts requests whose outcome stayed unknown (no answer,
// 5xx) even after replaying them: their effect cannot be accounted for, which fails the run.
verification verify_run(const options& o, http_client& client, const setup_data& setup,
                        const std::vector<std::optional<std::int64_t>>& balances_before,
                        const std::vector<committed_transfer>& committed, std::int64_t unresolved, std::ostream& log);

}  // namespace loadgen
