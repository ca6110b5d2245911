#include "persistence/history.hpp"

#include <pqxx/pqxx>

#include <string_view>
#include <unordered_map>

#include "base/assert.hpp"
#include "persistence/database.hpp"
#include "persistence/payments.hpp"
#include "persistence/rows.hpp"

namespace persistence {
namespace {

// The columns read_entry reads, in its order.
const std::string k_entry_columns_sql =
    std::string("id, transaction_id::text, account_id, currency, amount, balance_after, ") + k_created_at_utc_sql;

// The entries of an account and of its shards after the entry id $2, at most $3 of them
// (ledger_entry_account serves each account's range).
constexpr const char* k_list_entries = "history_list_entries";
const std::string k_list_entries_sql =
    "SELECT " + k_entry_columns_sql +
    ", (SELECT j.type FROM journal_transaction j WHERE j.id = ledger_entry.transaction_id)"
    " FROM ledger_entry"
    " WHERE account_id IN (SELECT $1::bigint UNION ALL SELECT id FROM account WHERE parent_id = $1)"
    "   AND id > $2 ORDER BY id LIMIT $3";

// The rows of a hot account (its main row and shards), locked FOR SHARE; none for an account
// without shards. Entry ids are drawn from one sequence when a writer inserts its entries, not
// when it commits, and a writer draws them only while it holds the rows of those entries (it has
// updated their balance caches in the same statement). One row's entries therefore commit in id
// order, but a hot account's shards are credited by several writers at once: an entry of shard A
// with a smaller id than a committed entry of shard B may still be in flight, and a page that
// ended at B's entry would leave it behind its cursor for good. Locking the rows first waits for
// every such writer and keeps new ones out until the page is read; the entries are then read in a
// statement of their own, which sees what those writers committed, and every entry committed
// later has a larger id than any the page returns.
constexpr const char* k_lock_hot_rows = "history_lock_hot_rows";
const std::string k_lock_hot_rows_sql =
    "SELECT id FROM account WHERE (id = $1 OR parent_id = $1)"
    "   AND EXISTS (SELECT 1 FROM account WHERE parent_id = $1) ORDER BY id FOR SHARE";

constexpr const char* k_find_transaction = "history_find_transaction";
const std::string k_find_transaction_sql =
    std::string("SELECT id::text, principal_id, type, status, COALESCE(metadata::text, '{}'), ") +
    k_created_at_utc_sql + " FROM journal_transaction WHERE id = $1::uuid";

// A transaction's entries with the owner of each entry's account (who may see the transaction).
constexpr const char* k_transaction_entries = "history_transaction_entries";
const std::string k_transaction_entries_sql =
    "SELECT " + k_entry_columns_sql +
    ", (SELECT a.owner_id FROM account a WHERE a.id = ledger_entry.account_id)"
    " FROM " +
    entries_of_journal_sql("j.id = $1::uuid") + " AS ledger_entry ORDER BY id";

// Many transactions at once (POST /v1/transactions/lookup), with what the single read gathers one
// query each: a payment's refunded total and refunds (at most $2, oldest first, comma-separated),
// the payment a refund gave back, and either side of a reversal. Every subquery is an index lookup.
constexpr const char* k_lookup_transactions = "history_lookup_transactions";
const std::string k_lookup_transactions_sql =
    std::string("SELECT j.id::text, j.principal_id, j.type, j.status, COALESCE(j.metadata::text, '{}'), ") +
    k_created_at_utc_sql +
    ", (SELECT t.refunded FROM payment_refund_total t WHERE t.transaction_id = j.id),"
    " array_to_string(ARRAY(SELECT r.transaction_id::text FROM payment_refund r"
    "                        WHERE r.payment_transaction_id = j.id ORDER BY r.created_at, r.transaction_id"
    "                        LIMIT $2), ','),"
    " (SELECT p.payment_transaction_id::text FROM payment_refund p WHERE p.transaction_id = j.id),"
    " (SELECT v.reversal_id::text FROM transaction_reversal v WHERE v.transaction_id = j.id),"
    " (SELECT v.transaction_id::text FROM transaction_reversal v WHERE v.reversal_id = j.id)"
    " FROM journal_transaction j WHERE j.id = ANY($1::uuid[])";

// The entries of those transactions, each transaction's in entry order (each read through its
// journal row's range of entry ids).
constexpr const char* k_lookup_entries = "history_lookup_entries";
const std::string k_lookup_entries_sql = "SELECT " + k_entry_columns_sql +
                                         ", (SELECT a.owner_id FROM account a WHERE a.id = ledger_entry.account_id)"
                                         " FROM " +
                                         entries_of_journal_sql("j.id = ANY($1::uuid[])") +
                                         " AS ledger_entry ORDER BY transaction_id, id";

constexpr const char* k_find_committed = "history_find_committed";
// One key names one request across routes: a stored batch, a journal transaction or a hold (the
// writer looks in all three too). A batch's first item is a journal row under the batch's own key,
// so the batch is read first.
constexpr const char* k_find_committed_sql =
    "(SELECT '' AS id, request_hash, response_status, response_body FROM transfer_batch"
    "   WHERE principal_id = $1 AND idempotency_key = $2)"
    " UNION ALL"
    " (SELECT id::text, request_hash, response_status, response_body FROM journal_transaction"
    "   WHERE principal_id = $1 AND idempotency_key = $2)"
    " UNION ALL"
    " (SELECT id::text, request_hash, 201, response_body FROM hold"
    "   WHERE principal_id = $1 AND idempotency_key = $2)"
    " LIMIT 1";

// $2: microseconds since the epoch, or NULL for now; a time after now is now. Whole seconds go
// through to_timestamp (exact for them) and the rest as an interval, so no microsecond is lost to
// floating point.
constexpr const char* k_balance_as_of = "history_balance_as_of";
constexpr const char* k_balance_as_of_sql =
    "WITH t AS (SELECT CASE WHEN $2::bigint IS NULL THEN now()"
    "                  ELSE LEAST(now(), to_timestamp($2::bigint / 1000000)"
    "                                    + ($2::bigint % 1000000) * interval '1 microsecond') END AS at),"
    "     r AS (SELECT $1::bigint AS id UNION ALL SELECT id FROM account WHERE parent_id = $1)"
    " SELECT (SELECT COALESCE(sum(x.b), 0)::bigint FROM"
    "          (SELECT (SELECT e.balance_after FROM ledger_entry e"
    "                    WHERE e.account_id = r.id AND e.created_at <= t.at ORDER BY e.id DESC LIMIT 1) AS b"
    "             FROM r) x),"
    "        to_char(t.at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
    "   FROM t";

// One row more than a page holds is read: when it is there, the page has a successor.
constexpr int k_next_page_probe_rows = 1;

// journal_transaction.type and .status reach the API as text. A text the server does not know is
// an error (unknown_value) like any other enum text read from the database, never passed on
// (ledger::parse_transaction_type knows every type).

// The only status a committed transaction has (migration 001 allows no other).
constexpr std::string_view k_status_completed = "COMPLETED";

std::optional<std::string_view> parse_transaction_status(std::string_view text) {
  if (text == k_status_completed) return k_status_completed;
  return std::nullopt;
}

// The items of a comma-separated list (none in an empty text).
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    items.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

entry_record read_entry(const pqxx::row& row) {
  entry_record e;
  e.id = row[0].as<std::int64_t>();
  e.transaction_id = row[1].as<std::string>();
  e.account_id = row[2].as<std::int64_t>();
  e.currency = row[3].as<std::string>();
  e.amount = row[4].as<std::int64_t>();
  e.balance_after = row[5].as<std::int64_t>();
  e.created_at = row[6].as<std::string>();
  return e;
}

}  // namespace

void prepare_history_statements(pqxx::connection& conn) {
  conn.prepare(k_list_entries, k_list_entries_sql);
  conn.prepare(k_lock_hot_rows, k_lock_hot_rows_sql);
  conn.prepare(k_find_transaction, k_find_transaction_sql);
  conn.prepare(k_transaction_entries, k_transaction_entries_sql);
  conn.prepare(k_lookup_transactions, k_lookup_transactions_sql);
  conn.prepare(k_lookup_entries, k_lookup_entries_sql);
  conn.prepare(k_find_committed, k_find_committed_sql);
  conn.prepare(k_balance_as_of, k_balance_as_of_sql);
}

entries_page list_entries(pqxx::connection& conn, ledger::account_id id, std::int64_t after, int limit) {
  WALLET_ASSERT(limit > 0, "a page holds one entry at least");
  // Not read-only: FOR SHARE (k_lock_hot_rows) writes the rows' lock marks.
  pqxx::work txn(conn);
  txn.exec_prepared(k_lock_hot_rows, id);
  auto rows = txn.exec_prepared(k_list_entries, id, after, limit + k_next_page_probe_rows);
  entries_page page;
  for (const auto& row : rows) {
    if (static_cast<int>(page.entries.size()) == limit) {
      page.next_after = page.entries.back().id;
      break;
    }
    auto entry = read_entry(row);
    entry.transaction_type = std::string(ledger::to_string(
        parse_column(ledger::parse_transaction_type, row[7].as<std::string>(), "journal_transaction.type")));
    page.entries.push_back(std::move(entry));
  }
  txn.commit();
  return page;
}

std::optional<transaction_record> find_transaction(pqxx::connection& conn, const std::string& transaction_id) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_prepared(k_find_transaction, transaction_id);
  if (rows.empty()) return std::nullopt;
  transaction_record t;
  t.id = rows[0][0].as<std::string>();
  if (!rows[0][1].is_null()) t.principal_id = rows[0][1].as<std::int64_t>();
  t.type = ledger::to_string(
      parse_column(ledger::parse_transaction_type, rows[0][2].as<std::string>(), "journal_transaction.type"));
  t.status = parse_column(parse_transaction_status, rows[0][3].as<std::string>(), "journal_transaction.status");
  t.metadata_json = rows[0][4].as<std::string>();
  t.created_at = rows[0][5].as<std::string>();
  for (const auto& row : txn.exec_prepared(k_transaction_entries, transaction_id)) {
    auto e = read_entry(row);
    if (!row[7].is_null()) e.account_owner = row[7].as<std::int64_t>();
    t.entries.push_back(std::move(e));
  }
  return t;
}

