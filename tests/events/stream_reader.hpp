#pragma once

// What the events suites need beyond tests/support: the Redis Stream read back with XRANGE
// (hiredis), and short SQL against a database of the suite's own.

#include <map>
#include <string>
#include <vector>

namespace events_test {

struct stream_entry {
  std::string id;  // the stream's own entry id (time-sequence)
  std::map<std::string, std::string> fields;
  const std::string& field(const std::string& name) const;
};

// Every entry of `key` in the Redis at `url`, oldest first (XRANGE in pages). Throws
// std::runtime_error when Redis cannot be reached or answers with an error.
std::vector<stream_entry> read_stream(const std::string& url, const std::string& key = "wallet:events");

// The first column of the first row of `sql` on the database at `url`, as text ("" for none or NULL).
std::string sql_value(const std::string& url, const std::string& sql);
// The first column of every row.
std::vector<std::string> sql_column(const std::string& url, const std::string& sql);

}  // namespace events_test
