// A batch of transfers (POST /v1/transfers/batch, docs/money-flows.md): payday for an employer.
//
// The batch runs in the single flight of its Idempotency-Key. Its stored answer, when there is one,
// is the answer. Otherwise every account it names is resolved (a payer the caller does not own, or
// an account that does not exist, refuses the whole batch with 404 naming the item), each item is
// built like a single payment (its payee's fee leg to a fee_revenue shard of its writer, priced by
// the writer), and each payer's items go to that payer's actor as ONE run: decided in order against
// what the account holds less what is in flight, and reserved. The reserved postings then go to a
// ledger writer as ONE run, committed after the postings queued before it:
//
// - atomic: every payer's items to one writer, in one transaction that commits all of them or none
//   (persistence::commit_atomic); the first item refused, by an actor or by the writer, is named;
// - not atomic: each payer's items to that payer's writer (so they commit in the order its actor
//   decided them), each item committed or refused on its own.
//
// Item 0 is a journal transaction with the batch's own key, item i > 0 with the key
// "batch/<i>/<batch key>", each with the request hash "<batch hash>/<i>", so a batch run again (a replay, or a retry after the server stopped) never
// posts a committed item twice: its committed items replay their receipts. A batch whose every item
// committed is therefore answered again from the journal alone, byte for byte; only an answer that
// refuses an item is stored (migration 013) before it is given, since a refusal leaves no journal
// row and might not be repeated (the payer may have money now). An item whose outcome is unknown,
// or a bound that was hit, makes the answer 503: the items that did commit replay when the batch is
// retried with the same key.
//
// An item its payer's actor refuses for the account's state (too little money, not active) is looked
// up once more before it is answered: an earlier attempt of the batch may have committed it after
// the first lookup, and that commit is what left the account short. A single payment's refusal is
// settled the same way (money_flows::settle).

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <caf/send.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <unordered_map>

#include "actors/account_cache.hpp"
#include "actors/money_flows.hpp"
#include "actors/outcomes.hpp"
#include "actors/runs.hpp"
#include "actors/service_core.hpp"
#include "actors/uuid.hpp"
#include "base/assert.hpp"
#include "ledger/flows.hpp"
#include "ledger/receipt.hpp"
#include "ledger/types.hpp"
#include "persistence/transfer_batches.hpp"

namespace actors {

namespace {

// Refusals that are an item's own answer (422; 404 for an account that vanished; 400 for amounts
// the ledger writer cannot apply, such as a balance beyond 64 bits); any other outcome is the
// server's (a bound, the database) and makes the whole batch 503.
bool is_item_refusal(ledger::error_code code) {
  switch (code) {
    case ledger::error_code::invalid_request:
    case ledger::error_code::insufficient_funds:
    case ledger::error_code::account_inactive:
    case ledger::error_code::currency_mismatch:
    case ledger::error_code::same_account:
    case ledger::error_code::idempotency_key_reused:
    case ledger::error_code::not_found: return true;
    default: return false;
  }
}

// Refusals an actor makes from what it knows of its account, which an earlier attempt's commit of
// the same item can explain.
bool may_hide_a_commit(ledger::error_code code) {
  return code == ledger::error_code::insufficient_funds || code == ledger::error_code::account_inactive;
}

std::string item_field(std::size_t i, const char* field) { return "transfers[" + std::to_string(i) + "]." + field; }

money_result whole_batch(money_result r, std::size_t index) {
  r.detail = "transfers[" + std::to_string(index) + "]: " + r.detail;
  r.item_index = index;
  return r;
}

}  // namespace

class transfer_batch_flow : public std::enable_shared_from_this<transfer_batch_flow> {
 public:
  using finish_fn = money_flows::finish_fn;

  ~transfer_batch_flow() {
    // Transfers counted at a writer and never handed to it in a run (refused by their actor, or
    // the batch ended early) leave its count with the flow.
    for (const auto& [writer, count] : claimed_) runtime_->writer_gauges[writer]->run_postings_queued -= count;
  }

