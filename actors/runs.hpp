#pragma once

// Batches of transfers (POST /v1/transfers/batch, docs/money-flows.md) as they travel between the
// batch flow, the payers' account actors and a ledger writer.
//
//   flow ──(batch_atom, debit_run)──► registry ──► account_actor(payer): decides every item of the
//        ◄──────────── run_decision ───────────── payer in one run, in order, and reserves them
//   flow ──(run_atom, posting_run) via a bridge──► ledger_writer: commits the run (after the
//        ◄──────────── posting_run_outcome ─────── postings queued before it) in one transaction
//   flow ──run_release::release(rows)──► account_actor: the reservation ends, the rows are applied
//
// One employer paying 1,000 salaries is thus one message to its actor and one to its writer, not
// 1,000 round trips. Like messages.hpp, these never leave the process.

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "actors/commands.hpp"
#include "actors/directory.hpp"
#include "persistence/batch.hpp"

namespace actors {

using batch_atom = caf::atom_constant<caf::atom("batch")>;
using run_atom = caf::atom_constant<caf::atom("run")>;
using release_atom = caf::atom_constant<caf::atom("release")>;

// Postings a writer commits together, after the postings queued before them: every one that can
// be (commit_batch), or all or none (commit_atomic).
struct posting_run {
  std::vector<persistence::posting_request> postings;
  bool atomic = false;
};

struct posting_run_outcome {
  std::vector<persistence::posting_outcome> outcomes;  // one per posting, in order
  std::optional<std::size_t> refused_at;               // atomic: nothing committed, this one refused
  std::vector<persistence::row_state> rows;            // every row the run wrote, after COMMIT
};

// Where a run's outcome goes (the batch flow's callback).
struct run_sink {
  std::function<void(posting_run_outcome)> deliver;
};

// Ends a run's reservation in its account actor: release() once the run's outcome is known, with
// the committed rows of the account (or none, and `uncertain` when the outcome is unknown). A
// release dropped uncalled releases on its own when its last copy goes, so no reservation outlives
// its run.
class run_release {
 public:
  using send_fn =
      std::function<void(ledger::amount_minor reserved, std::vector<persistence::row_state> rows, bool uncertain)>;
  run_release() = default;
  run_release(ledger::amount_minor reserved, send_fn send)
      : state_(std::make_shared<state>(reserved, std::move(send))) {}

  void release(std::vector<persistence::row_state> rows, bool uncertain) const {
    if (state_) state_->release(std::move(rows), uncertain);
  }
  explicit operator bool() const { return state_ != nullptr; }

 private:
  struct state {
    state(ledger::amount_minor r, send_fn s) : reserved(r), send(std::move(s)) {}
    state(const state&) = delete;
    state& operator=(const state&) = delete;
    ~state() { release({}, false); }
    void release(std::vector<persistence::row_state> rows, bool uncertain) {
      if (released.exchange(true)) return;
      send(reserved, std::move(rows), uncertain);
    }
    ledger::amount_minor reserved;
    send_fn send;
    std::atomic<bool> released{false};
  };
  std::shared_ptr<state> state_;
};

// What a payer's actor decided for its items of a batch.
struct run_decision {
  // Per posting: ok when reserved (the posting now names the account's shards), else its refusal.
  std::vector<money_result> decided;
  std::vector<persistence::posting_request> postings;
  // Set when `stop_at_first_refusal` stopped the run: nothing of it is reserved.
  std::optional<std::size_t> refused_at;
  run_release release;  // empty when nothing was reserved
};

// The items of a batch that debit one account, in batch order.
struct debit_run {
  ledger::principal_id owner = 0;
  std::vector<persistence::posting_request> postings;
  std::optional<account_facts> payer;
  bool stop_at_first_refusal = false;  // an atomic batch: one refusal refuses the run
  std::function<void(run_decision)> done;

  ledger::account_id account() const { return postings.front().posting.debit_account; }
};

}  // namespace actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actors::posting_run)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actors::posting_run_outcome)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actors::run_sink)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actors::debit_run)
