#include "persistence/queries.hpp"

#include <pqxx/pqxx>

#include "base/assert.hpp"
#include "persistence/database.hpp"

namespace persistence {
namespace {

constexpr const char* k_account_columns =
    "id, owner_id, currency, kind, status, allow_negative, balance, version, COALESCE(parent_id, 0),"
    " to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";

constexpr const char* k_entry_columns =
    "id, transaction_id::text, account_id, currency, amount, balance_after,"
    " to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";

principal_record read_principal(const pqxx::row& row) {
  principal_record p;
  p.id = row[0].as<std::int64_t>();
  p.name = row[1].as<std::string>();
  p.role = parse_column(ledger::parse_role, row[2].as<std::string>(), "principal.role");
  return p;
}

account_record read_account(const pqxx::row& row) {
  account_record a;
  a.id = row[0].as<std::int64_t>();
  if (!row[1].is_null()) a.owner_id = row[1].as<std::int64_t>();
  a.currency = row[2].as<std::string>();
  a.kind = parse_column(ledger::parse_account_kind, row[3].as<std::string>(), "account.kind");
  a.status = parse_column(ledger::parse_account_status, row[4].as<std::string>(), "account.status");
  a.allow_negative = row[5].as<bool>();
  a.balance = row[6].as<std::int64_t>();
  a.version = row[7].as<std::int64_t>();
  a.parent_id = row[8].as<std::int64_t>();
  a.created_at = row[9].as<std::string>();
  return a;
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

// The account and its shards in ONE statement, so under READ COMMITTED they come from one
// snapshot: with two statements a sweep committing between them (shard -> main) would be seen
// on neither side, and a read that starts after a 201 could miss that payment.
std::optional<account_record> load_account(pqxx::transaction_base& txn, ledger::account_id id, bool lock) {
  auto rows = txn.exec_params(std::string("SELECT ") + k_account_columns +
                                  ", COALESCE(shard_no, -1) FROM account WHERE id = $1 OR parent_id = $1"
                                  " ORDER BY parent_id NULLS FIRST, shard_no" +
                                  (lock ? " FOR UPDATE" : ""),
                              id);
  if (rows.empty() || rows[0][0].as<std::int64_t>() != id) return std::nullopt;
  auto account = read_account(rows[0]);
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto& row = rows[i];
    account.shards.push_back(
        {row[0].as<std::int64_t>(), row[10].as<int>(), row[6].as<std::int64_t>(), row[7].as<std::int64_t>()});
  }
  return account;
}

void add_shards(pqxx::transaction_base& txn, const account_record& parent, int first_shard_no, int count) {
  txn.exec_params(
      "INSERT INTO account (owner_id, currency, kind, parent_id, shard_no)"
      " SELECT $1, $2, 'shard', $3, n FROM generate_series($4::int, $5::int) AS n",
      parent.owner_id, parent.currency, parent.id, first_shard_no, first_shard_no + count - 1);
  txn.exec_params("UPDATE account SET shard_count = $2 WHERE id = $1", parent.id, first_shard_no + count);
}

}  // namespace

ledger::amount_minor account_record::total_balance() const {
  ledger::amount_minor total = balance;
  for (const auto& s : shards) {
    auto next = ledger::checked_add(total, s.balance);
    WALLET_ASSERT(next.has_value(), "an account's total balance fits in int64");
    total = *next;
  }
  return total;
}

std::optional<principal_record> find_principal_by_key(pqxx::connection& conn, const std::string& key_hash_hex) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params(
      "SELECT p.id, p.name, p.role FROM api_key k JOIN principal p ON p.id = k.principal_id"
      " WHERE k.key_hash = decode($1, 'hex')",
      key_hash_hex);
  if (rows.empty()) return std::nullopt;
  return read_principal(rows[0]);
}

std::optional<principal_record> find_principal(pqxx::connection& conn, ledger::principal_id id) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params("SELECT id, name, role FROM principal WHERE id = $1", id);
  if (rows.empty()) return std::nullopt;
  return read_principal(rows[0]);
}