  transfer_batch_flow(money_flows& flows, transfer_batch_command command, finish_fn finish)
      : flows_(flows), core_(flows.core_), command_(std::move(command)), finish_(std::move(finish)) {
    const auto n = command_.items.size();
    keys_.reserve(n);
    // Item 0 takes the batch's key itself, so that the key is taken for every request of the
    // principal's: a single request under it finds item 0 (another request: 422), and a batch
    // under a key a single request used finds that request as its item 0.
    keys_.push_back(command_.idempotency_key);
    for (std::size_t i = 1; i < n; ++i) {
      keys_.push_back(std::string(ledger::k_batch_item_key_prefix) + std::to_string(i) + "/" + command_.item_key_base);
    }
    results_.resize(n);
    fences_.resize(n);
    settled_.assign(n, 0);
    recheck_.assign(n, 0);
  }

  // 1. The stored answer, or the items that committed already.
  void start() {
    auto self = shared_from_this();
    core_.readers->read<persistence::batch_lookup>(
        [self](pqxx::connection& conn) {
          auto keys = self->keys_;
          keys.push_back(self->legacy_key0());
          return persistence::find_transfer_batch(conn, self->command_.principal, self->command_.idempotency_key, keys);
        },
        [self](query_result<persistence::batch_lookup> r) {
          if (r.outcome != ledger::error_code::ok) return self->finish_(database_unavailable(r.outcome));
          if (r.value.batch) return self->replay(*r.value.batch);
          take_legacy_item0(r.value.items);
          // A hold under the key: another request's. (Items an earlier attempt committed first are
          // this batch's, and are answered below.)
          if (r.value.key_held_by_a_hold && std::none_of(r.value.items.begin(), r.value.items.end(),
                                                         [](const auto& item) { return item.has_value(); })) {
            return self->finish_(refusal(ledger::error_code::idempotency_key_reused,
                                         "this Idempotency-Key was already used for a hold"));
          }
          for (std::size_t i = 0; i < r.value.items.size(); ++i) {
            if (!r.value.items[i]) continue;
            // An item of another batch under this key: the key was used for a different batch.
            if (r.value.items[i]->request_hash != self->item_hash(i)) return self->finish_(key_reused());
            auto& item = self->results_[i];
            item.status = r.value.items[i]->status;
            item.body = r.value.items[i]->body;
            self->settled_[i] = true;
            ++self->found_;
          }
          self->replayed_ = self->found_ == self->results_.size();
          self->resolve_accounts();
        });
  }

 private:
  std::string item_hash(std::size_t i) const { return command_.request_hash + "/" + std::to_string(i); }

  // Batches committed before item 0 took the batch's key keep it under "batch/0/<key>": every
  // lookup reads that key too, last, so that such a batch retried now never posts item 0 twice.
  std::string legacy_key0() const { return "batch/0/" + command_.item_key_base; }

  // The lookup's last row (legacy_key0) as item 0's, when item 0 was not found under its key.
  static void take_legacy_item0(std::vector<std::optional<persistence::stored_response>>& items) {
    if (items.empty()) return;
    auto legacy = std::move(items.back());
    items.pop_back();
    if (legacy && !items.empty() && !items[0]) items[0] = std::move(legacy);
  }

  static money_result key_reused() {
    return refusal(ledger::error_code::idempotency_key_reused,
                   "this Idempotency-Key was already used for a different batch");
  }

  void replay(const persistence::stored_batch& stored) {
    if (stored.request_hash != command_.request_hash) return finish_(key_reused());
    money_result r;
    r.replayed = true;
    r.status = stored.status;
    r.body = stored.body;
    finish_(std::move(r));
  }

  // 2. The facts of every account the unsettled items name (a cache hit after first use).
  void resolve_accounts() {
    std::set<ledger::account_id> ids;
    for (std::size_t i = 0; i < command_.items.size(); ++i) {
      if (settled_[i] != 0) continue;
      ids.insert(command_.items[i].from);
      ids.insert(command_.items[i].to);
    }
    if (ids.empty()) return answer();
    pending_ = ids.size();
    auto self = shared_from_this();
    for (auto id : ids) {
      flows_.accounts_.facts(id, [self, id](ledger::error_code code, std::optional<account_facts> facts) {
        bool last = false;
        {
          std::lock_guard lock(self->mutex_);
          if (code != ledger::error_code::ok) self->failure_ = code;
          if (facts) self->facts_[id] = std::move(*facts);
          last = --self->pending_ == 0;
        }
        if (last) self->check_accounts();
      });
    }
  }

