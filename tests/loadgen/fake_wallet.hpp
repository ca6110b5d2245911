#pragma once

// An in-process test double of the wallet HTTP API (the parts wallet-loadgen uses), kept in
// memory and served by a small Beast server on 127.0.0.1. It can be told to misbehave the way a
// broken server would, so the load generator's verification can be shown to catch it.

#include <cstdint>
#include <memory>
#include <string>

namespace loadgen_test {

struct fake_behaviour {
  // Answers 201 to the n-th transfer (from 1) without recording it; 0 never.
  std::int64_t lose_transfer_number = 0;
  // Answers 429 with `Retry-After: throttle_retry_after_s` to the first attempt of every n-th
  // transfer key; 0 never.
  std::int64_t throttle_every = 0;
  int throttle_retry_after_s = 0;
  // Reconciliation reports a problem.
  bool reconciliation_broken = false;
  // A transfer whose Idempotency-Key ends in "-<n>" with n % lost_answer_every == 0 (0: none)
  // loses its answer on its first `lost_answer_attempts` attempts: the connection is closed
  // instead of answered, as when a server dies mid-request. With `lost_answer_after_apply` the
  // transfer is applied first (the answer is lost, the money moved), otherwise not at all (the
  // request was lost). Later attempts are answered normally.
  std::int64_t lost_answer_every = 0;
  std::int64_t lost_answer_attempts = 0;
  bool lost_answer_after_apply = true;
  // Instead of closing the connection, answer 503 `outcome_unknown` with `Retry-After: 0`, as
  // the server does when the deadline passes before the request's COMMIT is known.
  bool lost_answer_as_503 = false;
};

class fake_wallet {
 public:
  // Listens on 127.0.0.1:`port`; 0 picks a free port.
  fake_wallet(std::string operator_key, fake_behaviour behaviour, std::uint16_t port = 0);
  ~fake_wallet();
  fake_wallet(const fake_wallet&) = delete;
  fake_wallet& operator=(const fake_wallet&) = delete;

  std::uint16_t port() const;
  std::int64_t transfers_recorded() const;
  std::int64_t transfers_answered() const;
  // Answered POST /v1/transactions/lookup requests, and GET /v1/transactions/{id} requests.
  std::int64_t transaction_lookups() const;
  std::int64_t transaction_reads() const;

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace loadgen_test