principal_record create_principal(pqxx::connection& conn, const std::string& name, ledger::role role,
                                  const std::string& key_hash_hex) {
  pqxx::work txn(conn);
  auto row = txn.exec_params1("INSERT INTO principal (name, role) VALUES ($1, $2) RETURNING id, name, role", name,
                              std::string(ledger::to_string(role)));
  auto principal = read_principal(row);
  txn.exec_params("INSERT INTO api_key (key_hash, principal_id) VALUES (decode($1, 'hex'), $2)", key_hash_hex,
                  principal.id);
  txn.commit();
  return principal;
}

principal_record ensure_operator(pqxx::connection& conn, const std::string& name, const std::string& key_hash_hex) {
  if (auto existing = find_principal_by_key(conn, key_hash_hex)) return *existing;
  try {
    return create_principal(conn, name, ledger::role::operator_role, key_hash_hex);
  } catch (const pqxx::unique_violation&) {
    // Another server made it first.
    auto existing = find_principal_by_key(conn, key_hash_hex);
    WALLET_ASSERT(existing.has_value(), "a key that violated uniqueness exists");
    return *existing;
  }
}

account_record create_account(pqxx::connection& conn, ledger::principal_id owner, const std::string& currency,
                              int shard_count) {
  pqxx::work txn(conn);
  auto row = txn.exec_params1(std::string("INSERT INTO account (owner_id, currency, kind) VALUES ($1, $2, 'user')"
                                          " RETURNING ") +
                                  k_account_columns,
                              owner, currency);
  auto account = read_account(row);
  if (shard_count > 0) add_shards(txn, account, 0, shard_count);
  auto loaded = load_account(txn, account.id, false);
  txn.commit();
  return *loaded;
}

std::optional<account_record> find_account(pqxx::connection& conn, ledger::account_id id) {
  pqxx::read_transaction txn(conn);
  return load_account(txn, id, false);
}

std::optional<account_record> make_hot(pqxx::connection& conn, ledger::account_id id, int shard_count) {
  pqxx::work txn(conn);
  auto account = load_account(txn, id, true);
  if (!account || account->kind != ledger::account_kind::user) return std::nullopt;
  const int existing = static_cast<int>(account->shards.size());
  if (shard_count > existing) add_shards(txn, *account, existing, shard_count - existing);
  auto loaded = load_account(txn, id, false);
  txn.commit();
  return loaded;
}

std::optional<account_record> set_status(pqxx::connection& conn, ledger::account_id id,
                                         ledger::account_status status) {
  pqxx::work txn(conn);
  auto updated = txn.exec_params("UPDATE account SET status = $2 WHERE (id = $1 OR parent_id = $1) AND kind <> 'system'",
                                 id, std::string(ledger::to_string(status)));
  if (updated.affected_rows() == 0) return std::nullopt;
  auto loaded = load_account(txn, id, false);
  txn.commit();
  return loaded;
}

ledger::account_id ensure_clearing_account(pqxx::connection& conn, const std::string& currency) {
  pqxx::work txn(conn);
  txn.exec_params(
      "INSERT INTO account (currency, kind, allow_negative, system_role) VALUES ($1, 'system', TRUE, 'clearing')"
      " ON CONFLICT (currency, system_role) WHERE system_role IS NOT NULL DO NOTHING",
      currency);
  auto row = txn.exec_params1("SELECT id FROM account WHERE currency = $1 AND system_role = 'clearing'", currency);
  txn.commit();
  return row[0].as<std::int64_t>();
}

entries_page list_entries(pqxx::connection& conn, ledger::account_id id, std::int64_t after, int limit) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params(std::string("SELECT ") + k_entry_columns +
                                  " FROM ledger_entry"
                                  " WHERE account_id IN (SELECT $1::bigint UNION ALL SELECT id FROM account WHERE parent_id = $1)"
                                  "   AND id > $2 ORDER BY id LIMIT $3",
                              id, after, limit + 1);
  entries_page page;
  for (const auto& row : rows) {
    if (static_cast<int>(page.entries.size()) == limit) {
      page.next_after = page.entries.back().id;
      break;
    }
    page.entries.push_back(read_entry(row));
  }
  return page;
}

