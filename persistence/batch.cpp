#include "persistence/batch.hpp"

#include <pqxx/pqxx>

#include <algorithm>
#include <optional>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <spdlog/spdlog.h>

#include "base/assert.hpp"
#include "ledger/flows.hpp"
#include "ledger/receipt.hpp"
#include "persistence/binary_array.hpp"
#include "persistence/database.hpp"
#include "persistence/hold_rows.hpp"

namespace persistence {
namespace {

// The keys' journal rows, and (id NULL) the stored batches (migration 013) under the keys of the
// positions $3 and the holds (011) under those of the positions $4: a batch whose first transfer
// was refused holds its key in transfer_batch alone, and a hold's key lives with the hold. One key
// is one request of its principal's, whatever the route.
constexpr const char* k_find_committed = "posting_find_committed";
constexpr const char* k_find_committed_sql =
    "SELECT k.ord, j.id::text, j.request_hash, j.response_status, j.response_body"
    "  FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS k(principal_id, idempotency_key, ord)"
    "  JOIN journal_transaction j"
    "    ON j.principal_id = k.principal_id AND j.idempotency_key = k.idempotency_key"
    " UNION ALL "
    "SELECT k.ord, NULL, NULL, NULL, NULL"
    "  FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS k(principal_id, idempotency_key, ord)"
    "  JOIN transfer_batch b"
    "    ON b.principal_id = k.principal_id AND b.idempotency_key = k.idempotency_key"
    " WHERE k.ord = ANY($3::bigint[])"
    " UNION ALL "
    "SELECT k.ord, NULL, NULL, NULL, NULL"
    "  FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS k(principal_id, idempotency_key, ord)"
    "  JOIN hold h ON h.principal_id = k.principal_id AND h.idempotency_key = k.idempotency_key"
    " WHERE k.ord = ANY($4::bigint[])";

// The rows of a batch's accounts, with the fee schedule of the payments each receives (migration
// 007): its own, or for a hot account's shard its parent's, read in the same statement without
// locking the parent (payments to a hot payee never lock its main row; a schedule changed after
// this statement began is the next payment's). `xmin` names the row's version: any change to the
// row (a posting, a freeze, a new fee schedule, a hold) makes a new one. Read two ways:
//   locked: FOR NO KEY UPDATE, in ascending id order, so two writers never deadlock. Not FOR
//   UPDATE: that waits for the FOR KEY SHARE a foreign key check takes on the row it references (a
//   hold's payee, an adjustment's account, a new shard's parent), and a writer inserting such a row
//   for an account another writer holds, while holding a row that writer waits for, deadlocks;
//   the balance caches are updated, never their keys, which is all that NO KEY UPDATE leaves out;
//   unlocked: the optimistic first attempt of a plain batch (commit_once): the write statement
//   then changes or locks each row only at the version read here, and the batch is redone under
//   the locks when one has moved.
constexpr const char* k_account_rows_sql =
    "SELECT a.id, a.currency, a.status, a.allow_negative, a.balance, a.version, COALESCE(a.parent_id, 0),"
    "       CASE WHEN a.parent_id IS NULL THEN a.fee_bps ELSE p.fee_bps END,"
    "       CASE WHEN a.parent_id IS NULL THEN a.fee_fixed ELSE p.fee_fixed END, a.held, a.held_version, a.xmin"
    "  FROM account a LEFT JOIN account p ON p.id = a.parent_id"
    " WHERE a.id = ANY($1::bigint[]) ORDER BY a.id";
constexpr const char* k_lock_accounts = "posting_lock_accounts";
const std::string k_lock_accounts_sql = std::string(k_account_rows_sql) + " FOR NO KEY UPDATE OF a";
constexpr const char* k_read_accounts = "posting_read_accounts";

// The rows of the money flows (migration 005) that a posting checks under their lock.
constexpr const char* k_lock_deposits = "posting_lock_deposits";
constexpr const char* k_lock_deposits_sql =
    "SELECT transaction_id::text, account_id, amount, refunded, charged_back"
    "  FROM deposit_payment WHERE transaction_id = ANY($1::uuid[]) ORDER BY transaction_id FOR UPDATE";
constexpr const char* k_lock_withdrawals = "posting_lock_withdrawals";
constexpr const char* k_lock_withdrawals_sql =
    "SELECT id::text, status FROM withdrawal WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE";
constexpr const char* k_lock_payment_refunds = "posting_lock_payment_refunds";
constexpr const char* k_lock_payment_refunds_sql =
    "SELECT transaction_id::text, amount, refunded FROM payment_refund_total"
    "  WHERE transaction_id = ANY($1::uuid[]) ORDER BY transaction_id FOR UPDATE";
// The leases of the partitions whose debits the batch carries (migration 014): FOR SHARE, so a
// takeover (an UPDATE of the row) waits until this transaction ends, and every transaction after
// the takeover reads the new holder.
constexpr const char* k_lock_leases = "posting_lock_leases";
constexpr const char* k_lock_leases_sql =
    "SELECT partition, COALESCE(node_id, ''), epoch FROM partition_lease"
    "  WHERE partition = ANY($1::int[]) ORDER BY partition FOR SHARE";
// Corrections and currencies (migration 012).
constexpr const char* k_find_reversals = "posting_find_reversals";
constexpr const char* k_find_reversals_sql =
    "SELECT transaction_id::text FROM transaction_reversal WHERE transaction_id = ANY($1::uuid[])";
constexpr const char* k_lock_adjustments = "posting_lock_adjustments";
constexpr const char* k_lock_adjustments_sql =
    "SELECT id::text, status, requested_by FROM adjustment WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE";
// Expiry is judged when the quote's lock is held (clock_timestamp), not when the transaction began
// (now): the writer may have waited for account rows in between.
constexpr const char* k_lock_quotes = "posting_lock_quotes";
constexpr const char* k_lock_quotes_sql =
    "SELECT id::text, transaction_id IS NOT NULL, expires_at <= clock_timestamp() FROM fx_quote"
    "  WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE";
constexpr const char* k_find_payments = "posting_find_payments";
constexpr const char* k_find_payments_sql =
    "SELECT p.provider_id, p.payment_id FROM deposit_payment p"
    "  JOIN unnest($1::bigint[], $2::text[]) AS k(provider_id, payment_id)"
    "    ON p.provider_id = k.provider_id AND p.payment_id = k.payment_id";

// The four writes of a batch, as ONE prepared statement of data-modifying CTEs: one round trip,
// and PostgreSQL neither parses nor plans anything per batch (the writer's connection keeps
// generic plans, prepare_posting_statements). Each array is one parameter in PostgreSQL's binary
// format (pg_binary_array), read without parsing. Before, a small batch sent them as one
// multi-statement query of quoted literals, parsed and planned anew every time, and a large one
// as four prepared statements, four round trips (bench/PROFILE.md).
//   first the account rows: every row the batch read, changed or not, locked FOR NO KEY UPDATE at
//   the version (`xmin`) the batch read it at, in ascending id order, as a locked attempt and every
//   other locker of several account rows takes them (taken by the UPDATE, in its plan's order, and
//   the rows read unchanged after them, a batch could hold a higher row while it waited for a
//   lower one: a deadlock with any locker in id order, broken after a second); then the
//   balance caches, one row per account at the last balance the plan reached (with what the rows'
//   holds keep, migration 011), updated only once their row is locked: the new values travel with
//   the lock's rows, so the update takes each locked row once and finds its account by primary
//   key. (Joined to the array of new values instead, the planner took a nested loop that read the
//   whole array again for every locked row: quadratic in the batch, bench/PROFILE.md, twenty-sixth
//   part; tests/persistence/posting_plan_tests.cpp.) A lock that meets a newer
//   version of its row (committed since the statement began) rechecks `xmin` against it. A row
//   missing from the count had moved since the batch read it, which only a batch that read its
//   rows unlocked can meet: nothing more is written, and the batch is rolled back and redone under
//   the locks. A row a locked attempt holds already is locked again at no cost.
//   Then, only once every row is held, so that a key is never inserted before the rows' locks
//   are taken (as in a locked attempt): the entries (the zero-sum trigger sees them all at the end
//   of the statement); the journal rows with their receipts and the range of entry ids each
//   transaction's entries were given (migration 024: readers find a transaction's entries through
//   it; a transaction without entries has no range, and the journal refuses it); the batch's
//   outbox row, when it has transactions (migration 003).
// The CTEs all run on one snapshot; none reads a table another writes (the journal reads the
// entries' RETURNING rows, not the table).
//   Journal rows and entries are stamped with this statement's start (`created_at`), not the
//   transaction's: a locked attempt holds every row by then, and an unlocked one whose rows moved
//   while it waited is redone, so no entry on any of its rows commits after its stamp. On every
//   row, then, a larger entry id never has an earlier created_at, and a balance as of any time is
//   one that existed (docs/keys-and-audit.md). A transaction's start would be taken before a
//   locked attempt waited for its rows, while others committed entries on them.
constexpr const char* k_write_batch = "posting_write_batch";
constexpr const char* k_write_batch_sql =
    "WITH locked AS ("
    "  SELECT a.id, v.xmin, v.changed, v.balance, v.version, v.held, v.held_version FROM account AS a"
    "    JOIN (SELECT c.*, TRUE FROM unnest($14::bigint[], $21::xid[], $15::bigint[], $16::bigint[], $17::bigint[],"
    "                                       $18::bigint[]) AS c"
    "          UNION ALL"
    "          SELECT k.*, NULL, NULL, NULL, NULL, FALSE FROM unnest($22::bigint[], $23::xid[]) AS k)"
    "      AS v(id, xmin, balance, version, held, held_version, changed) ON a.id = v.id"
    "   WHERE a.xmin = v.xmin ORDER BY a.id FOR NO KEY UPDATE OF a),"
    " balances AS ("
    "  UPDATE account AS a SET balance = l.balance, version = l.version, held = l.held, held_version = l.held_version"
    "    FROM locked AS l"
    "   WHERE a.id = l.id AND a.xmin = l.xmin AND l.changed"
    "  RETURNING 1),"
    " held AS ("
    "  SELECT (SELECT count(*) FROM balances) AS updated, (SELECT count(*) FROM locked) AS locked),"
    " all_held AS ("
    "  SELECT updated = cardinality($14::bigint[]) AND locked = cardinality($14::bigint[]) + cardinality($22::bigint[])"
    "    AS yes FROM held),"
    " entries AS ("
    "  INSERT INTO ledger_entry (transaction_id, account_id, currency, amount, balance_after, created_at)"
    "  SELECT *, statement_timestamp() FROM unnest($9::uuid[], $10::bigint[], $11::bpchar[], $12::bigint[],"
    "                                              $13::bigint[])"
    "   WHERE (SELECT yes FROM all_held)"
    "  RETURNING id, transaction_id),"
    " ranges AS ("
    "  SELECT transaction_id, min(id) AS first_id, max(id) AS last_id FROM entries GROUP BY transaction_id),"
    " journal AS ("
    "  INSERT INTO journal_transaction"
    "    (id, principal_id, idempotency_key, request_hash, type, response_status, response_body, metadata,"
    "     first_entry_id, last_entry_id, created_at)"
    "  SELECT t.*, r.first_id, r.last_id, statement_timestamp()"
    "    FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::int[], $7::text[],"
    "                $8::jsonb[])"
    "           AS t(id, principal_id, idempotency_key, request_hash, type, response_status, response_body, metadata)"
    "    LEFT JOIN ranges AS r ON r.transaction_id = t.id"
    "   WHERE (SELECT yes FROM all_held)),"
    " outbox AS ("
    "  INSERT INTO outbox_event (transaction_ids, topic, payload)"
    "  SELECT $19::uuid[], 'ledger.batch', $20::jsonb WHERE cardinality($19::uuid[]) > 0 AND (SELECT yes FROM "
    "all_held))"
    " SELECT updated, locked FROM held";

// Retries of a whole batch after a deadlock, a serialization failure or a lost idempotency race.
constexpr int k_batch_attempts_max = 5;

// Appends one transaction's element of the batch's outbox payload.
void append_outbox_event(std::string& p, const posting_request& r, const ledger::posting_plan& plan) {
  if (p.empty()) {
    p = "{\"transactions\":[";
  } else {
    p += ',';
  }
  p += "{\"transactionId\":\"" + r.transaction_id + "\",\"type\":\"";
  p += ledger::to_string(r.posting.type);
  p +=
      "\",\"currency\":\"" + r.posting.currency + "\",\"amount\":\"" + std::to_string(plan.amount) + "\",\"entries\":[";
  for (std::size_t i = 0; i < plan.entries.size(); ++i) {
    if (i > 0) p += ',';
    p += "{\"accountId\":" + std::to_string(plan.entries[i].account) + ",\"amount\":\"" +
         std::to_string(plan.entries[i].amount) + "\"}";
  }
  p += "]}";
}

// A deposit's refundable remainder and a withdrawal's status, as locked by the batch and as the
// postings planned so far leave them.
struct deposit_state {
  ledger::account_id account = 0;
  ledger::amount_minor amount = 0;
  ledger::amount_minor refunded = 0;
  ledger::amount_minor charged_back = 0;
};

// What was refunded of a payment (its payment_refund_total row; none before its first refund).
struct payment_refund_state {
  bool exists = false;
  ledger::amount_minor amount = 0;
  ledger::amount_minor refunded = 0;
};

// An adjustment and a quote as locked by the batch (migration 012).
struct adjustment_state {
  std::string status;
  ledger::principal_id requested_by = 0;
};
struct quote_state {
  bool used = false;
  bool expired = false;
};

struct flow_states {
  std::set<std::string> reversed;  // originals with a reversal
  std::map<std::string, adjustment_state> adjustments;
  std::map<std::string, quote_state> quotes;
  std::map<std::string, deposit_state> deposits;
  std::map<std::string, payment_refund_state> payment_refunds;  // by the payment's transaction id
  std::map<std::string, std::string> withdrawals;               // id → status
  std::set<std::pair<std::int64_t, std::string>> payments;      // (provider, payment id) deposited
};

// Locks the flow rows the postings check, and finds the provider payments already deposited.
flow_states lock_flow_rows(pqxx::work& txn, const std::vector<posting_request>& requests,
                           const std::vector<std::size_t>& indices) {
  std::vector<std::string> deposits, withdrawals, payment_ids, refunded_payments;
  std::vector<std::int64_t> payment_providers;
  std::vector<std::string> originals, adjustments, quotes;
  for (std::size_t i : indices) {
    const auto& rows = requests[i].rows;
    if (!rows) continue;
    if (rows->reversal_of) {
      originals.push_back(rows->reversal_of->original_id);
      if (rows->reversal_of->payment) refunded_payments.push_back(rows->reversal_of->original_id);
      if (rows->reversal_of->deposit) deposits.push_back(rows->reversal_of->original_id);
    }
    if (rows->approval) adjustments.push_back(rows->approval->adjustment_id);
    if (rows->quote) quotes.push_back(rows->quote->quote_id);
    if (rows->claim) deposits.push_back(rows->claim->deposit_transaction_id);
    if (rows->refund) refunded_payments.push_back(rows->refund->payment_transaction_id);
    if (rows->settle) withdrawals.push_back(rows->settle->withdrawal_id);
    if (rows->deposit_payment && !rows->deposit_payment->payment_id.empty()) {
      payment_providers.push_back(rows->deposit_payment->provider_id);
      payment_ids.push_back(rows->deposit_payment->payment_id);
    }
  }
  flow_states states;
  if (!originals.empty()) {
    for (const auto& row : txn.exec_prepared(k_find_reversals, pg_array(originals))) {
      states.reversed.insert(row[0].as<std::string>());
    }
  }
  if (!adjustments.empty()) {
    for (const auto& row : txn.exec_prepared(k_lock_adjustments, pg_array(adjustments))) {
      states.adjustments[row[0].as<std::string>()] = {row[1].as<std::string>(), row[2].as<std::int64_t>()};
    }
  }
  if (!quotes.empty()) {
    for (const auto& row : txn.exec_prepared(k_lock_quotes, pg_array(quotes))) {
      states.quotes[row[0].as<std::string>()] = {row[1].as<bool>(), row[2].as<bool>()};
    }
  }
  if (!deposits.empty()) {
    for (const auto& row : txn.exec_prepared(k_lock_deposits, pg_array(deposits))) {
      states.deposits[row[0].as<std::string>()] = {row[1].as<std::int64_t>(), row[2].as<std::int64_t>(),
                                                   row[3].as<std::int64_t>(), row[4].as<std::int64_t>()};
    }
  }
  if (!withdrawals.empty()) {
    for (const auto& row : txn.exec_prepared(k_lock_withdrawals, pg_array(withdrawals))) {
      states.withdrawals[row[0].as<std::string>()] = row[1].as<std::string>();
    }
  }
  if (!refunded_payments.empty()) {
    for (const auto& row : txn.exec_prepared(k_lock_payment_refunds, pg_array(refunded_payments))) {
      states.payment_refunds[row[0].as<std::string>()] = {true, row[1].as<std::int64_t>(), row[2].as<std::int64_t>()};
    }
  }
  if (!payment_ids.empty()) {
    for (const auto& row : txn.exec_prepared(k_find_payments, pg_array(payment_providers), pg_array(payment_ids))) {
      states.payments.emplace(row[0].as<std::int64_t>(), row[1].as<std::string>());
    }
  }
  return states;
}

// A fenced posting's metadata names the lease it committed under ("lease": partition, epoch, node),
// so that which node debited an account at which epoch can be read back from the journal.
std::string with_lease(const std::string& metadata_json, const lease_fence& fence) {
  const std::string lease = "\"lease\":{\"partition\":" + std::to_string(fence.partition) +
                            ",\"epoch\":" + std::to_string(fence.epoch) + ",\"node\":\"" + fence.node_id + "\"}";
  const auto close = metadata_json.rfind('}');
  WALLET_ASSERT(close != std::string::npos, "metadata is a JSON object");
  const bool empty = metadata_json.find_first_not_of(" \t\n{") == close;
  return metadata_json.substr(0, close) + (empty ? "" : ",") + lease + "}";
}

// The partitions' current holders, as (node, epoch), for the fenced postings of `indices`.
std::map<int, std::pair<std::string, std::int64_t>> lock_leases(pqxx::work& txn,
                                                                const std::vector<posting_request>& requests,
                                                                const std::vector<std::size_t>& indices) {
  std::set<std::int64_t> partitions;
  for (std::size_t i : indices) {
    if (requests[i].fence) partitions.insert(requests[i].fence->partition);
  }
  std::map<int, std::pair<std::string, std::int64_t>> holders;
  if (partitions.empty()) return holders;
  const std::vector<std::int64_t> ids(partitions.begin(), partitions.end());
  for (const auto& row : txn.exec_prepared(k_lock_leases, pg_array(ids))) {
    holders[row[0].as<int>()] = {row[1].as<std::string>(), row[2].as<std::int64_t>()};
  }
  return holders;
}

// Whether a posting's flow rows allow it, against the states the batch has locked; ok or the
// refusal. Checked before the posting is planned, so a refused posting changes nothing.
ledger::error_code check_flow_rows(const posting_request& r, const flow_states& states) {
  const auto& rows = *r.rows;
  if (rows.reversal_of) {
    const auto& v = *rows.reversal_of;
    if (states.reversed.count(v.original_id) != 0) return ledger::error_code::already_reversed;
    if (v.payment && states.payment_refunds.count(v.original_id) != 0) return ledger::error_code::already_refunded;
    if (v.deposit) {
      auto it = states.deposits.find(v.original_id);
      if (it == states.deposits.end()) return ledger::error_code::unknown_payment;
      if (it->second.refunded > 0 || it->second.charged_back > 0) return ledger::error_code::already_refunded;
    }
  }
  if (rows.approval) {
    auto it = states.adjustments.find(rows.approval->adjustment_id);
    if (it == states.adjustments.end()) return ledger::error_code::not_found;
    if (it->second.status != "PENDING_APPROVAL") return ledger::error_code::already_decided;
    if (it->second.requested_by == rows.approval->approver) return ledger::error_code::same_approver;
  }
  if (rows.quote) {
    auto it = states.quotes.find(rows.quote->quote_id);
    if (it == states.quotes.end()) return ledger::error_code::not_found;
    // A used quote: the exchange flow answers with the receipt of the exchange that used it.
    if (it->second.used) return ledger::error_code::conflict;
    if (it->second.expired) return ledger::error_code::quote_expired;
  }
  if (rows.claim) {
    auto it = states.deposits.find(rows.claim->deposit_transaction_id);
    if (it == states.deposits.end()) return ledger::error_code::unknown_payment;
    const auto& d = it->second;
    if (d.account != r.posting.debit_account) return ledger::error_code::unknown_payment;
    if (rows.claim->chargeback && d.charged_back > 0) return ledger::error_code::already_charged_back;
    const auto left = d.amount - d.refunded - d.charged_back;
    if (left <= 0 || (!rows.claim->rest && r.posting.amount > left)) return ledger::error_code::refund_exceeds_payment;
  }
  if (rows.refund) {
    // Before its first refund a payment has no row: all of it is left.
    const auto& f = *rows.refund;
    auto it = states.payment_refunds.find(f.payment_transaction_id);
    const auto left = it == states.payment_refunds.end() ? f.payment_amount : it->second.amount - it->second.refunded;
    if (r.posting.debit_account != f.payee) return ledger::error_code::unknown_payment;
    if (left <= 0 || (!f.rest && r.posting.amount > left)) return ledger::error_code::refund_exceeds_payment;
  }
  if (rows.settle) {
    auto it = states.withdrawals.find(rows.settle->withdrawal_id);
    if (it == states.withdrawals.end()) return ledger::error_code::unknown_withdrawal;
    if (it->second != "PENDING") return ledger::error_code::already_settled;
  }
  if (rows.deposit_payment && !rows.deposit_payment->payment_id.empty() &&
      states.payments.count({rows.deposit_payment->provider_id, rows.deposit_payment->payment_id}) != 0) {
    return ledger::error_code::conflict;
  }
  return ledger::error_code::ok;
}

// Records what an accepted posting did to the flow states, and appends its row writes (and its
// audit row to `audit_writes`, which go last: see persistence/audit.hpp).
void apply_flow_rows(pqxx::work& txn, const posting_request& r, const ledger::posting_plan& plan, flow_states& states,
                     std::string& writes, std::string& audit_writes) {
  const auto& rows = *r.rows;
  auto q = [&](const std::string& text) { return txn.quote(text); };
  auto q_or_null = [&](const std::string& text) { return text.empty() ? std::string("NULL") : txn.quote(text); };
  const std::string tx = q(r.transaction_id) + "::uuid";
  if (rows.reversal_of) {
    const auto& v = *rows.reversal_of;
    const std::string original = q(v.original_id) + "::uuid";
    states.reversed.insert(v.original_id);
    writes += "INSERT INTO transaction_reversal (transaction_id, reversal_id, principal_id, reason) VALUES (" +
              original + ", " + tx + ", " + std::to_string(v.principal) + ", " + q(v.reason) + ");\n";
    if (v.payment) {
      const auto& f = *v.payment;
      states.payment_refunds[v.original_id] = {true, f.payment_amount, f.payment_amount};
      writes +=
          "INSERT INTO payment_refund_total (transaction_id, payee_id, payer_id, currency, amount, refunded)"
          " VALUES (" +
          original + ", " + std::to_string(f.payee) + ", " + std::to_string(f.payer) + ", " + q(r.posting.currency) +
          ", " + std::to_string(f.payment_amount) + ", " + std::to_string(f.payment_amount) + ");\n";
    }
    if (v.deposit) {
      auto& d = states.deposits.at(v.original_id);
      d.refunded = d.amount;
      writes += "UPDATE deposit_payment SET refunded = amount WHERE transaction_id = " + original + ";\n";
    }
  }
  if (rows.approval) {
    states.adjustments[rows.approval->adjustment_id].status = "APPROVED";
    writes += "UPDATE adjustment SET status = 'APPROVED', decided_by = " + std::to_string(rows.approval->approver) +
              ", decided_at = now(), transaction_id = " + tx + " WHERE id = " + q(rows.approval->adjustment_id) +
              "::uuid;\n";
  }
  if (rows.quote) {
    states.quotes[rows.quote->quote_id].used = true;
    writes += "UPDATE fx_quote SET transaction_id = " + tx + " WHERE id = " + q(rows.quote->quote_id) + "::uuid;\n";
  }
  if (rows.event) {
    const auto& e = *rows.event;
    writes += "INSERT INTO provider_event (provider_id, event_id, type, payment_id, payload, transaction_id) VALUES (" +
              std::to_string(e.provider_id) + ", " + q(e.event_id) + ", " + q(e.type) + ", " + q_or_null(e.payment_id) +
              ", " + q(e.payload_json) + "::jsonb, " + tx + ");\n";
  }
  if (rows.deposit_payment) {
    const auto& d = *rows.deposit_payment;
    writes +=
        "INSERT INTO deposit_payment (transaction_id, account_id, provider_id, payment_id, currency, amount)"
        " VALUES (" +
        tx + ", " + std::to_string(r.posting.credit_parent != 0 ? r.posting.credit_parent : r.posting.credit_account) +
        ", " + std::to_string(d.provider_id) + ", " + q_or_null(d.payment_id) + ", " + q(r.posting.currency) + ", " +
        std::to_string(plan.amount) + ");\n";
    if (!d.payment_id.empty()) states.payments.emplace(d.provider_id, d.payment_id);
  }
  if (rows.claim) {
    auto& d = states.deposits.at(rows.claim->deposit_transaction_id);
    const std::string id = q(rows.claim->deposit_transaction_id) + "::uuid";
    if (rows.claim->chargeback) {
      d.charged_back += plan.amount;
      writes += "UPDATE deposit_payment SET charged_back = charged_back + " + std::to_string(plan.amount) +
                ", chargeback_transaction_id = " + tx + " WHERE transaction_id = " + id + ";\n";
    } else {
      d.refunded += plan.amount;
      writes += "UPDATE deposit_payment SET refunded = refunded + " + std::to_string(plan.amount) +
                " WHERE transaction_id = " + id + ";\n";
    }
  }
  if (rows.refund) {
    const auto& f = *rows.refund;
    auto& p = states.payment_refunds[f.payment_transaction_id];
    const std::string payment = q(f.payment_transaction_id) + "::uuid";
    if (p.exists) {
      writes += "UPDATE payment_refund_total SET refunded = refunded + " + std::to_string(plan.amount) +
                " WHERE transaction_id = " + payment + ";\n";
    } else {
      // The first refund makes the row. Another server making it at the same time meets the primary
      // key: the batch is redone (commit_with_retries) and then finds it locked here.
      p = {true, f.payment_amount, 0};
      writes +=
          "INSERT INTO payment_refund_total (transaction_id, payee_id, payer_id, currency, amount, refunded)"
          " VALUES (" +
          payment + ", " + std::to_string(f.payee) + ", " + std::to_string(f.payer) + ", " + q(r.posting.currency) +
          ", " + std::to_string(f.payment_amount) + ", " + std::to_string(plan.amount) + ");\n";
    }
    p.refunded += plan.amount;
    writes += "INSERT INTO payment_refund (transaction_id, payment_transaction_id, amount) VALUES (" + tx + ", " +
              payment + ", " + std::to_string(plan.amount) + ");\n";
  }
  if (rows.withdrawal_request) {
    const auto& w = *rows.withdrawal_request;
    writes +=
        "INSERT INTO withdrawal (id, account_id, principal_id, provider_id, currency, amount, fee, destination,"
        " transaction_id) VALUES (" +
        q(w.id) + "::uuid, " + std::to_string(r.posting.debit_account) + ", " + std::to_string(w.principal) + ", " +
        std::to_string(w.provider_id) + ", " + q(r.posting.currency) + ", " + std::to_string(w.amount) + ", " +
        std::to_string(w.fee) + ", " + q_or_null(w.destination) + ", " + tx + ");\n";
  }
  if (rows.settle) {
    const auto& st = *rows.settle;
    const std::string status = st.paid ? "PAID" : "FAILED";
    states.withdrawals[st.withdrawal_id] = status;
    writes += "UPDATE withdrawal SET status = " + q(status) + ", settled_transaction_id = " + tx +
              ", provider_payment_id = " + q_or_null(st.provider_payment_id) +
              ", settled_at = now() WHERE id = " + q(st.withdrawal_id) + "::uuid;\n";
  }
  if (rows.audit) {
    // The transaction, the amount that left the deciding account, and every entry with its sign:
    // a reversal's amount is one leg of several (970 of a 1,000 payment whose fee was 30), and an
    // adjustment's is unsigned, so the entries say what moved. The flow's own members come last
    // and win (an approval's signed amount).
    const auto& a = *rows.audit;
    std::string entries = "[";
    for (const auto& e : plan.entries) {
      if (entries.size() > 1) entries += ',';
      entries += "{\"accountId\":" + std::to_string(e.account) + ",\"amount\":\"" + std::to_string(e.amount) + "\"}";
    }
    entries += ']';
    const auto detail = "jsonb_build_object('transactionId', " + q(r.transaction_id) + ", 'amount', " +
                        q(std::to_string(plan.amount)) + ", 'entries', " + q(entries) + "::jsonb) || " +
                        q(a.detail_json) + "::jsonb";
    audit_writes +=
        audit_insert_sql(std::to_string(a.principal), q(a.action), q(a.target), detail, q(a.request_id)) + ";\n";
  }
}

// How an attempt reads the batch's account rows (k_account_rows_sql).
enum class row_access : std::uint8_t { locked, unlocked };

// An unlocked attempt found that it cannot decide the batch without the rows' locks: a row had
// moved since it was read, or a posting would be refused. Nothing of it was committed.
struct needs_locks : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Whether a batch may be tried first without locking its account rows: plain postings only (no
// flow rows, no holds: their rows are checked under locks of their own), never an atomic batch.
bool may_read_unlocked(const std::vector<posting_request>& requests, const std::vector<std::size_t>& indices) {
  return std::none_of(indices.begin(), indices.end(), [&](std::size_t i) { return requests[i].rows != nullptr; });
}

// Whether a posting that commits writes a journal row under its key: all but a hold's placement
// and void, which change held money and the hold's row only.
bool makes_journal_row(const posting_request& r) {
  return !(r.rows && r.rows->hold && r.rows->hold->what != flow_rows::hold_change::kind::capture);
}

// `later` came with the key of `first`, which this batch commits: the answer it would get right
// after that commit, the stored receipt for the same request, idempotency_key_reused for another.
void answer_from_batch(const posting_request& first, const posting_outcome& first_out, const posting_request& later,
                       posting_outcome& out) {
  out.transaction_id = first_out.transaction_id;
  if (later.request_hash != first.request_hash) {
    out.outcome = ledger::error_code::idempotency_key_reused;
    return;
  }
  out.replayed = true;
  out.response_status = first_out.response_status;
  out.response_body = first_out.response_body;
}

// One attempt: one database transaction over the postings named by `indices`.
// With `all_or_nothing` (an atomic batch), the first posting that cannot be planned ends the
// attempt: the transaction is rolled back and `refused_at` names it.
// An unlocked attempt (`row_access::unlocked`, plain batches only) throws needs_locks instead of
// refusing a posting or writing over a row that moved; the caller then redoes it locked.
batch_result commit_once(pqxx::connection& conn, const std::vector<posting_request>& requests,
                         const std::vector<std::size_t>& indices, bool all_or_nothing, row_access access) {
  batch_result result;
  result.outcomes.resize(requests.size());
  result.attempts = 1;
  const bool unlocked = access == row_access::unlocked;
  WALLET_ASSERT(!unlocked || (!all_or_nothing && may_read_unlocked(requests, indices)),
                "only plain batches are read unlocked");

  pqxx::work txn(conn);

  // 0. In cluster mode, the leases its debits were decided under, before any account row in every
  // attempt (the unlocked one locks its rows only at the write): a renewal locks lease rows alone,
  // so no writer then waits for a lease while it holds a row another writer waits for.
  const auto lease_holders = lock_leases(txn, requests, indices);

  // 1. Read every row the postings touch, locked in ascending id order. This comes before the key
  // lookup on purpose: a key committed by another server (or by an earlier COMMIT whose outcome
  // was unknown here) was committed under the same debit row's lock, so once we hold it, such a
  // commit is either visible to the lookup below or will queue behind us and meet the unique key.
  // Looking keys up first would let one commit in between, and the plan would then refuse a
  // committed transfer on funds its own commit spent.
  // Read unlocked, the same holds by other means: a commit before the lookup is visible to it;
  // one after it changed its debit row after the read, so the write below finds that row at a
  // newer version (or meets the unique key) and the batch is redone under the locks; and no
  // posting is refused on rows read unlocked.
  std::set<ledger::account_id> ids;
  for (std::size_t i : indices) {
    const auto& p = requests[i].posting;
    ids.insert(p.debit_account);
    ids.insert(p.credit_account);
    ids.insert(p.debit_shards.begin(), p.debit_shards.end());
    for (const auto& leg : p.extra_credits) ids.insert(leg.account);
    if (p.shortfall_account != 0) ids.insert(p.shortfall_account);
    for (const auto& leg : p.legs) {
      ids.insert(leg.account);
      ids.insert(leg.shards.begin(), leg.shards.end());
    }
  }
  ledger::account_states states;
  // The fee schedules of the payees among the rows (migration 007), by row.
  std::unordered_map<ledger::account_id, ledger::fee_schedule> payee_fees;
  // The version of each row as read (its xmin), which the write statement checks.
  std::unordered_map<ledger::account_id, std::int64_t> read_at;  // the row's xmin
  if (!ids.empty()) {
    auto rows = txn.exec_prepared(unlocked ? k_read_accounts : k_lock_accounts,
                                  pg_array(std::vector<std::int64_t>(ids.begin(), ids.end())));
    for (const auto& row : rows) {
      ledger::account_state s;
      s.id = row[0].as<std::int64_t>();
      s.currency = row[1].as<std::string>();
      s.status = parse_column(ledger::parse_account_status, row[2].as<std::string>(), "account.status");
      s.allow_negative = row[3].as<bool>();
      s.balance = row[4].as<std::int64_t>();
      s.version = row[5].as<std::int64_t>();
      s.parent_id = row[6].as<std::int64_t>();
      if (!row[7].is_null()) payee_fees[s.id] = {row[7].as<std::int32_t>(), row[8].as<std::int64_t>()};
      s.held = row[9].as<std::int64_t>();
      s.held_version = row[10].as<std::int64_t>();
      read_at.emplace(s.id, row[11].as<std::int64_t>());
      states.emplace(s.id, std::move(s));
    }
  }
  const ledger::account_states locked = states;
  // ... and the flow rows (deposits, withdrawals) the postings check.
  flow_states flows = lock_flow_rows(txn, requests, indices);
  hold_states holds = lock_hold_rows(txn, requests, indices);

  // 2. Idempotency keys already committed: their stored answer is the answer.
  std::vector<bool> committed_before(requests.size(), false);
  {
    std::vector<std::int64_t> principals;
    pg_text_array keys;
    std::vector<std::size_t> key_owner;
    // 1-based positions in `keys` of the postings looked up among the stored batches (a batch's
    // own transfers are not: their batch is stored under item 0's key), and among the holds.
    std::vector<std::int64_t> batch_checked, hold_checked;
    for (std::size_t i : indices) {
      if (!requests[i].principal) continue;
      principals.push_back(*requests[i].principal);
      keys.add(requests[i].idempotency_key);
      key_owner.push_back(i);
      if (!makes_journal_row(requests[i])) continue;
      const auto position = static_cast<std::int64_t>(key_owner.size());
      hold_checked.push_back(position);
      if (!requests[i].batch_item) batch_checked.push_back(position);
    }
    if (!keys.empty()) {
      auto rows = txn.exec_prepared(k_find_committed, pg_array(principals), keys.take(), pg_array(batch_checked),
                                    pg_array(hold_checked));
      std::vector<std::size_t> keys_held_elsewhere;
      for (const auto& row : rows) {
        const std::size_t i = key_owner.at(row[0].as<std::size_t>() - 1);
        if (row[1].is_null()) {
          keys_held_elsewhere.push_back(i);
          continue;
        }
        auto& out = result.outcomes[i];
        committed_before[i] = true;
        out.transaction_id = row[1].as<std::string>();
        if (row[2].as<std::string>() == requests[i].request_hash) {
          out.replayed = true;
          out.response_status = row[3].as<int>();
          out.response_body = row[4].as<std::string>();
        } else {
          out.outcome = ledger::error_code::idempotency_key_reused;
        }
      }
      // A key that only a stored batch or a hold holds: another request under it is refused. (One
      // the journal holds too was answered above: a batch's own transfers are never checked here.)
      for (std::size_t i : keys_held_elsewhere) {
        if (committed_before[i]) continue;
        committed_before[i] = true;
        result.outcomes[i].outcome = ledger::error_code::idempotency_key_reused;
      }
    }
  }

  // 3. Plan, in request order, against the locked rows.
  // The columns go straight into the write statement's arrays, in PostgreSQL's binary format.
  using element = pg_binary_array::element;
  pg_binary_array j_ids(element::uuid), j_principals(element::int8), j_keys(element::text), j_hashes(element::text),
      j_types(element::text), j_status(element::int4), j_bodies(element::text), j_meta(element::jsonb);
  pg_binary_array e_tx(element::uuid), e_account(element::int8), e_currency(element::bpchar), e_amount(element::int8),
      e_balance_after(element::int8);
  pg_binary_array o_tx(element::uuid);
  std::string o_payload;
  std::string flow_writes;
  std::string audit_writes;
  std::size_t accepted = 0;
  // The key of each posting accepted so far, to the posting: a second posting of this batch with
  // a key taken here would meet the journal's unique key at the write, and a failed write is a
  // redo of the whole batch and then one transaction per posting.
  std::map<std::pair<ledger::principal_id, std::string_view>, std::size_t> keys_taken;
  for (std::size_t i : indices) {
    if (all_or_nothing && committed_before[i] && !result.outcomes[i].replayed) {
      result.refused_at = i;
      return result;
    }
    if (committed_before[i]) continue;
    const auto& r = requests[i];
    auto& out = result.outcomes[i];
    if (r.principal && makes_journal_row(r)) {
      if (auto taken = keys_taken.find({*r.principal, r.idempotency_key}); taken != keys_taken.end()) {
        // The same key on two postings of one batch: the first one's answer is this one's, as if it
        // had come just after its commit. The single flights keep one key to one request per
        // server, and runs commit alone, so no flow sends this today; were one to, this answers it
        // instead of failing the write and redoing the whole batch posting by posting.
        answer_from_batch(requests[taken->second], result.outcomes[taken->second], r, out);
        if (all_or_nothing && !out.replayed) {
          result.refused_at = i;
          return result;
        }
        continue;
      }
    }
    if (r.fence) {
      // The node lost the partition since its actor decided this debit: another node may be
      // debiting the account now, so this one must not. Nothing of it commits; the client retries
      // with the same key, and the retry reaches the partition's new holder.
      // An atomic batch commits all of its items or none: nothing of it commits then, and the
      // whole batch is answered as not this node's.
      auto it = lease_holders.find(r.fence->partition);
      if (it == lease_holders.end() || it->second.first != r.fence->node_id || it->second.second != r.fence->epoch) {
        ++result.fenced;
        if (all_or_nothing) {
          out.outcome = ledger::error_code::not_partition_owner;
          result.refused_at = i;
          return result;
        }
        out.outcome = ledger::error_code::outcome_unknown;
        continue;
      }
    }
    // Holds (migration 011): a placement or a void changes held money and its hold row, and makes
    // no journal row; a capture posts only while its hold is active.
    if (r.rows && r.rows->hold) {
      if (r.rows->hold->what != flow_rows::hold_change::kind::capture) {
        if (plan_hold_change(txn, r, states, holds, out, flow_writes, audit_writes)) ++accepted;
        continue;
      }
      out.outcome = check_capture(r, holds);
      if (out.outcome != ledger::error_code::ok) continue;
    }
    if (r.rows) {
      out.outcome = check_flow_rows(r, flows);
      if (all_or_nothing && out.outcome != ledger::error_code::ok) {
        result.refused_at = i;
        return result;
      }
      if (out.outcome != ledger::error_code::ok) continue;
    }
    // A payment pays its payee's fee as this transaction read it with the credit row (see
    // k_lock_accounts_sql), never a schedule its flow may have cached before it changed.
    const ledger::posting* posting = &r.posting;
    ledger::posting priced;
    if (ledger::flows::pays_payee_fee(r.posting.type)) {
      auto fees = payee_fees.find(r.posting.credit_account);
      if (fees != payee_fees.end() || !r.posting.extra_credits.empty()) {
        priced = r.posting;
        if (!ledger::flows::price_payee_fee(priced, fees == payee_fees.end() ? ledger::fee_schedule{} : fees->second)) {
          if (unlocked) throw needs_locks("a payment's fee is refused only under its rows' locks");
          out.outcome = ledger::error_code::fees_changed;
          if (all_or_nothing) {
            result.refused_at = i;
            return result;
          }
          continue;
        }
        posting = &priced;
      }
    }
    // A claim of the rest of a deposit, or a refund of the rest of a payment, takes what is left as
    // the deposit's or the payment's row stands now (check_flow_rows found some left).
    if (r.rows && r.rows->takes_the_rest()) {
      ledger::amount_minor left = 0;
      if (r.rows->claim) {
        const auto& d = flows.deposits.at(r.rows->claim->deposit_transaction_id);
        left = d.amount - d.refunded - d.charged_back;
      } else {
        const auto& f = *r.rows->refund;
        auto it = flows.payment_refunds.find(f.payment_transaction_id);
        left = it == flows.payment_refunds.end() ? f.payment_amount : it->second.amount - it->second.refunded;
      }
      priced = r.posting;
      priced.amount = std::min(r.posting.amount, left);
      posting = &priced;
    }
    auto plan = ledger::plan_posting(*posting, states);
    if (unlocked && plan.outcome != ledger::error_code::ok) {
      throw needs_locks("a posting is refused only under its rows' locks");
    }
    out.outcome = plan.outcome;
    out.amount = plan.amount;
    out.inactive_account = plan.inactive_account;
    if (all_or_nothing && plan.outcome != ledger::error_code::ok) {
      result.refused_at = i;
      return result;  // rolled back: the transaction is aborted when it goes out of scope
    }
    if (plan.outcome != ledger::error_code::ok || plan.entries.empty()) continue;
    ++accepted;
    if (r.principal)
      keys_taken.emplace(std::pair<ledger::principal_id, std::string_view>(*r.principal, r.idempotency_key), i);
    out.transaction_id = r.transaction_id;
    out.debit_balance_after = plan.debit_balance_after;
    out.response_status = ledger::receipt_status;
    std::string fields = r.receipt_fields;
    if (r.rows && r.rows->takes_the_rest()) {
      fields += (fields.empty() ? "\"amount\":\"" : ",\"amount\":\"") + std::to_string(plan.amount) + "\"";
    }
    if (ledger::flows::pays_payee_fee(r.posting.type)) {
      const auto fee = ledger::flows::payee_fee_of(*posting);
      fields = ledger::payment_receipt_fields(fee, plan.amount - fee) + (fields.empty() ? "" : "," + fields);
    }
    if (r.posting.shortfall_account != 0) {
      // What the debited account paid, and what the shortfall account booked (a chargeback's loss).
      if (!fields.empty()) fields += ',';
      fields += "\"walletAmount\":\"" + std::to_string(plan.amount - plan.shortfall) + "\",\"lossAmount\":\"" +
                std::to_string(plan.shortfall) + "\"";
    }
    out.response_body = ledger::receipt_json(r.posting.type, r.transaction_id, plan.debit_balance_after, fields);
    if (r.rows) apply_flow_rows(txn, r, plan, flows, flow_writes, audit_writes);
    if (r.rows && r.rows->hold) apply_capture(txn, r, plan.amount, holds, flow_writes);
    j_ids.add(r.transaction_id);
    if (r.principal) {
      j_principals.add(*r.principal);
    } else {
      j_principals.add_null();
    }
    j_keys.add(r.idempotency_key);
    j_hashes.add(r.request_hash);
    j_types.add(ledger::to_string(r.posting.type));
    j_status.add(out.response_status);
    j_bodies.add(out.response_body);
    j_meta.add(r.fence ? with_lease(r.metadata_json, *r.fence) : r.metadata_json);
    for (const auto& e : plan.entries) {
      e_tx.add(r.transaction_id);
      e_account.add(e.account);
      // A posting of legs may span currencies (an exchange): each entry is in its row's.
      e_currency.add(r.posting.legs.empty() ? r.posting.currency : states.at(e.account).currency);
      e_amount.add(e.amount);
      e_balance_after.add(e.balance_after);
    }
    o_tx.add(r.transaction_id);
    append_outbox_event(o_payload, r, plan);
    out.entries = std::move(plan.entries);
  }

  if (accepted > 0) {
    pg_binary_array u_ids(element::int8), u_balances(element::int8), u_versions(element::int8), u_held(element::int8),
        u_held_versions(element::int8), u_read_at(element::xid);
    pg_binary_array v_ids(element::int8), v_read_at(element::xid);
    // In ascending id order: a batch that read its rows unlocked takes their locks here, in this
    // order, as a locked attempt takes them when it reads.
    for (const ledger::account_id id : ids) {
      const auto found = states.find(id);
      if (found == states.end()) continue;  // no such account: its postings were refused
      const auto& state = found->second;
      const auto& before = locked.at(id);
      if (state.version == before.version && state.held_version == before.held_version) {
        // Read and not changed: locked at the version read, so that what the plan read of it
        // still holds when the batch commits (a locked attempt holds its locks already).
        if (unlocked) {
          v_ids.add(id);
          v_read_at.add(read_at.at(id));
        }
        continue;
      }
      u_ids.add(id);
      u_balances.add(state.balance);
      u_versions.add(state.version);
      u_held.add(state.held);
      u_held_versions.add(state.held_version);
      u_read_at.add(read_at.at(id));
      result.rows.push_back({id, state.balance, state.version, state.parent_id, state.held, state.held_version});
    }
    const bool outbox_row = o_tx.size() > 0;
    if (outbox_row) o_payload += "]}";
    // 4-7. The writes (k_write_batch). A key committed by another server since step 2 is a unique
    // violation: the attempt is redone and step 2 then finds it. A batch of hold placements and
    // voids only has no journal rows, entries or outbox row.
    const std::size_t u_count = u_ids.size();
    const std::size_t v_count = v_ids.size();
    const auto bin = [](pg_binary_array& a) { return pqxx::binarystring(a.take()); };
    const auto written = txn.exec_prepared1(
        k_write_batch, bin(j_ids), bin(j_principals), bin(j_keys), bin(j_hashes), bin(j_types), bin(j_status),
        bin(j_bodies), bin(j_meta), bin(e_tx), bin(e_account), bin(e_currency), bin(e_amount), bin(e_balance_after),
        bin(u_ids), bin(u_balances), bin(u_versions), bin(u_held), bin(u_held_versions), bin(o_tx),
        outbox_row ? o_payload : std::string("null"), bin(u_read_at), bin(v_ids), bin(v_read_at));
    const auto updated = written[0].as<std::size_t>();
    const auto locked_rows = written[1].as<std::size_t>();
    if (updated != u_count || locked_rows != u_count + v_count) {
      // Rows that moved since they were read. Under their locks none can: that would be a defect.
      if (unlocked) throw needs_locks("an account row changed since the batch read it");
      throw std::logic_error("account rows changed under the batch's locks: " + std::to_string(updated) + " of " +
                             std::to_string(u_count) + " updated");
    }
    std::string writes;
    // 8. The rows of the money flows, after the journal rows they name.
    if (!flow_writes.empty()) writes += (writes.empty() ? "" : ";\n") + flow_writes;
    // 9. The audit rows of operators' flows, last: their lock is held until COMMIT.
    if (!audit_writes.empty()) writes += (writes.empty() ? "" : ";\n") + audit_lock_sql() + ";\n" + audit_writes;
    if (!writes.empty()) txn.exec(writes);
  }
  txn.commit();
  return result;
}

void merge(batch_result& into, batch_result&& part, const std::vector<std::size_t>& indices) {
  for (std::size_t i : indices) into.outcomes[i] = std::move(part.outcomes[i]);
  // A later part's row state is newer: it committed after the earlier one.
  for (auto& row : part.rows) {
    auto it = std::find_if(into.rows.begin(), into.rows.end(), [&](const row_state& r) { return r.id == row.id; });
    if (it == into.rows.end()) {
      into.rows.push_back(row);
    } else if (row.version > it->version || (row.version == it->version && row.held_version > it->held_version)) {
      *it = row;
    }
  }
  into.attempts += part.attempts;
  into.fenced += part.fenced;
  into.relocked += part.relocked;
}

// Commits `indices` with retries for transient conflicts; rethrows anything else. A plain batch is
// tried first with its account rows read unlocked (commit_once); when that attempt needs the
// locks, and for every later attempt, the rows are locked.
batch_result commit_with_retries(pqxx::connection& conn, const std::vector<posting_request>& requests,
                                 const std::vector<std::size_t>& indices, bool all_or_nothing = false) {
  int attempts = 0;
  int relocked = 0;
  auto access = !all_or_nothing && may_read_unlocked(requests, indices) ? row_access::unlocked : row_access::locked;
  for (;;) {
    ++attempts;
    try {
      auto result = commit_once(conn, requests, indices, all_or_nothing, access);
      result.attempts = attempts;
      result.relocked = relocked;
      return result;
    } catch (const needs_locks&) {
      // Not a failure: the unlocked attempt gave way, and does not count against the attempts a
      // batch is allowed.
      ++relocked;
    } catch (const pqxx::unique_violation& e) {
      // Another server committed one of these idempotency keys since step 1: redo the attempt.
      if (attempts - relocked >= k_batch_attempts_max) throw;
      spdlog::warn("ledger batch of {} postings met a concurrently committed key, retrying", indices.size());
    } catch (const pqxx::transaction_rollback& e) {
      // Deadlock or serialization failure: nothing was committed, the batch is simply redone.
      if (attempts - relocked >= k_batch_attempts_max) throw;
      spdlog::warn("ledger batch of {} postings rolled back ({}), retrying", indices.size(), e.what());
    }
    access = row_access::locked;
  }
}

}  // namespace

void prepare_posting_statements(pqxx::connection& conn) {
  conn.prepare(k_find_committed, k_find_committed_sql);
  conn.prepare(k_lock_accounts, k_lock_accounts_sql);
  conn.prepare(k_read_accounts, k_account_rows_sql);
  conn.prepare(k_lock_deposits, k_lock_deposits_sql);
  conn.prepare(k_lock_withdrawals, k_lock_withdrawals_sql);
  conn.prepare(k_find_payments, k_find_payments_sql);
  conn.prepare(k_lock_payment_refunds, k_lock_payment_refunds_sql);
  conn.prepare(k_lock_leases, k_lock_leases_sql);
  conn.prepare(k_find_reversals, k_find_reversals_sql);
  conn.prepare(k_lock_adjustments, k_lock_adjustments_sql);
  conn.prepare(k_lock_quotes, k_lock_quotes_sql);
  conn.prepare(k_write_batch, k_write_batch_sql);
  // Every statement the posting path prepares finds its rows by primary or unique key, whatever the
  // arrays' lengths: a generic plan is as good as a custom one, and is planned once per connection
  // instead of once per batch (planning the lock and key lookups cost more than executing them at
  // small batches; bench/PROFILE.md).
  //
  // A generic plan is made at a statement's first execution and kept until something invalidates
  // it (an ANALYZE of one of its tables). On a new database that first execution meets empty
  // tables, and the planner then prefers reading them whole: a hash join over a sequential scan of
  // the journal for the key lookup, of `account` for the lock's parent rows and the balance
  // caches' update. As the tables grow, every batch would scan them until autovacuum's next
  // ANALYZE. No statement on this connection is meant to read a table whole, so sequential scans
  // are priced out here: the plans probe the keys' indexes whatever the statistics say
  // (tests/persistence/posting_plan_tests.cpp).
  //
  // Set through libpqxx's session variables, not SET statements: libpqxx 6 reconnects a connection
  // whose session ended on its next statement, silently, and sets them again in the new session.
  conn.set_variable("plan_cache_mode", "force_generic_plan");
  find_rows_by_key(conn);
  prepare_hold_statements(conn);
}

namespace {

// Commits `indices`; a refusal by the database is returned as its message instead of thrown.
// Connection loss and lock or statement timeouts still propagate: they say nothing about any one
// posting (the whole transaction is gone), so they are never isolated posting by posting.
std::optional<batch_result> try_commit(pqxx::connection& conn, const std::vector<posting_request>& requests,
                                       const std::vector<std::size_t>& indices, std::string& refusal) {
  try {
    return commit_with_retries(conn, requests, indices);
  } catch (const pqxx::broken_connection&) {
    throw;
  } catch (const pqxx::in_doubt_error&) {
    throw;
  } catch (const pqxx::sql_error& e) {
    if (is_timeout_sqlstate(e.sqlstate())) throw database_timeout(e.what());
    refusal = e.what();
  } catch (const std::exception& e) {
    refusal = e.what();
  }
  return std::nullopt;
}

}  // namespace

batch_result commit_batch(pqxx::connection& conn, const std::vector<posting_request>& requests) {
  std::vector<std::size_t> all(requests.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  std::string refusal;
  if (auto committed = try_commit(conn, requests, all, refusal)) return std::move(*committed);
  if (requests.size() > 1) {
    spdlog::warn("ledger batch of {} postings refused by the database ({}); isolating the offender", requests.size(),
                 refusal);
  }

  // Isolation: each posting in its own transaction, so one bad posting never fails its neighbours.
  // (A batch of one is its own offender: it fails alone, and nothing of it was committed.)
  // From here on some postings may have committed, so nothing may escape as an exception that
  // would make the caller answer the whole batch alike: each posting is answered by what
  // happened to it.
  batch_result result;
  result.outcomes.resize(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    auto& out = result.outcomes[i];
    if (result.connection_lost) {
      // Never sent: nothing of it committed.
      out.outcome = ledger::error_code::database_unavailable;
      continue;
    }
    if (requests.size() == 1) {
      spdlog::error("ledger posting {} refused by the database: {}", requests[i].transaction_id, refusal);
      out.outcome = ledger::error_code::internal;
      result.attempts += k_batch_attempts_max;
      continue;
    }
    std::vector<std::size_t> one{i};
    try {
      if (auto committed = try_commit(conn, requests, one, refusal)) {
        merge(result, std::move(*committed), one);
      } else {
        spdlog::error("ledger posting {} refused by the database: {}", requests[i].transaction_id, refusal);
        out.outcome = ledger::error_code::internal;
        result.attempts += k_batch_attempts_max;
      }
    } catch (const database_timeout& e) {
      // Rolled back: nothing of this posting committed.
      spdlog::warn("ledger posting {} timed out in the database: {}", requests[i].transaction_id, e.what());
      out.outcome = ledger::error_code::database_unavailable;
    } catch (const pqxx::in_doubt_error& e) {
      spdlog::error("ledger posting {}: COMMIT outcome unknown: {}", requests[i].transaction_id, e.what());
      out.outcome = ledger::error_code::outcome_unknown;
      result.connection_lost = true;
    } catch (const pqxx::broken_connection& e) {
      spdlog::error("ledger posting {}: connection lost: {}", requests[i].transaction_id, e.what());
      out.outcome = ledger::error_code::outcome_unknown;
      result.connection_lost = true;
    }
  }
  return result;
}

// An atomic batch of transfers (POST /v1/transfers/batch): one transaction, or nothing.
batch_result commit_atomic(pqxx::connection& conn, const std::vector<posting_request>& requests) {
  std::vector<std::size_t> all(requests.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  try {
    return commit_with_retries(conn, requests, all, true);
  } catch (const pqxx::broken_connection&) {
    throw;
  } catch (const pqxx::in_doubt_error&) {
    throw;
  } catch (const pqxx::sql_error& e) {
    if (is_timeout_sqlstate(e.sqlstate())) throw database_timeout(e.what());
    spdlog::error("atomic ledger batch of {} postings refused by the database: {}", requests.size(), e.what());
  }
  batch_result refused;
  refused.outcomes.resize(requests.size());
  for (auto& out : refused.outcomes) out.outcome = ledger::error_code::internal;
  refused.attempts = k_batch_attempts_max;
  return refused;
}

}  // namespace persistence
