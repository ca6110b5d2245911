// wallet-admin: operations on the ledger database outside the server.
//
//   wallet-admin migrate             apply pending migrations (owner role)
//   wallet-admin reconcile           a full reconciliation run, now; exit 0 if clean, 1 if not
//                                    (--incremental: only what changed since the last run)
//   wallet-admin create-operator     make an operator principal and print its API key once
//   wallet-admin providers create NAME   make a payment provider and print its signing secret once
//   wallet-admin providers rotate-secret NAME [--previous-valid-seconds N]
//                                    give it a new signing secret, printed once; the old one
//                                    verifies for N seconds more (a day by default, 0: not at all)
//   wallet-admin settlements import FILE
//                                    import a provider's settlement report (docs/settlements.md);
//                                    exit 0 if it matched the ledger, 1 if it found differences,
//                                    2 if it could not be imported

#include <CLI/CLI.hpp>
#include <pqxx/pqxx>

#include <chrono>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "config/settings.hpp"
#include "http/crypto.hpp"
#include "persistence/migrations.hpp"
#include "persistence/flows.hpp"
#include "persistence/principals.hpp"
#include "persistence/reconcile.hpp"
#include "persistence/settlements.hpp"

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

// Prints a finished or failed run the way an operator reads it; returns the exit code.
int report(const persistence::reconcile_run& run) {
  if (!run.finished()) {
    std::cout << "reconciliation run " << run.id << " (" << persistence::to_string(run.kind)
              << ") ended without a verdict: " << run.error << "\n";
    return 2;
  }
  std::cout << "reconciliation run " << run.id << " (" << persistence::to_string(run.kind)
            << "): " << (run.ok.value_or(false) ? "CLEAN" : "BROKEN") << "\n"
            << "  entries after " << run.from_entry_id.value_or(0) << " through " << run.through_entry_id.value_or(0)
            << "\n"
            << "  accounts checked:      " << run.accounts_checked << "\n"
            << "  entries checked:       " << run.entries_checked << "\n"
            << "  transactions checked:  " << run.transactions_checked << "\n";
  for (auto check : persistence::k_reconcile_checks) {
    const auto passed = run.passed(check);
    std::cout << "  " << persistence::to_string(check) << ": "
              << (!passed   ? "not checked"
                  : *passed ? "ok"
                            : "BROKEN")
              << "\n";
  }
  for (const auto& f : run.findings) {
    std::cout << "    " << persistence::to_string(f.check);
    if (f.account_id) std::cout << " account " << *f.account_id;
    if (!f.transaction_id.empty()) std::cout << " transaction " << f.transaction_id;
    if (!f.currency.empty()) std::cout << " currency " << f.currency;
    std::cout << ": " << f.detail << "\n";
  }
  std::cout << "  took " << std::fixed << std::setprecision(1) << run.duration_ms << " ms\n";
  return run.ok.value_or(false) ? 0 : 1;
}

