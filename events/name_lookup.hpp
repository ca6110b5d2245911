#pragma once

// Host name lookups for webhook delivery (docs/events.md, "Webhooks"). The system's resolver
// blocks, and a name whose DNS servers do not answer blocks for as long as the resolver's own
// timeouts and retries take. Asio's resolver runs every lookup of an io_context on one thread, so
// one such name held up every other endpoint's delivery behind it. Here lookups run on a small
// pool of threads of their own, and attempts that need the same name at the same time share one
// lookup: a slow name holds one thread, and the others go on.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace events {

// A host name's addresses in numeric form (as inet_ntop writes them), or why it has none.
struct host_addresses {
  std::vector<std::string> addresses;
  std::string error;  // empty when the name resolved
};

// Looks a name up; blocks. The default is lookup_host; the tests give their own.
using lookup_fn = std::function<host_addresses(const std::string& host)>;

// The system's resolver (getaddrinfo, TCP): every address, each once, in the resolver's order.
host_addresses lookup_host(const std::string& host);

class lookup_pool {
 public:
  using done_fn = std::function<void(const host_addresses&)>;
  // Whether a waiter still wants its answer (an attempt past its deadline does not); called on a
  // pool thread under the pool's lock, so it must only read a flag. A dropped waiter's `done` is
  // destroyed there too.
  using wanted_fn = std::function<bool()>;

  // `threads` at least 1.
  lookup_pool(lookup_fn lookup, std::size_t threads);
  // Lookups not started are dropped without their callbacks; the destructor waits for those
  // running (a lookup cannot be interrupted; the resolver's own timeout ends it).
  ~lookup_pool();
  lookup_pool(const lookup_pool&) = delete;
  lookup_pool& operator=(const lookup_pool&) = delete;

  // Looks `host` up and calls `done` with the result on one of the pool's threads; `done` must
  // only hand the result over. While a lookup of the same name is queued or running, `done` waits
  // for that one instead of starting another. A queued name whose every waiter has stopped
  // wanting its answer (`wanted` false; empty: always wanted) is dropped without a lookup, their
  // `done` never called: lookups nobody waits for any more do not hold the threads.
  void lookup(const std::string& host, done_fn done, wanted_fn wanted = {});

 private:
  void run();

  lookup_fn lookup_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  struct waiter {
    done_fn done;
    wanted_fn wanted;
  };
  std::deque<std::string> queue_;                                 // names not started, in arrival order
  std::unordered_map<std::string, std::vector<waiter>> waiting_;  // every name queued or running
  std::vector<std::thread> threads_;
};

// Judges the host of a new webhook endpoint (docs/events.md, "Webhooks"): whether deliveries may
// go there. At most `at_once` judgements run at a time, each waiting at most `wait` for a lookup
// on a pool of the judge's own, so that slow names hold the callers' threads (database readers)
// boundedly in number and in time.
class destination_judge : public std::enable_shared_from_this<destination_judge> {
 public:
  destination_judge(lookup_fn lookup, std::size_t at_once, std::chrono::milliseconds wait);

  // A place among the `at_once`, held while the returned pointer (or a copy) lives, which keeps
  // the judge alive too; null when every place is taken.
  std::shared_ptr<destination_judge> admit();

  // Why webhooks may not go to `host`: it does not resolve, does not within `wait`, or one of its
  // addresses is not one deliveries may go to (ledger::destination_allowed; loopback ones only
  // with `allow_loopback`). nullopt: they may. An IP literal is judged as it stands. A lookup
  // still running after `wait` goes on without the caller, and its answer is dropped. Blocks.
  std::optional<std::string> refused(const std::string& host, bool allow_loopback);

 private:
  std::chrono::milliseconds wait_;
  std::size_t at_once_;
  std::mutex mutex_;
  std::size_t admitted_ = 0;
  lookup_pool pool_;
};

}  // namespace events
