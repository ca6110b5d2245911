// reader_pool against the real PostgreSQL of the test command: a job is answered exactly once,
// by its delivery or by its failure, even when the delivery itself throws.

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "actors/reader_pool.hpp"
#include "tests/support/connections.hpp"
#include "tests/support/support.hpp"

namespace actors {
namespace {

persistence::connection_options options() {
  return test_support::options_for(test_support::database_url(), "reader-pool-tests");
}

// A delivery that throws is a bug in the caller's callback; the pool must not answer the job a
// second time through `fail` (the caller would see two answers to one request). A later job is
// still served by the same reader.
TEST(reader_pool, a_delivery_that_throws_is_not_answered_again) {
  reader_pool pool(options(), 1, 10, 5'000, 100);
  std::atomic<int> delivered{0}, failed{0}, later{0};
  pool.submit({
      [&](pqxx::connection& conn) -> std::function<void()> {
        pqxx::nontransaction txn(conn);
        txn.exec1("SELECT 1");
        return [&] {
          ++delivered;
          throw std::runtime_error("the callback's own bug");
        };
      },
      [&](ledger::error_code, std::string) { ++failed; },
  });
  pool.submit({
      [&](pqxx::connection&) -> std::function<void()> { return [&] { ++later; }; },
      [&](ledger::error_code, std::string) { ++failed; },
  });
  ASSERT_TRUE(test_support::eventually([&] { return later.load() == 1; }));
  pool.stop();
  EXPECT_EQ(delivered.load(), 1);
  EXPECT_EQ(failed.load(), 0);
}

// A query that fails is answered through `fail` once, and its delivery never runs.
TEST(reader_pool, a_failed_query_is_answered_once_through_fail) {
  reader_pool pool(options(), 1, 10, 5'000, 100);
  std::atomic<int> delivered{0}, failed{0};
  pool.submit({
      [&](pqxx::connection& conn) -> std::function<void()> {
        pqxx::nontransaction txn(conn);
        txn.exec("SELECT * FROM no_such_table_anywhere");
        return [&] { ++delivered; };
      },
      [&](ledger::error_code code, std::string) {
        EXPECT_EQ(code, ledger::error_code::internal);
        ++failed;
      },
  });
  ASSERT_TRUE(test_support::eventually([&] { return failed.load() == 1; }));
  pool.stop();
  EXPECT_EQ(delivered.load(), 0);
  EXPECT_EQ(failed.load(), 1);
}

}  // namespace
}  // namespace actors
