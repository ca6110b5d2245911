#pragma once

// Direct access to the shared test database for the checks a test makes behind the server's
// back (what the ledger holds, who waits on a lock).

#include <string>

namespace test_support {

// Runs a SQL query with the owner role and returns the first column of the first row as text
// ("" for no row or NULL).
std::string query_value(const std::string& sql);
void execute_sql(const std::string& sql, bool as_owner = true);

// `text` as a SQL string literal: in single quotes, with single quotes doubled.
std::string sql_literal(const std::string& text);

// Count of backends waiting, directly or through other waiters, on the backend `blocker_pid`
// (PostgreSQL queues a second waiter for a row behind the first one, not behind the holder).
int backends_blocked_by(int blocker_pid);

}  // namespace test_support
