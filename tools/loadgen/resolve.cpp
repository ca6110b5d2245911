#include "tools/loadgen/resolve.hpp"

#include "tools/loadgen/api.hpp"

#include <cstddef>
#include <functional>
#include <ostream>

namespace loadgen {

namespace {

// Replays of one request whose outcome is unknown, at the end of the run.
constexpr int k_resolve_attempts_max = 10;

}  // namespace

unknown_outcomes resolve_unknown(const options& o, http_client& client, driver& d,
                                 const std::vector<std::shared_ptr<operation>>& unknown,
                                 std::vector<committed_transfer>& committed, std::ostream& err) {
  unknown_outcomes counts;
  counts.replayed = static_cast<std::int64_t>(unknown.size());
  if (unknown.empty()) return counts;
  err << "resolve: replaying " << unknown.size() << " requests whose outcome was unknown\n";
  std::vector<http_response> answers(unknown.size());
  run_bulk(client, unknown.size(), static_cast<std::size_t>(o.verify_concurrency),
           [&](std::size_t i, std::size_t thread, std::function<void()> done) {
             call_with_retries(client, thread, d.request_for(*unknown[i]), k_resolve_attempts_max,
                               [&, i, done](http_response&& r) {
                                 answers[i] = std::move(r);
                                 done();
                               });
           });
  for (std::size_t i = 0; i < unknown.size(); ++i) {
    const auto& r = answers[i];
    if (r.status == 201) {
      if (!driver::acknowledge(committed, *unknown[i], r.body)) {
        ++counts.unresolved;
      } else if (r.idempotent_replayed) {
        ++counts.found_committed;
      } else {
        ++counts.applied_on_replay;
      }
    } else if (r.status < 400 || r.status >= 500 || r.status == 429) {
      ++counts.unresolved;
    } else {
      ++counts.refused;
    }
  }
  return counts;
}

}  // namespace loadgen