  // 3. Every payer the caller's own user account, every payee a user account: else 404, naming the
  // first item at fault.
  void check_accounts() {
    if (failure_ != ledger::error_code::ok) return finish_(database_unavailable(failure_));
    for (std::size_t i = 0; i < command_.items.size(); ++i) {
      if (settled_[i] != 0) continue;
      const auto& item = command_.items[i];
      auto payer = facts_.find(item.from);
      if (payer == facts_.end() || payer->second.kind != ledger::account_kind::user ||
          payer->second.owner_id != command_.principal) {
        return finish_(whole_batch(
            refusal(ledger::error_code::not_found,
                    "account " + std::to_string(item.from) + " (" + item_field(i, "fromAccountId") + ") was not found"),
            i));
      }
      auto payee = facts_.find(item.to);
      if (payee == facts_.end() || payee->second.kind != ledger::account_kind::user) {
        return finish_(whole_batch(
            refusal(ledger::error_code::not_found,
                    "account " + std::to_string(item.to) + " (" + item_field(i, "toAccountId") + ") was not found"),
            i));
      }
    }
    if (command_.atomic) atomic_writer_ = writer_for(first_payer(), core_.runtime->writers.size());
    resolve_fee_rows();
  }

  ledger::account_id first_payer() const {
    for (std::size_t i = 0; i < command_.items.size(); ++i) {
      if (settled_[i] == 0) return command_.items[i].from;
    }
    return command_.items.front().from;
  }

  std::size_t writer_of(ledger::account_id payer) const {
    return command_.atomic ? atomic_writer_ : writer_for(payer, core_.runtime->writers.size());
  }

  // 4. The fee_revenue shard of each (currency, writer) the items use. Every item names one: the
  // writer prices its fee from the payee's schedule under the lock, and a zero fee makes no entry,
  // so no item is ever refused for a schedule that changed (fees_changed).
  void resolve_fee_rows() {
    std::set<std::pair<std::string, std::size_t>> wanted;
    for (std::size_t i = 0; i < command_.items.size(); ++i) {
      if (settled_[i] != 0) continue;
      const auto& from = command_.items[i].from;
      wanted.emplace(facts_.at(from).currency, writer_of(from));
    }
    pending_ = wanted.size();
    auto self = shared_from_this();
    for (const auto& [currency, writer] : wanted) {
      flows_.fee_revenue_row(
          currency, writer,
          [self, key = std::make_pair(currency, writer)](ledger::error_code code, ledger::account_id row) {
            bool last = false;
            {
              std::lock_guard lock(self->mutex_);
              if (code != ledger::error_code::ok) self->failure_ = code;
              self->fee_rows_[key] = row;
              last = --self->pending_ == 0;
            }
            if (last) self->reserve();
          });
    }
  }

  // 5. Each payer's items, built like single payments, to its actor as one run.
  void reserve() {
    if (failure_ != ledger::error_code::ok) return finish_(database_unavailable(failure_));
    thread_local std::mt19937_64 spread{std::random_device{}()};
    const auto writers = core_.runtime->writers.size();
    std::map<ledger::account_id, std::vector<std::size_t>> by_payer;
    for (std::size_t i = 0; i < command_.items.size(); ++i) {
      if (settled_[i] != 0) continue;
      const auto& item = command_.items[i];
      if (item.from == item.to) {
        if (command_.atomic) {
          return finish_(whole_batch(refusal(ledger::error_code::same_account, "an account cannot pay itself"), i));
        }
        results_[i] = refusal(ledger::error_code::same_account, "an account cannot pay itself");
        settled_[i] = true;
        continue;
      }
      by_payer[item.from].push_back(i);
    }
    if (by_payer.empty()) return answer();
    if (auto busy = claim_writers(by_payer)) return finish_(std::move(*busy));
    runs_.reserve(by_payer.size());
    for (auto& [payer, indices] : by_payer) {
      const auto& payer_facts = facts_.at(payer);
      const auto writer = writer_of(payer);
      const auto fee_row = fee_rows_.at({payer_facts.currency, writer});
      payer_run run;
      run.indices = indices;
      for (auto i : indices) {
        const auto& item = command_.items[i];
        const auto& payee = facts_.at(item.to);
        persistence::posting_request p;
        p.posting = ledger::flows::transfer(
            item.from, account_directory::credit_row(payee, writer, writers, spread(), core_.runtime->ownership.get()),
            payee.id, item.amount, payer_facts.currency,
            ledger::flows::payee_fee{fee_row, payee.fees.value_or(ledger::fee_schedule{})});
        p.transaction_id = make_transaction_id();
        p.principal = command_.principal;
        p.idempotency_key = keys_[i];
        p.request_hash = item_hash(i);
        p.batch_item = true;
        p.metadata_json = json_members({{"payeeId", std::to_string(payee.id)}, {"reference", item.reference}});
        run.postings.push_back(std::move(p));
      }
      runs_.push_back(std::move(run));
    }
    pending_ = runs_.size();
    auto self = shared_from_this();
    for (std::size_t r = 0; r < runs_.size(); ++r) {
      debit_run run;
      run.owner = command_.principal;
      run.postings = std::move(runs_[r].postings);
      run.payer = facts_.at(run.postings.front().posting.debit_account);
      run.stop_at_first_refusal = command_.atomic;
      run.done = [self, r](run_decision d) {
        bool last = false;
        {
          std::lock_guard lock(self->mutex_);
          self->runs_[r].decision = std::move(d);
          last = --self->pending_ == 0;
        }
        if (last) self->decided();
      };
      caf::anon_send(core_.registry_for(run.account()), batch_atom::value, std::move(run));
    }
  }

