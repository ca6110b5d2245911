#include "tests/support/database.hpp"

#include "tests/support/support.hpp"

#include <pqxx/pqxx>
#include <utility>

namespace test_support {

std::string query_value(const std::string& sql) {
  pqxx::connection conn(owner_database_url());
  pqxx::nontransaction txn(conn);
  auto r = txn.exec(sql);
  if (r.empty() || r[0][0].is_null()) return {};
  return r[0][0].as<std::string>();
}

void execute_sql(const std::string& sql, bool as_owner) {
  pqxx::connection conn(as_owner ? owner_database_url() : database_url());
  pqxx::work txn(conn);
  txn.exec(sql);
  txn.commit();
}

std::string sql_literal(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

std::string sql_text_array(const std::vector<std::string>& texts) {
  std::string out = "ARRAY[";
  for (std::size_t i = 0; i < texts.size(); ++i) out += (i > 0 ? "," : "") + sql_literal(texts[i]);
  return out + "]::text[]";
}

int backends_blocked_by(int blocker_pid) {
  return std::stoi(
      query_value("WITH RECURSIVE waiting(pid) AS ("
                  "  SELECT pid FROM pg_stat_activity WHERE " +
                  std::to_string(blocker_pid) +
                  " = ANY(pg_blocking_pids(pid))"
                  "  UNION"
                  "  SELECT a.pid FROM pg_stat_activity a JOIN waiting w ON w.pid = ANY(pg_blocking_pids(a.pid))"
                  ") SELECT count(*) FROM waiting"));
}

struct account_lock::impl {
  pqxx::connection connection{owner_database_url()};
  pqxx::work transaction{connection};
  int backend_pid = connection.backendpid();
};

account_lock::account_lock(const std::vector<std::int64_t>& accounts) : impl_(std::make_unique<impl>()) {
  std::string ids;
  for (const auto account : accounts) ids += (ids.empty() ? "" : ",") + std::to_string(account);
  impl_->transaction.exec("SELECT id FROM account WHERE id IN (" + ids + ") FOR UPDATE");
}

void account_lock::also_lock(const std::vector<std::int64_t>& accounts) {
  for (const auto account : accounts) {
    impl_->transaction.exec("SELECT id FROM account WHERE id = " + std::to_string(account) + " FOR UPDATE");
  }
}

account_lock::~account_lock() = default;

int account_lock::waiters() const { return backends_blocked_by(impl_->backend_pid); }

std::chrono::milliseconds account_lock::longest_wait() const {
  return std::chrono::milliseconds(
      std::stoll(query_value("SELECT COALESCE(max(extract(epoch FROM clock_timestamp() - waitstart) * 1000), 0)::bigint"
                             "  FROM pg_locks WHERE NOT granted AND " +
                             std::to_string(impl_->backend_pid) + " = ANY(pg_blocking_pids(pid))")));
}

void account_lock::release() { impl_->transaction.abort(); }

test_trigger::test_trigger(std::string name, std::string table, const std::string& when, const std::string& body)
    : name_(std::move(name)), table_(std::move(table)) {
  execute_sql("CREATE FUNCTION " + name_ + "() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN " + body + " END $$");
  execute_sql("CREATE TRIGGER " + name_ + " BEFORE UPDATE ON " + table_ + " FOR EACH ROW WHEN (" + when +
              ") EXECUTE FUNCTION " + name_ + "()");
}

test_trigger::~test_trigger() { drop(); }

void test_trigger::drop() {
  execute_sql("DROP TRIGGER IF EXISTS " + name_ + " ON " + table_);
  execute_sql("DROP FUNCTION IF EXISTS " + name_ + "()");
}

}  // namespace test_support
