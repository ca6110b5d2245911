#pragma once

// The closed system a run moves money in: principals that own accounts, created and funded
// through the public API with the operator key, or read back from a setup file of an earlier run.

#include "tools/loadgen/http_client.hpp"
#include "tools/loadgen/options.hpp"

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace loadgen {

// A principal and the one account it owns. Transfers out of the account use its key.
struct party {
  std::int64_t principal_id = 0;
  std::string api_key;
  std::int64_t account_id = 0;
};

struct setup_data {
  workload_kind workload = workload_kind::hot_merchant;
  std::string currency;
  std::uint64_t seed = 0;
  std::vector<party> parties;     // payers, salary receivers or P2P accounts
  std::optional<party> hub;       // the hot merchant (hot-merchant, mix) or the employer (payday)
  std::optional<party> employer;  // the employer of the mix workload

  // Every account of the closed system: the parties' in order, then the hub's, then the
  // employer's.
  std::vector<std::int64_t> account_ids() const;
  // The party owning account index i of account_ids().
  const party& party_at(std::size_t i) const {
    if (i < parties.size()) return parties[i];
    return i == hub_index() && hub ? *hub : *employer;
  }
  std::size_t hub_index() const { return parties.size(); }
  std::size_t employer_index() const { return parties.size() + (hub ? 1 : 0); }
};

std::string to_json(const setup_data& setup);
// Throws std::runtime_error when the text is not a setup file.
setup_data setup_from_json(const std::string& text);

// Creates principals, accounts and deposits for `o.workload` through the API, `o.setup_concurrency`
// chains at a time. Progress and problems go to `log`. Throws std::runtime_error when the server
// refuses a step (after retrying transient failures).
setup_data create_setup(const options& o, http_client& client, std::ostream& log);

// Reuses `o.setup_file` when it exists and matches the options, otherwise creates a new setup and
// writes it there (when a path is given).
setup_data load_or_create_setup(const options& o, http_client& client, std::ostream& log);

}  // namespace loadgen
