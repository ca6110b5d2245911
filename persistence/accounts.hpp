#pragma once

// Accounts: creation (with the credit shards of a hot account), reads of an account with its
// shards, status changes, the clearing account of a currency, and the hot accounts the sweeper
// has to empty. Money moves only through persistence/batch.hpp; these writes move none. Each
// function runs its own short transaction on the connection it is given.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ledger/errors.hpp"
#include "ledger/fees.hpp"
#include "ledger/money.hpp"
#include "ledger/types.hpp"

#include "persistence/audit.hpp"
#include "persistence/pqxx_fwd.hpp"
#include "persistence/replays.hpp"

namespace persistence {

struct shard_record {
  ledger::account_id id = 0;
  int shard_no = 0;
  ledger::amount_minor balance = 0;
  std::int64_t version = 0;
};

struct account_record {
  ledger::account_id id = 0;
  std::optional<ledger::principal_id> owner_id;
  std::string currency;
  ledger::account_kind kind = ledger::account_kind::user;
  ledger::account_status status = ledger::account_status::active;
  bool allow_negative = false;
  ledger::amount_minor balance = 0;  // the main row only
  std::int64_t version = 0;
  ledger::account_id parent_id = 0;
  std::vector<shard_record> shards;  // a hot account's credit shards, by shard number
  std::string created_at;
  std::optional<ledger::fee_schedule> fees;  // of the payments it receives; nullopt: never set
  // What its active holds keep (migration 011), and how often that changed.
  ledger::amount_minor held = 0;
  std::int64_t held_version = 0;
  // How often its status changed (migration 020): the newest status an actor hears of wins.
  std::int64_t status_version = 0;

  bool hot() const { return !shards.empty(); }
  // Main row plus shards, with checked arithmetic (asserts on overflow: it cannot be stored).
  ledger::amount_minor total_balance() const;
};

// Creates an account (and, when shard_count > 0, its credit shards) in one transaction.
// The administrative writes here record `audit`, when given, in their own transaction (for
// create_account with the new account as its target), and only when they change something.
// With `replay`, its answer is recorded under the request's Idempotency-Key in the same transaction;
// when the key was taken already, nothing is made, `replay->stored` is set and the record returned
// is empty.
account_record create_account(pqxx::connection& conn, ledger::principal_id owner, const std::string& currency,
                              int shard_count, const audit_entry* audit = nullptr,
                              replayable<account_record>* replay = nullptr);
std::optional<account_record> find_account(pqxx::connection& conn, ledger::account_id id);
// The status of user account `id`; nullopt: no such user account.
std::optional<ledger::account_status> find_account_status(pqxx::connection& conn, ledger::account_id id);
// The same, read once no transaction that had locked the account's rows is still open: a writer
// whose COMMIT this server could not confirm (its connection broke during it) may still hold them,
// and its outcome is then read, not the state before it. It waits for a share lock on each row in
// turn, each released at once; each wait is bounded by the lock timeout.
std::optional<account_record> find_account_after_writers(pqxx::connection& conn, ledger::account_id id);
// Adds credit shards to an existing account (numbers continue after the existing ones).
// Returns nullopt if the account does not exist or is itself a shard.
// A system account credited by every payment (fee_revenue) made hot: it gets credit shards
// (kind 'shard', no owner) up to `shard_count`, so that its credits fan out like a hot payee's.
// The account's row is locked, so servers doing this at once add each shard once. The account
// with its shards; nullopt when `id` is no system account.
std::optional<account_record> make_system_hot(pqxx::connection& conn, ledger::account_id id, int shard_count);

// What a change of an account's status found (set_status, close_account).
struct status_change {
  // ok: `account` is the account as it stands now. not_found: no user account of that id (a
  // shard's or a system account's id names none). account_closed: a closed account's status never
  // changes again. account_not_empty: close_account found money or obligations, which `detail`
  // names with what to do first.
  ledger::error_code outcome = ledger::error_code::ok;
  std::string detail;
  std::optional<account_record> account;
};

// Sets the status of an account and of its shards to active or frozen.
status_change set_status(pqxx::connection& conn, ledger::account_id id, ledger::account_status status,
                         const audit_entry* audit = nullptr);

// Closes an account and its shards for good, if it holds nothing (main row and shards), keeps
// nothing for active holds, has no withdrawal still PENDING (a failed payout would pay it back) and
// no adjustment awaiting approval. Checked under the rows' locks, which every posting of the account needs too, so no
// payment commits between the check and the change. Closing a closed account changes nothing and
// answers ok. Every posting that would move money into or out of it is refused afterwards
// (account_inactive), except a chargeback or a provider-reported refund, whose shortfall account
// pays what the account cannot (it holds nothing). A frozen account is closed by an operator only
// (`closer`): a freeze is an operator's decision, which its owner does not end (forbidden).
status_change close_account(pqxx::connection& conn, ledger::account_id id, ledger::role closer,
                            const audit_entry* audit = nullptr);

// Adds credit shards to a user account until it has `shard_count`: not_found when there is no such
// user account, account_closed when it is closed.
status_change make_hot(pqxx::connection& conn, ledger::account_id id, int shard_count,
                       const audit_entry* audit = nullptr);

// Sets the fee schedule of the payments a user account receives (migration 007); nullopt if there
// is no such user account.
std::optional<account_record> set_fees(pqxx::connection& conn, ledger::account_id id,
                                       const ledger::fee_schedule& schedule, const audit_entry* audit = nullptr);

// The clearing account of a currency (system, may go negative), made on first use.
ledger::account_id ensure_clearing_account(pqxx::connection& conn, const std::string& currency);

// Hot accounts and their shards with a positive balance: what the sweeper has to move.
struct sweep_candidate {
  ledger::account_id account = 0;
  std::string currency;
  std::vector<ledger::account_id> shards;
};
// At most `limit` (> 0) of them, by account id, after the account `after` (0: from the first).
std::vector<sweep_candidate> sweep_candidates(pqxx::connection& conn, int limit, ledger::account_id after = 0);

// Defines this file's prepared statements on a connection. connect() calls it for every
// connection it opens; libpqxx registers each statement with the server on its first use.
void prepare_account_statements(pqxx::connection& conn);

}  // namespace persistence