  // The batch's transfers are counted at the writers that will commit them before anything is
  // reserved (writer.queue_run_postings_max): a writer they would take past its bound answers the
  // batch 503 writer_busy, and nothing stays counted. Counted here, not when the runs are sent, so
  // that batches deciding at the same time all see each other. A writer with no batch queued takes
  // any batch, so that one larger than the bound is not refused for good. The count is the flow's
  // until a run hands it to its writer (hand_over), which takes it off once the run is answered.
  std::optional<money_result> claim_writers(const std::map<ledger::account_id, std::vector<std::size_t>>& by_payer) {
    std::map<std::size_t, std::int64_t> per_writer;
    for (const auto& [payer, indices] : by_payer)
      per_writer[writer_of(payer)] += static_cast<std::int64_t>(indices.size());
    for (const auto& [writer, count] : per_writer) {
      auto& gauges = *runtime_->writer_gauges[writer];
      const auto before = gauges.run_postings_queued.fetch_add(count);
      claimed_[writer] += count;
      if (before > 0 && before + count > runtime_->writer_run_queue_max) {
        for (auto& [w, n] : claimed_) {
          runtime_->writer_gauges[w]->run_postings_queued -= n;
          n = 0;
        }
        return unavailable(ledger::error_code::writer_busy, "the ledger writer has too many batch transfers queued",
                           gauges.drain_seconds(before));
      }
    }
    return std::nullopt;
  }

  // A run of `count` of the claimed transfers goes to `writer`: its count is the writer's now.
  void hand_over(std::size_t writer, std::size_t count) {
    const auto n = static_cast<std::int64_t>(count);
    auto& claimed = claimed_[writer];
    WALLET_ASSERT(claimed >= n, "a batch's run carries no more transfers than it counted at its writer");
    claimed -= n;
  }

  // 6. Every payer's actor has decided: commit what they reserved.
  void decided() {
    if (command_.atomic) return commit_atomic();
    for (auto& run : runs_) {
      auto& d = run.decision;
      posting_run to_commit;
      for (std::size_t k = 0; k < run.indices.size(); ++k) {
        if (d.decided[k].outcome != ledger::error_code::ok) {
          results_[run.indices[k]] = d.decided[k];
          settled_[run.indices[k]] = true;
          recheck_[run.indices[k]] = may_hide_a_commit(d.decided[k].outcome);
          continue;
        }
        run.committed.push_back(k);
        fences_[run.indices[k]] = d.postings[k].fence;
        to_commit.postings.push_back(std::move(d.postings[k]));
      }
      run.to_commit = std::move(to_commit);
    }
    // One writer run per writer: the payers whose debits a writer commits send their items to it
    // together, so a batch of many payers is still one transaction per writer. Taken out first:
    // once the first run is sent, its answer may touch runs_ on another thread.
    std::map<std::size_t, std::pair<std::vector<std::size_t>, posting_run>> by_writer;
    for (std::size_t r = 0; r < runs_.size(); ++r) {
      auto& postings = runs_[r].to_commit.postings;
      if (postings.empty()) continue;
      auto& [members, run] = by_writer[writer_of(postings.front().posting.debit_account)];
      members.push_back(r);
      for (auto& p : postings) run.postings.push_back(std::move(p));
      postings.clear();
    }
    pending_ = by_writer.size();
    if (pending_ == 0) return answer();
    auto self = shared_from_this();
    for (auto& [writer, group] : by_writer) {
      hand_over(writer, group.second.postings.size());
      core_.post_run(writer, std::move(group.second),
                     run_sink{[self, members = group.first](posting_run_outcome outcome) {
                       self->committed(members, std::move(outcome));
                     }});
    }
  }

