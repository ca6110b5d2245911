#pragma once

// Every message type exchanged between the wallet's actors, and the atoms that tag them.
//
// These messages never leave the process: commands carry callbacks and shared state handles,
// which cannot be serialized. They are therefore declared with CAF_ALLOW_UNSAFE_MESSAGE_TYPE
// rather than given inspect() overloads; forwarding to another node (docs/design.md §8) will send
// the HTTP-level command, not these.

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "actors/commands.hpp"
#include "actors/directory.hpp"
#include "persistence/accounts.hpp"
#include "persistence/batch.hpp"

namespace actors {

using posting_atom = caf::atom_constant<caf::atom("posting")>;
using flush_atom = caf::atom_constant<caf::atom("flush")>;
using debit_atom = caf::atom_constant<caf::atom("debit")>;
using notice_atom = caf::atom_constant<caf::atom("notice")>;
using loaded_atom = caf::atom_constant<caf::atom("loaded")>;
using idle_atom = caf::atom_constant<caf::atom("idle")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using call_atom = caf::atom_constant<caf::atom("call")>;
using reserved_atom = caf::atom_constant<caf::atom("reserved")>;
using status_atom = caf::atom_constant<caf::atom("status")>;

// A debit of a user account as it reaches that account's actor: the posting its money flow
// prepared (a transfer, a withdrawal, a refund, a chargeback). The actor adds the account's
// shards, checks its status and funds against what it holds, reserves, and hands the posting to
// the account's writer.
struct debit_request {
  // The principal that must own the account; 0 when an operator or a provider acts on it.
  ledger::principal_id owner = 0;
  // posting.posting.debit_account is the account; its amount is what leaves it.
  persistence::posting_request posting;
  // The account's facts when the directory has them: an account actor that starts with them
  // needs no database read before its first debit (the writer checks funds under its lock).
  std::optional<account_facts> payer;

  ledger::account_id account() const { return posting.posting.debit_account; }
};

// The committed state of account rows, from a ledger writer after COMMIT. An `uncertain` notice
// names rows (by id and parent only) that a batch of unknown outcome may have credited: their
// actors read the account again rather than refuse debits from a balance that may be too low.
struct balance_notice {
  std::vector<persistence::row_state> rows;
  bool uncertain = false;
};

// An account actor's load (or reload) result.
struct account_loaded {
  bool found = false;
  bool failed = false;  // the database could not be asked
  persistence::account_record record;
};

// Where a money-moving request wants its answer: a callback that hands it to the HTTP layer.
// Exactly one answer reaches the callback: the first deliver() wins, and a sink dropped unanswered
// (a message lost when an actor stops, e.g. at shutdown) answers "outcome unknown" when its last
// copy is destroyed, so a caller never waits for an answer that cannot come.
class reply_sink {
 public:
  reply_sink() = default;
  explicit reply_sink(std::function<void(money_result)> callback)
      : state_(std::make_shared<state>(std::move(callback))) {}

  void deliver(money_result result) const {
    if (state_) state_->answer(std::move(result));
  }

 private:
  struct state {
    explicit state(std::function<void(money_result)> cb) : callback(std::move(cb)) {}
    state(const state&) = delete;
    state& operator=(const state&) = delete;
    ~state() {
      if (!answered.load()) answer(unanswered());
    }
    void answer(money_result result) {
      if (answered.exchange(true)) return;
      callback(std::move(result));
    }
    static money_result unanswered();
    std::function<void(money_result)> callback;
    std::atomic<bool> answered{false};
  };
  std::shared_ptr<state> state_;
};

// Where the amount of an account's debits in flight is wanted.
struct amount_sink {
  std::function<void(ledger::amount_minor)> deliver;
};

}  // namespace actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actors::amount_sink)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(ledger::account_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actors::transfer_command)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actors::deposit_command)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actors::money_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actors::debit_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actors::balance_notice)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actors::account_loaded)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actors::reply_sink)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(persistence::posting_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(persistence::posting_outcome)