// Imports the report at `path`, read in chunks (never whole), and prints what the import found.
int import_settlements(const config::settings& settings, const std::string& path, const std::string& imported_by) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "wallet-admin: cannot read settlement report " << path << "\n";
    return 2;
  }
  auto conn = persistence::connect(options_for(settings.database.url, settings));
  constexpr std::size_t k_chunk_bytes = 1 << 20;
  std::string buffer(k_chunk_bytes, '\0');
  const persistence::report_chunks next_chunk = [&]() -> std::string_view {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.bad()) throw std::runtime_error("cannot read " + path);
    return std::string_view(buffer.data(), static_cast<std::size_t>(in.gcount()));
  };
  persistence::settlement_import_options options;
  options.imported_by = imported_by;
  options.amount_minor_max = settings.ledger.amount_minor_max;
  const auto started = std::chrono::steady_clock::now();
  const auto outcome = persistence::import_settlement_report(*conn, next_chunk, options);
  const auto took_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (!outcome.error.empty()) {
    std::cout << "settlement report " << path << " was not imported: " << outcome.error << "\n";
    return 2;
  }
  const auto& s = outcome.summary;
  const auto differences = s.posted_not_settled + s.settled_not_posted + s.amount_mismatch;
  std::cout << "settlement import " << s.import_id << " (" << s.provider << "): " << s.lines << " lines settled "
            << s.settled_from << " to " << s.settled_to << "\n"
            << "  checked from:         " << s.checked_from << " (what was posted since, up to the last settlement)\n"
            << "  matched lines:        " << s.matched << "\n"
            << "  posted not settled:   " << s.posted_not_settled << "\n"
            << "  settled not posted:   " << s.settled_not_posted << "\n"
            << "  amount mismatch:      " << s.amount_mismatch << "\n"
            << "  new exceptions:       " << s.new_exceptions << " (the others were open already)\n"
            << "  resolved exceptions:  " << s.resolved_exceptions << " (of keys this report matched)\n"
            << "  file sha256:          " << s.file_hash << "\n"
            << "  took " << std::fixed << std::setprecision(1) << took_ms << " ms\n";
  return differences == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"wallet-admin: migrations, reconciliation and keys of the wallet ledger", "wallet-admin"};
  std::string config_path;
  app.add_option("--config", config_path, "TOML configuration file (the environment overrides it)");
  app.require_subcommand(1);
  auto* migrate = app.add_subcommand("migrate", "Apply pending migrations as the owner role (database.owner_url)");
  auto* reconcile = app.add_subcommand(
      "reconcile", "Reconcile the ledger now (a full run); exit 0 if clean, 1 if not, 2 if the run could not finish");
  bool incremental = false;
  reconcile->add_flag("--incremental", incremental, "Check only what changed since the last run");
  auto* create_operator = app.add_subcommand("create-operator", "Make an operator and print its API key once");
  std::string operator_name = "operator";
  create_operator->add_option("--name", operator_name, "Name of the operator");
  auto* providers = app.add_subcommand("providers", "Payment providers");
  auto* create_provider = providers->add_subcommand("create", "Make a provider and print its signing secret once");
  std::string provider_name;
  create_provider->add_option("NAME", provider_name, "1 to 40 of a-z, 0-9, '_' and '-'")->required();
  auto* rotate_provider = providers->add_subcommand(
      "rotate-secret", "Give a provider a new signing secret and print it once; the old one verifies a while more");
  rotate_provider->add_option("NAME", provider_name, "The provider's name")->required();
  std::int64_t previous_valid_s = 24 * 3600;
  rotate_provider
      ->add_option("--previous-valid-seconds", previous_valid_s,
                   "How long events signed with the old secret still verify (0: not at all; at most 604800)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{7 * 24 * 3600}));
  providers->require_subcommand(1);
  auto* settlements = app.add_subcommand("settlements", "Payment providers' settlement reports");
  settlements->require_subcommand(1);
  auto* settlements_import = settlements->add_subcommand(
      "import",
      "Import a settlement report (CSV) and match it against the ledger; exit 0 if it matched, 1 if it "
      "found differences, 2 if it could not be imported");
  std::string report_path;
  settlements_import->add_option("FILE", report_path, "The report: provider,paymentId,type,amount,currency,settledAt")
      ->required();
  std::string imported_by = "wallet-admin";
  settlements_import->add_option("--by", imported_by, "Who imports it (kept with the import and its exceptions)");
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
      auto options = options_for(settings.database.url, settings);
      options.statement_timeout_ms = settings.ledger.reconcile_statement_timeout_ms;
      auto conn = persistence::connect(options);
      persistence::prepare_reconcile_statements(*conn);
      const auto kind = incremental ? persistence::reconcile_kind::incremental : persistence::reconcile_kind::full;
      // A run in progress elsewhere (a server's) is waited out, within the runs' own bound.
      const auto claim =
          persistence::claim_run_waiting(*conn, kind, "wallet-admin", settings.ledger.reconcile_statement_timeout_ms);
      persistence::run_options run_options;
      run_options.statement_timeout_ms = settings.ledger.reconcile_statement_timeout_ms;
      run_options.work_mem_mb = settings.ledger.reconcile_work_mem_mb;
      return report(persistence::execute_run(*conn, claim.run_id, kind, run_options));
    }
    if (create_operator->parsed()) {
      auto conn = persistence::connect(options_for(settings.database.url, settings));
      const auto key = api::new_api_key();
      const auto p =
          persistence::create_principal(*conn, operator_name, ledger::role::operator_role, api::sha256_hex(key));
      std::cout << "operator " << p.id << " (" << p.name << "): API key " << key << "\n";
      return 0;
    }
    if (create_provider->parsed()) {
      if (!ledger::is_valid_provider_name(provider_name)) {
        std::cerr
            << "wallet-admin: a provider name is 1 to 40 of a-z, 0-9, '_' and '-', starting with a letter or digit\n";
        return 1;
      }
      auto conn = persistence::connect(options_for(settings.database.url, settings));
      const auto created = persistence::create_provider(*conn, provider_name, api::new_signing_secret());
      if (!created) {
        std::cerr << "wallet-admin: a provider named \"" << provider_name << "\" exists already\n";
        return 1;
      }
      std::cout << "provider " << created->id << " (" << created->name << "): signing secret "
                << created->signing_secret << "\n";
      return 0;
    }
    if (rotate_provider->parsed()) {
      auto conn = persistence::connect(options_for(settings.database.url, settings));
      const auto r = persistence::rotate_provider_secret(*conn, provider_name, api::new_signing_secret(),
                                                         previous_valid_s, nullptr);
      switch (r.outcome) {
        case persistence::provider_rotation_outcome::rotated: break;
        case persistence::provider_rotation_outcome::no_provider:
          std::cerr << "wallet-admin: no provider is named \"" << provider_name << "\"\n";
          return 1;
        case persistence::provider_rotation_outcome::no_secret:
          std::cerr << "wallet-admin: provider \"" << provider_name << "\" sends no events and has no secret\n";
          return 1;
      }
      std::cout << "provider " << r.provider.id << " (" << r.provider.name << "): signing secret "
                << r.provider.signing_secret;
      if (!r.provider.previous_secret_expires_at.empty()) {
        std::cout << "; the previous one verifies until " << r.provider.previous_secret_expires_at;
      }
      std::cout << "\n";
      return 0;
    }
    if (settlements_import->parsed()) return import_settlements(settings, report_path, imported_by);
  } catch (const std::exception& e) {
    std::cerr << "wallet-admin: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
