#include "tools/loadgen/verify.hpp"

#include "tools/loadgen/api.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

#include <pqxx/pqxx>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <ostream>
#include <thread>
#include <unordered_map>

namespace loadgen {
namespace {

// Generous: the operator is rate-limited like anyone, and verification reads many ids quickly.
constexpr int k_verify_attempts_max = 30;
// Ids per direct database query.
constexpr std::size_t k_query_batch_ids_max = 2'000;
// Failures listed one by one before the rest are only counted.
constexpr std::size_t k_listed_failures_max = 5;
// The server's reconciliation run: POSTs that may each find a run begun before the last transfer
// was answered (waited out, then a new one started), and polls of a run, with a pause growing
// from the first to the last value (an incremental run reads what the run wrote, in seconds;
// a first run on a large ledger is a full one, in minutes).
constexpr int k_reconcile_starts_max = 10;
constexpr int k_reconcile_polls_max = 1'200;
constexpr std::chrono::milliseconds k_reconcile_poll_first{50};
constexpr std::chrono::milliseconds k_reconcile_poll_max{1'000};

http_request operator_get(const options& o, std::string target) {
  http_request r;
  r.method = http_method::get;
  r.target = std::move(target);
  r.api_key = o.operator_key;
  return r;
}

// One call with retries of transient failures, waited for; nothing when there was no answer.
std::optional<http_response> call_blocking(http_client& client, const http_request& request) {
  std::mutex m;
  std::optional<http_response> answer;
  run_bulk(client, 1, 1, [&](std::size_t, std::size_t thread, std::function<void()> done) {
    call_with_retries(client, thread, request, k_verify_attempts_max, [&, done](http_response&& r) {
      {
        std::lock_guard lock(m);
        answer = std::move(r);
      }
      done();
    });
  });
  return answer;
}

// Starts a reconciliation run that begins after every transfer was answered, waits for its end
// and returns the failure to report, or nothing when the run is clean.
std::optional<std::string> reconciliation_failure(const options& o, http_client& client) {
  http_request post;
  post.method = http_method::post;
  post.target = "/v1/admin/reconciliation";
  post.body = "{}";
  post.api_key = o.operator_key;
  for (int start = 0; start < k_reconcile_starts_max; ++start) {
    const auto posted = call_blocking(client, post);
    const auto claim = posted && posted->status == 202 ? parse_object(posted->body) : std::nullopt;
    const auto run_id = claim ? int_field(*claim, "runId") : std::nullopt;
    const auto* started = claim ? claim->if_contains("started") : nullptr;
    if (!run_id || started == nullptr || !started->is_bool()) {
      return "reconciliation did not start: " + (posted ? describe(*posted) : std::string("no answer"));
    }
    const std::string target = "/v1/admin/reconciliation/runs/" + std::to_string(*run_id);
    std::optional<boost::json::object> ended;
    std::optional<http_response> last;
    auto pause = k_reconcile_poll_first;
    for (int poll = 0; poll < k_reconcile_polls_max && !ended; ++poll) {
      last = call_blocking(client, operator_get(o, target));
      auto run = last && last->status == 200 ? parse_object(last->body) : std::nullopt;
      const auto status = run ? string_field(*run, "status") : std::nullopt;
      if (!status)
        return "reconciliation run " + std::to_string(*run_id) +
               " could not be read: " + (last ? describe(*last) : std::string("no answer"));
      if (*status != "running") {
        ended = std::move(run);
      } else {
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, k_reconcile_poll_max);
      }
    }
    if (!ended) {
      return "reconciliation run " + std::to_string(*run_id) + " did not end within " +
             std::to_string(k_reconcile_polls_max) + " polls";
    }
    // A run that was already in progress may have begun before the last transfer: start another.
    if (!started->as_bool()) continue;
    const auto* ok = ended->if_contains("ok");
    if (string_field(*ended, "status") != "finished" || ok == nullptr || !ok->is_bool()) {
      return "reconciliation run " + std::to_string(*run_id) + " ended without a verdict: " + last->body.substr(0, 500);
    }
    if (!ok->as_bool()) return "reconciliation reports a problem: " + last->body.substr(0, 500);
    return std::nullopt;
  }
  return "reconciliation: no run of this verification started in " + std::to_string(k_reconcile_starts_max) +
         " attempts (other runs kept being in progress)";
}

// What the lookup said about one id.
enum class presence : std::uint8_t { unknown, present, missing, malformed };

// Ids per POST /v1/transactions/lookup: the server's ledger.lookup_ids_max by default.
constexpr std::size_t k_lookup_ids_max = 1'000;
// A lookup holds one of the server's reader connections (database.readers, 8 by default) for tens
// of milliseconds: more lookups in flight only queue there, and past database.connection_wait_ms
// they are refused 503 and retried after a pause, which is slower. So at most this many, however
// high --verify-concurrency is (measured: 1,000 lookups of 1,000 ids took the same time with 4 or
// 8 in flight, and 64 in flight had a quarter of them refused).
constexpr std::size_t k_lookups_in_flight_max = 8;

std::string lookup_body(const std::vector<std::string>& ids, std::size_t start, std::size_t end) {
  boost::json::array list;
  for (std::size_t i = start; i < end; ++i) list.emplace_back(ids[i]);
  return boost::json::serialize(boost::json::object{{"ids", std::move(list)}});
}

// Why a transaction shown by the server is not one zero-sum posting; nothing when it is.
std::optional<std::string> malformed_transaction(const boost::json::object& t) {
  const auto* entries = t.if_contains("entries");
  if (entries == nullptr || !entries->is_array()) return std::string("no entries");
  std::int64_t sum = 0;
  for (const auto& e : entries->as_array()) {
    if (!e.is_object()) continue;
    sum += int_field(e.as_object(), "amount").value_or(0);
  }
  if (sum != 0 || entries->as_array().empty()) return "entries sum to " + std::to_string(sum);
  return std::nullopt;
}

// Looks the acknowledged transactions up in chunks of k_lookup_ids_max, at most
// --verify-concurrency (and k_lookups_in_flight_max) chunks in flight, each retried like any
// verification call. Each distinct
// id is asked once (a repeated id is reported as such by the caller).
void check_through_api(const options& o, http_client& client, const std::vector<committed_transfer>& committed,
                       verification& v) {
  std::vector<std::string> ids;
  ids.reserve(committed.size());
  for (const auto& c : committed) ids.push_back(c.transaction_id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::unordered_map<std::string, std::size_t> index_of;
  index_of.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) index_of.emplace(ids[i], i);

  std::vector<presence> found(ids.size(), presence::unknown);
  std::vector<std::string> detail(ids.size());
  std::atomic<std::int64_t> lookups{0};
  const std::size_t chunks = (ids.size() + k_lookup_ids_max - 1) / k_lookup_ids_max;
  const auto in_flight = std::min(static_cast<std::size_t>(o.verify_concurrency), k_lookups_in_flight_max);
  run_bulk(client, chunks, in_flight, [&](std::size_t chunk, std::size_t thread, std::function<void()> done) {
    const std::size_t start = chunk * k_lookup_ids_max;
    const std::size_t end = std::min(ids.size(), start + k_lookup_ids_max);
    http_request request;
    request.method = http_method::post;
    request.target = "/v1/transactions/lookup";
    request.body = lookup_body(ids, start, end);
    request.api_key = o.operator_key;
    // Each callback writes only its own chunk's slots of `found` and `detail`.
    call_with_retries(client, thread, std::move(request), k_verify_attempts_max,
                      [&, start, end, done](http_response&& r) {
                        if (r.status != 0) ++lookups;
                        auto body = r.status == 200 ? parse_object(r.body) : std::nullopt;
                        const auto* transactions = body ? body->if_contains("transactions") : nullptr;
                        const auto* missing = body ? body->if_contains("missing") : nullptr;
                        if (!transactions || !transactions->is_array() || !missing || !missing->is_array()) {
                          for (std::size_t i = start; i < end; ++i) detail[i] = describe(r);
                          return done();
                        }
                        const auto in_chunk = [&](const std::optional<std::string>& id) -> std::optional<std::size_t> {
                          const auto it = id ? index_of.find(*id) : index_of.end();
                          if (it == index_of.end() || it->second < start || it->second >= end) return std::nullopt;
                          return it->second;
                        };
                        for (const auto& t : transactions->as_array()) {
                          const auto i = t.is_object() ? in_chunk(string_field(t.as_object(), "id")) : std::nullopt;
                          if (!i) continue;
                          const auto why = malformed_transaction(t.as_object());
                          found[*i] = why ? presence::malformed : presence::present;
                          if (why) detail[*i] = *why;
                        }
                        for (const auto& m : missing->as_array()) {
                          const auto i = m.is_string() ? in_chunk(std::string(m.as_string())) : std::nullopt;
                          if (i) found[*i] = presence::missing;
                        }
                        // An id the answer neither shows nor names as missing stays unknown.
                        for (std::size_t i = start; i < end; ++i) {
                          if (found[i] == presence::unknown) detail[i] = "the lookup's answer did not mention it";
                        }
                        done();
                      });
  });
  v.lookup_requests = lookups.load();
  std::size_t missing = 0, unknown = 0, malformed = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto& id = ids[i];
    switch (found[i]) {
      case presence::present: break;
      case presence::missing:
        if (missing++ < k_listed_failures_max)
          v.fail("transaction " + id + " was answered 201 but is not in the ledger");
        break;
      case presence::unknown:
        if (unknown++ < k_listed_failures_max) v.fail("transaction " + id + " could not be read: " + detail[i]);
        break;
      case presence::malformed:
        if (malformed++ < k_listed_failures_max) v.fail("transaction " + id + " is malformed: " + detail[i]);
        break;
    }
  }
  if (missing > k_listed_failures_max)
    v.fail(std::to_string(missing) + " acknowledged transactions are missing in all");
  if (unknown > k_listed_failures_max) v.fail(std::to_string(unknown) + " transactions could not be read in all");
  if (malformed > k_listed_failures_max) v.fail(std::to_string(malformed) + " transactions are malformed in all");
  v.notes.push_back(std::to_string(ids.size() - missing - unknown - malformed) + " of " + std::to_string(ids.size()) +
                    " acknowledged transactions found through the API, in " + std::to_string(v.lookup_requests) +
                    " lookups of up to " + std::to_string(k_lookup_ids_max) + " ids");
}

void check_in_database(const options& o, const std::vector<committed_transfer>& committed, verification& v) {
  std::unordered_map<std::string, std::int64_t> rows;
  try {
    pqxx::connection connection(o.database_url);
    pqxx::read_transaction tx(connection);
    for (std::size_t start = 0; start < committed.size(); start += k_query_batch_ids_max) {
      const std::size_t end = std::min(committed.size(), start + k_query_batch_ids_max);
      // An array literal of quoted ids; an id with a quote or backslash never reaches here
      // because transaction ids are validated as UUIDs when they are recorded.
      std::string array = "{";
      for (std::size_t i = start; i < end; ++i) {
        if (i > start) array += ',';
        array += '"' + committed[i].transaction_id + '"';
      }
      array += '}';
      for (const auto& row : tx.exec_params(o.database_verify_query, array)) {
        rows[row[0].as<std::string>()] += row[1].as<std::int64_t>();
      }
    }
  } catch (const std::exception& e) {
    v.fail(std::string("direct database verification failed: ") + e.what());
    return;
  }
  std::size_t missing = 0, doubled = 0;
  for (const auto& c : committed) {
    const auto it = rows.find(c.transaction_id);
    const std::int64_t n = it == rows.end() ? 0 : it->second;
    if (n == 0 && missing++ < k_listed_failures_max) {
      v.fail("transaction " + c.transaction_id + " was answered 201 but is not in the database");
    }
    if (n > 1 && doubled++ < k_listed_failures_max) {
      v.fail("transaction " + c.transaction_id + " is in the database " + std::to_string(n) + " times");
    }
  }
  if (missing > k_listed_failures_max)
    v.fail(std::to_string(missing) + " acknowledged transactions are missing in all");
  if (doubled > k_listed_failures_max)
    v.fail(std::to_string(doubled) + " transactions are stored more than once in all");
  v.notes.push_back(std::to_string(committed.size() - missing) + " of " + std::to_string(committed.size()) +
                    " acknowledged transactions found in the database");
}

}  // namespace

