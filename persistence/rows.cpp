#include "persistence/rows.hpp"

#include <pqxx/pqxx>

#include "persistence/database.hpp"

namespace persistence {

principal_record read_principal(const pqxx::row& row) {
  principal_record p;
  p.id = row[0].as<std::int64_t>();
  p.name = row[1].as<std::string>();
  p.role = parse_column(ledger::parse_role, row[2].as<std::string>(), "principal.role");
  return p;
}

namespace {

constexpr const char* k_account_status = "rows_account_status";
constexpr const char* k_account_status_sql = "SELECT status FROM account WHERE id = $1 AND kind = 'user'";

}  // namespace

std::optional<ledger::account_status> account_status_in(pqxx::transaction_base& txn, ledger::account_id id) {
  // Defining a statement libpqxx knows already, with the same text, does nothing.
  txn.conn().prepare(k_account_status, k_account_status_sql);
  const auto rows = txn.exec_prepared(k_account_status, id);
  if (rows.empty()) return std::nullopt;
  return parse_column(ledger::parse_account_status, rows[0][0].as<std::string>(), "account.status");
}

std::vector<ledger::account_id> parse_id_array(const char* text) {
  std::vector<ledger::account_id> out;
  pqxx::array_parser parser(text);
  for (auto item = parser.get_next(); item.first != pqxx::array_parser::done; item = parser.get_next()) {
    if (item.first == pqxx::array_parser::string_value) out.push_back(std::stoll(item.second));
  }
  return out;
}

}  // namespace persistence
