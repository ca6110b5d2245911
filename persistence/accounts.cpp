#include "persistence/accounts.hpp"

#include <functional>

#include <pqxx/pqxx>

#include "base/assert.hpp"
#include "persistence/database.hpp"
#include "persistence/rows.hpp"

namespace persistence {
namespace {

// The columns of an account row, in the order of k_account_columns_sql.
enum account_column : int {
  col_id,
  col_owner_id,
  col_currency,
  col_kind,
  col_status,
  col_allow_negative,
  col_balance,
  col_version,
  col_parent_id,
  col_created_at,
  col_fee_bps,
  col_fee_fixed,
  col_held,
  col_held_version,
  col_status_version,
  col_shard_no,  // only where a statement selects it after the others (k_load_sql)
};

const std::string k_account_columns_sql =
    std::string("id, owner_id, currency, kind, status, allow_negative, balance, version, COALESCE(parent_id, 0), ") +
    k_created_at_utc_sql + ", fee_bps, fee_fixed, held, held_version, status_version";

// The account and its shards in ONE statement, so under READ COMMITTED they come from one
// snapshot: with two statements a sweep committing between them (shard -> main) would be seen
// on neither side, and a read that starts after a 201 could miss that payment. The main row
// comes first (its parent_id is NULL), then the shards by number.
constexpr const char* k_load = "account_load";
const std::string k_load_sql = "SELECT " + k_account_columns_sql +
                               ", shard_no FROM account WHERE id = $1 OR parent_id = $1"
                               " ORDER BY parent_id NULLS FIRST, shard_no";

// The same rows, locked: adding shards must not race another writer that adds them. FOR NO KEY
// UPDATE, as the writers lock (persistence/batch.cpp).
constexpr const char* k_load_for_update = "account_load_for_update";
const std::string k_load_for_update_sql = k_load_sql + " FOR NO KEY UPDATE";

// Waits for every open transaction that locked one account row (FOR SHARE conflicts with the
// writers' FOR NO KEY UPDATE and with their UPDATEs); the lock goes with its own transaction.
constexpr const char* k_wait_for_writers = "account_wait_for_writers";
constexpr const char* k_wait_for_writers_sql = "SELECT id FROM account WHERE id = $1 FOR SHARE";

constexpr const char* k_insert = "account_insert";
const std::string k_insert_sql =
    "INSERT INTO account (owner_id, currency, kind) VALUES ($1, $2, 'user') RETURNING " + k_account_columns_sql;

// Shards $4 to $5 (inclusive) of the account $3, owned by $1, in currency $2, in its status: a
// frozen account's new shards take no credit its main row would refuse.
constexpr const char* k_insert_shards = "account_insert_shards";
constexpr const char* k_insert_shards_sql =
    "INSERT INTO account (owner_id, currency, kind, parent_id, shard_no, status)"
    " SELECT $1, $2, 'shard', $3, n, (SELECT status FROM account WHERE id = $3)"
    "   FROM generate_series($4::int, $5::int) AS n";

constexpr const char* k_set_shard_count = "account_set_shard_count";
constexpr const char* k_set_shard_count_sql = "UPDATE account SET shard_count = $2 WHERE id = $1";

// An account and its shards change status together; system accounts never do. The rows are
// locked first, in ascending id order like every writer and sweep locks them: the UPDATE alone
// locks them in the order it finds them on disk (a shard before its main row, once the main row
// has been rewritten), and a sweep holding the main row while it waits for that shard would be a
// deadlock that PostgreSQL breaks by aborting one side.
constexpr const char* k_lock_for_status = "account_lock_for_status";
// Only an account's own id names it: a shard's, or a system account's, names nothing to change.
constexpr const char* k_lock_for_status_sql =
    "SELECT id FROM account WHERE (id = $1 OR parent_id = $1) AND kind <> 'system'"
    "   AND EXISTS (SELECT 1 FROM account m WHERE m.id = $1 AND m.parent_id IS NULL AND m.kind <> 'system')"
    " ORDER BY id FOR NO KEY UPDATE";
// Withdrawals of an account still waiting for their payout (withdrawal_account index).
constexpr const char* k_pending_withdrawals = "account_pending_withdrawals";
constexpr const char* k_pending_withdrawals_sql =
    "SELECT count(*) FROM withdrawal WHERE account_id = $1 AND status = 'PENDING'";

// Adjustments of an account still awaiting a second operator (migration 023's partial index).
constexpr const char* k_pending_adjustments = "account_pending_adjustments";
constexpr const char* k_pending_adjustments_sql =
    "SELECT count(*) FROM adjustment WHERE account_id = $1 AND status = 'PENDING_APPROVAL'";

constexpr const char* k_set_status = "account_set_status";
constexpr const char* k_set_status_sql =
    "UPDATE account SET status = $2, status_version = status_version + 1"
    " WHERE (id = $1 OR parent_id = $1) AND kind <> 'system'"
    "   AND EXISTS (SELECT 1 FROM account m WHERE m.id = $1 AND m.parent_id IS NULL AND m.kind <> 'system')";

// The system_role of the clearing account of a currency (where deposits come from).
constexpr const char* k_clearing_role = "clearing";

constexpr const char* k_insert_system = "account_insert_system";
constexpr const char* k_insert_system_sql =
    "INSERT INTO account (currency, kind, allow_negative, system_role) VALUES ($1, 'system', TRUE, $2)"
    " ON CONFLICT (currency, system_role) WHERE system_role IS NOT NULL DO NOTHING";

constexpr const char* k_find_system = "account_find_system";
constexpr const char* k_find_system_sql = "SELECT id FROM account WHERE currency = $1 AND system_role = $2";

// The fee schedule of the payments a user account receives (migration 007): on its main row only,
// also for a hot account (the ledger writer reads it there when it locks a shard).
constexpr const char* k_set_fees = "account_set_fees";
constexpr const char* k_set_fees_sql =
    "UPDATE account SET fee_bps = $2, fee_fixed = $3 WHERE id = $1 AND kind = 'user'";

constexpr const char* k_sweep_candidates = "account_sweep_candidates";
constexpr const char* k_sweep_candidates_sql =
    "SELECT s.parent_id, s.currency, array_agg(s.id ORDER BY s.shard_no)::text FROM account s"
    " WHERE s.kind = 'shard' AND s.balance > 0 AND s.parent_id > $2"
    " GROUP BY s.parent_id, s.currency ORDER BY s.parent_id LIMIT $1";

// The shard numbers of a hot account start here.
constexpr int k_first_shard_no = 0;

account_record read_account(const pqxx::row& row) {
  account_record a;
  a.id = row[col_id].as<std::int64_t>();
  if (!row[col_owner_id].is_null()) a.owner_id = row[col_owner_id].as<std::int64_t>();
  a.currency = row[col_currency].as<std::string>();
  a.kind = parse_column(ledger::parse_account_kind, row[col_kind].as<std::string>(), "account.kind");
  a.status = parse_column(ledger::parse_account_status, row[col_status].as<std::string>(), "account.status");
  a.allow_negative = row[col_allow_negative].as<bool>();
  a.balance = row[col_balance].as<std::int64_t>();
  a.version = row[col_version].as<std::int64_t>();
  a.parent_id = row[col_parent_id].as<std::int64_t>();
  a.created_at = row[col_created_at].as<std::string>();
  if (!row[col_fee_bps].is_null()) {
    a.fees = ledger::fee_schedule{row[col_fee_bps].as<std::int32_t>(), row[col_fee_fixed].as<std::int64_t>()};
  }
  a.held = row[col_held].as<std::int64_t>();
  a.held_version = row[col_held_version].as<std::int64_t>();
  a.status_version = row[col_status_version].as<std::int64_t>();
  return a;
}

std::optional<account_record> load_account(pqxx::transaction_base& txn, ledger::account_id id, bool lock) {
  auto rows = txn.exec_prepared(lock ? k_load_for_update : k_load, id);
  if (rows.empty() || rows[0][col_id].as<std::int64_t>() != id) return std::nullopt;
  auto account = read_account(rows[0]);
  for (std::size_t i = 1; i < rows.size(); ++i) {
    const auto& row = rows[i];
    WALLET_ASSERT(row[col_parent_id].as<std::int64_t>() == id, "every row after the main one is its shard");
    account.shards.push_back({row[col_id].as<std::int64_t>(), row[col_shard_no].as<int>(),
                              row[col_balance].as<std::int64_t>(), row[col_version].as<std::int64_t>()});
  }
  return account;
}

void add_shards(pqxx::transaction_base& txn, const account_record& parent, int first_shard_no, int count) {
  WALLET_ASSERT(count > 0, "at least one shard is added");
  const int last_shard_no = first_shard_no + count - 1;
  txn.exec_prepared0(k_insert_shards, parent.owner_id, parent.currency, parent.id, first_shard_no, last_shard_no);
  txn.exec_prepared0(k_set_shard_count, parent.id, last_shard_no + 1);
}

}  // namespace

void prepare_account_statements(pqxx::connection& conn) {
  conn.prepare(k_load, k_load_sql);
  conn.prepare(k_load_for_update, k_load_for_update_sql);
  conn.prepare(k_wait_for_writers, k_wait_for_writers_sql);
  conn.prepare(k_insert, k_insert_sql);
  conn.prepare(k_insert_shards, k_insert_shards_sql);
  conn.prepare(k_set_shard_count, k_set_shard_count_sql);
  conn.prepare(k_lock_for_status, k_lock_for_status_sql);
  conn.prepare(k_set_status, k_set_status_sql);
  conn.prepare(k_pending_withdrawals, k_pending_withdrawals_sql);
  conn.prepare(k_pending_adjustments, k_pending_adjustments_sql);
  conn.prepare(k_insert_system, k_insert_system_sql);
  conn.prepare(k_find_system, k_find_system_sql);
  conn.prepare(k_sweep_candidates, k_sweep_candidates_sql);
  conn.prepare(k_set_fees, k_set_fees_sql);
}

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
                              int shard_count, const audit_entry* audit, replayable<account_record>* replay) {
  pqxx::work txn(conn);
  if (replay && (replay->stored = claim_replay(txn, replay->request))) return {};
  auto account = read_account(txn.exec_prepared1(k_insert, owner, currency));
  if (shard_count > 0) add_shards(txn, account, k_first_shard_no, shard_count);
  auto loaded = load_account(txn, account.id, false);
  WALLET_ASSERT(loaded.has_value(), "an account created in this transaction is found in it");
  if (audit != nullptr) append_audit(txn, *audit, "account:" + std::to_string(account.id));
  if (replay) record_replay(txn, replay->request, replay->status, replay->render(*loaded));
  txn.commit();
  return *loaded;
}

