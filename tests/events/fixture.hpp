#pragma once

// The events suites' fixture: a PostgreSQL and a Redis of their own (test_support::
// private_services, started once per process), so that the relays here are the only ones on
// that database and every count of stream entries is exact; wallet-server children and in-process
// relays on them; and the ledger and the stream read back.

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "events/relay.hpp"
#include "tests/events/stream_reader.hpp"
#include "tests/support/services.hpp"
#include "tests/support/support.hpp"

namespace events_test {

using test_support::http_client;
using test_support::server_process;

class events_suite : public ::testing::Test {
 protected:
  void SetUp() override;

  static test_support::private_services& services();
  static std::string owner_url() { return services().owner_url(); }
  static std::string redis_url() { return services().redis_url(); }

  // A wallet-server on the private services (rate limits out of the way), with `extra` settings.
  static server_process::options server_options(const std::map<std::string, std::string>& extra = {});
  // An in-process relay's configuration on the private services: small batches and a short poll,
  // so that a test's few hundred transactions take many rounds.
  static events::relay_config relay_config();

  // The journal transactions with an entry on one of `accounts` (or on their shards).
  static std::set<std::string> committed_transactions(const std::vector<std::int64_t>& accounts);
  // Outbox rows that have not been published yet.
  static std::int64_t unpublished_rows();

  // The stream's entries that name one of `accounts`, in stream order.
  static std::vector<stream_entry> entries_touching(const std::vector<std::int64_t>& accounts);
  // How often each eventId occurs among `entries`.
  static std::map<std::string, int> counts_by_event(const std::vector<stream_entry>& entries);
  // Waits (bounded) until every one of `transactions` has a stream entry.
  static bool wait_until_streamed(const std::set<std::string>& transactions, const std::vector<std::int64_t>& accounts);
};

// "1,2,3": ids for a SQL IN list.
std::string id_list(const std::vector<std::int64_t>& ids);

// A transfer's transaction id (201), or "" with a test failure.
std::string transfer(http_client& c, const std::string& key, std::int64_t from, std::int64_t to, std::int64_t amount);

// The public account ids of a stream entry's `accounts` field.
std::vector<std::int64_t> accounts_of(const stream_entry& e);

}  // namespace events_test
