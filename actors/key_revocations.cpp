#include "actors/key_revocations.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <vector>

#include "persistence/api_keys.hpp"

namespace actors {

key_revocations::key_revocations(key_cache& keys, std::shared_ptr<reader_pool> readers, std::chrono::milliseconds ttl,
                                 key_cache::clock::time_point covered_from)
    : keys_(keys),
      readers_(std::move(readers)),
      interval_(std::max<std::chrono::milliseconds>(std::chrono::milliseconds(1), ttl / 3)),
      covered_from_(covered_from) {}

key_revocations::~key_revocations() { stop(); }

void key_revocations::start() {
  timer_.start("wallet-keycheck", interval_, [this] { check(); });
}

void key_revocations::stop() { timer_.stop(); }

void key_revocations::check() {
  // One check at a time: a slow one is not joined by more.
  if (in_flight_.exchange(true)) return;
  const auto started = key_cache::clock::now();
  std::int64_t window_ms = 0;
  {
    std::lock_guard lock(covered_mutex_);
    window_ms = std::chrono::duration_cast<std::chrono::milliseconds>(started - covered_from_ + k_overlap).count();
  }
  readers_->read<std::vector<std::string>>(
      [window_ms](pqxx::connection& conn) {
        return persistence::recently_revoked_keys(conn, window_ms, k_keys_per_check_max + 1);
      },
      [this, started](query_result<std::vector<std::string>> r) {
        if (r.outcome != ledger::error_code::ok) {
          ++failures_;
          if (!failing_.exchange(true)) {
            spdlog::warn(
                "could not check for revoked API keys ({}); cached keys will be read again once their "
                "time to live has passed",
                r.detail);
          }
          in_flight_ = false;
          return;
        }
        if (failing_.exchange(false)) spdlog::info("checking for revoked API keys again");
        const bool complete = static_cast<int>(r.value.size()) <= k_keys_per_check_max;
        keys_.confirm(r.value, complete, started);
        ++checks_;
        {
          std::lock_guard lock(covered_mutex_);
          covered_from_ = std::max(covered_from_, started);
        }
        in_flight_ = false;
      });
}

key_revocation_stats key_revocations::stats() const { return key_revocation_stats{checks_.load(), failures_.load()}; }

}  // namespace actors
