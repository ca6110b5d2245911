#pragma once

// One request of the load, and the workload that chooses them: payer, payee and amount (or a
// balance read) drawn from a seeded stream, so a seed and a stream number always give the same
// sequence of requests.

#include "tools/loadgen/options.hpp"
#include "tools/loadgen/setup.hpp"

#include <chrono>
#include <cstdint>
#include <random>
#include <string>

namespace loadgen {

struct operation {
  bool transfer = true;    // false: a balance read of `from`
  std::uint32_t from = 0;  // account indexes of setup_data::account_ids()
  std::uint32_t to = 0;
  std::int64_t amount_minor = 0;
  std::string key;  // the Idempotency-Key
  std::chrono::steady_clock::time_point scheduled;
  // When the current attempt was due: `scheduled` for the first, the end of the server's
  // Retry-After for a retry.
  std::chrono::steady_clock::time_point attempt_due;
  int attempts = 0;
  int closed_user = -1;  // closed loop: the virtual user that sends the next request
};

// Chooses payer, payee and amount for each request of a workload, from its own seeded stream.
class workload_generator {
 public:
  // `o` and `setup` must outlive the generator; `stream` keeps the streams of several
  // generators of one run apart (one per I/O thread).
  workload_generator(const options& o, const setup_data& setup, std::uint64_t stream);

  operation next();

 private:
  void pick_pair(operation& op);

  const options& options_;
  std::mt19937_64 rng_;
  std::uint32_t parties_;
  std::uint32_t hub_;
  std::uint32_t employer_;
  double mix_p2p_from_;
  double mix_salary_from_;
  double mix_total_;
  std::uniform_int_distribution<std::uint32_t> party_;
  std::uniform_int_distribution<std::uint32_t> other_party_;
  std::uniform_int_distribution<std::int64_t> amount_;
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
};

}  // namespace loadgen
