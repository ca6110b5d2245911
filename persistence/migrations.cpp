#include "persistence/migrations.hpp"

#include <pqxx/pqxx>

namespace persistence {
namespace {
// An arbitrary, fixed key for pg_advisory_lock: "wallet migrations".
constexpr std::int64_t k_migration_lock_key = 0x77616c6c65746d;
}  // namespace

std::vector<std::string> apply_migrations(const connection_options& owner) {
  auto conn = connect(owner);
  {
    pqxx::nontransaction setup(*conn);
    setup.exec("SET statement_timeout = 0");
    setup.exec("SELECT pg_advisory_lock(" + std::to_string(k_migration_lock_key) + ")");
    setup.exec(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())");
  }
  std::vector<std::string> applied;
  for (const auto& m : migrations()) {
    pqxx::work txn(*conn);
    auto done = txn.exec_params("SELECT 1 FROM schema_migrations WHERE version = $1", m.version);
    if (!done.empty()) continue;
    txn.exec(m.sql);
    txn.exec_params("INSERT INTO schema_migrations (version) VALUES ($1)", m.version);
    txn.commit();
    applied.push_back(m.version);
  }
  pqxx::nontransaction unlock(*conn);
  unlock.exec("SELECT pg_advisory_unlock(" + std::to_string(k_migration_lock_key) + ")");
  return applied;
}

}  // namespace persistence
