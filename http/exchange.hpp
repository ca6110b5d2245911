#pragma once

// One HTTP request in flight, as the routes see it: what was asked, and a one-shot way to
// answer that is safe to call from any thread (the answer is posted to the connection's thread).
//
// Threads: the request fields are written once, before the routes see the exchange. The work
// behind a request moves between threads (reader, limiter, actor) but one step at a time, so
// `extra_headers` belongs to whichever step runs; only the answer that wins reads it, on the
// thread that answers. The connection's own deadline may answer concurrently: it never reads
// `extra_headers`, and `principal_id` (logged with every answer) is atomic.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "http/problem.hpp"

namespace api {

struct reply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
};

reply problem_reply(const problem& p, std::string_view request_id);

// What the server has admitted and not finished: requests whose work may still run, and the bytes
// of large bodies they hold (admission.inflight_requests_max and the large-body budget bound them).
// Shared with the slots, so that a slot given back late (by a callback destroyed at shutdown)
// never outlives it.
struct admission_budget {
  std::atomic<std::int64_t> requests{0};
  std::atomic<std::int64_t> large_body_bytes{0};
};

// One admitted request's share of the budget, given back when the exchange that holds it dies:
// when the last callback of the work behind the request has run or been destroyed. An answer
// alone gives nothing back: the deadline's answer leaves the work running (a posting waiting for
// its rows, a check waiting for Redis, a report being read), and a slot freed then would let the
// server admit more than its bound while that work goes on.
class admission_slot {
 public:
  admission_slot() = default;
  admission_slot(std::shared_ptr<admission_budget> budget, std::int64_t body_bytes)
      : budget_(std::move(budget)), body_bytes_(body_bytes) {
    budget_->requests.fetch_add(1);
  }
  admission_slot(admission_slot&& o) noexcept
      : budget_(std::move(o.budget_)), body_bytes_(std::exchange(o.body_bytes_, 0)) {}
  admission_slot& operator=(admission_slot&& o) noexcept {
    if (this != &o) {
      release();
      budget_ = std::move(o.budget_);
      body_bytes_ = std::exchange(o.body_bytes_, 0);
    }
    return *this;
  }
  admission_slot(const admission_slot&) = delete;
  admission_slot& operator=(const admission_slot&) = delete;
  ~admission_slot() { release(); }

 private:
  void release() {
    if (!budget_) return;
    budget_->requests.fetch_sub(1);
    budget_->large_body_bytes.fetch_sub(body_bytes_);
    budget_.reset();
    body_bytes_ = 0;
  }
  std::shared_ptr<admission_budget> budget_;
  std::int64_t body_bytes_ = 0;
};

// Never store in an exchange a callable that holds the exchange itself: the cycle would keep its
// slot (and the request's memory) for good. `respond` and the deadline hold it weakly.
struct exchange {
  // First, so destroyed last: the body and everything else of the request go before the slot.
  admission_slot slot;
  std::string request_id;
  std::string method;
  std::string target;  // path and query, as sent
  std::string path;
  std::string query;
  std::string body;
  std::string authorization;
  std::string idempotency_key;
  bool has_idempotency_key = false;
  std::string content_type;
  std::string wallet_signature;  // a provider event's Wallet-Signature header
  std::string client_address;    // the peer's IP address, for per-address limits
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  // By when (from `started`) it is answered, whatever the work behind it does: its route's
  // deadline, or what a forwarding node left for it. Zero: not known (no forward bound is derived).
  std::chrono::milliseconds deadline{0};
  std::string route = "unmatched";            // the route label for metrics
  std::atomic<std::int64_t> principal_id{0};  // once authenticated
  std::string key_hash;  // the SHA-256 (hex) of its API key, once authenticated (before the route runs)
  std::vector<std::pair<std::string, std::string>> extra_headers;  // e.g. RateLimit, added to the reply
  std::atomic<bool> answered{false};
  // Cluster mode: forwarded here by the node that received it (docs/scaling.md). It is never
  // forwarded again, and its rate limit was counted where it arrived.
  bool forwarded = false;
  // Its route names accounts, and the principal's allowance of lookups of accounts that do not
  // exist was checked before it ran (handler_support::within_lookup_allowance).
  bool lookup_checked = false;

  // Sends the answer with `extra_headers`; only the first answer counts (this or the deadline's).
  std::function<void(reply)> respond;
};

using exchange_ptr = std::shared_ptr<exchange>;

// What a request is read and answered under: the limits of its route (http.body_bytes_max and
// http.request_deadline_ms for all but a few routes).
struct request_limits {
  std::int64_t body_bytes_max = 0;
  std::int64_t deadline_ms = 0;
};

}  // namespace api
