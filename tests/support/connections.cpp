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

}  // namespace test_support
