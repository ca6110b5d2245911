// Reconciliation against a real PostgreSQL, on the SCRATCH database (test_support's
// scratch_*_database_url, emptied and migrated for every test): each test breaks the ledger on
// purpose as the owner role, the way a bug or a manual fix in psql would, and asserts that the
// check meant for that breakage reports it, naming exactly the account, transaction, entry or
// currency broken, and that no other check does. The shared test database is never touched.
//
// Currency XTS (the ISO code for testing); XXX where a second currency is needed.

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "persistence/accounts.hpp"
#include "persistence/batch.hpp"
#include "persistence/database.hpp"
#include "persistence/migrations.hpp"
#include "persistence/reconcile.hpp"
#include "tests/support/connections.hpp"
#include "tests/support/support.hpp"

namespace persistence {
namespace {

using test_support::sql_literal;

using check = reconcile_check;

// Polls of a run's row while a test waits for it to reach a phase; generous for a loaded machine.
constexpr int k_phase_polls_max = 2'000;
constexpr std::chrono::milliseconds k_phase_poll{5};

connection_options options_for(const std::string& url, std::int64_t statement_timeout_ms = 60'000) {
  connection_options o = test_support::options_for(url, "reconcile-tests");
  o.statement_timeout_ms = statement_timeout_ms;
  return o;
}

// What a finding names, for exact comparison: the check, the account, the transaction, the
// currency and the entry (0 / empty where the check names none).
using named = std::tuple<check, std::int64_t, std::string, std::string, std::int64_t>;

std::multiset<named> names_of(const reconcile_run& run) {
  std::multiset<named> out;
  for (const auto& f : run.findings) {
    out.insert({f.check, f.account_id.value_or(0), f.transaction_id, f.currency, f.entry_id.value_or(0)});
  }
  return out;
}

std::string describe(const reconcile_run& run) {
  std::string text = "run " + std::to_string(run.id) + " " + std::string(to_string(run.kind)) + " " + run.status +
                     (run.error.empty() ? "" : " (" + run.error + ")") + ":";
  for (const auto& f : run.findings) text += "\n  " + std::string(to_string(f.check)) + ": " + f.detail;
  return text;
}

// Fixture: the scratch database emptied and migrated, a principal, the XTS clearing account and
// helpers that post through the real posting path (commit_batch) or break things as the owner.
class scratch_ledger : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      owner_ = connect(options_for(test_support::scratch_owner_database_url()));
    } catch (const std::exception& e) {
      FAIL() << "the scratch database is not reachable (scripts/services.sh reset-db makes it): " << e.what();
    }
    test_support::drop_public_schema(*owner_);
    apply_migrations(options_for(test_support::scratch_owner_database_url()));
    app_ = connect(options_for(test_support::scratch_database_url()));
    prepare_posting_statements(*app_);
    reconciler_ = reconcile_connection();
    principal_ = int_of("INSERT INTO principal (name, role) VALUES ('reconcile tests', 'user') RETURNING id");
    clearing_ = ensure_clearing_account(*app_, "XTS");
  }

  std::unique_ptr<pqxx::connection> reconcile_connection(std::int64_t statement_timeout_ms = 60'000) {
    auto conn = connect(options_for(test_support::scratch_database_url(), statement_timeout_ms));
    prepare_reconcile_statements(*conn);
    return conn;
  }

  std::int64_t int_of(const std::string& sql) { return test_support::int_of(*owner_, sql); }
  std::string text_of(const std::string& sql) { return test_support::text_of(*owner_, sql); }
  void owner_exec(const std::string& sql) {
    pqxx::work txn(*owner_);
    txn.exec(sql);
    txn.commit();
  }

  std::int64_t new_account(const std::string& currency = "XTS", bool allow_negative = false) {
    return int_of("INSERT INTO account (owner_id, currency, kind, allow_negative) VALUES (" +
                  std::to_string(principal_) + ", " + sql_literal(currency) + ", 'user', " +
                  (allow_negative ? "TRUE" : "FALSE") + ") RETURNING id");
  }

  // Posts through commit_batch; returns the transaction id.
  std::string post(ledger::transaction_type type, std::int64_t from, std::int64_t to, std::int64_t amount) {
    posting_request r;
    r.posting.type = type;
    r.posting.debit_account = from;
    r.posting.credit_account = to;
    r.posting.amount = amount;
    r.posting.currency = "XTS";
    r.transaction_id = text_of("SELECT gen_random_uuid()::text");
    r.principal = principal_;
    r.idempotency_key = "key-" + r.transaction_id;
    r.request_hash = "hash";
    const auto result = commit_batch(*app_, {r});
    EXPECT_EQ(result.outcomes.at(0).outcome, ledger::error_code::ok);
    return r.transaction_id;
  }
  std::string fund(std::int64_t account, std::int64_t amount) {
    return post(ledger::transaction_type::deposit, clearing_, account, amount);
  }
  std::string transfer(std::int64_t from, std::int64_t to, std::int64_t amount) {
    return post(ledger::transaction_type::transfer, from, to, amount);
  }

  // One transaction inserted directly as the owner, entries as (account, currency, amount,
  // balance_after), with the caches moved by the amounts; returns its id.
  struct line {
    std::int64_t account;
    std::string currency;
    std::int64_t amount;
    std::int64_t balance_after;
  };
  std::string insert_directly(const std::vector<line>& lines, bool move_caches = true) {
    const std::string tx = text_of("SELECT gen_random_uuid()::text");
    pqxx::work txn(*owner_);
    insert_entries(txn, tx, lines, move_caches);
    insert_journal_row(txn, tx);
    txn.commit();
    return tx;
  }

  // Entries of transaction `tx` in one statement, and no journal row; the caches moved by the
  // amounts when asked.
  void insert_entries(pqxx::transaction_base& txn, const std::string& tx, const std::vector<line>& lines,
                      bool move_caches = true) {
    std::string values;
    for (const auto& l : lines) {
      if (!values.empty()) values += ", ";
      values += "(" + sql_literal(tx) + ", " + std::to_string(l.account) + ", " + sql_literal(l.currency) + ", " +
                std::to_string(l.amount) + ", " + std::to_string(l.balance_after) + ")";
    }
    txn.exec("INSERT INTO ledger_entry (transaction_id, account_id, currency, amount, balance_after) VALUES " + values);
    if (move_caches) {
      for (const auto& l : lines) {
        txn.exec("UPDATE account SET balance = balance + " + std::to_string(l.amount) +
                 ", version = version + 1 WHERE id = " + std::to_string(l.account));
      }
    }
  }

  // The journal row of transaction `tx`, whose entries `txn` inserted already: it records their
  // range of ids, as the writer's does (migration 024).
  void insert_journal_row(pqxx::transaction_base& txn, const std::string& tx) {
    txn.exec(
        "INSERT INTO journal_transaction (id, principal_id, idempotency_key, request_hash, type, response_status,"
        " response_body, first_entry_id, last_entry_id)"
        " SELECT " +
        sql_literal(tx) + ", " + std::to_string(principal_) + ", " + sql_literal("direct-" + tx) +
        ", 'direct', 'TRANSFER', 201, '{}', min(id), max(id) FROM ledger_entry WHERE transaction_id = " +
        sql_literal(tx));
  }

  std::int64_t balance(std::int64_t account) {
    return int_of("SELECT balance FROM account WHERE id = " + std::to_string(account));
  }
  std::int64_t entry_of(const std::string& tx, std::int64_t account) {
    return int_of("SELECT id FROM ledger_entry WHERE transaction_id = " + sql_literal(tx) +
                  " AND account_id = " + std::to_string(account));
  }

  reconcile_run run(reconcile_kind kind, pqxx::connection* conn = nullptr) {
    auto& c = conn != nullptr ? *conn : *reconciler_;
    const auto claim = claim_run(c, kind, "reconcile-tests");
    EXPECT_TRUE(claim.started);
    return execute_run(c, claim.run_id, kind, run_options{});
  }
  // A run that must finish clean.
  reconcile_run clean_run(reconcile_kind kind) {
    auto r = run(kind);
    EXPECT_EQ(r.status, "finished") << describe(r);
    EXPECT_TRUE(r.ok.value_or(false)) << describe(r);
    EXPECT_TRUE(r.findings.empty()) << describe(r);
    return r;
  }

  std::string run_field(std::int64_t run_id, const std::string& column) {
    return text_of("SELECT COALESCE(" + column +
                   "::text, '') FROM reconciliation_run WHERE id = " + std::to_string(run_id));
  }

  std::unique_ptr<pqxx::connection> owner_;
  std::unique_ptr<pqxx::connection> app_;
  std::unique_ptr<pqxx::connection> reconciler_;
  std::int64_t principal_ = 0;
  std::int64_t clearing_ = 0;
};

