#include "actors/accounts.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <optional>
#include <unordered_map>

#include "actors/messages.hpp"
#include "actors/outcomes.hpp"
#include "actors/reader_pool.hpp"
#include "actors/runs.hpp"
#include "actors/uuid.hpp"
#include "base/assert.hpp"

namespace actors {
namespace {

struct waiting_debit {
  debit_request request;
  reply_sink sink;
};

// Kept small on purpose: a server may hold a hundred thousand of these. No std::deque (it
// allocates a block when constructed) and no hash map for what is one row, or a few dozen for
// a hot account.
struct account_actor_state {
  ledger::account_id id = 0;
  bool loaded = false;
  bool loading = false;
  bool missing = false;
  // A reload was asked for while a load ran, which may have read the rows too early for it.
  bool reload_again = false;
  // The next load is a reload: it reads the rows once no writer holds them (account_runtime::load).
  bool reload_after_writers = false;
  // The load running now is such a reload: if it fails, the next load must wait as it would have.
  bool loading_after_writers = false;
  ledger::principal_id owner = 0;  // 0: a system account, owned by nobody
  ledger::account_kind kind = ledger::account_kind::user;
  ledger::account_status status = ledger::account_status::active;
  // The status_version `status` is at (migration 020); -1: not heard of (a new actor, active).
  // A load or an operator's notice changes the status only when it is newer: a load may have
  // read the status before a change that its notice already told, and two changes' notices may
  // arrive in the other order than they committed in.
  std::int64_t status_version = -1;
  std::array<char, 3> currency{};  // ISO 4217 code, not a std::string: 29 bytes less per actor
  // Committed state of the main row (first) and each shard row: (balance, version).
  std::vector<persistence::row_state> rows;
  ledger::amount_minor reserved = 0;
  // What the account's active holds keep (durable, unlike `reserved`), with the held_version it
  // was read at; -1 until a writer's answer, a notice or a load tells it (migration 011).
  ledger::amount_minor held = 0;
  std::int64_t held_version = -1;
  std::int64_t inflight = 0;
  // A row or the held amount changed while debits were in flight (a notice, a load, or an answer
  // that left others in flight: a writer's batch answers each of its postings with the rows as the
  // whole batch left them). The rows may then include debits that `reserved` still counts, until
  // the last debit in flight is answered (refusable_funds).
  bool rows_may_include_reserved = false;
  std::vector<waiting_debit> waiting;
  std::uint64_t received = 0;
  // Cluster mode: the lease epoch of the account's partition this actor's state was learnt under
  // (0: none yet).
  std::int64_t lease_epoch = 0;
  // The service owns the runtime and outlives every actor; a plain pointer keeps each of the
  // behavior's handlers down to one captured pointer.
  account_runtime* rt = nullptr;
  caf::actor registry;
  static inline const char* name = "account_actor";
};

using account_actor = caf::stateful_actor<account_actor_state>;

// Rows start with version -1 when the actor began from the directory's facts: their balance is
// not known until a writer's answer or a load brings it.
bool balances_known(const account_actor_state& st) {
  if (st.held_version < 0) return false;
  return std::all_of(st.rows.begin(), st.rows.end(), [](const auto& r) { return r.version >= 0; });
}

// Starts serving from immutable facts, without a database read: ownership, kind, currency and
// shards are known; balances are checked by the writer under its lock until the first answer (or
// a load) tells them. The status is left as it is: active in a new actor, and in one whose reload
// failed, what its last load or an operator's notice told it (the facts carry no status).
void start_from_facts(account_actor_state& st, const account_facts& facts) {
  st.owner = facts.owner_id.value_or(0);
  st.kind = facts.kind;
  std::copy_n(facts.currency.begin(), std::min<std::size_t>(3, facts.currency.size()), st.currency.begin());
  st.rows.clear();
  st.rows.push_back({st.id, 0, -1, 0});
  st.held = 0;
  st.held_version = -1;
  for (auto shard : facts.shards) st.rows.push_back({shard, 0, -1, st.id});
  st.loaded = true;
}

// Whether this actor may refuse a debit for funds or status before the writer sees it. Not in
// cluster mode: other nodes' writers credit the account (a payment to it, a deposit, a hold that
// expires) and change its status, and their notices reach only their own node's actors, so what
// this actor knows of the balance is a lower bound and its status may be stale. The writer then
// decides both under the account's row lock, as it does for an actor that knows no balance yet.
bool may_refuse_before_writer(const account_actor_state& st) { return st.rt->ownership == nullptr; }

// Whether an actor that started from `facts` reads the account in the background: a hot
// account's, whose shards' balances count towards its funds, and in cluster mode every account's,
// since shards added through another node are not among the facts this node's directory keeps
// (its actors would leave their money out of the debits they send).
bool needs_background_load(const account_actor_state& st, const account_facts& facts) {
  return !facts.shards.empty() || !may_refuse_before_writer(st);
}

ledger::amount_minor committed_total(const account_actor_state& st) {
  ledger::amount_minor total = 0;
  for (const auto& row : st.rows) {
    auto next = ledger::checked_add(total, row.balance);
    WALLET_ASSERT(next.has_value(), "an account's committed total fits in int64");
    total = *next;
  }
  return total;
}

// Money reserved by debits in flight is bounded here, not only by the balance: an actor that
// started from the account's facts knows no balance yet and lets the writer check funds, so
// nothing else would stop its reservations from overflowing (a batch run counts as one debit in
// flight, yet may carry a thousand items of the largest amount). Half of int64 keeps
// `committed - reserved - held` in range; a debit past it is answered 503, like any other debit
// over the account's in-flight bound.
constexpr ledger::amount_minor k_reserved_max = std::numeric_limits<ledger::amount_minor>::max() / 2;

bool reservation_fits(const account_actor_state& st, ledger::amount_minor amount) {
  const auto next = ledger::checked_add(st.reserved, amount);
  return next.has_value() && *next <= k_reserved_max;
}

money_result too_much_in_flight(const writer_gauges& gauges, std::int64_t inflight) {
  return unavailable(ledger::error_code::account_busy, "too much money from this account is in flight",
                     gauges.drain_seconds(inflight));
}

// What the account's holds keep, when `row` (its main row) tells a newer value than known.
void apply_held(account_actor_state& st, ledger::amount_minor held, std::int64_t held_version) {
  if (held_version <= st.held_version) return;
  st.held = held;
  st.held_version = held_version;
}

void learn_status(account_actor_state& st, ledger::account_status status, std::int64_t version) {
  if (version < st.status_version) return;
  st.status = status;
  st.status_version = version;
}

// Whether what the rows or the held amount say now may include debits still in flight: after
// anything but the answer of the last of them changed them (see rows_may_include_reserved).
void note_change_in_flight(account_actor_state& st, bool changed) {
  if (st.inflight == 0) {
    st.rows_may_include_reserved = false;
  } else if (changed) {
    st.rows_may_include_reserved = true;
  }
}

// Merges committed rows by version; true when a row or the held amount changed.
bool apply_rows(account_actor_state& st, const std::vector<persistence::row_state>& rows) {
  bool changed = false;
  for (const auto& row : rows) {
    if (row.id == st.id && row.held_version > st.held_version) {
      apply_held(st, row.held, row.held_version);
      changed = true;
    }
    auto it = std::find_if(st.rows.begin(), st.rows.end(), [&](const auto& r) { return r.id == row.id; });
    if (it == st.rows.end()) {
      // A shard added after this actor loaded: the notice makes it known. And the main row itself
      // while the first load runs: a credit that committed after the load's snapshot is newer than
      // what the load will bring, which the merge by version then leaves alone (debits wait for
      // the load either way).
      if (row.parent_id == st.id || row.id == st.id) {
        st.rows.push_back(row);
        changed = true;
      }
      continue;
    }
    if (row.version > it->version) {
      *it = row;
      changed = true;
    }
  }
  return changed;
}

// What the account can pay as this actor knows it, for refusing a debit before the writer; nullopt
// when this actor refuses none for funds: it knows no balance yet, or in cluster mode
// (may_refuse_before_writer), or the account is hot. A hot account's sweep moves money from a
// shard into its main row in one writer's batch, and a later credit of that shard, committed by
// another writer, may be noticed first: the shard is then known as swept, the main row not yet
// as credited, and their sum is short of what the account holds. While the rows may include
// debits in flight, what those reserve is left out, so that no debit is counted twice: a debit is
// then refused only when it would not fit even if every debit in flight were in the rows already.
// `committed`: committed_total(st), which the caller has summed already.
std::optional<ledger::amount_minor> refusable_funds(const account_actor_state& st, ledger::amount_minor committed) {
  if (!balances_known(st) || !may_refuse_before_writer(st) || st.rows.size() > 1) return std::nullopt;
  const auto held = std::max<ledger::amount_minor>(st.held, 0);
  return committed - held - (st.rows_may_include_reserved ? 0 : st.reserved);
}

void start_load(account_actor* self) {
  auto& st = self->state;
  if (st.loading) return;
  st.loading = true;
  st.loading_after_writers = st.reload_after_writers;
  st.reload_after_writers = false;
  st.rt->load(st.id, caf::actor_cast<caf::actor>(self), st.loading_after_writers);
}

// What the actor believed may be stale (a commit of unknown outcome, another node's lease):
// debits wait until the account is read again. A load already running may have read it before
// that, so it is followed by one more. A reload waits for the writers that hold the rows: a
// connection that broke during COMMIT leaves its transaction to end on its own, and a read before
// that end would show the rows as they were, which the actor would then take for committed: a
// credit it missed makes it refuse debits the account can pay until it is read again.
void reload(account_actor* self) {
  auto& st = self->state;
  st.loaded = false;
  st.reload_after_writers = true;
  if (st.loading) {
    st.reload_again = true;
    return;
  }
  start_load(self);
}

// Cluster mode: only the node that leases the account's partition decides its debits, single or
// in a batch's run, and its writer commits them only while that lease still stands (the fence,
// persistence/batch.cpp). Returns the refusal when this node does not hold the lease; otherwise
// sets the fence the postings carry. `changed_hands`: the partition changed hands since this
// state was learnt, so another node may have debited the account meanwhile; it is read again
// before anything is decided.
std::optional<money_result> check_lease(account_actor_state& st, std::optional<persistence::lease_fence>& fence,
                                        bool& changed_hands) {
  const auto& owned = *st.rt->ownership;
  const auto lease = owned.lease_for(st.id);
  if (!lease) {
    auto r = unavailable(
        ledger::error_code::not_partition_owner,
        "account " + std::to_string(st.id) + " is debited by another node now; retry with the same Idempotency-Key");
    r.partition = owned.partition_of(st.id);
    return r;
  }
  changed_hands = st.lease_epoch != 0 && st.lease_epoch != lease->epoch;
  st.lease_epoch = lease->epoch;
  fence = persistence::lease_fence{lease->partition, lease->epoch, owned.node_id()};
  return std::nullopt;
}

// Decides one debit. Its answer goes straight to the caller's sink, not back through the
// registry: one message hop in, one writer round trip, and the answer leaves from here.
void process(account_actor* self, debit_request& req, const reply_sink& sink) {
  auto& st = self->state;
  account_runtime* rt = st.rt;
  if (st.missing || st.owner == 0 || (req.owner != 0 && st.owner != req.owner) ||
      st.kind != ledger::account_kind::user) {
    sink.deliver(refusal(ledger::error_code::not_found, "account " + std::to_string(st.id) + " was not found"));
    return;
  }
  auto& posting = req.posting;
  // A posting with a shortfall account (a chargeback) takes what the account holds, whatever its
  // status, and is never refused for funds.
  const bool takes_what_is_there = posting.posting.shortfall_account != 0;
  // A claim of the rest of a deposit (or a refund of the rest of a payment) names what was left
  // when its flow read it; the writer takes what is left under the deposit's (the payment's) lock,
  // which may be less (a refund committed meanwhile). It is not refused for funds here, and
  // reserves what it can take, as a taking posting does.
  const bool takes_at_most = posting.rows && posting.rows->takes_the_rest();
  if (st.status != ledger::account_status::active && !takes_what_is_there && may_refuse_before_writer(st)) {
    money_result r = refusal(ledger::error_code::account_inactive, inactive_detail(st.id));
    r.decided_before_writer = true;
    sink.deliver(std::move(r));
    return;
  }
  if (rt->ownership) {
    bool changed_hands = false;
    if (auto refused = check_lease(st, posting.fence, changed_hands)) {
      sink.deliver(std::move(*refused));
      return;
    }
    if (changed_hands) {
      st.waiting.push_back({std::move(req), sink});
      reload(self);
      return;
    }
  }
  const std::size_t writer_index = writer_for(st.id, rt->writers.size());
  auto& gauges = *rt->writer_gauges[writer_index];
  if (st.inflight >= rt->inflight_max) {
    sink.deliver(unavailable(ledger::error_code::account_busy, "too many payments from this account are in flight",
                             gauges.drain_seconds(st.inflight)));
    return;
  }
  if (const auto queued = gauges.queued.load(); queued >= rt->writer_queue_max) {
    sink.deliver(
        unavailable(ledger::error_code::writer_busy, "the ledger writer is saturated", gauges.drain_seconds(queued)));
    return;
  }
  // Active holds keep their money from every debit but their own capture, which releases its hold
  // as it pays (migration 011).
  const ledger::amount_minor releases = posting.posting.releases_held;
  const ledger::amount_minor committed = committed_total(st);
  const ledger::amount_minor available = committed - st.reserved - std::max<ledger::amount_minor>(st.held, 0);
  const ledger::amount_minor amount = posting.posting.amount;
  const bool places_hold = posting.rows && posting.rows->hold &&
                           posting.rows->hold->what == persistence::flow_rows::hold_change::kind::place;
  const auto refusable = refusable_funds(st, committed);
  if (refusable && *refusable + releases < amount && !takes_what_is_there && !takes_at_most) {
    money_result r = places_hold ? refusal(ledger::error_code::hold_exceeds_available,
                                           "the account's available money is less than this hold")
                                 : refusal(ledger::error_code::insufficient_funds,
                                           "the debited account holds too little for this amount");
    r.decided_before_writer = true;
    sink.deliver(std::move(r));
    return;
  }
  // Held until the writer answers: the whole amount, or what a taking posting can take. A capture
  // reserves nothing: its hold keeps more than it pays until the writer's answer releases both.
  const ledger::amount_minor reserve = releases > 0 ? 0
                                       : takes_what_is_there || takes_at_most
                                           ? std::clamp<ledger::amount_minor>(available, 0, amount)
                                           : amount;

  // Every shard known now, including one added after this actor loaded (learnt from a notice).
  posting.posting.debit_shards.clear();
  for (const auto& row : st.rows) {
    if (row.id != st.id) posting.posting.debit_shards.push_back(row.id);
  }
  std::sort(posting.posting.debit_shards.begin(), posting.posting.debit_shards.end());
  if (posting.posting.currency.empty()) posting.posting.currency.assign(st.currency.begin(), st.currency.end());

  if (!reservation_fits(st, reserve)) {
    sink.deliver(too_much_in_flight(gauges, st.inflight));
    return;
  }
  st.reserved += reserve;
  ++st.inflight;
  ++gauges.queued;
  self->request(rt->writers[writer_index], caf::infinite, posting_atom::value, std::move(posting))
      .then(
          [self, sink, reserve](persistence::posting_outcome& outcome) {
            auto& s = self->state;
            const bool changed = apply_rows(s, outcome.rows_after);
            s.reserved -= reserve;
            --s.inflight;
            WALLET_ASSERT(s.reserved >= 0 && s.inflight >= 0, "reservations balance");
            note_change_in_flight(s, changed);
            if (outcome.outcome == ledger::error_code::outcome_unknown ||
                outcome.outcome == ledger::error_code::database_unavailable) {
              // What the database holds is uncertain: reload before deciding more debits.
              reload(self);
            }
            sink.deliver(to_money_result(outcome));
          },
          [self, sink, reserve, &gauges](caf::error& err) {
            // The writer never answered (it stopped with the posting in its mailbox or its batch),
            // so it never took the posting off its queue count either.
            --gauges.queued;
            auto& s = self->state;
            s.reserved -= reserve;
            --s.inflight;
            note_change_in_flight(s, false);
            reload(self);
            spdlog::error("account {}: ledger writer failed: {}", s.id, caf::to_string(err));
            sink.deliver(unavailable(ledger::error_code::outcome_unknown,
                                     "the outcome of this request is unknown; retry with the same Idempotency-Key"));
          });
}

// Decides a batch's items that debit this account (actors/runs.hpp), in order, in one run: each
// is checked like a single debit against what the account holds less what is in flight, including
// the run's own items before it, and reserved. The whole run counts as one debit in flight, and
// its postings go to the writer with the flow's other payers' (the flow sends them), so the run
// ends with its release: the reservation goes, the committed rows come.
void decide_run(account_actor* self, debit_run& run) {
  auto& st = self->state;
  account_runtime* rt = st.rt;
  run_decision d;
  const std::size_t n = run.postings.size();
  auto refuse_all = [&](const money_result& why) {
    d.decided.assign(n, why);
    d.refused_at = 0;
    d.postings = std::move(run.postings);
    run.done(std::move(d));
  };
  if (st.missing || st.owner == 0 || (run.owner != 0 && st.owner != run.owner) ||
      st.kind != ledger::account_kind::user) {
    return refuse_all(refusal(ledger::error_code::not_found, "account " + std::to_string(st.id) + " was not found"));
  }
  if (st.status != ledger::account_status::active && may_refuse_before_writer(st)) {
    return refuse_all(refusal(ledger::error_code::account_inactive, inactive_detail(st.id)));
  }
  std::optional<persistence::lease_fence> fence;
  if (rt->ownership) {
    bool changed_hands = false;
    if (auto refused = check_lease(st, fence, changed_hands)) return refuse_all(*refused);
    if (changed_hands) {
      reload(self);
      return refuse_all(unavailable(ledger::error_code::account_busy, "the account is being reloaded; retry shortly"));
    }
  }
  auto& gauges = *rt->writer_gauges[writer_for(st.id, rt->writers.size())];
  if (st.inflight >= rt->inflight_max) {
    return refuse_all(unavailable(ledger::error_code::account_busy, "too many payments from this account are in flight",
                                  gauges.drain_seconds(st.inflight)));
  }
  // The run's whole amount, before any item is decided: what it may reserve at most.
  ledger::amount_minor run_total = 0;
  for (const auto& item : run.postings) {
    const auto next = ledger::checked_add(run_total, item.posting.amount);
    if (!next || !reservation_fits(st, *next)) return refuse_all(too_much_in_flight(gauges, st.inflight));
    run_total = *next;
  }
  if (const auto queued = gauges.queued.load(); queued >= rt->writer_queue_max) {
    return refuse_all(
        unavailable(ledger::error_code::writer_busy, "the ledger writer is saturated", gauges.drain_seconds(queued)));
  }
  std::vector<ledger::account_id> shards;
  for (const auto& row : st.rows) {
    if (row.id != st.id) shards.push_back(row.id);
  }
  std::sort(shards.begin(), shards.end());
  // As for a single debit: active holds keep their money from a batch's items too.
  const auto refusable = refusable_funds(st, committed_total(st));
  ledger::amount_minor available = refusable.value_or(0);
  ledger::amount_minor reserved = 0;
  d.decided.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto& posting = run.postings[i].posting;
    if (refusable && available < posting.amount) {
      d.decided[i] =
          refusal(ledger::error_code::insufficient_funds, "the debited account holds too little for this amount");
      if (run.stop_at_first_refusal) {
        d.refused_at = i;
        reserved = 0;
        break;
      }
      continue;
    }
    available -= posting.amount;
    reserved += posting.amount;
    posting.debit_shards = shards;
    if (posting.currency.empty()) posting.currency.assign(st.currency.begin(), st.currency.end());
    run.postings[i].fence = fence;
  }
  if (!d.refused_at && reserved > 0) {
    st.reserved += reserved;
    ++st.inflight;
    d.release = run_release(
        reserved, [me = caf::actor_cast<caf::actor>(self)](ledger::amount_minor amount,
                                                           std::vector<persistence::row_state> rows, bool uncertain) {
          caf::anon_send(me, release_atom::value, amount, balance_notice{std::move(rows)}, uncertain);
        });
  }
  d.postings = std::move(run.postings);
  run.done(std::move(d));
}

// An actor whose account does not exist answers what reached it and offers to stop at once:
// it must not outlive the requests that named the account (one created later under that id
// gets a fresh actor that loads it).
void offer_stop_if_missing(account_actor* self) {
  auto& st = self->state;
  if (st.missing && st.inflight == 0 && st.waiting.empty()) {
    self->send(st.registry, idle_atom::value, st.id, st.received);
  }
}

void drain_waiting(account_actor* self) {
  auto& st = self->state;
  if (!st.loaded && !st.missing) return;
  std::vector<waiting_debit> ready;
  ready.swap(st.waiting);
  for (std::size_t i = 0; i < ready.size(); ++i) {
    // A debit that found its partition changed hands made the actor reload (cluster mode): the
    // ones after it wait for that load too, in their order, behind it.
    if (!st.loaded && !st.missing) {
      for (; i < ready.size(); ++i) st.waiting.push_back(std::move(ready[i]));
      break;
    }
    process(self, ready[i].request, ready[i].sink);
  }
  offer_stop_if_missing(self);
}

caf::behavior account_actor_behavior(account_actor* self, ledger::account_id id, caf::actor registry,
                                     account_runtime* rt) {
  self->state.id = id;
  self->state.rt = rt;
  self->state.registry = std::move(registry);
  // Loaded on the first debit, unless that debit brings the account's facts.
  return {
      [self](debit_atom, debit_request& req, reply_sink& sink) {
        auto& st = self->state;
        ++st.received;
        if (!st.loaded && !st.loading && !st.missing && req.payer && req.payer->id == st.id) {
          start_from_facts(st, *req.payer);
          // A hot account's shards may not be written by its first debits: read their balances
          // in the background, off this debit's path.
          if (needs_background_load(st, *req.payer)) start_load(self);
        }
        if (st.loaded || st.missing) {
          process(self, req, sink);
          offer_stop_if_missing(self);
          return;
        }
        // Not (re)loaded yet: wait for the committed state, but only a bounded number.
        if (static_cast<std::int64_t>(st.waiting.size()) + st.inflight >= st.rt->inflight_max) {
          sink.deliver(
              unavailable(ledger::error_code::account_busy, "too many payments from this account are in flight"));
          return;
        }
        st.waiting.push_back({std::move(req), std::move(sink)});
        start_load(self);
      },
      [self](notice_atom, balance_notice& notice) {
        if (!notice.uncertain) return note_change_in_flight(self->state, apply_rows(self->state, notice.rows));
        // A batch of unknown outcome may have credited this account: read it again.
        auto& st = self->state;
        if (!st.missing) reload(self);
      },
      // A batch's items of this account (actors/runs.hpp). The flow sends the account's facts, so
      // an actor that starts here serves at once; one reloading after an unknown outcome answers
      // 503 rather than holding a whole batch in its bounded queue.
      [self](batch_atom, debit_run& run) {
        auto& st = self->state;
        ++st.received;
        if (!st.loaded && !st.loading && !st.missing && run.payer && run.payer->id == st.id) {
          start_from_facts(st, *run.payer);
          if (needs_background_load(st, *run.payer)) start_load(self);
        }
        if (!st.loaded && !st.missing) {
          run_decision d;
          d.decided.assign(run.postings.size(), unavailable(ledger::error_code::account_busy,
                                                            "the account is being reloaded; retry shortly"));
          d.refused_at = 0;
          d.postings = std::move(run.postings);
          run.done(std::move(d));
          return;
        }
        decide_run(self, run);
        offer_stop_if_missing(self);
      },
      [self](release_atom, ledger::amount_minor amount, balance_notice& rows, bool uncertain) {
        auto& st = self->state;
        const bool changed = apply_rows(st, rows.rows);
        st.reserved -= amount;
        --st.inflight;
        WALLET_ASSERT(st.reserved >= 0 && st.inflight >= 0, "reservations balance");
        note_change_in_flight(st, changed);
        if (uncertain) {
          reload(self);
        }
      },
      [self](loaded_atom, account_loaded& result) {
        auto& st = self->state;
        st.loading = false;
        if (st.reload_again && !result.failed) {
          // This load may have read the rows before what made the later reload necessary (a
          // commit of unknown outcome): read them once more; waiting debits wait for that.
          st.reload_again = false;
          start_load(self);
          return;
        }
        st.reload_again = false;
        if (result.failed) {
          // A reload that could not wait for the writers (its lock wait timed out, the database
          // was away) leaves the next load to wait instead: a writer may still hold the rows.
          if (st.loading_after_writers) st.reload_after_writers = true;
          std::vector<waiting_debit> failed;
          failed.swap(st.waiting);
          for (auto& w : failed) {
            w.sink.deliver(unavailable(ledger::error_code::database_unavailable, "the database is unavailable"));
          }
          return;
        }
        if (!result.found) {
          st.missing = true;
        } else {
          // Merge by version: a writer's answer that arrived during the load may be newer.
          const auto& record = result.record;
          st.owner = record.owner_id.value_or(0);
          st.kind = record.kind;
          learn_status(st, record.status, record.status_version);
          std::copy_n(record.currency.begin(), std::min<std::size_t>(3, record.currency.size()), st.currency.begin());
          bool changed = record.held_version > st.held_version;
          apply_held(st, record.held, record.held_version);
          std::vector<persistence::row_state> loaded_rows{{st.id, record.balance, record.version, 0}};
          for (const auto& s : record.shards) loaded_rows.push_back({s.id, s.balance, s.version, st.id});
          for (const auto& row : loaded_rows) {
            auto it = std::find_if(st.rows.begin(), st.rows.end(), [&](const auto& r) { return r.id == row.id; });
            if (it == st.rows.end()) {
              st.rows.push_back(row);
              changed = true;
            } else if (row.version >= it->version) {
              changed = changed || row.version > it->version || row.balance != it->balance;
              *it = row;
            }
          }
          st.rows.shrink_to_fit();
          // A reload while debits are in flight (one's outcome was unknown, others' are not yet
          // answered) may read rows that some of them changed already.
          note_change_in_flight(st, changed);
          st.loaded = true;
        }
        drain_waiting(self);
      },
      // The registry asks when nothing was forwarded for a while; the actor offers to stop if it
      // holds no work. (No timer per actor: a hundred thousand timers cost memory.)
      [self](tick_atom) {
        auto& st = self->state;
        if (st.inflight == 0 && st.waiting.empty()) self->send(st.registry, idle_atom::value, st.id, st.received);
      },
      [self](reserved_atom) -> ledger::amount_minor { return self->state.reserved; },
      // An operator froze or unfroze the account: later debits are decided under the new status.
      [self](status_atom, ledger::account_status status, std::int64_t version) {
        learn_status(self->state, status, version);
      },
      [self](stop_atom) { self->quit(); },
  };
}

struct registry_entry {
  caf::actor actor;
  std::uint64_t forwarded = 0;
  // The actor system's clock (steady time in the server, simulated under the test coordinator).
  caf::actor_clock::time_point last_forward;
};

struct registry_state {
  std::unordered_map<ledger::account_id, registry_entry> live;
  static inline const char* name = "account_registry";
};

using registry_actor = caf::stateful_actor<registry_state>;

caf::behavior account_registry(registry_actor* self, std::shared_ptr<account_runtime> rt) {
  const auto idle = std::chrono::milliseconds(rt->idle_ms);
  const auto scan_every = std::max(std::chrono::milliseconds(10), idle / 2);
  self->delayed_send(self, scan_every, tick_atom::value);
  return {
      [=](debit_atom, debit_request& req, reply_sink& sink) {
        auto& live = self->state.live;
        const auto account = req.account();
        auto it = live.find(account);
        if (it == live.end()) {
          if (live.size() >= rt->live_max_per_shard) {
            sink.deliver(unavailable(ledger::error_code::server_busy, "too many accounts are active; retry shortly"));
            return;
          }
          // Linked: when the registry shard stops, its account actors stop with it.
          auto actor =
              self->spawn<caf::linked>(account_actor_behavior, account, caf::actor_cast<caf::actor>(self), rt.get());
          it = live.emplace(account, registry_entry{actor, 0, {}}).first;
          ++rt->live_actors;
        }
        ++it->second.forwarded;
        it->second.last_forward = self->clock().now();
        self->send(it->second.actor, debit_atom::value, std::move(req), std::move(sink));
      },
      // A batch's items of one account (actors/runs.hpp), forwarded like a debit.
      [=](batch_atom, debit_run& run) {
        auto& live = self->state.live;
        const auto account = run.account();
        auto it = live.find(account);
        if (it == live.end()) {
          if (live.size() >= rt->live_max_per_shard) {
            run_decision d;
            d.decided.assign(run.postings.size(), unavailable(ledger::error_code::server_busy,
                                                              "too many accounts are active; retry shortly"));
            d.refused_at = 0;
            d.postings = std::move(run.postings);
            run.done(std::move(d));
            return;
          }
          auto actor =
              self->spawn<caf::linked>(account_actor_behavior, account, caf::actor_cast<caf::actor>(self), rt.get());
          it = live.emplace(account, registry_entry{actor, 0, {}}).first;
          ++rt->live_actors;
        }
        ++it->second.forwarded;
        it->second.last_forward = self->clock().now();
        self->send(it->second.actor, batch_atom::value, std::move(run));
      },
      // The debits in flight of an account: 0 when it has no live actor.
      [=](reserved_atom, ledger::account_id id) -> caf::result<ledger::amount_minor> {
        auto& live = self->state.live;
        auto it = live.find(id);
        if (it == live.end()) return ledger::amount_minor{0};
        auto promise = self->make_response_promise<ledger::amount_minor>();
        promise.delegate(it->second.actor, reserved_atom::value);
        return promise;
      },
      [=](notice_atom, balance_notice& notice) {
        auto& live = self->state.live;
        std::unordered_map<ledger::account_id, balance_notice> by_account;
        for (const auto& row : notice.rows) {
          const ledger::account_id owner = row.parent_id != 0 ? row.parent_id : row.id;
          if (live.count(owner) == 0) continue;
          auto& n = by_account[owner];
          n.rows.push_back(row);
          n.uncertain = notice.uncertain;
        }
        for (auto& [owner, n] : by_account) self->send(live[owner].actor, notice_atom::value, std::move(n));
      },
      [=](status_atom, ledger::account_id id, ledger::account_status status, std::int64_t version) {
        auto& live = self->state.live;
        if (auto it = live.find(id); it != live.end())
          self->send(it->second.actor, status_atom::value, status, version);
      },
      [=](idle_atom, ledger::account_id id, std::uint64_t received) {
        auto& live = self->state.live;
        auto it = live.find(id);
        // Only when the actor has seen everything forwarded to it can it stop without a
        // command landing in a mailbox nobody reads.
        if (it == live.end() || it->second.forwarded != received) return;
        self->send(it->second.actor, stop_atom::value);
        live.erase(it);
        --rt->live_actors;
      },
      [=](tick_atom) {
        const auto now = self->clock().now();
        for (const auto& [id, entry] : self->state.live) {
          if (now - entry.last_forward >= idle) self->send(entry.actor, tick_atom::value);
        }
        self->delayed_send(self, scan_every, tick_atom::value);
      },
  };
}

}  // namespace

caf::actor spawn_account_registry(caf::actor_system& system, std::shared_ptr<account_runtime> runtime) {
  return system.spawn(account_registry, std::move(runtime));
}

std::function<void(ledger::account_id, caf::actor, bool)> load_from_database(std::shared_ptr<reader_pool> readers) {
  return [readers = std::move(readers)](ledger::account_id id, caf::actor me, bool after_writers) {
    readers->submit({
        [me, id, after_writers](pqxx::connection& conn) -> std::function<void()> {
          account_loaded result;
          if (auto record = after_writers ? persistence::find_account_after_writers(conn, id)
                                          : persistence::find_account(conn, id)) {
            result.found = true;
            result.record = std::move(*record);
          }
          return
              [me, result = std::move(result)]() mutable { caf::anon_send(me, loaded_atom::value, std::move(result)); };
        },
        [me](ledger::error_code, std::string) {
          account_loaded result;
          result.failed = true;
          caf::anon_send(me, loaded_atom::value, std::move(result));
        },
    });
  };
}

}  // namespace actors
