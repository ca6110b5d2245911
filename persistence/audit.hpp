#pragma once

// The audit log (migration 009): who did what, when, in which request. One row per operator
// action, written in the transaction of the action wherever the action has one of its own here
// (principals, keys, accounts, providers; the money flows add theirs to the posting, see
// persistence/batch.hpp). Append-only: the database refuses UPDATE, DELETE and TRUNCATE.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ledger/types.hpp"
#include "persistence/pqxx_fwd.hpp"

namespace pqxx {
class transaction_base;
}

namespace persistence {

// One action to record. The detail is a small JSON object (at most 4 KiB) that never holds a
// secret: no API key, no signing secret.
struct audit_entry {
  ledger::principal_id principal = 0;  // who acted
  std::string action;                  // "<object>.<verb>", e.g. "account.freeze"
  std::string target;                  // what it acted on, e.g. "account:42"
  std::string detail_json = "{}";
  std::string request_id;
};

// Appends `entry` in `txn`, with `target` when it is not empty (a target made in the same
// transaction, e.g. a new account's id) and the members of `extra_json` added to the detail.
// Takes the audit log's transaction-scoped lock, held until COMMIT: call it last in a
// transaction, after every row lock the transaction takes, so that no one waits for a row lock
// while holding it.
void append_audit(pqxx::transaction_base& txn, const audit_entry& entry, const std::string& target = {},
                  const std::string& extra_json = "{}");
// The same, in a transaction of its own: for an action that committed elsewhere (a sweep, the
// start of a reconciliation run).
void append_audit(pqxx::connection& conn, const audit_entry& entry);

// The posting path writes its audit rows within one multi-statement write: the lock statement
// once, then one INSERT per row, after every other write of the batch. The values are SQL
// literals quoted by the caller; `detail_sql` is a jsonb expression.
const std::string& audit_lock_sql();
std::string audit_insert_sql(const std::string& principal_sql, const std::string& action_sql,
                             const std::string& target_sql, const std::string& detail_sql,
                             const std::string& request_id_sql);

struct audit_record {
  std::int64_t id = 0;
  ledger::principal_id principal = 0;
  std::string action;
  std::string target;
  std::string detail_json;
  std::string request_id;
  std::string created_at;
};

struct audit_page {
  std::vector<audit_record> entries;
  std::optional<std::int64_t> next_after;  // pass as `after` for the next page
};

// Entries after the id `after`, oldest first; at most `limit` (> 0) of them.
audit_page list_audit(pqxx::connection& conn, std::int64_t after, int limit);

// Defines this file's prepared statements on a connection. connect() calls it for every
// connection it opens; libpqxx registers each statement with the server on its first use.
void prepare_audit_statements(pqxx::connection& conn);

}  // namespace persistence
