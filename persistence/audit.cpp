#include "persistence/audit.hpp"

#include <pqxx/pqxx>

#include "base/assert.hpp"
#include "persistence/rows.hpp"

namespace persistence {
namespace {

// An arbitrary, fixed key for the transaction-scoped advisory lock under which audit rows are
// inserted: "auditlog". Held from the insert to COMMIT, it makes ids visible in commit order, so
// that a reader paging by id never passes an id that a slower transaction fills in later. Every
// audited action is an administrative one (a few a second at most), so the lock costs nothing
// that matters; it is taken last in each transaction, after its row locks, so it never waits
// behind a row lock while held.
constexpr std::int64_t k_audit_lock_key = 0x61756469746c6f67;

constexpr const char* k_lock = "audit_lock";
const std::string k_lock_sql = "SELECT pg_advisory_xact_lock(" + std::to_string(k_audit_lock_key) + ")";

constexpr const char* k_insert = "audit_insert";
constexpr const char* k_insert_sql =
    "INSERT INTO audit_log (principal_id, action, target, detail, request_id)"
    " VALUES ($1, $2, $3, $4::jsonb || $5::jsonb, $6)";

// One row more than a page holds is read: when it is there, the page has a successor.
constexpr const char* k_list = "audit_list";
const std::string k_list_sql = std::string("SELECT id, principal_id, action, target, detail::text, request_id, ") +
                               k_created_at_utc_sql + " FROM audit_log WHERE id > $1 ORDER BY id LIMIT $2";
constexpr int k_next_page_probe_rows = 1;

}  // namespace

void prepare_audit_statements(pqxx::connection& conn) {
  conn.prepare(k_lock, k_lock_sql);
  conn.prepare(k_insert, k_insert_sql);
  conn.prepare(k_list, k_list_sql);
}

void append_audit(pqxx::transaction_base& txn, const audit_entry& entry, const std::string& target,
                  const std::string& extra_json) {
  WALLET_ASSERT(entry.principal > 0, "an audited action has a principal");
  WALLET_ASSERT(!entry.action.empty() && !entry.request_id.empty(), "an audited action has a name and a request");
  txn.exec_prepared(k_lock);
  txn.exec_prepared0(k_insert, entry.principal, entry.action, target.empty() ? entry.target : target, entry.detail_json,
                     extra_json, entry.request_id);
}

void append_audit(pqxx::connection& conn, const audit_entry& entry) {
  pqxx::work txn(conn);
  append_audit(txn, entry);
  txn.commit();
}

const std::string& audit_lock_sql() { return k_lock_sql; }

std::string audit_insert_sql(const std::string& principal_sql, const std::string& action_sql,
                             const std::string& target_sql, const std::string& detail_sql,
                             const std::string& request_id_sql) {
  return "INSERT INTO audit_log (principal_id, action, target, detail, request_id) VALUES (" + principal_sql + ", " +
         action_sql + ", " + target_sql + ", " + detail_sql + ", " + request_id_sql + ")";
}

audit_page list_audit(pqxx::connection& conn, std::int64_t after, int limit) {
  WALLET_ASSERT(limit > 0, "a page holds one entry at least");
  pqxx::read_transaction txn(conn);
  audit_page page;
  for (const auto& row : txn.exec_prepared(k_list, after, limit + k_next_page_probe_rows)) {
    if (static_cast<int>(page.entries.size()) == limit) {
      page.next_after = page.entries.back().id;
      break;
    }
    audit_record a;
    a.id = row[0].as<std::int64_t>();
    a.principal = row[1].as<std::int64_t>();
    a.action = row[2].as<std::string>();
    a.target = row[3].as<std::string>();
    a.detail_json = row[4].as<std::string>();
    a.request_id = row[5].as<std::string>();
    a.created_at = row[6].as<std::string>();
    page.entries.push_back(std::move(a));
  }
  return page;
}

}  // namespace persistence
