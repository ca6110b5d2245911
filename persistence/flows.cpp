#include "persistence/flows.hpp"

#include <pqxx/pqxx>

#include "persistence/database.hpp"
#include "persistence/api_keys.hpp"

namespace persistence {
namespace {

constexpr const char* k_utc = "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'";

std::string utc(const std::string& column) { return "to_char(" + column + " AT TIME ZONE 'UTC', " + k_utc + ")"; }

std::string text_or_empty(const pqxx::field& f) { return f.is_null() ? std::string() : f.as<std::string>(); }

provider_record read_provider(const pqxx::row& row) {
  provider_record p{row[0].as<std::int64_t>(), row[1].as<std::string>(), row[2].as<std::int64_t>(),
                    text_or_empty(row[3]), row[4].as<std::string>()};
  p.previous_signing_secret = text_or_empty(row[5]);
  if (!p.previous_signing_secret.empty()) {
    p.previous_secret_expires_unix = row[6].as<std::int64_t>();
    p.previous_secret_expires_at = row[7].as<std::string>();
  }
  p.secret_rotated_at = text_or_empty(row[8]);
  return p;
}

// The previous secret only while it still verifies.
const std::string k_provider_columns =
    "id, name, principal_id, signing_secret, " + utc("created_at") +
    ", CASE WHEN previous_secret_expires_at > now() THEN previous_signing_secret END,"
    " floor(extract(epoch FROM previous_secret_expires_at))::bigint, " +
    utc("previous_secret_expires_at") + ", " + utc("secret_rotated_at");

const std::string k_deposit_select =
    "SELECT d.transaction_id::text, d.account_id, d.provider_id, p.name, d.payment_id, d.currency, d.amount,"
    "       d.refunded, d.charged_back, d.chargeback_transaction_id::text"
    "  FROM deposit_payment d JOIN provider p ON p.id = d.provider_id ";

deposit_record read_deposit(const pqxx::row& row) {
  deposit_record d;
  d.transaction_id = row[0].as<std::string>();
  d.account_id = row[1].as<std::int64_t>();
  d.provider_id = row[2].as<std::int64_t>();
  d.provider = row[3].as<std::string>();
  d.payment_id = text_or_empty(row[4]);
  d.currency = row[5].as<std::string>();
  d.amount = row[6].as<std::int64_t>();
  d.refunded = row[7].as<std::int64_t>();
  d.charged_back = row[8].as<std::int64_t>();
  d.chargeback_transaction_id = text_or_empty(row[9]);
  return d;
}

}  // namespace

ledger::account_id ensure_system_account(pqxx::connection& conn, const std::string& currency,
                                         const std::string& system_role, bool allow_negative) {
  pqxx::work txn(conn);
  txn.exec_params(
      "INSERT INTO account (currency, kind, allow_negative, system_role) VALUES ($1, 'system', $2, $3)"
      " ON CONFLICT (currency, system_role) WHERE system_role IS NOT NULL DO NOTHING",
      currency, allow_negative, system_role);
  auto row = txn.exec_params1("SELECT id FROM account WHERE currency = $1 AND system_role = $2", currency, system_role);
  txn.commit();
  return row[0].as<std::int64_t>();
}

std::optional<provider_record> create_provider(pqxx::connection& conn, const std::string& name,
                                               const std::string& signing_secret, const audit_entry* audit,
                                               const std::string& caller_key_hash_hex) {
  pqxx::work txn(conn);
  require_caller_key(txn, caller_key_hash_hex);
  if (!txn.exec_params("SELECT 1 FROM provider WHERE name = $1", name).empty()) return std::nullopt;
  auto principal =
      txn.exec_params1("INSERT INTO principal (name, role) VALUES ($1, 'provider') RETURNING id", "provider " + name);
  auto rows = txn.exec_params(
      "INSERT INTO provider (name, principal_id, signing_secret) VALUES ($1, $2, $3)"
      " ON CONFLICT (name) DO NOTHING RETURNING " +
          k_provider_columns,
      name, principal[0].as<std::int64_t>(), signing_secret);
  if (rows.empty()) return std::nullopt;  // created meanwhile by another request; this one rolls back
  auto out = read_provider(rows[0]);
  if (audit != nullptr) {
    append_audit(txn, *audit, "provider:" + name, "{\"providerId\":" + std::to_string(out.id) + "}");
  }
  txn.commit();
  return out;
}

provider_rotation rotate_provider_secret(pqxx::connection& conn, const std::string& name, const std::string& new_secret,
                                         std::int64_t previous_valid_s, const audit_entry* audit,
                                         replayable<provider_record>* replay, const std::string& caller_key_hash_hex) {
  pqxx::work txn(conn);
  require_caller_key(txn, caller_key_hash_hex);
  provider_rotation out;
  if (replay && (replay->stored = claim_replay(txn, replay->request))) return out;
  const auto rows = txn.exec_params(
      "UPDATE provider SET signing_secret = $2, secret_rotated_at = now(),"
      " previous_signing_secret = CASE WHEN $3::bigint > 0 THEN signing_secret END,"
      " previous_secret_expires_at = CASE WHEN $3::bigint > 0 THEN now() + $3::bigint * interval '1 second' END"
      " WHERE name = $1 AND signing_secret IS NOT NULL RETURNING " +
          k_provider_columns,
      name, new_secret, previous_valid_s);
  if (rows.empty()) {
    out.outcome = txn.exec_params("SELECT 1 FROM provider WHERE name = $1", name).empty()
                      ? provider_rotation_outcome::no_provider
                      : provider_rotation_outcome::no_secret;
    return out;
  }
  out.provider = read_provider(rows[0]);
  if (audit != nullptr) {
    append_audit(txn, *audit, "provider:" + name,
                 "{\"providerId\":" + std::to_string(out.provider.id) +
                     ",\"previousSecretValidSeconds\":" + std::to_string(previous_valid_s) + "}");
  }
  if (replay) record_replay(txn, replay->request, replay->status, replay->render(out.provider));
  txn.commit();
  return out;
}

std::optional<provider_record> find_provider(pqxx::connection& conn, const std::string& name) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params("SELECT " + k_provider_columns + " FROM provider WHERE name = $1", name);
  if (rows.empty()) return std::nullopt;
  return read_provider(rows[0]);
}

