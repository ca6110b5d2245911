#pragma once

// What the topic files of this folder (principals, accounts, history, preload) share: row readers
// and a column expression. Only persistence/*.cpp include this header: it pulls in libpqxx,
// which the public headers keep out.

#include <pqxx/row>
#include <pqxx/transaction_base>

#include <optional>
#include <vector>

#include "ledger/types.hpp"
#include "persistence/principals.hpp"

namespace persistence {

// `created_at` as the API shows it: UTC, microseconds, ISO 8601 with a trailing Z.
inline constexpr const char* k_created_at_utc_sql =
    "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";

// A principal from the columns (id, name, role), starting at column 0. An unknown role is an
// error (unknown_value), never a default.
principal_record read_principal(const pqxx::row& row);

// The status of user account `id` as `txn` sees it; nullopt: no such user account (a shard or a
// system account is none). For checks before a posting (a hold's payee, a quote's accounts, an
// adjustment's account); the writer decides again under the row lock.
std::optional<ledger::account_status> account_status_in(pqxx::transaction_base& txn, ledger::account_id id);

// The ids of a PostgreSQL bigint array in its text form ("{1,2,3}").
std::vector<ledger::account_id> parse_id_array(const char* text);

}  // namespace persistence
