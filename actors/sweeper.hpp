#pragma once

// The sweeper: moves what the credit shards of each hot account hold into its main row, every
// `interval` on a timer thread of its own and on an operator's request (POST /v1/admin/sweeps).
//
// At most one sweep of an account is in flight at a time, and none is sent while the account's
// writer is at its queue bound: when the writer is slow, sweeps wait for the next tick instead of
// piling up in front of payments.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "base/ticker.hpp"
#include "actors/query_result.hpp"
#include "actors/views.hpp"
#include "ledger/types.hpp"

namespace actors {

struct service_core;

struct sweeper_stats {
  std::uint64_t committed = 0;  // sweep transactions committed
  std::uint64_t deferred = 0;   // accounts a tick skipped: a sweep in flight, or the writer at its bound
  std::uint64_t ticks = 0;
};

class sweeper {
 public:
  // `accounts_per_page`: hot accounts read and swept at once (ledger.sweep_accounts_per_page).
  sweeper(service_core& core, int accounts_per_page);
  ~sweeper();
  sweeper(const sweeper&) = delete;
  sweeper& operator=(const sweeper&) = delete;

  void start(std::chrono::milliseconds interval);
  void stop();

  // Sweeps every hot account's shards now, all of them page by page from the first; `done` gets
  // the sweeps committed, the accounts skipped (a sweep of them in flight, or their writer at its
  // bound) and the sweeps that failed. Its outcome is not ok when a page could not be read or a
  // sweep not committed; the value then still says what the pages before did.
  void sweep_all(std::function<void(query_result<sweep_view>)> done);

  sweeper_stats stats() const;

 private:
  // What one page of candidates (accounts_per_page_ hot accounts at most) gave.
  struct page_result {
    sweep_view swept;
    // The last account of a full page (the next page starts after it); 0 after the last page.
    ledger::account_id next_after = 0;
  };
  // Reads the hot accounts after `after` that have money on their shards and sweeps them.
  // `read` gets where the next page starts as soon as this one is read (0: it was the last).
  void sweep_page(ledger::account_id after, std::function<void(ledger::account_id)> read,
                  std::function<void(query_result<page_result>)> done);
  // The operator's sweep from `after` on, `so_far` being what the pages before gave.
  void sweep_from(ledger::account_id after, page_result so_far, std::function<void(query_result<sweep_view>)> done);
  // The timer's sweep: one page, from where the last tick stopped.
  void tick();

  service_core& core_;
  int accounts_per_page_;
  std::atomic<std::uint64_t> committed_{0};
  std::atomic<std::uint64_t> deferred_{0};
  std::atomic<std::uint64_t> ticks_{0};
  // Where the next tick's candidates begin: after the last account of a tick that found as many as
  // it reads, so that accounts past the first page are swept too; 0 once a tick
  // reached the last. (An operator's sweep reads every page itself and leaves this alone.)
  std::atomic<ledger::account_id> resume_after_{0};
  // Hot accounts with a sweep in flight, and how many of its shard postings are still out.
  std::mutex sweeping_mutex_;
  std::unordered_map<ledger::account_id, int> sweeping_;

  base::ticker timer_;  // last: stopped first
};

}  // namespace actors