std::vector<provider_record> list_providers(pqxx::connection& conn) {
  pqxx::read_transaction txn(conn);
  std::vector<provider_record> out;
  for (const auto& row : txn.exec("SELECT " + k_provider_columns + " FROM provider ORDER BY id")) {
    out.push_back(read_provider(row));
  }
  return out;
}

std::optional<deposit_record> find_deposit(pqxx::connection& conn, const std::string& transaction_id) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params(k_deposit_select + "WHERE d.transaction_id = $1::uuid", transaction_id);
  if (rows.empty()) return std::nullopt;
  return read_deposit(rows[0]);
}

std::optional<deposit_record> find_deposit_by_payment(pqxx::connection& conn, std::int64_t provider_id,
                                                      const std::string& payment_id) {
  pqxx::read_transaction txn(conn);
  auto rows =
      txn.exec_params(k_deposit_select + "WHERE d.provider_id = $1 AND d.payment_id = $2", provider_id, payment_id);
  if (rows.empty()) return std::nullopt;
  return read_deposit(rows[0]);
}

std::optional<withdrawal_record> find_withdrawal(pqxx::connection& conn, const std::string& id) {
  pqxx::read_transaction txn(conn);
  auto rows = txn.exec_params(
      "SELECT w.id::text, w.account_id, w.principal_id, w.provider_id, p.name, w.currency, w.amount, w.fee,"
      "       w.destination, w.status, w.transaction_id::text, w.settled_transaction_id::text,"
      "       w.provider_payment_id, " +
          utc("w.created_at") + ", " + utc("w.settled_at") +
          "  FROM withdrawal w JOIN provider p ON p.id = w.provider_id WHERE w.id = $1::uuid",
      id);
  if (rows.empty()) return std::nullopt;
  const auto& row = rows[0];
  withdrawal_record w;
  w.id = row[0].as<std::string>();
  w.account_id = row[1].as<std::int64_t>();
  w.principal_id = row[2].as<std::int64_t>();
  w.provider_id = row[3].as<std::int64_t>();
  w.provider = row[4].as<std::string>();
  w.currency = row[5].as<std::string>();
  w.amount = row[6].as<std::int64_t>();
  w.fee = row[7].as<std::int64_t>();
  w.destination = text_or_empty(row[8]);
  w.status = row[9].as<std::string>();
  w.transaction_id = row[10].as<std::string>();
  w.settled_transaction_id = text_or_empty(row[11]);
  w.provider_payment_id = text_or_empty(row[12]);
  w.created_at = row[13].as<std::string>();
  w.settled_at = text_or_empty(row[14]);
  return w;
}

}  // namespace persistence
