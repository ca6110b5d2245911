#pragma once

// What the topic files of this folder (principals, accounts, history, preload) share: row readers
// and column and join expressions. Only persistence/*.cpp include this header: it pulls in libpqxx,
// which the public headers keep out.

#include <pqxx/row>
#include <pqxx/transaction_base>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ledger/types.hpp"
#include "persistence/principals.hpp"

namespace persistence {

// `created_at` as the API shows it: UTC, microseconds, ISO 8601 with a trailing Z.
inline constexpr const char* k_created_at_utc_sql =
    "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";

// The condition that pairs the journal row aliased `j` with its entries aliased `e` (migration
// 024): the journal row records the smallest and largest id its entries were given, so they are
// read as one range of ledger_entry's primary key, less any entries of other transactions whose
// ids fell in between. Pairing one journal row, a join on it is planned as that range. Pairing
// many, read each row's entries in a subquery of its own (`CROSS JOIN LATERAL (... OFFSET 0)`):
// the planner cannot tell how wide a range is, and joined whole it may hash the entry table on
// transaction_id instead of reading the ranges.
inline std::string entries_of_sql(std::string_view e, std::string_view j) {
  std::string out;
  out.append(e).append(".id BETWEEN ").append(j).append(".first_entry_id AND ").append(j).append(".last_entry_id AND ");
  out.append(e).append(".transaction_id = ").append(j).append(".id");
  return out;
}

// A derived table of the entries of the journal rows (aliased `j`) that `journal_where` selects,
// each row's read as its range (above): alias it, and it has ledger_entry's columns and no other.
inline std::string entries_of_journal_sql(std::string_view journal_where) {
  std::string out = "(SELECT e.* FROM journal_transaction j CROSS JOIN LATERAL (SELECT * FROM ledger_entry e WHERE ";
  out.append(entries_of_sql("e", "j")).append(" OFFSET 0) e WHERE ").append(journal_where).append(")");
  return out;
}

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