std::optional<ledger::account_status> find_account_status(pqxx::connection& conn, ledger::account_id id) {
  pqxx::read_transaction txn(conn);
  return account_status_in(txn, id);
}

std::optional<account_record> find_account(pqxx::connection& conn, ledger::account_id id) {
  pqxx::read_transaction txn(conn);
  return load_account(txn, id, false);
}

std::optional<account_record> find_account_after_writers(pqxx::connection& conn, ledger::account_id id) {
  const auto rows = find_account(conn, id);
  if (!rows) return std::nullopt;
  // One row at a time, each in a transaction of its own: no lock is held while the next is waited
  // for, so no writer waits behind this read for longer than an instant, and no deadlock can form.
  std::vector<ledger::account_id> ids{rows->id};
  for (const auto& shard : rows->shards) ids.push_back(shard.id);
  for (const ledger::account_id row : ids) {
    pqxx::work txn(conn);
    txn.exec_prepared(k_wait_for_writers, row);
    txn.commit();
  }
  // Taken once every writer that held a row has ended: their outcome, the main row and its shards
  // at one moment.
  return find_account(conn, id);
}

namespace {

// Adds shards to account `id` (of `kind`) until it has `shard_count`, under its rows' locks.
// Another request or server may have added some while this one waited for the lock: a new
// statement sees what committed meanwhile (the locking one's snapshot predates it), so shard
// numbers that exist are never inserted again.
std::optional<account_record> add_missing_shards(pqxx::work& txn, ledger::account_id id, int shard_count,
                                                 ledger::account_kind kind) {
  const auto locked = load_account(txn, id, true);
  if (!locked || locked->kind != kind) return std::nullopt;
  auto account = load_account(txn, id, false);
  const int existing = static_cast<int>(account->shards.size());
  if (shard_count > existing) add_shards(txn, *account, k_first_shard_no + existing, shard_count - existing);
  return load_account(txn, id, false);
}

}  // namespace