  // 7 (not atomic). One writer's run committed: each item is answered by what became of it, and
  // each payer's reservation ends with its rows.
  void committed(const std::vector<std::size_t>& members, posting_run_outcome outcome) {
    bool last = false;
    {
      std::lock_guard lock(mutex_);
      std::size_t at = 0;  // the run's postings are the members' in order
      for (const auto r : members) {
        auto& run = runs_[r];
        bool uncertain = false;
        for (const auto k : run.committed) {
          const auto i = run.indices[k];
          results_[i] = to_money_result(outcome.outcomes.at(at++));
          settled_[i] = true;
          if (results_[i].outcome == ledger::error_code::outcome_unknown) uncertain = true;
        }
        run.decision.release.release(rows_of(outcome.rows, command_.items[run.indices.front()].from), uncertain);
      }
      last = --pending_ == 0;
    }
    if (last) answer();
  }

  // 6-7 (atomic). The first refusal of any actor refuses the batch; otherwise one run, all or none.
  void commit_atomic() {
    std::optional<std::size_t> first;
    money_result why;
    for (auto& run : runs_) {
      if (!run.decision.refused_at) continue;
      const auto i = run.indices[*run.decision.refused_at];
      if (!first || i < *first) {
        first = i;
        why = run.decision.decided[*run.decision.refused_at];
      }
    }
    if (first) {
      release_all({}, false);
      if (!may_hide_a_commit(why.outcome)) return finish_(whole_batch(std::move(why), *first));
      // All of an atomic batch commits together: if an earlier attempt committed it, every item
      // shows now, and the batch is answered with them.
      for (std::size_t i = 0; i < recheck_.size(); ++i) recheck_[i] = settled_[i] == 0;
      auto self = shared_from_this();
      return recheck([self, why = std::move(why), at = *first](bool all_found) mutable {
        if (all_found) return self->answer();
        self->finish_(whole_batch(std::move(why), at));
      });
    }
    // All items in batch order, so that the one the writer names is the first failing one.
    std::vector<std::pair<std::size_t, persistence::posting_request>> ordered;
    for (auto& run : runs_) {
      for (std::size_t k = 0; k < run.indices.size(); ++k) {
        ordered.emplace_back(run.indices[k], std::move(run.decision.postings[k]));
      }
    }
    std::sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    posting_run all;
    all.atomic = true;
    std::vector<std::size_t> order;
    for (auto& [i, p] : ordered) {
      order.push_back(i);
      all.postings.push_back(std::move(p));
    }
    auto self = shared_from_this();
    hand_over(atomic_writer_, all.postings.size());
    core_.post_run(atomic_writer_, std::move(all),
                   run_sink{[self, order = std::move(order)](posting_run_outcome outcome) {
                     self->committed_atomic(order, std::move(outcome));
                   }});
  }

  void committed_atomic(const std::vector<std::size_t>& order, posting_run_outcome outcome) {
    if (outcome.refused_at) {
      release_all({}, false);
      auto why = to_money_result(outcome.outcomes.at(*outcome.refused_at));
      return finish_(whole_batch(std::move(why), order.at(*outcome.refused_at)));
    }
    bool uncertain = false;
    for (std::size_t k = 0; k < order.size(); ++k) {
      results_[order[k]] = to_money_result(outcome.outcomes.at(k));
      settled_[order[k]] = true;
      if (results_[order[k]].outcome == ledger::error_code::outcome_unknown) uncertain = true;
    }
    release_all(outcome.rows, uncertain);
    answer();
  }

