#pragma once

// Versioned schema migrations: the `.sql` files of persistence/migrations, compiled into the
// binary, applied in order by the owner role, each in its own transaction, recorded in
// `schema_migrations`. Applying them again changes nothing.

#include <string>
#include <vector>

#include "persistence/database.hpp"

namespace persistence {

struct migration {
  std::string version;  // the file name without ".sql", e.g. "001_ledger"
  std::string sql;
};

const std::vector<migration>& migrations();

// Applies every migration not yet recorded. Returns the versions applied now.
// An advisory lock keeps two servers starting at once from racing.
std::vector<std::string> apply_migrations(const connection_options& owner);

}  // namespace persistence
