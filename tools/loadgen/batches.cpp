#include "tools/loadgen/batches.hpp"

#include "tools/loadgen/api.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iomanip>
#include <memory>
#include <mutex>
#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace loadgen {

namespace {

using steady = std::chrono::steady_clock;

struct shared_run {
  const options* o = nullptr;
  http_client* client = nullptr;
  std::string api_key;
  std::int64_t employer = 0;
  std::vector<std::int64_t> salary_accounts;
  std::string run_id;
  steady::time_point end;
  std::mutex mutex;
  std::condition_variable done;
  std::int64_t users_active = 0;
  std::vector<std::int64_t> latencies_us;
  batch_run_result result;
  std::atomic<std::uint64_t> sequence{0};
};

std::string batch_body(shared_run& run, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> pick(0, run.salary_accounts.size() - 1);
  std::uniform_int_distribution<std::int64_t> amount(run.o->amount_min_minor, run.o->amount_max_minor);
  std::string body = "{\"atomic\":false,\"transfers\":[";
  for (std::int64_t i = 0; i < run.o->batch_size; ++i) {
    if (i > 0) body += ',';
    body += "{\"fromAccountId\":" + std::to_string(run.employer) +
            ",\"toAccountId\":" + std::to_string(run.salary_accounts[pick(rng)]) +
            ",\"amount\":" + std::to_string(amount(rng)) + "}";
  }
  body += "]}";
  return body;
}

void user_loop(const std::shared_ptr<shared_run>& run, std::size_t thread, std::shared_ptr<std::mt19937_64> rng) {
  if (steady::now() >= run->end) {
    std::lock_guard lock(run->mutex);
    if (--run->users_active == 0) run->done.notify_all();
    return;
  }
  http_request request;
  request.method = http_method::post;
  request.target = "/v1/transfers/batch";
  request.api_key = run->api_key;
  request.idempotency_key = "lg-" + run->run_id + "-b" + std::to_string(run->sequence++);
  request.body = batch_body(*run, *rng);
  const auto sent = steady::now();
  run->client->pool(thread).submit(std::move(request), [run, thread, rng, sent](http_response&& r) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - sent).count();
    {
      std::lock_guard lock(run->mutex);
      auto& res = run->result;
      const auto o = r.status == 201 ? parse_object(r.body) : std::nullopt;
      const auto* results = o ? o->if_contains("results") : nullptr;
      if (results == nullptr || !results->is_array() ||
          static_cast<std::int64_t>(results->as_array().size()) != run->o->batch_size) {
        ++res.failed_requests;
      } else {
        ++res.requests;
        run->latencies_us.push_back(us);
        for (const auto& item : results->as_array()) {
          const auto status = item.is_object() ? int_field(item.as_object(), "status") : std::nullopt;
          if (status == 201) {
            ++res.salaries;
          } else {
            ++res.refused_items;
          }
        }
      }
    }
    // Posted, so that a quick answer cannot grow the stack.
    boost::asio::post(run->client->context(thread), [run, thread, rng] { user_loop(run, thread, rng); });
  });
}

std::int64_t percentile(std::vector<std::int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto i = std::min(sorted.size() - 1, static_cast<std::size_t>(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[i];
}

}  // namespace

batch_run_result run_payday_batches(const options& o, http_client& client, const setup_data& setup, std::ostream& out,
                                    std::ostream& err) {
  auto run = std::make_shared<shared_run>();
  run->o = &o;
  run->client = &client;
  const auto& employer = setup.party_at(setup.hub_index());
  run->api_key = employer.api_key;
  run->employer = employer.account_id;
  for (const auto& p : setup.parties) run->salary_accounts.push_back(p.account_id);
  run->run_id = std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  const auto start = steady::now();
  run->end = start + std::chrono::microseconds(static_cast<std::int64_t>(o.duration_s * 1e6));
  run->users_active = o.concurrency;
  for (std::int64_t u = 0; u < o.concurrency; ++u) {
    const auto thread = static_cast<std::size_t>(u) % client.threads();
    auto rng = std::make_shared<std::mt19937_64>(o.seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(u));
    boost::asio::post(client.context(thread), [run, thread, rng] { user_loop(run, thread, rng); });
  }
  {
    std::unique_lock lock(run->mutex);
    run->done.wait(lock, [&] { return run->users_active == 0; });
  }
  auto result = run->result;
  result.wall_s = std::chrono::duration<double>(steady::now() - start).count();
  std::sort(run->latencies_us.begin(), run->latencies_us.end());
  result.p50_us = percentile(run->latencies_us, 50);
  result.p99_us = percentile(run->latencies_us, 99);
  result.max_us = run->latencies_us.empty() ? 0 : run->latencies_us.back();
  result.exit_code = result.failed_requests == 0 && result.requests > 0 ? 0 : 1;
  const double per_s = result.wall_s > 0 ? static_cast<double>(result.salaries) / result.wall_s : 0;
  out << std::fixed << std::setprecision(1) << "payday-batch\tbatch_size\t" << o.batch_size << "\tusers\t"
      << o.concurrency << "\trequests\t" << result.requests << "\tfailed\t" << result.failed_requests << "\tsalaries\t"
      << result.salaries << "\trefused\t" << result.refused_items << "\tsalaries_per_s\t" << per_s << "\tp50_ms\t"
      << static_cast<double>(result.p50_us) / 1000.0 << "\tp99_ms\t" << static_cast<double>(result.p99_us) / 1000.0
      << "\tmax_ms\t" << static_cast<double>(result.max_us) / 1000.0 << "\n";
  if (result.failed_requests > 0) {
    err << "wallet-loadgen: " << result.failed_requests << " batches were not answered 201\n";
  }
  return result;
}

}  // namespace loadgen
