// wallet-admin: operations on the ledger database outside the server.
//
//   wallet-admin migrate             apply pending migrations (owner role)
//   wallet-admin reconcile           check the ledger's invariants; exit 0 if clean, 1 if not
//   wallet-admin create-operator     make an operator principal and print its API key once

#include <CLI/CLI.hpp>
#include <pqxx/pqxx>

#include <fstream>
#include <iostream>
#include <sstream>

#include "config/settings.hpp"
#include "http/crypto.hpp"
#include "persistence/migrations.hpp"
#include "persistence/queries.hpp"

namespace {

persistence::connection_options options_for(const std::string& url, const config::settings& s) {
  persistence::connection_options o;
  o.url = url;
  o.connect_timeout_ms = s.database.connect_timeout_ms;
  o.statement_timeout_ms = 0;
  o.lock_timeout_ms = s.database.lock_timeout_ms;
  o.application_name = "wallet-admin";
  return o;
}

void print_list(const char* title, const std::vector<std::string>& items) {
  if (items.empty()) return;
  std::cout << "  " << title << ":\n";
  for (const auto& i : items) std::cout << "    " << i << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"wallet-admin: migrations, reconciliation and keys of the wallet ledger", "wallet-admin"};
  std::string config_path;
  app.add_option("--config", config_path, "TOML configuration file (the environment overrides it)");
  app.require_subcommand(1);
  auto* migrate = app.add_subcommand("migrate", "Apply pending migrations as the owner role (database.owner_url)");
  auto* reconcile = app.add_subcommand("reconcile", "Check the ledger's invariants; exit 0 if clean, 1 if not");
  auto* create_operator = app.add_subcommand("create-operator", "Make an operator and print its API key once");
  std::string operator_name = "operator";
  create_operator->add_option("--name", operator_name, "Name of the operator");
  CLI11_PARSE(app, argc, argv);

  try {
    std::string text;
    if (!config_path.empty()) {
      std::ifstream in(config_path);
      if (!in) throw config::config_error("cannot read configuration file " + config_path);
      std::ostringstream s;
      s << in.rdbuf();
      text = s.str();
    }
    const auto settings = config::load_from(text, config::process_environment());

    if (migrate->parsed()) {
      const std::string url = settings.database.owner_url.empty() ? settings.database.url : settings.database.owner_url;
      const auto applied = persistence::apply_migrations(options_for(url, settings));
      if (applied.empty()) std::cout << "migrations: up to date\n";
      for (const auto& v : applied) std::cout << "migrations: applied " << v << "\n";
      return 0;
    }
    if (reconcile->parsed()) {
      auto conn = persistence::connect(options_for(settings.database.url, settings));
      const auto r = persistence::reconcile(*conn);
      std::cout << "reconciliation: " << (r.ok ? "CLEAN" : "BROKEN") << "\n"
                << "  accounts checked:      " << r.accounts_checked << "\n"
                << "  entries checked:       " << r.entries_checked << "\n"
                << "  transactions checked:  " << r.transactions_checked << "\n"
                << "  zero sum per currency: " << (r.currencies_not_zero.empty() ? "yes" : "NO") << "\n"
                << "  transactions balanced: " << (r.transactions_not_zero.empty() ? "yes" : "NO") << "\n"
                << "  caches match entries:  " << (r.caches_mismatched.empty() ? "yes" : "NO") << "\n"
                << "  no bad negatives:      " << (r.negative_balances.empty() ? "yes" : "NO") << "\n"
                << "  entries reference accounts: " << (r.entries_orphaned.empty() ? "yes" : "NO") << "\n";
      print_list("currencies not summing to zero", r.currencies_not_zero);
      print_list("transactions not summing to zero", r.transactions_not_zero);
      print_list("balance caches that differ from their entries", r.caches_mismatched);
      print_list("disallowed negative balances", r.negative_balances);
      print_list("entries with a missing account or another currency", r.entries_orphaned);
      std::cout << "  took " << r.duration_ms << " ms\n";
      return r.ok ? 0 : 1;
    }
    if (create_operator->parsed()) {
      auto conn = persistence::connect(options_for(settings.database.url, settings));
      const auto key = api::new_api_key();
      const auto p = persistence::create_principal(*conn, operator_name, ledger::role::operator_role, api::sha256_hex(key));
      std::cout << "operator " << p.id << " (" << p.name << "): API key " << key << "\n";
      return 0;
    }
  } catch (const std::exception& e) {
    std::cerr << "wallet-admin: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
