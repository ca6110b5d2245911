#pragma once

// Opening PostgreSQL connections with the server's timeouts, asking one whether the database
// answers, and the text forms of the array parameters that let one statement carry a whole batch
// (`unnest($1::bigint[], ...)`).

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "persistence/pqxx_fwd.hpp"

namespace persistence {

// A value read from the database that the server does not know (e.g. a role or status text a
// newer migration added): an error, never silently mapped to a default.
struct unknown_value : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The enum named by `text` in column `column`; throws unknown_value when `parse` does not know it.
template <typename Parse>
auto parse_column(Parse parse, const std::string& text, const char* column) {
  auto value = parse(text);
  if (!value) throw unknown_value(std::string("unknown ") + column + " '" + text + "' read from the database");
  return *value;
}

struct connection_options {
  std::string url;
  std::int64_t connect_timeout_ms = 2'000;
  std::int64_t statement_timeout_ms = 5'000;
  std::int64_t lock_timeout_ms = 2'000;
  std::string application_name = "wallet-server";
};

// Opens a connection, sets statement_timeout and lock_timeout on it, and defines on it the
// prepared statements of principals, accounts, history, preload and ping (the posting path and
// reconciliation prepare their own). Throws pqxx::broken_connection when the database cannot be
// reached.
std::unique_ptr<pqxx::connection> connect(const connection_options& options);

// True when the database answers a trivial query.
bool ping(pqxx::connection& conn);

// Makes `conn`'s plans find rows through indexes whatever the statistics say: a sequential scan is
// priced out (enable_seqscan = off). For connections none of whose statements is meant to read a
// table whole. On a new database a plan made from empty tables reads them whole, and a generic plan
// keeps doing so as they grow, until autovacuum's next ANALYZE invalidates it (bench/PROFILE.md,
// seventh part). Set as a libpqxx session variable, not a SET statement: libpqxx 6 reconnects a
// connection whose session ended on its next statement, silently, and sets them again there.
void find_rows_by_key(pqxx::connection& conn);

// Array literals for parameters. Text elements are always quoted and escaped, so any string
// (including JSON and idempotency keys with commas, quotes or backslashes) is carried exactly.
std::string pg_array(const std::vector<std::int64_t>& values);
std::string pg_array(const std::vector<std::optional<std::int64_t>>& values);
std::string pg_array(const std::vector<std::string>& values);

// The same text literal as pg_array(values), built one element at a time: for parameters filled
// in a loop (the writer's batch), without a vector of copies in between.
class pg_text_array {
 public:
  void reserve(std::size_t bytes) { text_.reserve(bytes); }
  void add(std::string_view value);
  bool empty() const { return count_ == 0; }
  // The literal (e.g. {"a","b"}); the builder is left empty.
  std::string take();

 private:
  std::string text_ = "{";
  std::size_t count_ = 0;
};

// SQLSTATE classes the server reacts to.
bool is_retryable_sqlstate(const std::string& sqlstate);  // deadlock, serialization failure
bool is_timeout_sqlstate(const std::string& sqlstate);    // lock_timeout, statement_timeout

}  // namespace persistence