status_change make_hot(pqxx::connection& conn, ledger::account_id id, int shard_count, const audit_entry* audit) {
  pqxx::work txn(conn);
  const auto locked = load_account(txn, id, true);
  if (!locked || locked->kind != ledger::account_kind::user) return {ledger::error_code::not_found, {}, std::nullopt};
  if (locked->status == ledger::account_status::closed) {
    return {ledger::error_code::account_closed, "account " + std::to_string(id) + " is closed: it takes no shards",
            std::nullopt};
  }
  auto loaded = add_missing_shards(txn, id, shard_count, ledger::account_kind::user);
  if (!loaded) return {ledger::error_code::not_found, {}, std::nullopt};
  if (audit != nullptr) append_audit(txn, *audit);
  txn.commit();
  return {ledger::error_code::ok, {}, std::move(loaded)};
}

std::optional<account_record> make_system_hot(pqxx::connection& conn, ledger::account_id id, int shard_count) {
  pqxx::work txn(conn);
  auto loaded = add_missing_shards(txn, id, shard_count, ledger::account_kind::system);
  if (!loaded) return std::nullopt;
  txn.commit();
  return loaded;
}

namespace {

// Runs `change` on the account as it stands under the locks of its rows (main row and shards,
// in ascending id order as every writer and sweep locks them, so they should never deadlock with
// it), and commits when it answers ok. A statement after the locks sees whatever the transactions
// that held them committed. Should PostgreSQL still roll it back to break a deadlock with another
// locker, it is run again: nothing was changed.
status_change under_status_locks(pqxx::connection& conn, ledger::account_id id,
                                 const std::function<status_change(pqxx::work&, const account_record&)>& change) {
  constexpr int k_attempts_max = 3;
  for (int attempt = 1;; ++attempt) {
    try {
      pqxx::work txn(conn);
      if (txn.exec_prepared(k_lock_for_status, id).empty()) return {ledger::error_code::not_found, {}, std::nullopt};
      // Again: the first statement locked only the rows its snapshot held. A make_hot that held
      // the main row while it waited may have added shards, which this one finds and locks; none
      // can be added now that the main row is held.
      txn.exec_prepared(k_lock_for_status, id);
      const auto current = load_account(txn, id, false);
      WALLET_ASSERT(current.has_value(), "an account whose rows this transaction locked is found");
      auto out = change(txn, *current);
      if (out.outcome == ledger::error_code::ok) txn.commit();
      return out;
    } catch (const pqxx::statement_completion_unknown&) {
      throw;
    } catch (const pqxx::transaction_rollback&) {
      if (attempt >= k_attempts_max) throw;
    }
  }
}

std::string closed_detail(ledger::account_id id) {
  return "account " + std::to_string(id) + " is closed, and a closed account's status never changes again";
}

}  // namespace

