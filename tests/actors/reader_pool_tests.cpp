// reader_pool against the real PostgreSQL of the test command: a job is answered exactly once,
// by its delivery or by its failure, even when the delivery itself throws.

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
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

// The outcome a job ends with when the database raises `sqlstate` in it.
ledger::error_code outcome_of_a_job_raising(const std::string& sqlstate) {
  reader_pool pool(options(), 1, 10, 5'000, 100);
  std::atomic<int> failed{0};
  ledger::error_code outcome = ledger::error_code::ok;
  pool.submit({
      [&](pqxx::connection& conn) -> std::function<void()> {
        pqxx::work txn(conn);
        txn.exec("DO $$ BEGIN RAISE EXCEPTION 'raised by the test' USING ERRCODE = '" + sqlstate + "'; END $$");
        txn.commit();
        return [] {};
      },
      [&](ledger::error_code code, std::string) {
        outcome = code;
        ++failed;
      },
  });
  EXPECT_TRUE(test_support::eventually([&] { return failed.load() == 1; }));
  pool.stop();
  return outcome;
}

// A transaction PostgreSQL rolled back to break a deadlock or a serialization conflict changed
// nothing: the client is told to retry (503), not that the server failed (500). One whose
// completion is unknown is neither.
TEST(reader_pool, a_rolled_back_transaction_is_a_retryable_refusal) {
  EXPECT_EQ(outcome_of_a_job_raising("40P01"), ledger::error_code::database_unavailable);
  EXPECT_EQ(outcome_of_a_job_raising("40001"), ledger::error_code::database_unavailable);
  EXPECT_EQ(outcome_of_a_job_raising("40003"), ledger::error_code::outcome_unknown);
  EXPECT_EQ(outcome_of_a_job_raising("22012"), ledger::error_code::internal);  // division_by_zero
}

}  // namespace
}  // namespace actors