  void release_all(const std::vector<persistence::row_state>& rows, bool uncertain) {
    for (auto& run : runs_) {
      run.decision.release.release(rows_of(rows, command_.items[run.indices.front()].from), uncertain);
    }
  }

  // The rows of `account` (its main row and its shards) among `rows`.
  static std::vector<persistence::row_state> rows_of(const std::vector<persistence::row_state>& rows,
                                                     ledger::account_id account) {
    std::vector<persistence::row_state> out;
    for (const auto& row : rows) {
      if (row.id == account || row.parent_id == account) out.push_back(row);
    }
    return out;
  }

  // An actor's refusals looked up again (recheck_): an item found committed is answered with its
  // receipt. `then` learns whether every item looked up was found.
  void recheck(std::function<void(bool)> then) {
    std::vector<std::string> keys(keys_.size());
    for (std::size_t i = 0; i < keys_.size(); ++i) {
      if (recheck_[i] != 0) keys[i] = keys_[i];
    }
    keys.push_back(recheck_[0] != 0 ? legacy_key0() : std::string());
    auto self = shared_from_this();
    core_.readers->read<persistence::batch_lookup>(
        [self, keys = std::move(keys)](pqxx::connection& conn) {
          return persistence::find_transfer_batch(conn, self->command_.principal, self->command_.idempotency_key, keys);
        },
        [self, then = std::move(then)](query_result<persistence::batch_lookup> r) {
          if (r.outcome != ledger::error_code::ok) {
            // A refusal that may hide a committed item is not final without the lookup.
            return self->finish_(unavailable(ledger::error_code::outcome_unknown,
                                             "the outcome of this batch could not be confirmed; retry with the same "
                                             "Idempotency-Key: the transfers that committed are not repeated",
                                             ledger::k_retry_after_default_s));
          }
          if (r.value.batch) return self->replay(*r.value.batch);
          take_legacy_item0(r.value.items);
          bool all_found = true;
          for (std::size_t i = 0; i < self->recheck_.size(); ++i) {
            if (self->recheck_[i] == 0) continue;
            self->recheck_[i] = 0;
            const auto& found = r.value.items[i];
            if (!found) {
              all_found = false;
              continue;
            }
            if (found->request_hash != self->item_hash(i)) return self->finish_(key_reused());
            auto& item = self->results_[i];
            item = money_result{};
            item.status = found->status;
            item.body = found->body;
            self->settled_[i] = true;
            ++self->found_;
          }
          // Every item committed before this request: its answer is a replay, as the next one.
          self->replayed_ = self->found_ == self->results_.size();
          then(all_found);
        });
  }

