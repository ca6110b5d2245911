#pragma once

// Direct access to the shared test database, behind the server's back: the checks a test makes
// (what the ledger holds, who waits on a lock) and the row locks it holds to stall the server.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace test_support {

// Runs a SQL query with the owner role and returns the first column of the first row as text
// ("" for no row or NULL).
std::string query_value(const std::string& sql);
void execute_sql(const std::string& sql, bool as_owner = true);

// `text` as a SQL string literal: in single quotes, with single quotes doubled.
std::string sql_literal(const std::string& text);
// `texts` as a SQL text[] literal, e.g. ARRAY['a','b']::text[].
std::string sql_text_array(const std::vector<std::string>& texts);

// Count of backends waiting, directly or through other waiters, on the backend `blocker_pid`
// (PostgreSQL queues a second waiter for a row behind the first one, not behind the holder).
int backends_blocked_by(int blocker_pid);

// The row locks of `accounts` (SELECT ... FOR UPDATE), held from an owner connection of the
// shared database until release() or destruction: the way a test stalls whatever must write or
// lock those rows (a ledger writer's batch, a sweep, an operator's freeze) for as long as it wants.
class account_lock {
 public:
  explicit account_lock(const std::vector<std::int64_t>& accounts);
  ~account_lock();
  account_lock(const account_lock&) = delete;
  account_lock& operator=(const account_lock&) = delete;

  // Backends waiting on these locks, directly or behind other waiters (backends_blocked_by).
  int waiters() const;
  // How long the backend waiting longest on these locks directly has waited (zero: none waits),
  // by the database's clock.
  std::chrono::milliseconds longest_wait() const;
  // Locks more accounts in the same transaction, in the order given; blocks while another
  // transaction holds one of them (a deadlock PostgreSQL breaks shows here as an exception).
  void also_lock(const std::vector<std::int64_t>& accounts);
  // Rolls the locking transaction back: whatever waited goes on. Releasing again does nothing;
  // the destructor releases a lock still held.
  void release();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// A trigger of the test's, BEFORE UPDATE on `table` for each row `when` holds, running `body`
// (plpgsql), with its function named `name`: the way a test makes the database refuse or stall one
// row's update. Dropped by drop() or on destruction.
class test_trigger {
 public:
  test_trigger(std::string name, std::string table, const std::string& when, const std::string& body);
  ~test_trigger();
  test_trigger(const test_trigger&) = delete;
  test_trigger& operator=(const test_trigger&) = delete;
  void drop();

 private:
  std::string name_;
  std::string table_;
};

}  // namespace test_support