std::optional<transaction_record> find_transaction(pqxx::connection& conn, const std::string& transaction_id) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params(
      "SELECT id::text, principal_id, type, status, COALESCE(metadata::text, '{}'),"
      " to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
      " FROM journal_transaction WHERE id = $1::uuid",
      transaction_id);
  if (rows.empty()) return std::nullopt;
  transaction_record t;
  t.id = rows[0][0].as<std::string>();
  if (!rows[0][1].is_null()) t.principal_id = rows[0][1].as<std::int64_t>();
  t.type = rows[0][2].as<std::string>();
  t.status = rows[0][3].as<std::string>();
  t.metadata_json = rows[0][4].as<std::string>();
  t.created_at = rows[0][5].as<std::string>();
  auto entries = txn.exec_params(
      std::string("SELECT ") + k_entry_columns +
          ", (SELECT a.owner_id FROM account a WHERE a.id = ledger_entry.account_id)"
          " FROM ledger_entry WHERE transaction_id = $1::uuid ORDER BY id",
      transaction_id);
  for (const auto& row : entries) {
    auto e = read_entry(row);
    if (!row[7].is_null()) e.account_owner = row[7].as<std::int64_t>();
    t.entries.push_back(std::move(e));
  }
  return t;
}

std::optional<stored_response> find_committed(pqxx::connection& conn, ledger::principal_id principal,
                                              const std::string& idempotency_key) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params(
      "SELECT id::text, request_hash, response_status, response_body FROM journal_transaction"
      " WHERE principal_id = $1 AND idempotency_key = $2",
      principal, idempotency_key);
  if (rows.empty()) return std::nullopt;
  return stored_response{rows[0][0].as<std::string>(), rows[0][1].as<std::string>(), rows[0][2].as<int>(),
                         rows[0][3].as<std::string>()};
}

namespace {
std::vector<ledger::account_id> parse_id_array(const char* text) {
  std::vector<ledger::account_id> out;
  pqxx::array_parser parser(text);
  for (auto item = parser.get_next(); item.first != pqxx::array_parser::done; item = parser.get_next()) {
    if (item.first == pqxx::array_parser::string_value) out.push_back(std::stoll(item.second));
  }
  return out;
}
}  // namespace

std::vector<key_record> recent_keys(pqxx::connection& conn, std::int64_t limit) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params(
      "SELECT p.id, p.name, p.role, encode(k.key_hash, 'hex') FROM api_key k JOIN principal p ON p.id = k.principal_id"
      " ORDER BY k.created_at DESC LIMIT $1",
      limit);
  std::vector<key_record> out;
  out.reserve(rows.size());
  for (const auto& row : rows) out.push_back({row[3].as<std::string>(), read_principal(row)});
  return out;
}

std::vector<account_summary> recent_accounts(pqxx::connection& conn, std::int64_t limit) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params(
      "SELECT a.id, a.owner_id, a.currency, a.kind,"
      "       COALESCE((SELECT array_agg(s.id ORDER BY s.shard_no) FROM account s WHERE s.parent_id = a.id), '{}')::text"
      "  FROM account a WHERE a.kind <> 'shard' ORDER BY a.id DESC LIMIT $1",
      limit);
  std::vector<account_summary> out;
  out.reserve(rows.size());
  for (const auto& row : rows) {
    account_summary a;
    a.id = row[0].as<std::int64_t>();
    if (!row[1].is_null()) a.owner_id = row[1].as<std::int64_t>();
    a.currency = row[2].as<std::string>();
    a.kind = parse_column(ledger::parse_account_kind, row[3].as<std::string>(), "account.kind");
    a.shards = parse_id_array(row[4].c_str());
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<sweep_candidate> sweep_candidates(pqxx::connection& conn, int limit) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params(
      "SELECT s.parent_id, s.currency, array_agg(s.id ORDER BY s.shard_no)::text FROM account s"
      " WHERE s.kind = 'shard' AND s.balance > 0 GROUP BY s.parent_id, s.currency ORDER BY s.parent_id LIMIT $1",
      limit);
  std::vector<sweep_candidate> out;
  for (const auto& row : rows) {
    sweep_candidate c;
    c.account = row[0].as<std::int64_t>();
    c.currency = row[1].as<std::string>();
    c.shards = parse_id_array(row[2].c_str());
    out.push_back(std::move(c));
  }
  return out;
}

bool ping(pqxx::connection& conn) {
  pqxx::nontransaction txn(conn);
  txn.exec("SELECT 1");
  return true;
}

}  // namespace persistence