  // 8. Every item answered: the batch's answer, stored before it is given when it refuses an item.
  void answer() {
    if (std::any_of(recheck_.begin(), recheck_.end(), [](char c) { return c != 0; })) {
      auto self = shared_from_this();
      return recheck([self](bool) { self->answer(); });
    }
    for (const auto& r : results_) {
      if (r.outcome == ledger::error_code::ok || is_item_refusal(r.outcome)) continue;
      auto out = r;
      if (out.outcome != ledger::error_code::internal && out.retry_after_s == 0) {
        out.retry_after_s = ledger::k_retry_after_default_s;
      }
      out.detail = "not every transfer of the batch could be decided (" + r.detail +
                   "); retry with the same Idempotency-Key: the transfers that committed are not repeated";
      return finish_(std::move(out));
    }
    // A committed item's receipt is JSON already (the writer's, or the stored one it replays): it is
    // spliced into the answer as it is, not parsed and written again (a batch of 1,000 carries
    // 1,000 receipts).
    std::string body = "{\"results\":[";
    for (std::size_t i = 0; i < results_.size(); ++i) {
      const auto& r = results_[i];
      if (i != 0) body += ',';
      if (r.outcome == ledger::error_code::ok) {
        body += "{\"index\":" + std::to_string(i) + ",\"status\":" + std::to_string(r.status) + ",\"receipt\":";
        body += r.body;
        body += '}';
        continue;
      }
      boost::json::object item;
      item["index"] = i;
      item["status"] = r.outcome == ledger::error_code::not_found         ? 404
                       : r.outcome == ledger::error_code::invalid_request ? 400
                                                                          : 422;
      item["code"] = std::string(ledger::to_string(r.outcome));
      item["detail"] = r.detail;
      body += boost::json::serialize(item);
    }
    body += "]}";
    const bool all_committed = std::all_of(results_.begin(), results_.end(),
                                           [](const money_result& r) { return r.outcome == ledger::error_code::ok; });
    if (all_committed) {
      money_result out;
      out.replayed = replayed_;
      out.status = ledger::receipt_status;
      out.body = std::move(body);
      return finish_(std::move(out));
    }
    persistence::stored_batch answer{command_.request_hash, ledger::receipt_status, std::move(body)};
    // The refusals that a later decision could overturn are stored only while their node still
    // holds the leases they were decided under.
    std::vector<persistence::lease_fence> fences;
    for (std::size_t i = 0; i < results_.size(); ++i) {
      if (fences_[i] && may_hide_a_commit(results_[i].outcome)) fences.push_back(*fences_[i]);
    }
    auto self = shared_from_this();
    core_.readers->read<std::optional<persistence::stored_batch>>(
        [self, answer, fences = std::move(fences)](pqxx::connection& conn) {
          return persistence::store_transfer_batch(conn, self->command_.principal, self->command_.idempotency_key,
                                                   answer, static_cast<int>(self->command_.items.size()), fences);
        },
        [self](query_result<std::optional<persistence::stored_batch>> r) {
          if (r.outcome != ledger::error_code::ok) {
            return self->finish_(unavailable(ledger::error_code::outcome_unknown,
                                             "the batch's answer could not be stored; retry with the same "
                                             "Idempotency-Key: the transfers that committed are not repeated"));
          }
          if (!r.value) {
            return self->finish_(unavailable(ledger::error_code::not_partition_owner,
                                             "this node lost a payer's partition before the batch's answer was "
                                             "stored; retry with the same Idempotency-Key: the transfers that "
                                             "committed are not repeated"));
          }
          if (r.value->request_hash != self->command_.request_hash) return self->finish_(key_reused());
          money_result out;
          out.status = r.value->status;
          out.body = std::move(r.value->body);
          self->finish_(std::move(out));
        });
  }

  struct payer_run {
    std::vector<std::size_t> indices;  // the batch items of this payer, in order
    std::vector<persistence::posting_request> postings;
    run_decision decision;
    std::vector<std::size_t> committed;  // positions in `indices` sent to the writer
    posting_run to_commit;
  };

  money_flows& flows_;
  service_core& core_;
  transfer_batch_command command_;
  finish_fn finish_;
  std::vector<std::string> keys_;
  std::vector<money_result> results_;
  // The lease each item sent to its writer was decided under (cluster mode), for storing refusals.
  std::vector<std::optional<persistence::lease_fence>> fences_;
  std::vector<char> settled_;  // items answered already (not vector<bool>: written from several threads)
  std::vector<char> recheck_;  // items an actor refused that are looked up once more before the answer
  std::mutex mutex_;           // the countdowns and what they collect
  std::size_t pending_ = 0;
  ledger::error_code failure_ = ledger::error_code::ok;
  std::unordered_map<ledger::account_id, account_facts> facts_;
  std::map<std::pair<std::string, std::size_t>, ledger::account_id> fee_rows_;
  std::vector<payer_run> runs_;
  std::size_t atomic_writer_ = 0;
  // Transfers counted at each writer's run_postings_queued and not yet handed to it (claim_writers),
  // and a share of the runtime that holds those counts, so that the destructor never reads one gone.
  std::map<std::size_t, std::int64_t> claimed_;
  std::shared_ptr<account_runtime> runtime_ = core_.runtime;
  bool replayed_ = false;  // every item had committed before: the answer is a replay
  std::size_t found_ = 0;  // items found committed by the lookups (start, recheck)
};

void money_flows::transfer_batch(transfer_batch_command command, finish_fn done) {
  const auto principal = command.principal;
  const auto key = command.idempotency_key;
  const auto hash = command.request_hash;
  in_flight(principal, key, hash, std::move(done), [this, command = std::move(command)](finish_fn finish) mutable {
    std::make_shared<transfer_batch_flow>(*this, std::move(command), std::move(finish))->start();
  });
}

}  // namespace actors
