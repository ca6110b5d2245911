#include "persistence/corrections.hpp"

#include <pqxx/pqxx>

#include "persistence/database.hpp"
#include "persistence/rows.hpp"

namespace persistence {
namespace {

std::string utc(const std::string& column) {
  return "to_char(" + column + " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";
}

std::string text_or_empty(const pqxx::field& f) { return f.is_null() ? std::string() : f.as<std::string>(); }

constexpr const char* k_reversal_target = "corrections_reversal_target";
const std::string k_reversal_target_sql =
    "SELECT j.type, (SELECT r.reversal_id::text FROM transaction_reversal r WHERE r.transaction_id = j.id),"
    "       EXISTS (SELECT 1 FROM deposit_payment d WHERE d.transaction_id = j.id)"
    "  FROM journal_transaction j WHERE j.id = $1::uuid";

// Each entry with the account its row belongs to (a shard's parent), that account's kind, owner
// and shards.
constexpr const char* k_reversal_entries = "corrections_reversal_entries";
const std::string k_reversal_entries_sql =
    "SELECT e.account_id, p.id, e.amount, e.currency, p.kind = 'user',"
    "       COALESCE((SELECT array_agg(s.id ORDER BY s.id) FROM account s WHERE s.parent_id = p.id), '{}')::text,"
    "       p.owner_id"
    "  FROM " +
    entries_of_journal_sql("j.id = $1::uuid") +
    " AS e JOIN account a ON a.id = e.account_id"
    "  JOIN account p ON p.id = COALESCE(a.parent_id, a.id)"
    " ORDER BY e.id";

constexpr const char* k_reversal_links = "corrections_reversal_links";
const std::string k_reversal_links_sql =
    "SELECT transaction_id::text, reversal_id::text, reason FROM transaction_reversal"
    " WHERE transaction_id = $1::uuid OR reversal_id = $1::uuid";

const std::string k_adjustment_columns =
    "id::text, account_id, currency, amount, reason, requested_by, request_hash,"
    " status, decided_by, " +
    utc("decided_at") + ", transaction_id::text, " + utc("created_at");

constexpr const char* k_insert_adjustment = "corrections_insert_adjustment";
const std::string k_insert_adjustment_sql =
    "INSERT INTO adjustment (id, account_id, currency, amount, reason, requested_by, idempotency_key, request_hash)"
    " SELECT $1::uuid, a.id, a.currency, $3, $4, $5, $6, $7 FROM account a"
    " WHERE a.id = $2 AND a.kind = 'user' AND a.status <> 'closed'"
    " ON CONFLICT (requested_by, idempotency_key) DO NOTHING RETURNING " +
    k_adjustment_columns;

constexpr const char* k_adjustment_by_key = "corrections_adjustment_by_key";
const std::string k_adjustment_by_key_sql =
    "SELECT " + k_adjustment_columns + " FROM adjustment WHERE requested_by = $1 AND idempotency_key = $2";

constexpr const char* k_find_adjustment = "corrections_find_adjustment";
const std::string k_find_adjustment_sql = "SELECT " + k_adjustment_columns + " FROM adjustment WHERE id = $1::uuid";

constexpr const char* k_reject_adjustment = "corrections_reject_adjustment";
const std::string k_reject_adjustment_sql =
    "UPDATE adjustment SET status = 'REJECTED', decided_by = $2, decided_at = now()"
    " WHERE id = $1::uuid AND status = 'PENDING_APPROVAL' RETURNING " +
    k_adjustment_columns;

constexpr const char* k_put_rate = "corrections_put_rate";
const std::string k_put_rate_sql =
    "INSERT INTO fx_rate (base, quote, rate, source, updated_by) VALUES ($1, $2, $3, $4, $5)"
    " ON CONFLICT (base, quote) DO UPDATE SET rate = EXCLUDED.rate, source = EXCLUDED.source,"
    "   updated_by = EXCLUDED.updated_by, updated_at = now()"
    " RETURNING " +
    utc("updated_at");

constexpr const char* k_find_rate = "corrections_find_rate";
const std::string k_find_rate_sql =
    "SELECT base, quote, rate, source, " + utc("updated_at") + " FROM fx_rate WHERE base = $1 AND quote = $2";

constexpr const char* k_insert_quote = "corrections_insert_quote";
const std::string k_insert_quote_sql =
    "INSERT INTO fx_quote (id, principal_id, from_account, to_account, from_currency, to_currency, rate, source,"
    "  from_amount, to_amount, expires_at)"
    " VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9, $10, now() + $11::bigint * interval '1 millisecond')"
    " RETURNING " +
    utc("expires_at");

constexpr const char* k_find_quote = "corrections_find_quote";
const std::string k_find_quote_sql =
    "SELECT id::text, principal_id, from_account, to_account, from_currency, to_currency, rate, source,"
    "       from_amount, to_amount, " +
    utc("expires_at") + ", expires_at <= now(), transaction_id::text FROM fx_quote WHERE id = $1::uuid";

constexpr const char* k_find_receipt = "corrections_find_receipt";
constexpr const char* k_find_receipt_sql =
    "SELECT response_status, response_body FROM journal_transaction WHERE id = $1::uuid";

// Defines the statements of this file on `conn` (defining one libpqxx knows already, with the
// same text, does nothing).
void prepare(pqxx::connection& conn) {
  conn.prepare(k_reversal_target, k_reversal_target_sql);
  conn.prepare(k_reversal_entries, k_reversal_entries_sql);
  conn.prepare(k_reversal_links, k_reversal_links_sql);
  conn.prepare(k_insert_adjustment, k_insert_adjustment_sql);
  conn.prepare(k_adjustment_by_key, k_adjustment_by_key_sql);
  conn.prepare(k_find_adjustment, k_find_adjustment_sql);
  conn.prepare(k_reject_adjustment, k_reject_adjustment_sql);
  conn.prepare(k_put_rate, k_put_rate_sql);
  conn.prepare(k_find_rate, k_find_rate_sql);
  conn.prepare(k_insert_quote, k_insert_quote_sql);
  conn.prepare(k_find_quote, k_find_quote_sql);
  conn.prepare(k_find_receipt, k_find_receipt_sql);
}

adjustment_record read_adjustment(const pqxx::row& row) {
  adjustment_record a;
  a.id = row[0].as<std::string>();
  a.account_id = row[1].as<std::int64_t>();
  a.currency = row[2].as<std::string>();
  a.amount = row[3].as<std::int64_t>();
  a.reason = row[4].as<std::string>();
  a.requested_by = row[5].as<std::int64_t>();
  a.request_hash = row[6].as<std::string>();
  a.status = row[7].as<std::string>();
  if (!row[8].is_null()) a.decided_by = row[8].as<std::int64_t>();
  a.decided_at = text_or_empty(row[9]);
  a.transaction_id = text_or_empty(row[10]);
  a.created_at = row[11].as<std::string>();
  return a;
}

}  // namespace

std::optional<reversal_target> find_reversal_target(pqxx::connection& conn, const std::string& transaction_id) {
  prepare(conn);
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_prepared(k_reversal_target, transaction_id);
  if (rows.empty()) return std::nullopt;
  reversal_target t;
  t.id = transaction_id;
  t.type = rows[0][0].as<std::string>();
  t.reversed_by = text_or_empty(rows[0][1]);
  t.has_deposit_row = rows[0][2].as<bool>();
  for (const auto& row : txn.exec_prepared(k_reversal_entries, transaction_id)) {
    reversal_entry_record e;
    e.row = row[0].as<std::int64_t>();
    e.account = row[1].as<std::int64_t>();
    e.amount = row[2].as<std::int64_t>();
    e.currency = row[3].as<std::string>();
    e.user_account = row[4].as<bool>();
    e.shards = parse_id_array(row[5].c_str());
    if (!row[6].is_null()) e.owner = row[6].as<std::int64_t>();
    t.entries.push_back(std::move(e));
  }
  return t;
}

reversal_links find_reversal_links(pqxx::connection& conn, const std::string& transaction_id) {
  prepare(conn);
  pqxx::read_transaction txn(conn);
  reversal_links links;
  for (const auto& row : txn.exec_prepared(k_reversal_links, transaction_id)) {
    if (row[0].as<std::string>() == transaction_id) {
      links.reversed_by = row[1].as<std::string>();
    } else {
      links.reverses = row[0].as<std::string>();
    }
    links.reason = row[2].as<std::string>();
  }
  return links;
}

adjustment_created create_adjustment(pqxx::connection& conn, const adjustment_record& a, const std::string& key,
                                     const audit_entry& audit) {
  prepare(conn);
  pqxx::work txn(conn);
  auto rows = txn.exec_prepared(k_insert_adjustment, a.id, a.account_id, a.amount, a.reason, a.requested_by, key,
                                a.request_hash);
  if (rows.empty()) {
    // Either the key made one already, or the account is no user account, or it is closed.
    auto existing = txn.exec_prepared(k_adjustment_by_key, a.requested_by, key);
    if (!existing.empty()) return {ledger::error_code::ok, read_adjustment(existing[0]), false};
    const bool closed = account_status_in(txn, a.account_id) == ledger::account_status::closed;
    return {closed ? ledger::error_code::account_closed : ledger::error_code::not_found, {}, false};
  }
  adjustment_created out{ledger::error_code::ok, read_adjustment(rows[0]), true};
  append_audit(txn, audit, "adjustment:" + out.adjustment.id);
  txn.commit();
  return out;
}

std::optional<adjustment_record> find_adjustment(pqxx::connection& conn, const std::string& id) {
  prepare(conn);
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_prepared(k_find_adjustment, id);
  if (rows.empty()) return std::nullopt;
  return read_adjustment(rows[0]);
}

adjustment_decision reject_adjustment(pqxx::connection& conn, const std::string& id, ledger::principal_id decider,
                                      const audit_entry& audit) {
  prepare(conn);
  pqxx::work txn(conn);
  // The UPDATE waits for an approval that holds the row's lock, then finds it decided.
  auto rows = txn.exec_prepared(k_reject_adjustment, id, decider);
  adjustment_decision out;
  if (rows.empty()) {
    auto current = txn.exec_prepared(k_find_adjustment, id);
    if (!current.empty()) out.adjustment = read_adjustment(current[0]);
    return out;
  }
  out.adjustment = read_adjustment(rows[0]);
  out.decided = true;
  append_audit(txn, audit);
  txn.commit();
  return out;
}

fx_rate_record put_fx_rate(pqxx::connection& conn, const fx_rate_record& r, ledger::principal_id by,
                           const audit_entry& audit) {
  prepare(conn);
  pqxx::work txn(conn);
  auto row = txn.exec_prepared1(k_put_rate, r.base, r.quote, r.rate, r.source, by);
  fx_rate_record out = r;
  out.updated_at = row[0].as<std::string>();
  append_audit(txn, audit);
  txn.commit();
  return out;
}

std::optional<fx_rate_record> find_fx_rate(pqxx::connection& conn, const std::string& base, const std::string& quote) {
  prepare(conn);
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_prepared(k_find_rate, base, quote);
  if (rows.empty()) return std::nullopt;
  return fx_rate_record{rows[0][0].as<std::string>(), rows[0][1].as<std::string>(), rows[0][2].as<std::string>(),
                        rows[0][3].as<std::string>(), rows[0][4].as<std::string>()};
}

fx_quote_record create_fx_quote(pqxx::connection& conn, fx_quote_record q, std::int64_t ttl_ms) {
  prepare(conn);
  pqxx::work txn(conn);
  auto row = txn.exec_prepared1(k_insert_quote, q.id, q.principal, q.from_account, q.to_account, q.from_currency,
                                q.to_currency, q.rate, q.source, q.from_amount, q.to_amount, ttl_ms);
  q.expires_at = row[0].as<std::string>();
  txn.commit();
  return q;
}

std::optional<fx_quote_record> find_fx_quote(pqxx::connection& conn, const std::string& id) {
  prepare(conn);
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_prepared(k_find_quote, id);
  if (rows.empty()) return std::nullopt;
  const auto& row = rows[0];
  fx_quote_record q;
  q.id = row[0].as<std::string>();
  q.principal = row[1].as<std::int64_t>();
  q.from_account = row[2].as<std::int64_t>();
  q.to_account = row[3].as<std::int64_t>();
  q.from_currency = row[4].as<std::string>();
  q.to_currency = row[5].as<std::string>();
  q.rate = row[6].as<std::string>();
  q.source = row[7].as<std::string>();
  q.from_amount = row[8].as<std::int64_t>();
  q.to_amount = row[9].as<std::int64_t>();
  q.expires_at = row[10].as<std::string>();
  q.expired = row[11].as<bool>();
  q.transaction_id = text_or_empty(row[12]);
  return q;
}

std::optional<std::pair<int, std::string>> find_receipt(pqxx::connection& conn, const std::string& transaction_id) {
  prepare(conn);
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_prepared(k_find_receipt, transaction_id);
  if (rows.empty()) return std::nullopt;
  return std::make_pair(rows[0][0].as<int>(), rows[0][1].as<std::string>());
}

}  // namespace persistence