status_change set_status(pqxx::connection& conn, ledger::account_id id, ledger::account_status status,
                         const audit_entry* audit) {
  WALLET_ASSERT(status != ledger::account_status::closed, "an account is closed by close_account");
  return under_status_locks(conn, id, [&](pqxx::work& txn, const account_record& current) -> status_change {
    if (current.status == ledger::account_status::closed) {
      return {ledger::error_code::account_closed, closed_detail(id), std::nullopt};
    }
    txn.exec_prepared(k_set_status, id, std::string(ledger::to_string(status)));
    auto loaded = load_account(txn, id, false);
    if (audit != nullptr) append_audit(txn, *audit);
    return {ledger::error_code::ok, {}, std::move(loaded)};
  });
}

status_change close_account(pqxx::connection& conn, ledger::account_id id, ledger::role closer,
                            const audit_entry* audit) {
  return under_status_locks(conn, id, [&](pqxx::work& txn, const account_record& current) -> status_change {
    if (current.status == ledger::account_status::closed) return {ledger::error_code::ok, {}, current};
    if (current.status == ledger::account_status::frozen && closer != ledger::role::operator_role) {
      return {ledger::error_code::forbidden,
              "account " + std::to_string(id) + " is frozen: only an operator can close it; nothing was changed",
              std::nullopt};
    }
    const auto refuse = [&](std::string why) {
      return status_change{ledger::error_code::account_not_empty,
                           "account " + std::to_string(id) + " " + std::move(why) + "; nothing was changed",
                           std::nullopt};
    };
    if (const auto balance = current.total_balance(); balance != 0) {
      return refuse("holds " + std::to_string(balance) + " " + current.currency +
                    " (minor units): pay it out first, by a transfer or a withdrawal");
    }
    if (current.held != 0) {
      return refuse("has active holds of " + std::to_string(current.held) + " " + current.currency +
                    ": capture or void them first, or wait until they expire");
    }
    if (const auto pending = txn.exec_prepared1(k_pending_withdrawals, id)[0].as<std::int64_t>(); pending > 0) {
      return refuse("has " + std::to_string(pending) +
                    " withdrawal(s) still PENDING, which pay it back if the payout fails: wait until they are "
                    "settled");
    }
    if (const auto pending = txn.exec_prepared1(k_pending_adjustments, id)[0].as<std::int64_t>(); pending > 0) {
      return refuse("has " + std::to_string(pending) +
                    " adjustment(s) awaiting approval: an operator approves or rejects them first");
    }
    txn.exec_prepared(k_set_status, id, std::string(ledger::to_string(ledger::account_status::closed)));
    auto loaded = load_account(txn, id, false);
    if (audit != nullptr) append_audit(txn, *audit);
    return {ledger::error_code::ok, {}, std::move(loaded)};
  });
}

