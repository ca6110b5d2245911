#include "tests/events/fixture.hpp"

#include <boost/json.hpp>

#include <errno.h>

#include <algorithm>
#include <stdexcept>

namespace events_test {
namespace {

// Started on first use, stopped when the process ends (a killed run's services are stopped by
// the next run's constructor).
std::unique_ptr<test_support::private_services>& services_slot() {
  static std::unique_ptr<test_support::private_services> slot;
  return slot;
}

std::string& setup_error() {
  static std::string error;
  return error;
}

}  // namespace

void events_suite::SetUp() {
  auto& slot = services_slot();
  if (!slot && setup_error().empty()) {
    try {
      // One directory per suite binary: events_tests and webhooks_tests may run at the same time.
      slot = std::make_unique<test_support::private_services>(test_support::build_dir() + "/events/services-" +
                                                              program_invocation_short_name);
    } catch (const std::exception& e) {
      setup_error() = e.what();
    }
  }
  ASSERT_TRUE(slot) << "private services did not start: " << setup_error();
  // A test that failed half-way may have left Redis down: each starts from both up.
  slot->start();
}

test_support::private_services& events_suite::services() { return *services_slot(); }

server_process::options events_suite::server_options(const std::map<std::string, std::string>& extra) {
  server_process::options o;
  o.env = test_support::unlimited_rates();
  for (const auto& [k, v] : services().env()) o.env[k] = v;
  o.env["WALLET_DATABASE_OWNER_URL"] = services().owner_url();
  // Every relay of this suite is quick to notice new rows and to retry a Redis that came back.
  o.env["WALLET_EVENTS_POLL_INTERVAL_MS"] = "5";
  o.env["WALLET_EVENTS_BACKOFF_MS_MAX"] = "200";
  for (const auto& [k, v] : extra) o.env[k] = v;
  return o;
}

events::relay_config events_suite::relay_config() {
  events::relay_config c;
  c.database.url = services().database_url();
  c.database.application_name = "events-test-relay";
  c.redis_url = services().redis_url();
  c.batch_rows_max = 2;
  c.poll_interval_ms = 1;
  c.backoff_ms_max = 100;
  return c;
}

std::set<std::string> events_suite::committed_transactions(const std::vector<std::int64_t>& accounts) {
  const auto ids = id_list(accounts);
  const auto rows = sql_column(owner_url(),
                               "SELECT DISTINCT e.transaction_id::text FROM ledger_entry e"
                               " JOIN account a ON a.id = e.account_id"
                               " WHERE a.id IN (" +
                                   ids + ") OR a.parent_id IN (" + ids + ")");
  return {rows.begin(), rows.end()};
}

std::int64_t events_suite::unpublished_rows() {
  return std::stoll(sql_value(owner_url(), "SELECT count(*) FROM outbox_event WHERE published_at IS NULL"));
}

std::vector<stream_entry> events_suite::entries_touching(const std::vector<std::int64_t>& accounts) {
  std::vector<stream_entry> out;
  for (auto& e : read_stream(redis_url())) {
    const auto named = accounts_of(e);
    if (std::any_of(named.begin(), named.end(),
                    [&](std::int64_t a) { return std::find(accounts.begin(), accounts.end(), a) != accounts.end(); })) {
      out.push_back(std::move(e));
    }
  }
  return out;
}

std::map<std::string, int> events_suite::counts_by_event(const std::vector<stream_entry>& entries) {
  std::map<std::string, int> counts;
  for (const auto& e : entries) ++counts[e.field("eventId")];
  return counts;
}

bool events_suite::wait_until_streamed(const std::set<std::string>& transactions,
                                       const std::vector<std::int64_t>& accounts) {
  return test_support::eventually(
      [&] {
        const auto counts = counts_by_event(entries_touching(accounts));
        return std::all_of(transactions.begin(), transactions.end(),
                           [&](const std::string& t) { return counts.count(t) != 0; });
      },
      std::chrono::seconds(60), std::chrono::milliseconds(50));
}

std::string id_list(const std::vector<std::int64_t>& ids) {
  std::string out;
  for (auto id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

std::string transfer(http_client& c, const std::string& key, std::int64_t from, std::int64_t to, std::int64_t amount) {
  const auto r =
      c.post("/v1/transfers", key, test_support::transfer_body(from, to, amount), test_support::unique_key("transfer"));
  EXPECT_EQ(r.status, 201) << r.body;
  if (r.status != 201) return "";
  return std::string(r.json().as_object().at("transactionId").as_string());
}

std::vector<std::int64_t> accounts_of(const stream_entry& e) {
  std::vector<std::int64_t> out;
  const auto parsed = boost::json::parse(e.field("accounts"));
  for (const auto& v : parsed.as_array()) out.push_back(v.as_int64());
  return out;
}

}  // namespace events_test
