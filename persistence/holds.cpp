#include "persistence/holds.hpp"

#include <pqxx/pqxx>

#include <algorithm>
#include <chrono>
#include <string>

#include "persistence/audit.hpp"
#include "persistence/database.hpp"
#include "persistence/hold_rows.hpp"
#include "persistence/rows.hpp"

namespace persistence {
namespace {

// A timestamp as the API shows it: UTC, microseconds, ISO 8601 with a trailing Z.
std::string utc_sql(const std::string& expression) {
  return "to_char((" + expression + ") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";
}

// The columns of a hold, in the order read_facts reads them, and whether it is ACTIVE but due.
const std::string k_hold_columns_sql =
    "h.id::text, h.status, h.payer_id, h.payee_id, h.currency, h.amount, h.captured, " + utc_sql("h.expires_at") +
    ", " + utc_sql("h.created_at") +
    ", COALESCE(h.capture_transaction_id::text, ''),"
    " h.status = 'ACTIVE' AND h.expires_at <= clock_timestamp()";

// The position of the due flag among the columns, and how many there are.
constexpr int k_due_column = 10;
constexpr int k_hold_columns = 11;

constexpr const char* k_find = "hold_find";
const std::string k_find_sql = "SELECT " + k_hold_columns_sql +
                               ", pa.owner_id, pe.owner_id FROM hold h"
                               " JOIN account pa ON pa.id = h.payer_id JOIN account pe ON pe.id = h.payee_id"
                               " WHERE h.id = $1::uuid";

constexpr const char* k_find_answer = "hold_find_answer";
// A placement's key among the holds; and among the journal and the stored batches, since one key
// names one request across routes (a hit there has another route's request hash: 422).
constexpr const char* k_find_answer_sql =
    "(SELECT request_hash, response_body FROM hold WHERE principal_id = $1 AND idempotency_key = $2)"
    " UNION ALL"
    " (SELECT request_hash, response_body FROM journal_transaction WHERE principal_id = $1 AND idempotency_key = $2)"
    " UNION ALL"
    " (SELECT request_hash, response_body FROM transfer_batch WHERE principal_id = $1 AND idempotency_key = $2)"
    " LIMIT 1";

// The payers with due holds, a bounded number a tick, locked in id order. A payer whose row is
// locked already (a writer's batch) is skipped, not waited for: its holds expire at a later tick.
// The time is read once, `(SELECT clock_timestamp())`: a volatile function compared row by row is
// never an index condition, and every tick would read every active hold (of up to 30 days) instead
// of the due ones through hold_active_expiry.
// FOR NO KEY UPDATE, as the writers lock (persistence/batch.cpp): a row that is only referenced by
// a foreign key check in flight (the payee of a hold being placed) is not skipped.
constexpr const char* k_lock_due_payers = "hold_lock_due_payers";
constexpr const char* k_lock_due_payers_sql =
    "SELECT a.id FROM account a"
    " WHERE a.id IN (SELECT payer_id FROM hold WHERE status = 'ACTIVE' AND expires_at <= (SELECT clock_timestamp()))"
    "   AND NOT a.id = ANY($2::bigint[])"
    " ORDER BY a.id LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED";

// The payers with due holds still, without locking them (those the call above skipped), and one of
// them locked, waiting for its row (expire_held_back_payers).
constexpr const char* k_due_payers = "hold_due_payers";
// Taken in turn: those after the last payer the previous call took up ($3) first, then from the
// lowest id again, so that payers locked for good cannot keep the others waiting.
constexpr const char* k_due_payers_sql =
    "SELECT payer_id FROM hold WHERE status = 'ACTIVE' AND expires_at <= (SELECT clock_timestamp())"
    "   AND NOT payer_id = ANY($2::bigint[])"
    " GROUP BY payer_id ORDER BY payer_id <= $3, payer_id LIMIT $1";
constexpr const char* k_lock_due_payer = "hold_lock_due_payer";
constexpr const char* k_lock_due_payer_sql =
    "SELECT a.id FROM account a WHERE a.id = $1"
    "   AND EXISTS (SELECT 1 FROM hold WHERE payer_id = $1 AND status = 'ACTIVE'"
    "                 AND expires_at <= (SELECT clock_timestamp()))"
    " FOR NO KEY UPDATE";

// Under the payers' locks: their due holds expire, and their held money shrinks by as much. At
// most $2 holds, and each payer's share of them at most (the longest due of its own first): a
// payer with a backlog of many thousand due holds (a marketplace's, after an outage) is worked off
// over several ticks, each statement bounded, rather than by one statement that the statement
// timeout cancels at every tick; and its backlog takes only its share of a tick, so the other
// payers locked with it have theirs released in the same tick.
constexpr const char* k_expire = "hold_expire";
constexpr const char* k_expire_sql =
    "WITH expired AS ("
    "  UPDATE hold SET status = 'EXPIRED', settled_at = clock_timestamp()"
    "   WHERE id IN (SELECT d.id FROM unnest($1::bigint[]) AS p(id)"
    "                CROSS JOIN LATERAL (SELECT h.id FROM hold h WHERE h.payer_id = p.id AND h.status = 'ACTIVE'"
    "                                      AND h.expires_at <= (SELECT clock_timestamp()) ORDER BY h.expires_at"
    "                                      LIMIT GREATEST(1, $2 / GREATEST(cardinality($1::bigint[]), 1))) d"
    "                LIMIT $2)"
    "     AND status = 'ACTIVE'"
    "  RETURNING payer_id, amount),"
    " totals AS (SELECT payer_id, sum(amount)::bigint AS total, count(*) AS n FROM expired GROUP BY payer_id)"
    " UPDATE account a SET held = a.held - t.total, held_version = a.held_version + 1"
    "  FROM totals t WHERE a.id = t.payer_id"
    " RETURNING a.id, a.balance, a.version, a.held, a.held_version, t.n";

// The posting path's statements (posting_ like the rest of batch.cpp's).
constexpr const char* k_lock_holds = "posting_lock_holds";
const std::string k_lock_holds_sql =
    "SELECT " + k_hold_columns_sql + " FROM hold h WHERE h.id = ANY($1::uuid[]) ORDER BY h.id FOR UPDATE";

// The placements' keys among the holds, then (with an empty hash, which no request has) among
// the journal's transactions and the stored batches: one key is one request of its principal's,
// whatever the route.
constexpr const char* k_find_hold_keys = "posting_find_hold_keys";
constexpr const char* k_find_hold_keys_sql =
    "SELECT h.principal_id, h.idempotency_key, h.request_hash, h.response_body"
    "  FROM unnest($1::bigint[], $2::text[]) AS k(principal_id, idempotency_key)"
    "  JOIN hold h ON h.principal_id = k.principal_id AND h.idempotency_key = k.idempotency_key"
    " UNION ALL "
    "SELECT j.principal_id, j.idempotency_key, '', ''"
    "  FROM unnest($1::bigint[], $2::text[]) AS k(principal_id, idempotency_key)"
    "  JOIN journal_transaction j ON j.principal_id = k.principal_id AND j.idempotency_key = k.idempotency_key"
    " UNION ALL "
    "SELECT b.principal_id, b.idempotency_key, '', ''"
    "  FROM unnest($1::bigint[], $2::text[]) AS k(principal_id, idempotency_key)"
    "  JOIN transfer_batch b ON b.principal_id = k.principal_id AND b.idempotency_key = k.idempotency_key";

// The database's clock for a new hold: now, and now + $1 seconds.
constexpr const char* k_hold_clock = "posting_hold_clock";
const std::string k_hold_clock_sql = "SELECT " + utc_sql("c.t") + ", " +
                                     utc_sql("c.t + $1::bigint * interval '1 second'") +
                                     " FROM (SELECT clock_timestamp() AS t) c";

ledger::holds::hold_facts read_facts(const pqxx::row& row) {
  ledger::holds::hold_facts f;
  f.id = row[0].as<std::string>();
  f.status = row[1].as<std::string>();
  f.payer = row[2].as<std::int64_t>();
  f.payee = row[3].as<std::int64_t>();
  f.currency = row[4].as<std::string>();
  f.amount = row[5].as<std::int64_t>();
  f.captured = row[6].as<std::int64_t>();
  f.expires_at = row[7].as<std::string>();
  f.created_at = row[8].as<std::string>();
  f.capture_transaction_id = row[9].as<std::string>();
  return f;
}

}  // namespace

std::optional<hold_record> find_hold(pqxx::connection& conn, const std::string& id) {
  conn.prepare(k_find, k_find_sql);
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_prepared(k_find, id);
  if (rows.empty()) return std::nullopt;
  const auto& row = rows[0];
  hold_record h;
  h.facts = read_facts(row);
  h.due = row[k_due_column].as<bool>();
  if (!row[k_hold_columns].is_null()) h.payer_owner = row[k_hold_columns].as<std::int64_t>();
  if (!row[k_hold_columns + 1].is_null()) h.payee_owner = row[k_hold_columns + 1].as<std::int64_t>();
  return h;
}

std::optional<stored_hold_answer> find_hold_answer(pqxx::connection& conn, ledger::principal_id principal,
                                                   const std::string& key) {
  conn.prepare(k_find_answer, k_find_answer_sql);
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_prepared(k_find_answer, principal, key);
  if (rows.empty()) return std::nullopt;
  return stored_hold_answer{rows[0][0].as<std::string>(), rows[0][1].as<std::string>()};
}

placement_reading read_for_placement(pqxx::connection& conn, ledger::principal_id principal, const std::string& key,
                                     ledger::account_id payee) {
  conn.prepare(k_find_answer, k_find_answer_sql);
  pqxx::read_transaction txn(conn);
  placement_reading out;
  if (auto rows = txn.exec_prepared(k_find_answer, principal, key); !rows.empty()) {
    out.stored = stored_hold_answer{rows[0][0].as<std::string>(), rows[0][1].as<std::string>()};
  }
  out.payee_status = account_status_in(txn, payee);
  return out;
}

namespace {

// Holds one expiry statement releases at most (k_expire_sql).
constexpr int k_holds_per_statement_max = 5'000;

// Payers cancelled for time in one call before the rest are given up on for this call (named failed
// with them): a database slow for everyone costs a few statement timeouts a tick, not one a payer.
constexpr int k_cancelled_payers_max = 2;

// Expires the due holds of `payers`, whose rows `txn` has locked, into `result`. One statement for
// all; when the database refuses it or cancels it for time, each payer on its own, so that one
// keeps only its own holds: a payer refused or cancelled is named in result.failed (the expirer
// then leaves it out of its next ticks, and tries it again now and then). Were a cancelled
// statement thrown instead, a payer whose holds take too long to expire would stop every other
// payer's expiry at every tick.
void expire_locked(pqxx::work& txn, const std::vector<std::int64_t>& payers, expiry_result& result) {
  // A hot payer's holds are checked against main + shards by deferred triggers (migration 011),
  // which would refuse at COMMIT, past every savepoint: the whole tick would fail, for every payer,
  // and again at the next tick. Checked at each statement's end instead, a refusal is the refused
  // payer's alone, as any other.
  txn.exec0("SET CONSTRAINTS account_hot_held_main, account_hot_held_shard IMMEDIATE");
  // In a savepoint: a refusal undoes it alone, and the payers' locks stay. (Written out:
  // libpqxx 6's subtransaction leaves its parent aborted when a prepared statement fails in it.)
  auto expire = [&](const std::vector<std::int64_t>& ids) {
    txn.exec0("SAVEPOINT hold_expiry");
    pqxx::result rows;
    try {
      rows = txn.exec_prepared(k_expire, pg_array(ids), k_holds_per_statement_max);
    } catch (const pqxx::sql_error&) {
      txn.exec0("ROLLBACK TO SAVEPOINT hold_expiry");
      txn.exec0("RELEASE SAVEPOINT hold_expiry");  // else each refusal nests one level deeper
      throw;
    }
    txn.exec0("RELEASE SAVEPOINT hold_expiry");
    for (const auto& row : rows) {
      row_state s;
      s.id = row[0].as<std::int64_t>();
      s.balance = row[1].as<std::int64_t>();
      s.version = row[2].as<std::int64_t>();
      s.held = row[3].as<std::int64_t>();
      s.held_version = row[4].as<std::int64_t>();
      result.rows.push_back(s);
      result.expired += row[5].as<int>();
    }
  };
  auto cancelled = [](const pqxx::sql_error& e) { return e.sqlstate() == "57014"; };
  try {
    expire(payers);
  } catch (const pqxx::sql_error& e) {
    if (payers.size() == 1) {  // tried on its own already
      result.failed.push_back(payers.front());
      return;
    }
    int cancellations = cancelled(e) ? 1 : 0;
    for (const auto payer : payers) {
      try {
        expire({payer});
      } catch (const pqxx::sql_error& each) {
        result.failed.push_back(payer);
        if (cancelled(each) && ++cancellations > k_cancelled_payers_max) {
          // The payers not tried count as failed too: left out of the next ticks (and tried again
          // now and then) rather than forgotten, which would bring them back into every tick's
          // statement while the database stays slow.
          result.failed.insert(result.failed.end(), std::find(payers.begin(), payers.end(), payer) + 1, payers.end());
          break;
        }
      }
    }
  }
}

}  // namespace

expiry_result expire_due_holds(pqxx::connection& conn, int limit, const std::vector<std::int64_t>& excluded,
                               std::vector<std::int64_t>* committing) {
  conn.prepare(k_lock_due_payers, k_lock_due_payers_sql);
  conn.prepare(k_expire, k_expire_sql);
  expiry_result result;
  pqxx::work txn(conn);
  std::vector<std::int64_t> payers;
  for (const auto& row : txn.exec_prepared(k_lock_due_payers, limit, pg_array(excluded))) {
    payers.push_back(row[0].as<std::int64_t>());
  }
  if (payers.empty()) return result;
  expire_locked(txn, payers, result);
  if (committing != nullptr) *committing = payers;
  txn.commit();
  return result;
}

expiry_result expire_held_back_payers(pqxx::connection& conn, int limit, const std::vector<std::int64_t>& excluded,
                                      std::int64_t after, std::chrono::milliseconds wait,
                                      std::vector<std::int64_t>* committing) {
  conn.prepare(k_due_payers, k_due_payers_sql);
  conn.prepare(k_lock_due_payer, k_lock_due_payer_sql);
  conn.prepare(k_expire, k_expire_sql);
  expiry_result result;
  std::vector<std::int64_t> due;
  std::string own_timeout;
  {
    pqxx::read_transaction read(conn);
    for (const auto& row : read.exec_prepared(k_due_payers, limit, pg_array(excluded), after)) {
      due.push_back(row[0].as<std::int64_t>());
    }
    own_timeout = read.exec1("SHOW lock_timeout")[0].as<std::string>();
  }
  if (committing != nullptr) committing->clear();
  if (!due.empty()) result.last_taken_up = due.back();
  for (const auto payer : due) {
    // One payer a transaction: no other payer's row is held while this one's is waited for.
    pqxx::work txn(conn);
    txn.exec0("SET LOCAL lock_timeout = " + std::to_string(std::max<std::int64_t>(1, wait.count())));
    try {
      // No row: its holds are no longer due (captured, voided or expired meanwhile).
      if (txn.exec_prepared(k_lock_due_payer, payer).empty()) continue;
    } catch (const pqxx::sql_error& e) {
      if (e.sqlstate() == "55P03") continue;  // still locked: a later call tries again
      throw;
    }
    // The hold rows' locks wait as any other statement of this connection does.
    txn.exec0("SET LOCAL lock_timeout = " + txn.quote(own_timeout));
    expire_locked(txn, {payer}, result);
    // Every payer committed so far, and this one: if this COMMIT's outcome is unknown, the caller
    // tells them all to read their rows again (the earlier ones' answers are lost with the call).
    if (committing != nullptr) committing->push_back(payer);
    txn.commit();
  }
  return result;
}

void prepare_hold_statements(pqxx::connection& conn) {
  conn.prepare(k_lock_holds, k_lock_holds_sql);
  conn.prepare(k_find_hold_keys, k_find_hold_keys_sql);
  conn.prepare(k_hold_clock, k_hold_clock_sql);
}

hold_states lock_hold_rows(pqxx::work& txn, const std::vector<posting_request>& requests,
                           const std::vector<std::size_t>& indices) {
  std::vector<std::string> ids, keys;
  std::vector<std::int64_t> principals;
  for (std::size_t i : indices) {
    const auto& r = requests[i];
    if (!r.rows || !r.rows->hold) continue;
    if (r.rows->hold->what == flow_rows::hold_change::kind::place) {
      if (!r.principal) continue;
      principals.push_back(*r.principal);
      keys.push_back(r.idempotency_key);
    } else {
      ids.push_back(r.rows->hold->hold_id);
    }
  }
  hold_states states;
  if (!ids.empty()) {
    for (const auto& row : txn.exec_prepared(k_lock_holds, pg_array(ids))) {
      states.holds[row[0].as<std::string>()] = {read_facts(row), row[k_due_column].as<bool>()};
    }
  }
  if (!keys.empty()) {
    for (const auto& row : txn.exec_prepared(k_find_hold_keys, pg_array(principals), pg_array(keys))) {
      std::pair<std::string, std::string> stored{row[2].as<std::string>(), row[3].as<std::string>()};
      const std::pair<std::int64_t, std::string> key{row[0].as<std::int64_t>(), row[1].as<std::string>()};
      // A hold's own row is the answer to replay; another request's only refuses the key.
      if (stored.first.empty()) {
        states.keys.emplace(key, std::move(stored));
      } else {
        states.keys[key] = std::move(stored);
      }
    }
  }
  return states;
}

namespace {

// Why a hold that is not ACTIVE (or is due) cannot be captured or voided; ok when it is active.
ledger::error_code settled_code(const hold_row_state& h) {
  if (h.facts.status == "CAPTURED") return ledger::error_code::already_captured;
  if (h.facts.status == "VOIDED") return ledger::error_code::hold_voided;
  if (h.facts.status == "EXPIRED" || h.due) return ledger::error_code::hold_expired;
  return ledger::error_code::ok;
}

}  // namespace

ledger::error_code check_capture(const posting_request& r, const hold_states& holds) {
  auto it = holds.holds.find(r.rows->hold->hold_id);
  if (it == holds.holds.end() || it->second.facts.payer != r.posting.debit_account) {
    return ledger::error_code::not_found;
  }
  const auto& h = it->second;
  if (const auto code = settled_code(h); code != ledger::error_code::ok) return code;
  if (r.posting.releases_held != h.facts.amount || r.posting.amount > h.facts.amount) {
    return ledger::error_code::invalid_request;
  }
  return ledger::error_code::ok;
}

bool plan_hold_change(pqxx::work& txn, const posting_request& r, ledger::account_states& accounts, hold_states& holds,
                      posting_outcome& out, std::string& writes, std::string& audit_writes) {
  const auto& change = *r.rows->hold;
  const ledger::account_id payer = r.posting.debit_account;
  if (change.what == flow_rows::hold_change::kind::place) {
    if (!r.principal) {
      out.outcome = ledger::error_code::invalid_request;
      return false;
    }
    if (auto it = holds.keys.find({*r.principal, r.idempotency_key}); it != holds.keys.end()) {
      if (it->second.first != r.request_hash) {
        out.outcome = ledger::error_code::idempotency_key_reused;
        return false;
      }
      out.replayed = true;
      out.response_status = 201;
      out.response_body = it->second.second;
      return false;
    }
    out.outcome = ledger::holds::place(accounts, payer, r.posting.debit_shards, r.posting.amount, r.posting.currency);
    if (out.outcome == ledger::error_code::account_inactive) out.inactive_account = payer;
    if (out.outcome != ledger::error_code::ok) return false;
    const auto clock = txn.exec_prepared1(k_hold_clock, change.expires_in_seconds);
    ledger::holds::hold_facts f;
    f.id = change.hold_id;
    f.status = "ACTIVE";
    f.payer = payer;
    f.payee = change.payee;
    f.currency = r.posting.currency;
    f.amount = r.posting.amount;
    f.created_at = clock[0].as<std::string>();
    f.expires_at = clock[1].as<std::string>();
    out.response_status = 201;
    out.response_body = ledger::holds::hold_json(f);
    out.transaction_id = f.id;
    out.amount = f.amount;
    writes +=
        "INSERT INTO hold (id, payer_id, payee_id, principal_id, idempotency_key, request_hash, response_body,"
        " currency, amount, expires_at, created_at) VALUES (" +
        txn.quote(f.id) + "::uuid, " + std::to_string(payer) + ", " + std::to_string(f.payee) + ", " +
        std::to_string(*r.principal) + ", " + txn.quote(r.idempotency_key) + ", " + txn.quote(r.request_hash) + ", " +
        txn.quote(out.response_body) + ", " + txn.quote(f.currency) + ", " + std::to_string(f.amount) + ", " +
        txn.quote(f.expires_at) + "::timestamptz, " + txn.quote(f.created_at) + "::timestamptz);\n";
    holds.keys[{*r.principal, r.idempotency_key}] = {r.request_hash, out.response_body};
    return true;
  }
  // A void.
  auto it = holds.holds.find(change.hold_id);
  if (it == holds.holds.end() || it->second.facts.payer != payer) {
    out.outcome = ledger::error_code::not_found;
    return false;
  }
  auto& h = it->second;
  out.transaction_id = h.facts.id;
  out.response_status = 200;
  if (h.facts.status == "VOIDED") {
    // Voided already (by this request's earlier try, or by the other party): it stays so.
    out.response_body = ledger::holds::hold_json(h.facts);
    return false;
  }
  out.outcome = settled_code(h);
  if (out.outcome != ledger::error_code::ok) return false;
  out.outcome = ledger::holds::release(accounts, payer, h.facts.amount);
  if (out.outcome != ledger::error_code::ok) return false;
  h.facts.status = "VOIDED";
  out.response_body = ledger::holds::hold_json(h.facts);
  writes += "UPDATE hold SET status = 'VOIDED', settled_at = clock_timestamp() WHERE id = " + txn.quote(h.facts.id) +
            "::uuid;\n";
  if (r.rows->audit) {
    // An operator's void: audited with the amount it released, in the void's own transaction.
    const auto& a = *r.rows->audit;
    const auto detail = txn.quote(a.detail_json) + "::jsonb || jsonb_build_object('amount', " +
                        txn.quote(std::to_string(h.facts.amount)) + ")";
    audit_writes += audit_insert_sql(std::to_string(a.principal), txn.quote(a.action), txn.quote(a.target), detail,
                                     txn.quote(a.request_id)) +
                    ";\n";
  }
  return true;
}

void apply_capture(pqxx::work& txn, const posting_request& r, ledger::amount_minor amount, hold_states& holds,
                   std::string& writes) {
  auto& h = holds.holds.at(r.rows->hold->hold_id);
  h.facts.status = "CAPTURED";
  h.facts.captured = amount;
  h.facts.capture_transaction_id = r.transaction_id;
  writes += "UPDATE hold SET status = 'CAPTURED', captured = " + std::to_string(amount) +
            ", settled_at = clock_timestamp(), capture_transaction_id = " + txn.quote(r.transaction_id) +
            "::uuid WHERE id = " + txn.quote(h.facts.id) + "::uuid;\n";
}

}  // namespace persistence