std::vector<transaction_record> lookup_transactions(pqxx::connection& conn,
                                                    const std::vector<std::string>& transaction_ids) {
  std::vector<transaction_record> out;
  if (transaction_ids.empty()) return out;
  pqxx::read_transaction txn(conn);
  std::unordered_map<std::string, std::size_t> at;
  for (const auto& row :
       txn.exec_prepared(k_lookup_transactions, pg_array(transaction_ids), k_payment_refunds_listed_max)) {
    transaction_record t;
    t.id = row[0].as<std::string>();
    if (!row[1].is_null()) t.principal_id = row[1].as<std::int64_t>();
    t.type = ledger::to_string(
        parse_column(ledger::parse_transaction_type, row[2].as<std::string>(), "journal_transaction.type"));
    t.status = parse_column(parse_transaction_status, row[3].as<std::string>(), "journal_transaction.status");
    t.metadata_json = row[4].as<std::string>();
    t.created_at = row[5].as<std::string>();
    if (!row[6].is_null()) t.refunded = row[6].as<std::int64_t>();
    for (const auto& id : split_list(row[7].as<std::string>())) t.refund_ids.push_back(id);
    if (!row[8].is_null()) t.refunded_payment = row[8].as<std::string>();
    if (!row[9].is_null()) t.reversed_by = row[9].as<std::string>();
    if (!row[10].is_null()) t.reverses = row[10].as<std::string>();
    at.emplace(t.id, out.size());
    out.push_back(std::move(t));
  }
  if (out.empty()) return out;
  for (const auto& row : txn.exec_prepared(k_lookup_entries, pg_array(transaction_ids))) {
    auto e = read_entry(row);
    if (!row[7].is_null()) e.account_owner = row[7].as<std::int64_t>();
    const auto it = at.find(e.transaction_id);
    WALLET_ASSERT(it != at.end(), "an entry of a transaction looked up belongs to one that was found");
    out[it->second].entries.push_back(std::move(e));
  }
  return out;
}

balance_as_of_record balance_as_of(pqxx::connection& conn, ledger::account_id id,
                                   std::optional<std::int64_t> as_of_us) {
  pqxx::read_transaction txn(conn);
  auto row = txn.exec_prepared1(k_balance_as_of, id, as_of_us);
  return balance_as_of_record{row[0].as<std::int64_t>(), row[1].as<std::string>()};
}

std::optional<stored_response> find_committed(pqxx::connection& conn, ledger::principal_id principal,
                                              const std::string& idempotency_key) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_prepared(k_find_committed, principal, idempotency_key);
  if (rows.empty()) return std::nullopt;
  return stored_response{rows[0][0].as<std::string>(), rows[0][1].as<std::string>(), rows[0][2].as<int>(),
                         rows[0][3].as<std::string>()};
}

}  // namespace persistence
