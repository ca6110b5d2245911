#include "persistence/accounts.hpp"

#include <pqxx/pqxx>

#include "base/assert.hpp"
#include "persistence/database.hpp"
#include "persistence/rows.hpp"

namespace persistence {
namespace {

const std::string k_account_columns =
    std::string("id, owner_id, currency, kind, status, allow_negative, balance, version, COALESCE(parent_id, 0), ") +
    k_created_at_utc_sql;

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

// The account and its shards in ONE statement, so under READ COMMITTED they come from one
// snapshot: with two statements a sweep committing between them (shard -> main) would be seen
// on neither side, and a read that starts after a 201 could miss that payment.
std::optional<account_record> load_account(pqxx::transaction_base& txn, ledger::account_id id, bool lock) {
  auto rows = txn.exec_params("SELECT " + k_account_columns +
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

account_record create_account(pqxx::connection& conn, ledger::principal_id owner, const std::string& currency,
                              int shard_count) {
  pqxx::work txn(conn);
  auto row = txn.exec_params1(
      "INSERT INTO account (owner_id, currency, kind) VALUES ($1, $2, 'user') RETURNING " + k_account_columns, owner,
      currency);
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

}  // namespace persistence
