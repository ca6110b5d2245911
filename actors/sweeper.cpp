#include "actors/sweeper.hpp"

#include <pthread.h>

#include <vector>
#include <spdlog/spdlog.h>

#include "actors/service_core.hpp"
#include "actors/uuid.hpp"
#include "persistence/accounts.hpp"

namespace actors {

sweeper::sweeper(service_core& core) : core_(core) {}

sweeper::~sweeper() { stop(); }

void sweeper::start(std::chrono::milliseconds interval) {
  timer_ = std::thread([this, interval] {
    pthread_setname_np(pthread_self(), "wallet-sweeper");
    std::unique_lock lock(timer_mutex_);
    while (!timer_wake_.wait_for(lock, interval, [this] { return stopping_; })) {
      lock.unlock();
      sweep_all([](query_result<int>) {});
      lock.lock();
    }
  });
}

void sweeper::stop() {
  {
    std::lock_guard lock(timer_mutex_);
    stopping_ = true;
  }
  timer_wake_.notify_all();
  if (timer_.joinable()) timer_.join();
}

void sweeper::sweep_all(std::function<void(query_result<int>)> done) {
  ++ticks_;
  const ledger::account_id after = resume_after_.load();
  core_.readers->read<std::vector<persistence::sweep_candidate>>(
      [after](pqxx::connection& conn) { return persistence::sweep_candidates(conn, k_candidates_max, after); },
      [this, done](query_result<std::vector<persistence::sweep_candidate>> r) {
        if (r.outcome != ledger::error_code::ok) return done(query_result<int>{r.outcome, r.detail, 0});
        resume_after_ = static_cast<int>(r.value.size()) == k_candidates_max ? r.value.back().account : 0;
        struct progress {
          std::atomic<int> remaining{0};
          std::atomic<int> committed{0};
          std::atomic<int> failed{0};
          std::function<void(query_result<int>)> done;
        };
        auto p = std::make_shared<progress>();
        p->done = done;
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
              continue;
            }
            sweeping_.emplace(c.account, static_cast<int>(c.shards.size()));
            chosen.push_back(std::move(c));
          }
        }
        int total = 0;
        for (const auto& c : chosen) total += static_cast<int>(c.shards.size());
        if (total == 0) return done(query_result<int>{});
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
              query_result<int> swept;
              swept.value = p->committed.load();
              if (const int failed = p->failed.load(); failed > 0) {
                // Sweeping again is harmless (an emptied shard moves nothing): the caller may
                // simply ask again.
                swept.outcome = ledger::error_code::database_unavailable;
                swept.detail = std::to_string(failed) + " sweeps could not be committed (" +
                               std::to_string(swept.value) + " were); sweep again later";
              }
              p->done(std::move(swept));
            }};
            core_.post(core_.writer_index(c.account), std::move(request), std::move(sink));
          }
        }
      });
}

sweeper_stats sweeper::stats() const { return sweeper_stats{committed_.load(), deferred_.load(), ticks_.load()}; }

}  // namespace actors