TEST_F(scratch_ledger, a_clean_ledger_passes_and_an_incremental_run_reads_only_the_new_entries) {
  // The first run, asked for as incremental, has no checkpoint to start from and is a full one;
  // it leaves checkpoints equal to each account's sum. The next incremental run starts at that
  // watermark and reads exactly the 10 transfers' 20 entries over the 3 accounts they touch.
  const auto a = new_account();
  const auto b = new_account();
  const auto d = new_account();
  fund(a, 10'000);
  fund(b, 500);
  transfer(a, b, 300);
  const auto first = clean_run(reconcile_kind::incremental);
  EXPECT_EQ(first.kind, reconcile_kind::full);
  EXPECT_EQ(first.from_entry_id.value_or(-1), 0);
  const auto watermark = int_of("SELECT max(id) FROM ledger_entry");
  EXPECT_EQ(first.through_entry_id.value_or(-1), watermark);
  EXPECT_EQ(first.entries_checked, 6);
  EXPECT_EQ(first.accounts_checked, 4);  // a, b, d and the clearing account
  EXPECT_EQ(int_of("SELECT count(*) FROM reconciliation_account_checkpoint c JOIN account a ON a.id = c.account_id"
                   " WHERE c.balance = a.balance AND c.entry_count = a.version AND c.through_entry_id = " +
                   std::to_string(watermark)),
            3);  // a, b and clearing; d has no entry and no checkpoint
  EXPECT_EQ(int_of("SELECT balance FROM reconciliation_currency_checkpoint WHERE currency = 'XTS'"), 0);

  for (int i = 0; i < 5; ++i) transfer(a, d, 10);
  for (int i = 0; i < 5; ++i) transfer(b, d, 10);
  const auto second = clean_run(reconcile_kind::incremental);
  EXPECT_EQ(second.kind, reconcile_kind::incremental);
  EXPECT_EQ(second.from_entry_id.value_or(-1), watermark);
  EXPECT_EQ(second.through_entry_id.value_or(-1), int_of("SELECT max(id) FROM ledger_entry"));
  EXPECT_EQ(second.entries_checked, 20);
  EXPECT_EQ(second.accounts_checked, 3);
  EXPECT_EQ(second.transactions_checked, 10);
  EXPECT_EQ(int_of("SELECT balance FROM reconciliation_account_checkpoint WHERE account_id = " + std::to_string(d)),
            100);

  // A full run agrees with the checkpoints the incremental runs left.
  const auto full = clean_run(reconcile_kind::full);
  EXPECT_EQ(full.entries_checked, 26);
  EXPECT_EQ(latest_finished_run(*app_)->id, full.id);
}

TEST_F(scratch_ledger, no_finished_run_means_no_latest_one) {
  // Before any run has finished there is nothing to answer from; a failed run is no verdict.
  EXPECT_FALSE(latest_finished_run(*app_).has_value());
  EXPECT_FALSE(running_run_id(*app_).has_value());
  EXPECT_FALSE(seconds_since_full_run(*app_).has_value());
  clean_run(reconcile_kind::full);
  EXPECT_TRUE(latest_finished_run(*app_).has_value());
  EXPECT_TRUE(seconds_since_full_run(*app_).has_value());
}

TEST_F(scratch_ledger, a_balance_cache_that_disagrees_is_reported_for_its_account) {
  // The owner moves two caches without entries: `touched` gets a new entry after the checkpoint,
  // `untouched` does not. The incremental run reads only what changed, so it names `touched`
  // alone; the full run names both. Nothing else is reported: the entries are sound.
  const auto touched = new_account();
  const auto untouched = new_account();
  const auto other = new_account();
  fund(touched, 1'000);
  fund(untouched, 1'000);
  clean_run(reconcile_kind::full);
  transfer(touched, other, 100);
  owner_exec("UPDATE account SET balance = balance + 7 WHERE id IN (" + std::to_string(touched) + ", " +
             std::to_string(untouched) + ")");

  const auto incremental = run(reconcile_kind::incremental);
  EXPECT_EQ(incremental.ok, false) << describe(incremental);
  EXPECT_EQ(names_of(incremental), (std::multiset<named>{{check::account_cache, touched, "", "", 0}}))
      << describe(incremental);
  EXPECT_EQ(incremental.passed(check::account_cache), false);
  EXPECT_EQ(incremental.passed(check::transaction_zero_sum), true);

  const auto full = run(reconcile_kind::full);
  EXPECT_EQ(names_of(full), (std::multiset<named>{{check::account_cache, touched, "", "", 0},
                                                  {check::account_cache, untouched, "", "", 0}}))
      << describe(full);
  EXPECT_NE(full.findings.at(0).detail.find("balance 907"), std::string::npos) << describe(full);
}

// After a run that found problems, the timer's incremental runs are full ones until a run finds the
// ledger right: an incremental run reads only what changed since, and would call the ledger right
// while a cache that drifted on an account nothing touched since stays wrong.
TEST_F(scratch_ledger, after_a_run_that_found_problems_the_next_runs_are_full_until_one_passes) {
  const auto drifted = new_account();
  const auto busy = new_account();
  const auto other = new_account();
  fund(drifted, 1'000);
  fund(busy, 1'000);
  clean_run(reconcile_kind::full);
  owner_exec("UPDATE account SET balance = balance + 7 WHERE id = " + std::to_string(drifted));
  const auto found = run(reconcile_kind::full);
  EXPECT_EQ(found.ok, false) << describe(found);

  transfer(busy, other, 100);  // new entries, none of them the drifted account's
  const auto next = run(reconcile_kind::incremental);
  EXPECT_EQ(next.kind, reconcile_kind::full);
  EXPECT_EQ(next.ok, false) << describe(next);
  EXPECT_EQ(names_of(next), (std::multiset<named>{{check::account_cache, drifted, "", "", 0}})) << describe(next);
  EXPECT_EQ(latest_finished_run(*app_)->ok, false);

  owner_exec("UPDATE account SET balance = balance - 7 WHERE id = " + std::to_string(drifted));
  const auto repaired = clean_run(reconcile_kind::incremental);
  EXPECT_EQ(repaired.kind, reconcile_kind::full);
  transfer(busy, other, 100);
  const auto after = clean_run(reconcile_kind::incremental);
  EXPECT_EQ(after.kind, reconcile_kind::incremental);
  EXPECT_EQ(after.entries_checked, 2);
}

TEST_F(scratch_ledger, an_entry_that_breaks_zero_sum_is_reported_for_its_transaction_and_currency) {
  // With the zero-sum trigger disabled, the owner adds one lone +5 entry (caches and
  // balance_after kept right). Its transaction and the currency XTS no longer sum to zero;
  // both the incremental and the full run name exactly those two.
  const auto a = new_account();
  fund(a, 100);
  clean_run(reconcile_kind::full);
  owner_exec("ALTER TABLE ledger_entry DISABLE TRIGGER ledger_entry_zero_sum");
  const auto tx = insert_directly({{a, "XTS", 5, 105}});
  owner_exec("ALTER TABLE ledger_entry ENABLE TRIGGER ledger_entry_zero_sum");

  const std::multiset<named> expected{{check::transaction_zero_sum, 0, tx, "XTS", 0},
                                      {check::currency_zero_sum, 0, "", "XTS", 0}};
  const auto incremental = run(reconcile_kind::incremental);
  EXPECT_EQ(names_of(incremental), expected) << describe(incremental);
  EXPECT_EQ(incremental.ok, false);
  const auto full = run(reconcile_kind::full);
  EXPECT_EQ(names_of(full), expected) << describe(full);
}

TEST_F(scratch_ledger, an_entry_its_journal_row_does_not_cover_is_reported_with_its_transaction) {
  // A transaction's entries are read through its journal row's range of entry ids (migration 024).
  // The owner adds a balanced pair of entries to a committed transaction after its range, and a
  // balanced pair under a transaction with no journal row, caches and balance_after kept right:
  // every sum is still zero, only the journal rows do not cover these four entries. Both runs name
  // each of them, with its account and transaction, and nothing else.
  const auto a = new_account();
  const auto b = new_account();
  fund(a, 100);
  fund(b, 100);
  const auto tx = insert_directly({{a, "XTS", -10, 90}, {b, "XTS", 10, 110}});
  clean_run(reconcile_kind::full);

  const auto orphan = text_of("SELECT gen_random_uuid()::text");
  {
    pqxx::work txn(*owner_);
    insert_entries(txn, tx, {{a, "XTS", -3, 87}, {b, "XTS", 3, 113}});
    insert_entries(txn, orphan, {{a, "XTS", -2, 85}, {b, "XTS", 2, 115}});
    txn.commit();
  }
  const auto last_of = [&](const std::string& t, std::int64_t account) {
    return int_of("SELECT max(id) FROM ledger_entry WHERE transaction_id = " + sql_literal(t) +
                  " AND account_id = " + std::to_string(account));
  };
  const std::multiset<named> expected{{check::transaction_zero_sum, a, tx, "XTS", last_of(tx, a)},
                                      {check::transaction_zero_sum, b, tx, "XTS", last_of(tx, b)},
                                      {check::transaction_zero_sum, a, orphan, "XTS", last_of(orphan, a)},
                                      {check::transaction_zero_sum, b, orphan, "XTS", last_of(orphan, b)}};
  const auto incremental = run(reconcile_kind::incremental);
  EXPECT_EQ(names_of(incremental), expected) << describe(incremental);
  EXPECT_EQ(incremental.ok, false);
  const auto full = run(reconcile_kind::full);
  EXPECT_EQ(names_of(full), expected) << describe(full);
  EXPECT_EQ(full.ok, false);
}

// Migration 024 on a ledger written before it: two transactions whose entries took interleaved
// ids, their journal rows without ranges. The migration gives each row the smallest and largest id
// of its own entries, drops the index of entries by transaction, and leaves the journal
// append-only and refusing a row without a range.
TEST(entry_range_migration, gives_each_journal_row_written_before_it_the_range_of_its_entries) {
  const auto owner_url = test_support::scratch_owner_database_url();
  auto owner = connect(options_for(owner_url));
  test_support::drop_public_schema(*owner);
  {
    pqxx::work txn(*owner);
    txn.exec(
        "CREATE TABLE schema_migrations (version TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())");
    txn.commit();
  }
  for (const auto& m : migrations()) {
    if (m.version == "024_entry_ranges") break;
    pqxx::work txn(*owner);
    txn.exec(m.sql);
    txn.exec_params("INSERT INTO schema_migrations (version) VALUES ($1)", m.version);
    txn.commit();
  }
  const std::string t1 = test_support::text_of(*owner, "SELECT gen_random_uuid()::text");
  const std::string t2 = test_support::text_of(*owner, "SELECT gen_random_uuid()::text");
  {
    pqxx::work txn(*owner);
    const auto principal =
        txn.exec1("INSERT INTO principal (name, role) VALUES ('migration', 'user') RETURNING id")[0].as<std::string>();
    const auto a = txn.exec1("INSERT INTO account (owner_id, currency, kind, allow_negative) VALUES (" + principal +
                             ", 'XTS', 'user', TRUE) RETURNING id")[0]
                       .as<std::string>();
    const auto b = txn.exec1("INSERT INTO account (owner_id, currency, kind) VALUES (" + principal +
                             ", 'XTS', 'user') RETURNING id")[0]
                       .as<std::string>();
    txn.exec(
        "INSERT INTO journal_transaction (id, principal_id, idempotency_key, request_hash, type, response_status,"
        " response_body) VALUES (" +
        sql_literal(t1) + ", " + principal + ", 'k1', 'h', 'TRANSFER', 201, '{}'), (" + sql_literal(t2) + ", " +
        principal + ", 'k2', 'h', 'TRANSFER', 201, '{}')");
    txn.exec("INSERT INTO ledger_entry (transaction_id, account_id, currency, amount, balance_after) VALUES (" +
             sql_literal(t1) + ", " + a + ", 'XTS', -5, -5), (" + sql_literal(t2) + ", " + a + ", 'XTS', -7, -12), (" +
             sql_literal(t1) + ", " + b + ", 'XTS', 5, 5), (" + sql_literal(t2) + ", " + b + ", 'XTS', 7, 12)");
    txn.commit();
  }

  // 024 and every migration after it.
  std::vector<std::string> remaining;
  for (const auto& m : migrations()) {
    if (m.version == "024_entry_ranges" || !remaining.empty()) remaining.push_back(m.version);
  }
  EXPECT_EQ(apply_migrations(options_for(owner_url)), remaining);
  for (const auto& t : {t1, t2}) {
    EXPECT_EQ(
        test_support::text_of(*owner,
                              "SELECT first_entry_id || '-' || last_entry_id FROM journal_transaction"
                              " WHERE id = " +
                                  sql_literal(t)),
        test_support::text_of(
            *owner, "SELECT min(id) || '-' || max(id) FROM ledger_entry WHERE transaction_id = " + sql_literal(t)));
  }
  // The ranges overlap (ids 1 and 3 against 2 and 4), and each still reads exactly its own entries.
  EXPECT_EQ(test_support::int_of(*owner,
                                 "SELECT count(*) FROM journal_transaction j JOIN ledger_entry e"
                                 "  ON e.id BETWEEN j.first_entry_id AND j.last_entry_id AND e.transaction_id = j.id"
                                 " WHERE j.id = " +
                                     sql_literal(t1)),
            2);
  EXPECT_EQ(
      test_support::int_of(*owner, "SELECT count(*) FROM pg_indexes WHERE indexname = 'ledger_entry_transaction'"), 0);
  EXPECT_THROW(
      {
        pqxx::work txn(*owner);
        txn.exec("UPDATE journal_transaction SET type = type WHERE id = " + sql_literal(t1));
      },
      pqxx::sql_error);
  EXPECT_THROW(
      {
        pqxx::work txn(*owner);
        txn.exec(
            "INSERT INTO journal_transaction (id, principal_id, idempotency_key, request_hash, type, response_status,"
            " response_body) VALUES (gen_random_uuid(), NULL, 'k3', 'h', 'TRANSFER', 201, '{}')");
      },
      pqxx::sql_error);
}

TEST_F(scratch_ledger, a_wrong_balance_after_is_reported_for_its_account_and_entry) {
  // A balanced transaction whose credited entry carries balance_after one too high (the sum is
  // 150, the row says 151): only balance_after names it, with that entry.
  const auto a = new_account();
  const auto b = new_account();
  fund(a, 100);
  fund(b, 100);
  clean_run(reconcile_kind::full);
  const auto tx = insert_directly({{a, "XTS", -50, 50}, {b, "XTS", 50, 151}});
  const auto entry = entry_of(tx, b);

  const auto incremental = run(reconcile_kind::incremental);
  EXPECT_EQ(names_of(incremental), (std::multiset<named>{{check::balance_after, b, "", "", entry}}))
      << describe(incremental);
  const auto full = run(reconcile_kind::full);
  EXPECT_EQ(names_of(full), (std::multiset<named>{{check::balance_after, b, "", "", entry}})) << describe(full);
}

TEST_F(scratch_ledger, a_disallowed_negative_balance_is_reported_for_its_account) {
  // The owner drops the CHECKs that guard negatives (the balance's own, and held <= balance of
  // migration 011) and posts a balanced transaction that takes an ordinary account to -40
  // (entries, caches and balance_after all consistent).
  const auto a = new_account();
  const auto b = new_account();
  fund(a, 10);
  clean_run(reconcile_kind::full);
  owner_exec("ALTER TABLE account DROP CONSTRAINT account_balance_not_negative");
  owner_exec("ALTER TABLE account DROP CONSTRAINT account_held_within_balance");
  insert_directly({{a, "XTS", -50, -40}, {b, "XTS", 50, 50}});
  ASSERT_EQ(balance(a), -40);

  const auto incremental = run(reconcile_kind::incremental);
  EXPECT_EQ(names_of(incremental), (std::multiset<named>{{check::negative_balance, a, "", "", 0}}))
      << describe(incremental);
  const auto full = run(reconcile_kind::full);
  EXPECT_EQ(names_of(full), (std::multiset<named>{{check::negative_balance, a, "", "", 0}})) << describe(full);
}

TEST_F(scratch_ledger, held_money_that_is_not_the_sum_of_the_active_holds_is_reported_for_its_account) {
  // Holds and held written as the owner: consistent first (a holds 300 + 200 and held 500; b's
  // only hold is voided and held 0), which both runs pass. Then a's held is cut to 450 while its
  // holds stay, and b's held is set to 100 with no active hold (a lost release). The incremental
  // run finds a (a payer of active holds) and not b (no active hold, no new entry); the full run
  // finds both; and so does the next run asked for as incremental, which is full while problems
  // stand.
  const auto a = new_account();
  const auto b = new_account();
  const auto payee = new_account();
  fund(a, 1'000);
  fund(b, 1'000);
  auto place = [&](std::int64_t payer, std::int64_t amount, const std::string& status) {
    const bool active = status == "ACTIVE";
    owner_exec(
        "INSERT INTO hold (id, payer_id, payee_id, principal_id, idempotency_key, request_hash, response_body,"
        " currency, amount, status, expires_at, settled_at) VALUES (gen_random_uuid(), " +
        std::to_string(payer) + ", " + std::to_string(payee) + ", " + std::to_string(principal_) +
        ", gen_random_uuid()::text, 'hash', '{}', 'XTS', " + std::to_string(amount) + ", " + sql_literal(status) +
        ", now() + interval '1 hour', " + (active ? "NULL" : "now()") + ")");
  };
  place(a, 300, "ACTIVE");
  place(a, 200, "ACTIVE");
  place(b, 100, "VOIDED");
  owner_exec("UPDATE account SET held = 500 WHERE id = " + std::to_string(a));
  clean_run(reconcile_kind::full);
  clean_run(reconcile_kind::incremental);

  owner_exec("UPDATE account SET held = 450 WHERE id = " + std::to_string(a));
  owner_exec("UPDATE account SET held = 100 WHERE id = " + std::to_string(b));
  const auto incremental = run(reconcile_kind::incremental);
  EXPECT_EQ(incremental.kind, reconcile_kind::incremental);
  EXPECT_EQ(names_of(incremental), (std::multiset<named>{{check::held_mismatch, a, "", "", 0}}))
      << describe(incremental);
  EXPECT_FALSE(incremental.passed(check::held_mismatch).value_or(true));
  const auto full = run(reconcile_kind::full);
  EXPECT_EQ(names_of(full),
            (std::multiset<named>{{check::held_mismatch, a, "", "", 0}, {check::held_mismatch, b, "", "", 0}}))
      << describe(full);
  EXPECT_EQ(int_of("SELECT count(*) FROM reconciliation_finding WHERE check_name = 'held_mismatch' AND run_id = " +
                   std::to_string(full.id)),
            2);
  transfer(b, payee, 1);
  const auto touched = run(reconcile_kind::incremental);
  EXPECT_EQ(touched.kind, reconcile_kind::full);
  EXPECT_EQ(names_of(touched),
            (std::multiset<named>{{check::held_mismatch, a, "", "", 0}, {check::held_mismatch, b, "", "", 0}}))
      << describe(touched);
}

TEST_F(scratch_ledger, entries_naming_a_missing_account_or_another_currency_are_reported_one_by_one) {
  // Two balanced transactions: one credits an account id that does not exist, the other credits
  // the XTS account `a` in XXX (against an XXX account that may go negative). Each of the two
  // entries is named with its account; the sums per transaction and per currency still hold.
  const auto a = new_account();
  const auto b = new_account("XTS", true);
  const auto x = new_account("XXX", true);
  fund(a, 100);
  clean_run(reconcile_kind::full);
  const std::int64_t missing = 999'999'999;
  const auto lost = insert_directly({{b, "XTS", -5, -5}, {missing, "XTS", 5, 5}});
  const auto foreign = insert_directly({{x, "XXX", -7, -7}, {a, "XXX", 7, 107}});
  const std::multiset<named> expected{{check::entry_account, missing, "", "XTS", entry_of(lost, missing)},
                                      {check::entry_account, a, "", "XXX", entry_of(foreign, a)}};

  const auto incremental = run(reconcile_kind::incremental);
  EXPECT_EQ(names_of(incremental), expected) << describe(incremental);
  const auto full = run(reconcile_kind::full);
  EXPECT_EQ(names_of(full), expected) << describe(full);
}

TEST_F(scratch_ledger, a_change_before_the_checkpoint_is_caught_by_the_full_run_only) {
  // After a run, the owner rewrites history below the checkpoint: the two entries of an old
  // transfer trade amounts, and the caches and balance_after follow, so every invariant the
  // entries themselves carry still holds. The incremental run reads nothing before its
  // watermark and finds nothing; the full run finds both accounts' checkpoints contradicted by
  // their entries, and rebuilds them, so the next full run is clean again.
  const auto a = new_account();
  const auto b = new_account();
  fund(a, 1'000);
  fund(b, 1'000);
  const auto tx = transfer(a, b, 300);
  clean_run(reconcile_kind::full);
  const auto a_entry = std::to_string(entry_of(tx, a));
  const auto b_entry = std::to_string(entry_of(tx, b));
  owner_exec("ALTER TABLE ledger_entry DISABLE TRIGGER ledger_entry_append_only");
  owner_exec("UPDATE ledger_entry SET amount = -amount, balance_after = CASE id WHEN " + a_entry +
             " THEN 1300 ELSE 700 END"
             " WHERE id IN (" +
             a_entry + ", " + b_entry + ")");
  owner_exec("ALTER TABLE ledger_entry ENABLE TRIGGER ledger_entry_append_only");
  owner_exec("UPDATE account SET balance = 1300 WHERE id = " + std::to_string(a));
  owner_exec("UPDATE account SET balance = 700 WHERE id = " + std::to_string(b));

  const auto incremental = run(reconcile_kind::incremental);
  EXPECT_TRUE(incremental.ok.value_or(false)) << describe(incremental);
  EXPECT_TRUE(incremental.findings.empty()) << describe(incremental);
  EXPECT_EQ(incremental.passed(check::checkpoint), std::nullopt);

  const auto full = run(reconcile_kind::full);
  EXPECT_EQ(names_of(full),
            (std::multiset<named>{{check::checkpoint, a, "", "", 0}, {check::checkpoint, b, "", "", 0}}))
      << describe(full);
  EXPECT_EQ(full.passed(check::checkpoint), false);
  clean_run(reconcile_kind::full);
}

TEST_F(scratch_ledger, the_watermark_waits_for_a_writer_that_took_its_ids_before_it) {
  // Transactions commit out of id order. Writer A inserts its entries (lower ids) and stays open;
  // writer B commits a transfer after it (higher ids). A run that starts now sees B's ids as the
  // highest: it must not move any checkpoint past A's ids while A may still commit. It waits in
  // phase 'waiting' until A commits, then its checkpoints include A's entries; a full run that
  // re-verifies every checkpoint agrees.
  const auto a1 = new_account();
  const auto a2 = new_account();
  const auto b1 = new_account();
  const auto b2 = new_account();
  fund(a1, 1'000);
  fund(b1, 1'000);
  clean_run(reconcile_kind::full);

  auto writer_conn = connect(options_for(test_support::scratch_owner_database_url()));
  const auto tx = text_of("SELECT gen_random_uuid()::text");
  pqxx::work writer_a(*writer_conn);
  writer_a.exec("INSERT INTO ledger_entry (transaction_id, account_id, currency, amount, balance_after) VALUES (" +
                sql_literal(tx) + ", " + std::to_string(a1) + ", 'XTS', -100, 900), (" + sql_literal(tx) + ", " +
                std::to_string(a2) + ", 'XTS', 100, 100)");
  insert_journal_row(writer_a, tx);
  writer_a.exec("UPDATE account SET balance = balance - 100, version = version + 1 WHERE id = " + std::to_string(a1));
  writer_a.exec("UPDATE account SET balance = balance + 100, version = version + 1 WHERE id = " + std::to_string(a2));
  const auto a_max = writer_a.exec1("SELECT max(id) FROM ledger_entry")[0].as<std::int64_t>();
  transfer(b1, b2, 10);
  auto watcher = connect(options_for(test_support::scratch_database_url()));
  const auto b_max = test_support::int_of(*watcher, "SELECT max(id) FROM ledger_entry");
  ASSERT_GT(b_max, a_max);

  const auto claim = claim_run(*reconciler_, reconcile_kind::incremental, "reconcile-tests");
  ASSERT_TRUE(claim.started);
  reconcile_run result;
  std::thread runner([&] { result = execute_run(*reconciler_, claim.run_id, reconcile_kind::incremental, {}); });
  std::string phase;
  for (int poll = 0; poll < k_phase_polls_max && phase != "waiting"; ++poll) {
    phase = test_support::text_of(
        *watcher, "SELECT COALESCE(phase, status) FROM reconciliation_run WHERE id = " + std::to_string(claim.run_id));
    if (phase != "waiting") std::this_thread::sleep_for(k_phase_poll);
  }
  EXPECT_EQ(phase, "waiting");
  writer_a.commit();
  runner.join();

  EXPECT_TRUE(result.ok.value_or(false)) << describe(result);
  EXPECT_EQ(result.through_entry_id.value_or(0), b_max);
  EXPECT_EQ(int_of("SELECT balance FROM reconciliation_account_checkpoint WHERE account_id = " + std::to_string(a1)),
            900);
  EXPECT_EQ(int_of("SELECT balance FROM reconciliation_account_checkpoint WHERE account_id = " + std::to_string(a2)),
            100);
  clean_run(reconcile_kind::full);
}

TEST_F(scratch_ledger, a_second_claim_while_a_run_is_in_progress_names_that_run) {
  // One run at a time across connections (as across processes): a claim on another connection
  // while a run is claimed gets that run's id and does not start one; once the run has ended,
  // the next claim starts a new one.
  auto second = reconcile_connection();
  const auto first = claim_run(*reconciler_, reconcile_kind::incremental, "first");
  ASSERT_TRUE(first.started);
  const auto again = claim_run(*second, reconcile_kind::full, "second");
  EXPECT_FALSE(again.started);
  EXPECT_EQ(again.run_id, first.run_id);
  EXPECT_EQ(running_run_id(*app_), first.run_id);

  const auto ended = execute_run(*reconciler_, first.run_id, reconcile_kind::incremental, {});
  EXPECT_EQ(ended.status, "finished");
  EXPECT_FALSE(running_run_id(*app_).has_value());
  const auto next = claim_run(*second, reconcile_kind::full, "second");
  EXPECT_TRUE(next.started);
  EXPECT_GT(next.run_id, first.run_id);
  EXPECT_EQ(execute_run(*second, next.run_id, reconcile_kind::full, {}).status, "finished");
}

TEST_F(scratch_ledger, a_run_whose_connection_died_is_closed_by_the_next_claim) {
  // The advisory lock dies with its session; the next claim takes it and marks the orphaned run
  // failed, so no run stays 'running' forever.
  std::int64_t orphan = 0;
  int orphan_pid = 0;
  {
    auto doomed = reconcile_connection();
    orphan_pid = doomed->backendpid();
    orphan = claim_run(*doomed, reconcile_kind::full, "doomed").run_id;
  }
  // The server ends the session (and frees its lock) after the client has gone: wait for that.
  bool gone = false;
  for (int poll = 0; poll < k_phase_polls_max && !gone; ++poll) {
    gone = int_of("SELECT count(*) FROM pg_stat_activity WHERE pid = " + std::to_string(orphan_pid)) == 0;
    if (!gone) std::this_thread::sleep_for(k_phase_poll);
  }
  ASSERT_TRUE(gone);
  const auto next = claim_run(*reconciler_, reconcile_kind::full, "next");
  ASSERT_TRUE(next.started);
  EXPECT_EQ(run_field(orphan, "status"), "failed");
  EXPECT_NE(run_field(orphan, "error").find("abandoned"), std::string::npos);
  execute_run(*reconciler_, next.run_id, reconcile_kind::full, {});
}

TEST_F(scratch_ledger, a_run_that_cannot_settle_its_watermark_in_time_fails_and_moves_nothing) {
  // A transaction holding ledger_entry's write lock since before the run outlives the run's bound
  // (1 s): the run ends failed, with that reason, and leaves the watermark where it was; once
  // that transaction is gone, the next run starts from the old watermark and is clean.
  const auto a = new_account();
  fund(a, 100);
  const auto base = clean_run(reconcile_kind::full);
  fund(a, 1);
  pqxx::work holder(*owner_);
  holder.exec("LOCK TABLE ledger_entry IN ROW EXCLUSIVE MODE");

  auto bounded = reconcile_connection(1'000);
  const auto claim = claim_run(*bounded, reconcile_kind::incremental, "bounded");
  run_options options;
  options.statement_timeout_ms = 1'000;
  const auto failed = execute_run(*bounded, claim.run_id, reconcile_kind::incremental, options);
  EXPECT_EQ(failed.status, "failed");
  EXPECT_FALSE(failed.ok.has_value());
  EXPECT_NE(failed.error.find("did not end within 1000 ms"), std::string::npos) << failed.error;
  holder.abort();

  const auto next = clean_run(reconcile_kind::incremental);
  EXPECT_EQ(next.from_entry_id.value_or(-1), base.through_entry_id.value_or(-2));
  EXPECT_EQ(next.entries_checked, 2);
}

TEST_F(scratch_ledger, a_sequence_that_caches_ids_per_session_fails_the_run) {
  // With CACHE > 1 a session may hand out ids below the watermark long after it was read: the
  // run refuses to move a checkpoint and says why.
  owner_exec("ALTER SEQUENCE ledger_entry_id_seq CACHE 10");
  const auto r = run(reconcile_kind::full);
  EXPECT_EQ(r.status, "failed");
  EXPECT_NE(r.error.find("CACHE 10"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace persistence
