#include "persistence/batch.hpp"

#include <pqxx/pqxx>

#include <algorithm>
#include <optional>
#include <map>
#include <set>
#include <spdlog/spdlog.h>

#include "base/assert.hpp"
#include "ledger/receipt.hpp"
#include "persistence/database.hpp"

namespace persistence {
namespace {

constexpr const char* k_find_committed = "posting_find_committed";
constexpr const char* k_find_committed_sql =
    "SELECT k.ord, j.id::text, j.request_hash, j.response_status, j.response_body"
    "  FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS k(principal_id, idempotency_key, ord)"
    "  JOIN journal_transaction j"
    "    ON j.principal_id = k.principal_id AND j.idempotency_key = k.idempotency_key";

constexpr const char* k_lock_accounts = "posting_lock_accounts";
constexpr const char* k_lock_accounts_sql =
    "SELECT id, currency, status, allow_negative, balance, version, COALESCE(parent_id, 0)"
    "  FROM account WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE";

// The four writes of a batch are sent as ONE multi-statement query: one round trip instead of
// four (measured: COMMIT's WAL flush and the round trips dominate a batch on this machine).
// They are therefore not prepared; the array parameters are passed as quoted literals, and
// each statement is a named template whose $n are replaced in order.
constexpr const char* k_insert_journal_sql =
    "INSERT INTO journal_transaction"
    "  (id, principal_id, idempotency_key, request_hash, type, response_status, response_body, metadata)"
    " SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::int[],"
    "                      $7::text[], $8::jsonb[])";

constexpr const char* k_insert_entries_sql =
    "INSERT INTO ledger_entry (transaction_id, account_id, currency, amount, balance_after)"
    " SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::bpchar[], $4::bigint[], $5::bigint[])";

constexpr const char* k_update_balances_sql =
    "UPDATE account AS a SET balance = u.balance, version = u.version"
    "  FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS u(id, balance, version)"
    " WHERE a.id = u.id";

// One outbox row announces the whole batch (migration 003).
constexpr const char* k_insert_outbox_sql =
    "INSERT INTO outbox_event (transaction_ids, topic, payload) VALUES ($1::uuid[], 'ledger.batch', $2::jsonb)";

// Replaces $1..$n of `sql` by the quoted `literals` (n < 10).
std::string bind_literals(std::string_view sql, const std::vector<std::string>& literals) {
  std::string out;
  out.reserve(sql.size() + 64);
  for (std::size_t i = 0; i < sql.size(); ++i) {
    if (sql[i] == '$' && i + 1 < sql.size() && sql[i + 1] >= '1' && sql[i + 1] <= '9') {
      const auto n = static_cast<std::size_t>(sql[i + 1] - '1');
      WALLET_ASSERT(n < literals.size(), "every placeholder has a literal");
      out += literals[n];
      ++i;
    } else {
      out += sql[i];
    }
  }
  return out;
}

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
  p += "\",\"currency\":\"" + r.posting.currency + "\",\"amount\":\"" + std::to_string(plan.amount) +
       "\",\"entries\":[";
  for (std::size_t i = 0; i < plan.entries.size(); ++i) {
    if (i > 0) p += ',';
    p += "{\"accountId\":" + std::to_string(plan.entries[i].account) + ",\"amount\":\"" +
         std::to_string(plan.entries[i].amount) + "\"}";
  }
  p += "]}";
}

// One attempt: one database transaction over the postings named by `indices`.
batch_result commit_once(pqxx::connection& conn, const std::vector<posting_request>& requests,
                         const std::vector<std::size_t>& indices) {
  batch_result result;
  result.outcomes.resize(requests.size());
  result.attempts = 1;

  pqxx::work txn(conn);

  // 1. Lock every row the postings touch, in ascending id order. This comes before the key
  // lookup on purpose: a key committed by another server (or by an earlier COMMIT whose outcome
  // was unknown here) was committed under the same debit row's lock, so once we hold it, such a
  // commit is either visible to the lookup below or will queue behind us and meet the unique key.
  // Looking keys up first would let one commit in between, and the plan would then refuse a
  // committed transfer on funds its own commit spent.
  std::set<ledger::account_id> ids;
  for (std::size_t i : indices) {
    const auto& p = requests[i].posting;
    ids.insert(p.debit_account);
    ids.insert(p.credit_account);
    ids.insert(p.debit_shards.begin(), p.debit_shards.end());
  }
  ledger::account_states states;
  if (!ids.empty()) {
    auto rows = txn.exec_prepared(k_lock_accounts, pg_array(std::vector<std::int64_t>(ids.begin(), ids.end())));
    for (const auto& row : rows) {
      ledger::account_state s;
      s.id = row[0].as<std::int64_t>();
      s.currency = row[1].as<std::string>();
      s.status = parse_column(ledger::parse_account_status, row[2].as<std::string>(), "account.status");
      s.allow_negative = row[3].as<bool>();
      s.balance = row[4].as<std::int64_t>();
      s.version = row[5].as<std::int64_t>();
      s.parent_id = row[6].as<std::int64_t>();
      states.emplace(s.id, std::move(s));
    }
  }
  const ledger::account_states locked = states;

  // 2. Idempotency keys already committed: their stored answer is the answer.
  std::vector<bool> committed_before(requests.size(), false);
  {
    std::vector<std::int64_t> principals;
    std::vector<std::string> keys;
    std::vector<std::size_t> key_owner;
    for (std::size_t i : indices) {
      if (!requests[i].principal) continue;
      principals.push_back(*requests[i].principal);
      keys.push_back(requests[i].idempotency_key);
      key_owner.push_back(i);
    }
    if (!keys.empty()) {
      auto rows = txn.exec_prepared(k_find_committed, pg_array(principals), pg_array(keys));
      for (const auto& row : rows) {
        const std::size_t i = key_owner.at(row[0].as<std::size_t>() - 1);
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
    }
  }

  // 3. Plan, in request order, against the locked rows.
  std::vector<std::string> j_ids, j_keys, j_hashes, j_types, j_bodies, j_meta;
  std::vector<std::optional<std::int64_t>> j_principals;
  std::vector<std::int64_t> j_status;
  std::vector<std::string> e_tx, e_currency, o_tx;
  std::string o_payload;
  std::vector<std::int64_t> e_account, e_amount, e_balance_after;
  std::size_t accepted = 0;
  for (std::size_t i : indices) {
    if (committed_before[i]) continue;
    const auto& r = requests[i];
    auto plan = ledger::plan_posting(r.posting, states);
    auto& out = result.outcomes[i];
    out.outcome = plan.outcome;
    out.amount = plan.amount;
    if (plan.outcome != ledger::error_code::ok || plan.entries.empty()) continue;
    ++accepted;
    out.transaction_id = r.transaction_id;
    out.debit_balance_after = plan.debit_balance_after;
    out.response_status = ledger::receipt_status;
    out.response_body = ledger::receipt_json(r.posting.type, r.transaction_id, plan.debit_balance_after);
    j_ids.push_back(r.transaction_id);
    j_principals.push_back(r.principal);
    j_keys.push_back(r.idempotency_key);
    j_hashes.push_back(r.request_hash);
    j_types.emplace_back(ledger::to_string(r.posting.type));
    j_status.push_back(out.response_status);
    j_bodies.push_back(out.response_body);
    j_meta.push_back(r.metadata_json);
    for (const auto& e : plan.entries) {
      e_tx.push_back(r.transaction_id);
      e_account.push_back(e.account);
      e_currency.push_back(r.posting.currency);
      e_amount.push_back(e.amount);
      e_balance_after.push_back(e.balance_after);
    }
    o_tx.push_back(r.transaction_id);
    append_outbox_event(o_payload, r, plan);
    out.entries = std::move(plan.entries);
  }

  if (accepted > 0) {
    std::vector<std::int64_t> u_ids, u_balances, u_versions;
    for (const auto& [id, state] : states) {
      if (state.version == locked.at(id).version) continue;
      u_ids.push_back(id);
      u_balances.push_back(state.balance);
      u_versions.push_back(state.version);
      result.rows.push_back({id, state.balance, state.version, state.parent_id});
    }
    auto q = [&](const auto& values) { return txn.quote(pg_array(values)); };
    // 4. Journal rows with their receipts (a key committed by another server since step 2 is a
    // unique violation: the attempt is redone and step 2 then finds it); 5. the entries;
    // 6. the balance caches, one row per account at the last balance the plan reached;
    // 7. the batch's outbox row, in the same transaction as the entries it announces.
    std::string writes = bind_literals(k_insert_journal_sql, {q(j_ids), q(j_principals), q(j_keys), q(j_hashes),
                                                              q(j_types), q(j_status), q(j_bodies), q(j_meta)});
    writes += ";\n";
    writes += bind_literals(k_insert_entries_sql,
                            {q(e_tx), q(e_account), q(e_currency), q(e_amount), q(e_balance_after)});
    writes += ";\n";
    writes += bind_literals(k_update_balances_sql, {q(u_ids), q(u_balances), q(u_versions)});
    writes += ";\n";
    o_payload += "]}";
    writes += bind_literals(k_insert_outbox_sql, {q(o_tx), txn.quote(o_payload)});
    txn.exec(writes);
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
    } else if (row.version > it->version) {
      *it = row;
    }
  }
  into.attempts += part.attempts;
}

// Commits `indices` with retries for transient conflicts; rethrows anything else.
batch_result commit_with_retries(pqxx::connection& conn, const std::vector<posting_request>& requests,
                                 const std::vector<std::size_t>& indices) {
  int attempts = 0;
  for (;;) {
    ++attempts;
    try {
      auto result = commit_once(conn, requests, indices);
      result.attempts = attempts;
      return result;
    } catch (const pqxx::unique_violation& e) {
      // Another server committed one of these idempotency keys since step 1: redo the attempt.
      if (attempts >= k_batch_attempts_max) throw;
      spdlog::warn("ledger batch of {} postings met a concurrently committed key, retrying", indices.size());
    } catch (const pqxx::transaction_rollback& e) {
      // Deadlock or serialization failure: nothing was committed, the batch is simply redone.
      if (attempts >= k_batch_attempts_max) throw;
      spdlog::warn("ledger batch of {} postings rolled back ({}), retrying", indices.size(), e.what());
    }
  }
}

}  // namespace

void prepare_posting_statements(pqxx::connection& conn) {
  conn.prepare(k_find_committed, k_find_committed_sql);
  conn.prepare(k_lock_accounts, k_lock_accounts_sql);
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
    spdlog::warn("ledger batch of {} postings refused by the database ({}); isolating the offender",
                 requests.size(), refusal);
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

}  // namespace persistence
