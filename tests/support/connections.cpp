#include "tests/support/connections.hpp"

#include <pqxx/pqxx>

namespace test_support {

persistence::connection_options options_for(const std::string& url, const std::string& application_name) {
  persistence::connection_options o;
  o.url = url;
  o.application_name = application_name;
  return o;
}

std::int64_t int_of(pqxx::connection& conn, const std::string& sql) {
  pqxx::nontransaction txn(conn);
  return txn.exec1(sql)[0].as<std::int64_t>();
}

std::string text_of(pqxx::connection& conn, const std::string& sql) {
  pqxx::nontransaction txn(conn);
  return txn.exec1(sql)[0].as<std::string>();
}

void drop_public_schema(pqxx::connection& owner) {
  pqxx::work txn(owner);
  txn.exec("DROP SCHEMA IF EXISTS public CASCADE");
  txn.exec("CREATE SCHEMA public");
  txn.commit();
}

}  // namespace test_support
