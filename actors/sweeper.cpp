#include "actors/sweeper.hpp"

#include <spdlog/spdlog.h>

#include <vector>

#include "actors/service_core.hpp"
#include "actors/uuid.hpp"
#include "persistence/accounts.hpp"

namespace actors {

sweeper::sweeper(service_core& core, int accounts_per_page) : core_(core), accounts_per_page_(accounts_per_page) {}

sweeper::~sweeper() { stop(); }

void sweeper::start(std::chrono::milliseconds interval) {
  timer_.start("wallet-sweeper", interval, [this] { tick(); });
}

void sweeper::stop() { timer_.stop(); }

void sweeper::sweep_all(std::function<void(query_result<sweep_view>)> done) {
  sweep_from(0, page_result{}, std::move(done));
}

void sweeper::sweep_from(ledger::account_id after, page_result so_far,
                         std::function<void(query_result<sweep_view>)> done) {
  sweep_page(
      after, [](ledger::account_id) {},
      [this, so_far, done = std::move(done)](query_result<page_result> r) mutable {
        if (r.outcome != ledger::error_code::ok)
          return done(query_result<sweep_view>{r.outcome, r.detail, so_far.swept});
        so_far.swept.sweeps += r.value.swept.sweeps;
        so_far.swept.deferred += r.value.swept.deferred;
        so_far.swept.failed += r.value.swept.failed;
        if (r.value.next_after != 0) return sweep_from(r.value.next_after, so_far, std::move(done));
        query_result<sweep_view> all;
        all.value = so_far.swept;
        if (so_far.swept.failed > 0) {
          // Sweeping again is harmless (an emptied shard moves nothing): the caller may simply ask again.
          all.outcome = ledger::error_code::database_unavailable;
          all.detail = std::to_string(so_far.swept.failed) + " sweeps could not be committed (" +
                       std::to_string(so_far.swept.sweeps) + " were); sweep again later";
        }
        done(std::move(all));
      });
}

void sweeper::tick() {
  ++ticks_;
  // The cursor moves once the page is read, not once its sweeps are done: a tick that comes while
  // they are still out reads the next page, not this one again.
  sweep_page(
      resume_after_.load(), [this](ledger::account_id next_after) { resume_after_ = next_after; },
      [](query_result<page_result>) {});
}

void sweeper::sweep_page(ledger::account_id after, std::function<void(ledger::account_id)> read,
                         std::function<void(query_result<page_result>)> done) {
  core_.readers->read<std::vector<persistence::sweep_candidate>>(
      [after, limit = accounts_per_page_](pqxx::connection& conn) {
        return persistence::sweep_candidates(conn, limit, after);
      },
      [this, read, done](query_result<std::vector<persistence::sweep_candidate>> r) {
        if (r.outcome != ledger::error_code::ok) return done(query_result<page_result>{r.outcome, r.detail, {}});
        const ledger::account_id next_after =
            static_cast<int>(r.value.size()) == accounts_per_page_ ? r.value.back().account : 0;
        read(next_after);
        struct progress {
          std::atomic<int> remaining{0};
          std::atomic<int> committed{0};
          std::atomic<int> failed{0};
          int deferred = 0;
          ledger::account_id next_after = 0;
          std::function<void(query_result<page_result>)> done;
        };
        auto p = std::make_shared<progress>();
        p->done = done;
        p->next_after = next_after;
        std::vector<persistence::sweep_candidate> chosen;
        {
          std::lock_guard lock(sweeping_mutex_);
          for (auto& c : r.value) {
            // Cluster mode: a shard is swept by the node that holds the shard's own partition, the
            // node whose writers credit it (account_directory::credit_row), so that no two nodes'
            // writers write one shard row at once (docs/scaling.md).
            if (const auto& owned = core_.runtime->ownership) {
              std::erase_if(c.shards, [&](ledger::account_id shard) { return !owned->lease_for(shard); });
              if (c.shards.empty()) continue;
            }
            const auto& gauges = *core_.runtime->writer_gauges[core_.writer_index(c.account)];
            if (sweeping_.count(c.account) != 0 ||
                gauges.queued.load() + static_cast<std::int64_t>(c.shards.size()) > core_.runtime->writer_queue_max) {
              ++deferred_;
              ++p->deferred;
              continue;
            }
            sweeping_.emplace(c.account, static_cast<int>(c.shards.size()));
            chosen.push_back(std::move(c));
          }
        }
        int total = 0;
        for (const auto& c : chosen) total += static_cast<int>(c.shards.size());
        if (total == 0) {
          query_result<page_result> nothing;
          nothing.value.swept.deferred = p->deferred;
          nothing.value.next_after = next_after;
          return done(std::move(nothing));
        }
        p->remaining = total;
        for (const auto& c : chosen) {
          for (ledger::account_id shard : c.shards) {
            persistence::posting_request request;
            request.posting.type = ledger::transaction_type::sweep;
            request.posting.debit_account = shard;
            request.posting.credit_account = c.account;
            request.posting.credit_parent = c.account;
            request.posting.amount = 0;  // whatever the shard holds under the lock
            request.posting.currency = c.currency;
            request.transaction_id = make_transaction_id();
            request.idempotency_key = "sweep:" + request.transaction_id;
            request.request_hash = "sweep";
            reply_sink sink{[this, p, account = c.account](money_result result) {
              if (result.outcome == ledger::error_code::ok && !result.body.empty()) {
                ++p->committed;
                ++committed_;
              } else if (result.outcome != ledger::error_code::ok) {
                ++p->failed;
                spdlog::warn("a sweep into account {} failed: {}", account, result.detail);
              }
              {
                std::lock_guard lock(sweeping_mutex_);
                if (auto it = sweeping_.find(account); it != sweeping_.end() && --it->second == 0) sweeping_.erase(it);
              }
              if (--p->remaining > 0) return;
              query_result<page_result> page;
              page.value.swept.sweeps = p->committed.load();
              page.value.swept.deferred = p->deferred;
              page.value.swept.failed = p->failed.load();
              page.value.next_after = p->next_after;
              p->done(std::move(page));
            }};
            core_.post(core_.writer_index(c.account), std::move(request), std::move(sink));
          }
        }
      });
}

sweeper_stats sweeper::stats() const { return sweeper_stats{committed_.load(), deferred_.load(), ticks_.load()}; }

}  // namespace actors
