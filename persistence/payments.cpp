#include "persistence/payments.hpp"

#include <pqxx/pqxx>

#include "persistence/rows.hpp"

namespace persistence {
namespace {

// A payment's entries (a TRANSFER, or a hold's CAPTURE, which posts the same legs) summed per
// account, a shard counted as its parent: the payer is the one account that paid (negative), the
// payee the user account that was paid, fee_revenue the system account that was paid. The payee's owner comes with it.
const std::string k_payment_sql =
    "SELECT COALESCE(a.parent_id, a.id), m.kind, m.owner_id, e.currency, sum(e.amount)::bigint, j.id::text"
    "  FROM journal_transaction j"
    "  JOIN ledger_entry e ON " +
    entries_of_sql("e", "j") +
    "  JOIN account a ON a.id = e.account_id"
    "  JOIN account m ON m.id = COALESCE(a.parent_id, a.id)"
    " WHERE j.id = $1::uuid AND j.type IN ('TRANSFER', 'CAPTURE')"
    " GROUP BY 1, 2, 3, 4, 6";

// A payment whose fee took all of it made no entry on its payee: its flow named the payee in the
// journal row's metadata ("payeeId"), as it does for every payment with a fee leg.
constexpr const char* k_named_payee_sql =
    "SELECT a.id, a.owner_id FROM journal_transaction j JOIN account a ON a.id = (j.metadata->>'payeeId')::bigint"
    " WHERE j.id = $1::uuid";

constexpr const char* k_refunded_sql = "SELECT refunded FROM payment_refund_total WHERE transaction_id = $1::uuid";

constexpr const char* k_refund_ids_sql =
    "SELECT transaction_id::text FROM payment_refund WHERE payment_transaction_id = $1::uuid"
    " ORDER BY created_at, transaction_id LIMIT $2";

constexpr const char* k_refunded_payment_sql =
    "SELECT payment_transaction_id::text FROM payment_refund WHERE transaction_id = $1::uuid";

ledger::amount_minor refunded_of(pqxx::transaction_base& txn, const std::string& transaction_id) {
  auto rows = txn.exec_params(k_refunded_sql, transaction_id);
  return rows.empty() ? 0 : rows[0][0].as<std::int64_t>();
}

}  // namespace

std::optional<payment_record> find_payment(pqxx::connection& conn, const std::string& transaction_id) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params(k_payment_sql, transaction_id);
  if (rows.empty()) return std::nullopt;
  payment_record p;
  // As the journal writes it (lower case): the writer files refund totals under that text.
  p.transaction_id = rows[0][5].as<std::string>();
  for (const auto& row : rows) {
    const auto account = row[0].as<std::int64_t>();
    const auto kind = row[1].as<std::string>();
    const auto sum = row[4].as<std::int64_t>();
    p.currency = row[3].as<std::string>();
    if (sum < 0) {
      p.payer = account;
      p.amount = -sum;
    } else if (kind == "system") {
      p.fee += sum;
    } else {
      p.payee = account;
      if (!row[2].is_null()) p.payee_owner = row[2].as<std::int64_t>();
    }
  }
  if (p.payee == 0) {
    auto named = txn.exec_params(k_named_payee_sql, transaction_id);
    if (!named.empty()) {
      p.payee = named[0][0].as<std::int64_t>();
      if (!named[0][1].is_null()) p.payee_owner = named[0][1].as<std::int64_t>();
    }
  }
  if (p.payer == 0 || p.payee == 0) return std::nullopt;
  p.refunded = refunded_of(txn, transaction_id);
  return p;
}

payment_refunds find_payment_refunds(pqxx::connection& conn, const std::string& transaction_id) {
  pqxx::read_transaction txn(conn);
  payment_refunds out;
  out.refunded = refunded_of(txn, transaction_id);
  if (out.refunded == 0) return out;
  for (const auto& row : txn.exec_params(k_refund_ids_sql, transaction_id, k_payment_refunds_listed_max)) {
    out.refund_ids.push_back(row[0].as<std::string>());
  }
  return out;
}

std::string find_refunded_payment(pqxx::connection& conn, const std::string& refund_transaction_id) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params(k_refunded_payment_sql, refund_transaction_id);
  return rows.empty() ? std::string() : rows[0][0].as<std::string>();
}

}  // namespace persistence