std::vector<std::optional<std::int64_t>> read_balances(const options& o, http_client& client,
                                                       const std::vector<std::int64_t>& account_ids) {
  std::vector<std::optional<std::int64_t>> balances(account_ids.size());
  run_bulk(client, account_ids.size(), static_cast<std::size_t>(o.verify_concurrency),
           [&](std::size_t i, std::size_t thread, std::function<void()> done) {
             call_with_retries(client, thread, operator_get(o, "/v1/accounts/" + std::to_string(account_ids[i])),
                               k_verify_attempts_max, [&, i, done](http_response&& r) {
                                 if (r.status == 200) {
                                   if (auto body = parse_object(r.body)) balances[i] = int_field(*body, "balance");
                                 }
                                 done();
                               });
           });
  return balances;
}

verification verify_run(const options& o, http_client& client, const setup_data& setup,
                        const std::vector<std::optional<std::int64_t>>& balances_before,
                        const std::vector<committed_transfer>& committed, std::int64_t unresolved, std::ostream& log) {
  verification v;
  if (unresolved > 0) {
    v.fail(std::to_string(unresolved) + " requests never got a definite answer, even when replayed");
  }

  using clock = std::chrono::steady_clock;
  const auto seconds_since = [](clock::time_point t) {
    return std::chrono::duration<double>(clock::now() - t).count();
  };
  // 1. The server's own reconciliation.
  auto phase = clock::now();
  if (auto failure = reconciliation_failure(o, client)) {
    v.fail(*failure);
  } else {
    v.notes.push_back("reconciliation ok");
  }
  v.reconcile_s = seconds_since(phase);

  // 2. Each acknowledged transaction once.
  {
    std::vector<std::string> ids;
    ids.reserve(committed.size());
    for (const auto& c : committed) ids.push_back(c.transaction_id);
    std::sort(ids.begin(), ids.end());
    const auto duplicate = std::adjacent_find(ids.begin(), ids.end());
    if (duplicate != ids.end()) {
      v.fail("two different requests were answered with the same transaction " + *duplicate);
    }
  }
  log << "verify: checking " << committed.size() << " acknowledged transactions\n";
  phase = clock::now();
  if (!o.database_url.empty()) {
    check_in_database(o, committed, v);
  } else {
    check_through_api(o, client, committed, v);
  }
  v.transactions_s = seconds_since(phase);

  // 3. Money: the total is unchanged and each account moved by exactly its acknowledged transfers.
  phase = clock::now();
  const auto ids = setup.account_ids();
  const auto after = read_balances(o, client, ids);
  std::vector<__int128> expected(ids.size(), 0);
  for (const auto& c : committed) {
    expected[c.from] -= c.amount_minor;
    expected[c.to] += c.amount_minor;
  }
  __int128 total_before = 0, total_after = 0;
  std::size_t unreadable = 0, wrong = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (!balances_before[i] || !after[i]) {
      ++unreadable;
      continue;
    }
    total_before += *balances_before[i];
    total_after += *after[i];
    const __int128 want = *balances_before[i] + expected[i];
    if (want != *after[i] && wrong++ < k_listed_failures_max) {
      v.fail("account " + std::to_string(ids[i]) + " holds " + std::to_string(*after[i]) + ", expected " +
             std::to_string(static_cast<long long>(want)) + " (before " + std::to_string(*balances_before[i]) +
             " plus its acknowledged transfers)");
    }
  }
  if (wrong > k_listed_failures_max) v.fail(std::to_string(wrong) + " accounts hold a wrong balance in all");
  if (unreadable > 0) v.fail(std::to_string(unreadable) + " account balances could not be read");
  if (total_before != total_after) {
    v.fail("the closed system held " + std::to_string(static_cast<long long>(total_before)) + " before and " +
           std::to_string(static_cast<long long>(total_after)) + " after");
  } else {
    v.notes.push_back("money in the closed system unchanged: " + std::to_string(static_cast<long long>(total_after)) +
                      " over " + std::to_string(ids.size()) + " accounts");
  }
  v.balances_s = seconds_since(phase);
  return v;
}

}  // namespace loadgen