std::optional<account_record> set_fees(pqxx::connection& conn, ledger::account_id id,
                                       const ledger::fee_schedule& schedule, const audit_entry* audit) {
  WALLET_ASSERT(ledger::is_valid(schedule), "a fee schedule is checked before it is stored");
  pqxx::work txn(conn);
  auto updated = txn.exec_prepared(k_set_fees, id, schedule.bps, schedule.fixed);
  if (updated.affected_rows() == 0) return std::nullopt;
  auto loaded = load_account(txn, id, false);
  if (audit != nullptr) append_audit(txn, *audit);
  txn.commit();
  return loaded;
}

ledger::account_id ensure_clearing_account(pqxx::connection& conn, const std::string& currency) {
  pqxx::work txn(conn);
  txn.exec_prepared0(k_insert_system, currency, k_clearing_role);
  auto row = txn.exec_prepared1(k_find_system, currency, k_clearing_role);
  txn.commit();
  return row[0].as<std::int64_t>();
}

std::vector<sweep_candidate> sweep_candidates(pqxx::connection& conn, int limit, ledger::account_id after) {
  WALLET_ASSERT(limit > 0, "a sweep looks at one candidate at least");
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_prepared(k_sweep_candidates, limit, after);
  std::vector<sweep_candidate> out;
  out.reserve(rows.size());
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
