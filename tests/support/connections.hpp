#pragma once

// Connections of the suites that drive persistence/ directly, without a server (persistence,
// cluster leases): the options a suite connects with, and the single values it reads back.

#include <cstdint>
#include <string>

#include "persistence/database.hpp"

namespace test_support {

// persistence's defaults for `url`, under the suite's `application_name`, which tells its
// sessions apart in pg_stat_activity.
persistence::connection_options options_for(const std::string& url, const std::string& application_name);

// The first column of the one row `sql` answers on `conn`, run outside any transaction (it commits
// on its own); throws unless it answers exactly one row.
std::int64_t int_of(pqxx::connection& conn, const std::string& sql);
std::string text_of(pqxx::connection& conn, const std::string& sql);

// Drops the scratch database's public schema and makes it again, empty, through `owner` (the
// schema's owner): every table goes at once, append-only ones included. Migrations applied
// afterwards make new tables, never vacuumed or analyzed, as on a database just migrated.
void drop_public_schema(pqxx::connection& owner);

}  // namespace test_support
