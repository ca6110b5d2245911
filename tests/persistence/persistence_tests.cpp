// The schema and the posting path against a real PostgreSQL (WALLET_DATABASE_URL as the app role,
// WALLET_DATABASE_OWNER_URL as the owner): migrations, the database's own guards of the ledger
// invariants, and commit_batch's isolation of a posting the database refuses.
//
// Every test makes its own principal and accounts (currency XTS, the ISO code for testing) and
// keeps the ledger reconcilable: whatever it commits directly as the owner is balanced, with the
// balance caches and versions updated, so suites that reconcile the whole database stay green.

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <functional>
#include <limits>
#include <optional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ledger/receipt.hpp"
#include "persistence/accounts.hpp"
#include "persistence/batch.hpp"
#include "persistence/binary_array.hpp"
#include "persistence/database.hpp"
#include "persistence/history.hpp"
#include "persistence/holds.hpp"
#include "persistence/migrations.hpp"
#include "tests/support/connections.hpp"
#include "tests/support/support.hpp"

namespace persistence {
namespace {

using test_support::int_of;
using test_support::options_for;
using test_support::sql_literal;
using test_support::text_of;
using test_support::unique_key;

const std::string k_currency = "XTS";

const std::string k_application_name = "persistence-tests";

std::unique_ptr<pqxx::connection> owner_connection() {
  return connect(options_for(test_support::owner_database_url(), k_application_name));
}

std::unique_ptr<pqxx::connection> app_connection() {
  auto conn = connect(options_for(test_support::database_url(), k_application_name));
  prepare_posting_statements(*conn);
  return conn;
}

// One statement in its own committed transaction.
pqxx::result run(pqxx::connection& conn, const std::string& sql) {
  pqxx::work txn(conn);
  pqxx::result r = txn.exec(sql);
  txn.commit();
  return r;
}

// The SQLSTATE and message of the pqxx::sql_error that `step` throws; a failure if none.
// libpqxx 6.4 leaves sqlstate() empty for some classes (insufficient_privilege among them), so
// that one is recognised by its exception type.
struct sql_failure {
  std::string sqlstate;
  std::string message;
  bool insufficient_privilege = false;
};
sql_failure sql_error_of(const std::function<void()>& step) {
  try {
    step();
  } catch (const pqxx::insufficient_privilege& e) {
    return {e.sqlstate(), e.what(), true};
  } catch (const pqxx::sql_error& e) {
    return {e.sqlstate(), e.what(), false};
  }
  ADD_FAILURE() << "expected an SQL error";
  return {};
}

// Fixture: a fresh principal, the XTS clearing account, and three user accounts a, b, d.
class ledger_db : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The test command migrates the database first; applying again keeps this suite standalone.
    apply_migrations(options_for(test_support::owner_database_url(), k_application_name));
  }

  void SetUp() override {
    owner_ = owner_connection();
    app_ = app_connection();
    principal_ = int_of(*owner_, "INSERT INTO principal (name, role) VALUES (" +
                                     sql_literal(unique_key("persistence")) + ", 'user') RETURNING id");
    clearing_ = ensure_clearing_account(*app_, k_currency);
    a_ = new_account();
    b_ = new_account();
    d_ = new_account();
  }

  std::int64_t new_account(bool allow_negative = false) {
    return int_of(*owner_, "INSERT INTO account (owner_id, currency, kind, allow_negative) VALUES (" +
                               std::to_string(principal_) + ", " + sql_literal(k_currency) + ", 'user', " +
                               (allow_negative ? "TRUE" : "FALSE") + ") RETURNING id");
  }

  std::string new_uuid() { return text_of(*owner_, "SELECT gen_random_uuid()::text"); }

  // Transfer `tx` of `amount` from `from` to `to` written directly in `txn`: both entries, balanced
  // in one statement, with the two accounts' balances after it, and its journal row with their
  // range of ids (migration 024).
  void insert_transfer(pqxx::work& txn, const std::string& tx, std::int64_t from, std::int64_t from_after,
                       std::int64_t to, std::int64_t to_after, std::int64_t amount) {
    txn.exec("INSERT INTO ledger_entry (transaction_id, account_id, currency, amount, balance_after) VALUES (" +
             sql_literal(tx) + ", " + std::to_string(from) + ", 'XTS', " + std::to_string(-amount) + ", " +
             std::to_string(from_after) + "), (" + sql_literal(tx) + ", " + std::to_string(to) + ", 'XTS', " +
             std::to_string(amount) + ", " + std::to_string(to_after) + ")");
    txn.exec(
        "INSERT INTO journal_transaction (id, principal_id, idempotency_key, request_hash, type,"
        " response_status, response_body, first_entry_id, last_entry_id) SELECT " +
        sql_literal(tx) + ", " + std::to_string(principal_) + ", " + sql_literal(unique_key("direct")) +
        ", 'direct', 'TRANSFER', 201, '{}', min(id), max(id) FROM ledger_entry WHERE transaction_id = " +
        sql_literal(tx));
  }

  // A hot account with two shards, made directly: its id, then its shards' in shard order.
  struct hot_account {
    std::int64_t id;
    std::int64_t shard_a;
    std::int64_t shard_b;
  };
  hot_account new_hot_account() {
    const std::int64_t hot = new_account();
    const std::string id = std::to_string(hot);
    run(*owner_, "INSERT INTO account (owner_id, currency, kind, parent_id, shard_no) SELECT " +
                     std::to_string(principal_) + ", 'XTS', 'shard', " + id + ", n FROM generate_series(0, 1) AS n");
    return {hot, int_of(*owner_, "SELECT id FROM account WHERE shard_no = 0 AND parent_id = " + id),
            int_of(*owner_, "SELECT id FROM account WHERE shard_no = 1 AND parent_id = " + id)};
  }

  posting_request request(ledger::transaction_type type, std::int64_t from, std::int64_t to, std::int64_t amount,
                          const std::string& key) {
    posting_request r;
    r.posting.type = type;
    r.posting.debit_account = from;
    r.posting.credit_account = to;
    r.posting.amount = amount;
    r.posting.currency = k_currency;
    r.transaction_id = new_uuid();
    r.principal = principal_;
    r.idempotency_key = key;
    r.request_hash = "hash:" + std::to_string(from) + ">" + std::to_string(to) + ":" + std::to_string(amount);
    return r;
  }

  posting_request transfer(std::int64_t from, std::int64_t to, std::int64_t amount, const std::string& key) {
    return request(ledger::transaction_type::transfer, from, to, amount, key);
  }

  void fund(std::int64_t account, std::int64_t amount) {
    const batch_result r = commit_batch(
        *app_, {request(ledger::transaction_type::deposit, clearing_, account, amount, unique_key("fund"))});
    ASSERT_EQ(r.outcomes.at(0).outcome, ledger::error_code::ok);
  }

  std::int64_t balance(std::int64_t account) {
    return int_of(*owner_, "SELECT balance FROM account WHERE id = " + std::to_string(account));
  }
  std::int64_t version(std::int64_t account) {
    return int_of(*owner_, "SELECT version FROM account WHERE id = " + std::to_string(account));
  }
  std::int64_t entries_of(const std::string& transaction_id) {
    return int_of(*owner_, "SELECT count(*) FROM ledger_entry WHERE transaction_id = " + sql_literal(transaction_id));
  }
  std::int64_t journal_rows_of(const std::string& transaction_id) {
    return int_of(*owner_, "SELECT count(*) FROM journal_transaction WHERE id = " + sql_literal(transaction_id));
  }
  std::int64_t outbox_rows_of(const std::string& transaction_id) {
    // A batch's row names all of its transactions; rows from before migration 003 name one.
    const std::string id = sql_literal(transaction_id) + "::uuid";
    return int_of(*owner_, "SELECT count(*) FROM outbox_event WHERE transaction_id = " + id + " OR " + id +
                               " = ANY(transaction_ids)");
  }
  std::int64_t keys_committed(const std::string& key) {
    return int_of(*owner_, "SELECT count(*) FROM journal_transaction WHERE principal_id = " +
                               std::to_string(principal_) + " AND idempotency_key = " + sql_literal(key));
  }

  // Invariant 2 for this fixture's accounts: each cache equals the sum of its entries, each version
  // their count, and each entry's balance_after is the running sum in entry order.
  void expect_caches_match_entries() {
    for (std::int64_t id : {a_, b_, d_}) {
      const std::string where = " WHERE account_id = " + std::to_string(id);
      EXPECT_EQ(balance(id), int_of(*owner_, "SELECT COALESCE(sum(amount), 0) FROM ledger_entry" + where)) << id;
      EXPECT_EQ(version(id), int_of(*owner_, "SELECT count(*) FROM ledger_entry" + where)) << id;
      EXPECT_EQ(0, int_of(*owner_,
                          "SELECT count(*) FROM (SELECT balance_after, sum(amount) OVER (ORDER BY id) AS running"
                          " FROM ledger_entry" +
                              where + ") x WHERE balance_after <> running"))
          << id;
    }
  }

  std::unique_ptr<pqxx::connection> owner_;
  std::unique_ptr<pqxx::connection> app_;
  std::int64_t principal_ = 0;
  std::int64_t clearing_ = 0;
  std::int64_t a_ = 0;
  std::int64_t b_ = 0;
  std::int64_t d_ = 0;
};

// A trigger created for one test and dropped when the test ends, however it ends.
class temporary_trigger {
 public:
  temporary_trigger(std::string name, const std::string& function_body, const std::string& trigger_clause)
      : name_(std::move(name)) {
    auto owner = owner_connection();
    pqxx::work txn(*owner);
    txn.exec("CREATE FUNCTION " + name_ + "() RETURNS trigger LANGUAGE plpgsql AS $fn$ " + function_body + " $fn$");
    txn.exec("CREATE CONSTRAINT TRIGGER " + name_ + " " + trigger_clause + " EXECUTE FUNCTION " + name_ + "()");
    txn.commit();
  }
  ~temporary_trigger() {
    try {
      auto owner = owner_connection();
      pqxx::work txn(*owner);
      txn.exec("DROP TRIGGER IF EXISTS " + name_ + " ON ledger_entry");
      txn.exec("DROP FUNCTION IF EXISTS " + name_ + "()");
      txn.commit();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "could not drop trigger " << name_ << ": " << e.what();
    }
  }
  temporary_trigger(const temporary_trigger&) = delete;
  temporary_trigger& operator=(const temporary_trigger&) = delete;

 private:
  std::string name_;
};

TEST(columns, an_unknown_enum_text_is_an_error_not_a_default) {
  // A role or status the server does not know (one a newer migration might add) must stop the
  // read loudly, never be taken for `user` or `closed`.
  EXPECT_EQ(parse_column(ledger::parse_role, "merchant", "principal.role"), ledger::role::merchant);
  EXPECT_THROW(parse_column(ledger::parse_role, "superuser", "principal.role"), unknown_value);
  EXPECT_THROW(parse_column(ledger::parse_account_status, "suspended", "account.status"), unknown_value);
  EXPECT_THROW(parse_column(ledger::parse_account_kind, "", "account.kind"), unknown_value);
}

// The array literals a writer sends its batches in read back exactly as they were built, whatever
// the text holds: quotes, backslashes, commas, braces, the word NULL, an empty string, and long runs
// without any of them; integers at the int64 edges, and NULL for a missing one.
TEST(arrays, array_literals_read_back_exactly_in_postgresql) {
  auto conn = connect(options_for(test_support::database_url(), k_application_name));
  const std::vector<std::string> texts = {"plain", "with \"quotes\"",      "back\\slash\\", "{braces},comma",  "NULL",
                                          "",      std::string(5000, 'x'), "\\\"",          "caf\u00e9 \u20ac"};
  const std::vector<std::int64_t> integers = {0, -1, 42, std::numeric_limits<std::int64_t>::min(),
                                              std::numeric_limits<std::int64_t>::max()};
  const std::vector<std::optional<std::int64_t>> optional = {7, std::nullopt, -7};
  pqxx::read_transaction txn(*conn);
  std::vector<std::string> texts_back;
  for (const auto& row : txn.exec("SELECT t FROM unnest(" + txn.quote(pg_array(texts)) +
                                  "::text[]) WITH ORDINALITY AS a(t, n) ORDER BY n")) {
    texts_back.push_back(row[0].as<std::string>());
  }
  EXPECT_EQ(texts_back, texts);
  std::vector<std::int64_t> integers_back;
  for (const auto& row : txn.exec("SELECT i FROM unnest(" + txn.quote(pg_array(integers)) +
                                  "::bigint[]) WITH ORDINALITY AS a(i, n) ORDER BY n")) {
    integers_back.push_back(row[0].as<std::int64_t>());
  }
  EXPECT_EQ(integers_back, integers);
  std::vector<std::optional<std::int64_t>> optional_back;
  for (const auto& row : txn.exec("SELECT i FROM unnest(" + txn.quote(pg_array(optional)) +
                                  "::bigint[]) WITH ORDINALITY AS a(i, n) ORDER BY n")) {
    optional_back.push_back(row[0].is_null() ? std::nullopt : std::optional<std::int64_t>(row[0].as<std::int64_t>()));
  }
  EXPECT_EQ(optional_back, optional);
}

// The writer builds its text arrays element by element: the same literal as from a vector, and a
// builder that gave its literal away starts again from an empty array.
TEST(arrays, a_text_array_built_element_by_element_is_the_vectors_literal) {
  const std::vector<std::string> texts = {"a", "with \"quotes\"", "back\\slash", ""};
  pg_text_array built;
  EXPECT_TRUE(built.empty());
  for (const auto& t : texts) built.add(t);
  EXPECT_FALSE(built.empty());
  EXPECT_EQ(built.take(), pg_array(texts));
  EXPECT_TRUE(built.empty());
  EXPECT_EQ(built.take(), "{}");
  built.add("again");
  EXPECT_EQ(built.take(), "{\"again\"}");
}

// The binary arrays of the write statement read back exactly in PostgreSQL, parameter by
// parameter with the casts the statement uses: every element type, NULLs, the int64 edges, text
// with bytes a text literal would escape, a jsonb element, and an empty array of each.
TEST(arrays, binary_arrays_read_back_exactly_in_postgresql) {
  auto conn = connect(options_for(test_support::database_url(), k_application_name));
  using element = pg_binary_array::element;
  const std::vector<std::string> texts = {"plain", "with \"quotes\"",      "back\\slash\\",   "{braces},comma", "NULL",
                                          "",      std::string(5000, 'x'), "caf\u00e9 \u20ac"};
  pg_binary_array text(element::text), int8(element::int8), int4(element::int4), xid(element::xid), uuid(element::uuid),
      bpchar(element::bpchar), jsonb(element::jsonb), empty(element::int8);
  for (const auto& t : texts) text.add(t);
  int8.add(std::numeric_limits<std::int64_t>::min());
  int8.add_null();
  int8.add(std::numeric_limits<std::int64_t>::max());
  int8.add(-1);
  int4.add(201);
  int4.add(-2'147'483'648);
  xid.add(4'294'967'295);
  xid.add(731);
  uuid.add("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b");
  uuid.add("FFFFFFFF-0000-4000-8000-000000000001");
  bpchar.add("EUR");
  jsonb.add(R"({"note":"salary 'n' \\ \"q\"","n":[1,2]})");
  jsonb.add("{}");
  EXPECT_EQ(text.size(), texts.size());

  pqxx::read_transaction txn(*conn);
  const auto as_text = [&](const char* cast, pg_binary_array& a) {
    return txn.exec_params1(std::string("SELECT ($1::") + cast + ")::text", pqxx::binarystring(a.take()))[0]
        .as<std::string>();
  };
  std::vector<std::string> texts_back;
  for (const auto& row : txn.exec_params("SELECT t FROM unnest($1::text[]) WITH ORDINALITY AS a(t, n) ORDER BY n",
                                         pqxx::binarystring(text.take()))) {
    texts_back.push_back(row[0].as<std::string>());
  }
  EXPECT_EQ(texts_back, texts);
  EXPECT_EQ(as_text("bigint[]", int8), "{-9223372036854775808,NULL,9223372036854775807,-1}");
  EXPECT_EQ(as_text("int[]", int4), "{201,-2147483648}");
  EXPECT_EQ(as_text("xid[]", xid), "{4294967295,731}");
  EXPECT_EQ(as_text("uuid[]", uuid), "{0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b,ffffffff-0000-4000-8000-000000000001}");
  EXPECT_EQ(as_text("bpchar[]", bpchar), "{EUR}");
  EXPECT_EQ(as_text("jsonb[]", jsonb), R"({"{\"n\": [1, 2], \"note\": \"salary 'n' \\\\ \\\"q\\\"\"}","{}"})");
  EXPECT_EQ(as_text("bigint[]", empty), "{}");
  EXPECT_EQ(
      txn.exec_params1("SELECT cardinality($1::uuid[])", pqxx::binarystring(pg_binary_array(element::uuid).take()))[0]
          .as<int>(),
      0);
  // A builder that gave its bytes away starts again from an empty array.
  empty.add(5);
  EXPECT_EQ(as_text("bigint[]", empty), "{5}");
  EXPECT_EQ(as_text("bigint[]", empty), "{}");
}

// What does not fit its element type is refused before anything is sent.
TEST(arrays, a_binary_array_refuses_what_its_type_cannot_hold) {
  using element = pg_binary_array::element;
  pg_binary_array int4(element::int4), xid(element::xid), uuid(element::uuid), int8(element::int8);
  EXPECT_THROW(int4.add(std::int64_t{2'147'483'648}), std::invalid_argument);
  EXPECT_THROW(xid.add(-1), std::invalid_argument);
  EXPECT_THROW(xid.add(std::int64_t{4'294'967'296}), std::invalid_argument);
  EXPECT_THROW(uuid.add("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5"), std::invalid_argument);    // a digit short
  EXPECT_THROW(uuid.add("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5g"), std::invalid_argument);   // not hex
  EXPECT_THROW(uuid.add("0190a1b2c3d4-7e5f-8a9b-0c1d2e3f4a5b00"), std::invalid_argument);  // dashes misplaced
  EXPECT_THROW(uuid.add("0190a1b2-c3d4-7e5f-8a9b0c1d2e3f4a5b0"), std::invalid_argument);   // a dash short
  EXPECT_THROW(int8.add("12"), std::invalid_argument);
  EXPECT_THROW(uuid.add(12), std::invalid_argument);
  EXPECT_EQ(int4.size() + xid.size() + uuid.size() + int8.size(), 0u);
}

TEST(migrations, applying_twice_applies_nothing_the_second_time) {
  // apply_migrations records each version once: the second call finds them all and returns none,
  // and schema_migrations holds exactly one row per embedded migration.
  const auto owner = options_for(test_support::owner_database_url(), k_application_name);
  apply_migrations(owner);
  EXPECT_TRUE(apply_migrations(owner).empty());
  ASSERT_FALSE(migrations().empty());
  auto conn = owner_connection();
  for (const auto& m : migrations()) {
    EXPECT_EQ(int_of(*conn, "SELECT count(*) FROM schema_migrations WHERE version = " + sql_literal(m.version)), 1)
        << m.version;
  }
  EXPECT_EQ(int_of(*conn, "SELECT count(*) FROM schema_migrations WHERE version = '001_ledger'"), 1);
  EXPECT_EQ(int_of(*conn, "SELECT count(*) FROM schema_migrations"), static_cast<std::int64_t>(migrations().size()));
}

TEST(migrations, versions_are_unique_and_ordered) {
  // Migrations apply in embedded order, so that order must be the order of their version names.
  const auto& all = migrations();
  for (std::size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1].version, all[i].version);
  for (const auto& m : all) EXPECT_FALSE(m.sql.empty()) << m.version;
}

TEST_F(ledger_db, an_unbalanced_entry_is_refused_by_its_statement) {
  // Even the owner cannot insert entries that leave a transaction unbalanced: the statement
  // trigger raises check_violation, and nothing of the transaction is written.
  const std::string tx = new_uuid();
  const auto one_leg = sql_error_of([&] {
    pqxx::work txn(*owner_);
    txn.exec("INSERT INTO ledger_entry (transaction_id, account_id, currency, amount, balance_after) VALUES (" +
             sql_literal(tx) + ", " + std::to_string(a_) + ", 'XTS', 100, 100)");
    txn.commit();
  });
  EXPECT_EQ(one_leg.sqlstate, "23514");
  EXPECT_NE(one_leg.message.find("does not sum to zero"), std::string::npos) << one_leg.message;

  // Balanced amounts in two currencies are still unbalanced per currency.
  const auto mixed = sql_error_of([&] {
    pqxx::work txn(*owner_);
    txn.exec("INSERT INTO ledger_entry (transaction_id, account_id, currency, amount, balance_after) VALUES (" +
             sql_literal(tx) + ", " + std::to_string(a_) + ", 'XTS', 100, 100), (" + sql_literal(tx) + ", " +
             std::to_string(b_) + ", 'XXX', -100, -100)");
    txn.commit();
  });
  EXPECT_EQ(mixed.sqlstate, "23514");

  // Each statement must balance on its own: two halves in two statements fail at the first one.
  const auto halves = sql_error_of([&] {
    pqxx::work txn(*owner_);
    txn.exec("INSERT INTO ledger_entry (transaction_id, account_id, currency, amount, balance_after) VALUES (" +
             sql_literal(tx) + ", " + std::to_string(a_) + ", 'XTS', 100, 100)");
    txn.exec("INSERT INTO ledger_entry (transaction_id, account_id, currency, amount, balance_after) VALUES (" +
             sql_literal(tx) + ", " + std::to_string(b_) + ", 'XTS', -100, -100)");
    txn.commit();
  });
  EXPECT_EQ(halves.sqlstate, "23514");
  EXPECT_EQ(entries_of(tx), 0);
}

TEST_F(ledger_db, a_balanced_transaction_inserted_directly_commits) {
  // The same direct insert, balanced in one statement (with its journal row and caches), commits.
  const std::int64_t source = new_account(true);
  const std::string tx = new_uuid();
  {
    pqxx::work txn(*owner_);
    insert_transfer(txn, tx, source, -100, a_, 100, 100);
    txn.exec("UPDATE account SET balance = balance - 100, version = version + 1 WHERE id = " + std::to_string(source));
    txn.exec("UPDATE account SET balance = balance + 100, version = version + 1 WHERE id = " + std::to_string(a_));
    txn.commit();
  }
  EXPECT_EQ(entries_of(tx), 2);
  EXPECT_EQ(int_of(*owner_, "SELECT sum(amount) FROM ledger_entry WHERE transaction_id = " + sql_literal(tx)), 0);
  EXPECT_EQ(balance(a_), 100);
  EXPECT_EQ(balance(source), -100);
  expect_caches_match_entries();
}

TEST_F(ledger_db, entries_and_journal_rows_are_append_only_for_every_role) {
  // The app role has no UPDATE or DELETE grant on the ledger tables (permission denied), and the
  // owner, who has them, is stopped by the append-only triggers; the rows stay as they were.
  fund(a_, 500);
  const std::string entry =
      std::to_string(int_of(*owner_, "SELECT max(id) FROM ledger_entry WHERE account_id = " + std::to_string(a_)));
  const std::string tx = text_of(*owner_, "SELECT transaction_id::text FROM ledger_entry WHERE id = " + entry);
  const std::vector<std::string> statements = {
      "UPDATE ledger_entry SET amount = amount + 1 WHERE id = " + entry,
      "DELETE FROM ledger_entry WHERE id = " + entry,
      "UPDATE journal_transaction SET response_body = '{}' WHERE id = " + sql_literal(tx),
      "DELETE FROM journal_transaction WHERE id = " + sql_literal(tx),
  };
  for (const auto& sql : statements) {
    const auto as_app = sql_error_of([&] { run(*app_, sql); });
    EXPECT_TRUE(as_app.insufficient_privilege) << sql;
    EXPECT_NE(as_app.message.find("permission denied"), std::string::npos) << as_app.message;
    const auto as_owner = sql_error_of([&] { run(*owner_, sql); });
    EXPECT_TRUE(as_owner.insufficient_privilege) << sql;
    EXPECT_NE(as_owner.message.find("is append-only"), std::string::npos) << as_owner.message;
  }
  EXPECT_EQ(int_of(*owner_, "SELECT amount FROM ledger_entry WHERE id = " + entry), 500);
  EXPECT_EQ(entries_of(tx), 2);
  EXPECT_EQ(journal_rows_of(tx), 1);

  // The app role may move balance caches but not re-own or re-denominate an account.
  const auto currency =
      sql_error_of([&] { run(*app_, "UPDATE account SET currency = 'XXX' WHERE id = " + std::to_string(a_)); });
  EXPECT_TRUE(currency.insufficient_privilege) << currency.message;
  const auto remove = sql_error_of([&] { run(*app_, "DELETE FROM account WHERE id = " + std::to_string(a_)); });
  EXPECT_TRUE(remove.insufficient_privilege) << remove.message;
}

TEST_F(ledger_db, a_normal_account_cannot_hold_a_negative_balance) {
  // CHECK (allow_negative OR balance >= 0) refuses -1 on a normal account for both roles; an
  // account that allows negatives takes it (rolled back, so caches still match entries).
  for (auto* conn : {owner_.get(), app_.get()}) {
    const auto refused =
        sql_error_of([&] { run(*conn, "UPDATE account SET balance = -1 WHERE id = " + std::to_string(b_)); });
    EXPECT_EQ(refused.sqlstate, "23514");
    EXPECT_NE(refused.message.find("account_balance_not_negative"), std::string::npos) << refused.message;
  }
  const auto created = sql_error_of([&] {
    run(*owner_, "INSERT INTO account (owner_id, currency, kind, balance) VALUES (" + std::to_string(principal_) +
                     ", 'XTS', 'user', -5)");
  });
  EXPECT_EQ(created.sqlstate, "23514");
  EXPECT_EQ(balance(b_), 0);

  const std::int64_t negative_ok = new_account(true);
  pqxx::work txn(*owner_);
  txn.exec("UPDATE account SET balance = -1 WHERE id = " + std::to_string(negative_ok));
  EXPECT_EQ(txn.exec1("SELECT balance FROM account WHERE id = " + std::to_string(negative_ok))[0].as<std::int64_t>(),
            -1);
  txn.abort();
}

TEST_F(ledger_db, commit_batch_writes_journal_entries_caches_and_outbox) {
  // One batch of three transfers commits in one attempt: per posting a journal row with its
  // receipt and two entries with running balance_after; one outbox row for the whole batch that
  // names every transaction in commit order; caches and versions match.
  fund(a_, 1000);
  std::vector<posting_request> batch = {transfer(a_, b_, 100, unique_key("k")), transfer(a_, d_, 250, unique_key("k")),
                                        transfer(b_, d_, 40, unique_key("k"))};
  const batch_result r = commit_batch(*app_, batch);
  ASSERT_EQ(r.outcomes.size(), 3u);
  EXPECT_EQ(r.attempts, 1);
  const std::vector<std::int64_t> after = {900, 650, 60};
  const std::vector<std::int64_t> amounts = {100, 250, 40};
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const auto& o = r.outcomes[i];
    EXPECT_EQ(o.outcome, ledger::error_code::ok) << i;
    EXPECT_FALSE(o.replayed);
    EXPECT_EQ(o.transaction_id, batch[i].transaction_id);
    EXPECT_EQ(o.debit_balance_after, after[i]);
    EXPECT_EQ(o.response_status, 201);
    EXPECT_EQ(o.response_body, ledger::receipt_json(ledger::transaction_type::transfer, batch[i].transaction_id,
                                                    after[i], ledger::payment_receipt_fields(0, amounts[i])));
    EXPECT_EQ(entries_of(batch[i].transaction_id), 2);
    EXPECT_EQ(journal_rows_of(batch[i].transaction_id), 1);
    EXPECT_EQ(outbox_rows_of(batch[i].transaction_id), 1);
    EXPECT_EQ(
        text_of(*owner_, "SELECT response_body FROM journal_transaction WHERE id = " + sql_literal(o.transaction_id)),
        o.response_body);
  }
  const std::string batch_row = "(SELECT id FROM outbox_event WHERE " +
                                sql_literal(std::as_const(batch[0].transaction_id)) + "::uuid = ANY(transaction_ids))";
  EXPECT_EQ(text_of(*owner_,
                    "SELECT array_to_string(transaction_ids, ',') || ' ' || topic FROM outbox_event"
                    " WHERE id = " +
                        batch_row),
            batch[0].transaction_id + "," + batch[1].transaction_id + "," + batch[2].transaction_id + " ledger.batch");
  EXPECT_EQ(text_of(*owner_,
                    "SELECT string_agg(t->>'transactionId' || ':' || (t->>'amount'), ',')"
                    " FROM outbox_event, jsonb_array_elements(payload->'transactions') AS t WHERE id = " +
                        batch_row),
            batch[0].transaction_id + ":100," + batch[1].transaction_id + ":250," + batch[2].transaction_id + ":40");
  EXPECT_EQ(balance(a_), 650);
  EXPECT_EQ(balance(b_), 60);
  EXPECT_EQ(balance(d_), 290);
  EXPECT_EQ(version(a_), 3);  // the deposit and two debits
  EXPECT_EQ(version(b_), 2);
  EXPECT_EQ(version(d_), 2);
  // The committed row states reported to the actors are those of the database.
  for (const auto& row : r.rows) {
    EXPECT_EQ(row.balance, balance(row.id)) << row.id;
    EXPECT_EQ(row.version, version(row.id)) << row.id;
  }
  EXPECT_EQ(r.rows.size(), 3u);
  expect_caches_match_entries();
}

// A batch's four writes are one prepared statement with its arrays as binary parameters, planned
// once per connection (generic plans): batches of any size write the same rows as the postings
// say, whatever a first batch's size made the plan. Each size has a refused posting in the middle, metadata and
// keys with quotes and backslashes, and every receipt, metadata object, entry and outbox element
// is read back exactly.
TEST_F(ledger_db, small_and_large_batches_write_the_same_rows) {
  for (const std::size_t size : {std::size_t{63}, std::size_t{64}, std::size_t{200}}) {
    SCOPED_TRACE(size);
    const std::int64_t payer = new_account();
    const std::int64_t payee = new_account();
    fund(payer, 100'000);
    const std::int64_t before = balance(payer);
    std::vector<posting_request> batch;
    for (std::size_t i = 0; i < size; ++i) {
      // The posting in the middle asks for more than the payer holds: it alone is refused.
      const std::int64_t amount = i == size / 2 ? 1'000'000 : static_cast<std::int64_t>(i + 1);
      auto r = transfer(payer, payee, amount, unique_key("it's \\ \"" + std::to_string(i) + "\""));
      r.metadata_json = R"({"note":"salary 'n' \\ \"q\" )" + std::to_string(i) + R"("})";
      batch.push_back(std::move(r));
    }
    const batch_result r = commit_batch(*app_, batch);
    ASSERT_EQ(r.outcomes.size(), size);
    std::int64_t paid = 0;
    std::string expected_elements;
    for (std::size_t i = 0; i < size; ++i) {
      const auto& o = r.outcomes[i];
      if (i == size / 2) {
        EXPECT_EQ(o.outcome, ledger::error_code::insufficient_funds);
        EXPECT_EQ(journal_rows_of(batch[i].transaction_id), 0);
        EXPECT_EQ(entries_of(batch[i].transaction_id), 0);
        continue;
      }
      ASSERT_EQ(o.outcome, ledger::error_code::ok) << i;
      paid += batch[i].posting.amount;
      EXPECT_EQ(o.debit_balance_after, before - paid) << i;
      const std::string id = sql_literal(batch[i].transaction_id);
      EXPECT_EQ(text_of(*owner_, "SELECT response_body FROM journal_transaction WHERE id = " + id), o.response_body);
      EXPECT_EQ(text_of(*owner_,
                        "SELECT idempotency_key || ' ' || (metadata->>'note') FROM journal_transaction"
                        " WHERE id = " +
                            id),
                batch[i].idempotency_key + " salary 'n' \\ \"q\" " + std::to_string(i));
      EXPECT_EQ(text_of(*owner_,
                        "SELECT string_agg(account_id || ':' || amount || ':' || balance_after, ',' ORDER BY id)"
                        " FROM ledger_entry WHERE transaction_id = " +
                            id),
                std::to_string(payer) + ":" + std::to_string(-batch[i].posting.amount) + ":" +
                    std::to_string(before - paid) + "," + std::to_string(payee) + ":" +
                    std::to_string(batch[i].posting.amount) + ":" + std::to_string(paid));
      if (!expected_elements.empty()) expected_elements += ',';
      expected_elements += batch[i].transaction_id + ":" + std::to_string(batch[i].posting.amount);
    }
    EXPECT_EQ(text_of(*owner_,
                      "SELECT string_agg(t->>'transactionId' || ':' || (t->>'amount'), ',')"
                      " FROM outbox_event, jsonb_array_elements(payload->'transactions') AS t"
                      " WHERE " +
                          sql_literal(std::as_const(batch[0].transaction_id)) + "::uuid = ANY(transaction_ids)"),
              expected_elements);
    // Payloads of this size are compressed in place, with the column's method (migration 017).
    EXPECT_EQ(
        text_of(*owner_, "SELECT pg_column_compression(payload) FROM outbox_event WHERE " +
                             sql_literal(std::as_const(batch[0].transaction_id)) + "::uuid = ANY(transaction_ids)"),
        "lz4");
    EXPECT_EQ(balance(payer), before - paid);
    EXPECT_EQ(balance(payee), paid);
    EXPECT_EQ(version(payee), static_cast<std::int64_t>(size) - 1);
  }
  expect_caches_match_entries();
}

TEST_F(ledger_db, a_key_reused_with_another_request_fails_alone) {
  // The owner commits a journal row under one posting's key with a different request hash: that
  // posting answers idempotency_key_reused with the stored transaction id and writes nothing,
  // while its neighbours in the same batch commit.
  fund(a_, 1000);
  const std::string reused_key = unique_key("reused");
  const std::string stored_tx = new_uuid();
  run(*owner_,
      "INSERT INTO journal_transaction (id, principal_id, idempotency_key, request_hash, type,"
      " response_status, response_body, first_entry_id, last_entry_id) VALUES (" +
          sql_literal(stored_tx) + ", " + std::to_string(principal_) + ", " + sql_literal(reused_key) +
          ", 'another-request', 'TRANSFER', 201, '{\"stored\":true}', 0, 0)");

  std::vector<posting_request> batch = {transfer(a_, b_, 100, unique_key("k")), transfer(a_, d_, 200, reused_key),
                                        transfer(a_, b_, 300, unique_key("k"))};
  const batch_result r = commit_batch(*app_, batch);
  ASSERT_EQ(r.outcomes.size(), 3u);
  EXPECT_EQ(r.outcomes[0].outcome, ledger::error_code::ok);
  EXPECT_EQ(r.outcomes[1].outcome, ledger::error_code::idempotency_key_reused);
  EXPECT_EQ(r.outcomes[2].outcome, ledger::error_code::ok);
  EXPECT_FALSE(r.outcomes[1].replayed);
  EXPECT_EQ(r.outcomes[1].transaction_id, stored_tx);
  EXPECT_TRUE(r.outcomes[1].entries.empty());
  // The neighbours planned as if the offender did not exist: 1000 - 100 - 300.
  EXPECT_EQ(r.outcomes[2].debit_balance_after, 600);
  EXPECT_EQ(balance(a_), 600);
  EXPECT_EQ(balance(b_), 400);
  EXPECT_EQ(balance(d_), 0);
  EXPECT_EQ(version(d_), 0);
  EXPECT_EQ(entries_of(batch[0].transaction_id), 2);
  EXPECT_EQ(entries_of(batch[2].transaction_id), 2);
  EXPECT_EQ(entries_of(batch[1].transaction_id), 0);
  EXPECT_EQ(journal_rows_of(batch[1].transaction_id), 0);
  EXPECT_EQ(outbox_rows_of(batch[1].transaction_id), 0);
  EXPECT_EQ(keys_committed(reused_key), 1);
  EXPECT_EQ(text_of(*owner_, "SELECT request_hash FROM journal_transaction WHERE id = " + sql_literal(stored_tx)),
            "another-request");
  expect_caches_match_entries();
}

TEST_F(ledger_db, a_posting_the_database_refuses_is_isolated_from_its_neighbours) {
  // A temporary constraint trigger refuses any entry of 4242 on account b, so the batch's one
  // statement fails; commit_batch retries posting by posting: the neighbours commit, the
  // offender answers internal with nothing written, and once the trigger is gone the same key
  // commits (a failed request leaves no trace).
  fund(a_, 10'000);
  const std::string offender_key = unique_key("offender");
  std::vector<posting_request> batch = {transfer(a_, b_, 100, unique_key("k")), transfer(a_, b_, 4242, offender_key),
                                        transfer(a_, d_, 300, unique_key("k")), transfer(b_, d_, 50, unique_key("k"))};
  batch_result r;
  {
    const std::string name = "wallet_test_refuse_" + std::to_string(::getpid());
    temporary_trigger trigger(name,
                              "BEGIN IF NEW.amount = 4242 AND NEW.account_id = " + std::to_string(b_) +
                                  " THEN RAISE EXCEPTION 'test refuses 4242'; END IF; RETURN NULL; END",
                              "AFTER INSERT ON ledger_entry FOR EACH ROW");
    r = commit_batch(*app_, batch);
  }
  ASSERT_EQ(r.outcomes.size(), 4u);
  EXPECT_EQ(r.outcomes[0].outcome, ledger::error_code::ok);
  EXPECT_EQ(r.outcomes[1].outcome, ledger::error_code::internal);
  EXPECT_EQ(r.outcomes[2].outcome, ledger::error_code::ok);
  EXPECT_EQ(r.outcomes[3].outcome, ledger::error_code::ok);
  EXPECT_GT(r.attempts, 1);  // the whole batch, then one transaction per posting
  EXPECT_EQ(balance(a_), 10'000 - 100 - 300);
  EXPECT_EQ(balance(b_), 100 - 50);
  EXPECT_EQ(balance(d_), 300 + 50);
  for (std::size_t i : {0u, 2u, 3u}) {
    EXPECT_EQ(entries_of(batch[i].transaction_id), 2) << i;
    EXPECT_EQ(journal_rows_of(batch[i].transaction_id), 1) << i;
    EXPECT_EQ(outbox_rows_of(batch[i].transaction_id), 1) << i;
  }
  EXPECT_EQ(entries_of(batch[1].transaction_id), 0);
  EXPECT_EQ(journal_rows_of(batch[1].transaction_id), 0);
  EXPECT_EQ(outbox_rows_of(batch[1].transaction_id), 0);
  EXPECT_EQ(keys_committed(offender_key), 0);
  // The rows the actors are told about are the committed ones.
  for (const auto& row : r.rows) {
    EXPECT_EQ(row.balance, balance(row.id)) << row.id;
    EXPECT_EQ(row.version, version(row.id)) << row.id;
  }
  expect_caches_match_entries();

  const batch_result retry = commit_batch(*app_, {batch[1]});
  ASSERT_EQ(retry.outcomes.at(0).outcome, ledger::error_code::ok);
  EXPECT_FALSE(retry.outcomes[0].replayed);
  EXPECT_EQ(balance(b_), 50 + 4242);
  EXPECT_EQ(keys_committed(offender_key), 1);
  expect_caches_match_entries();
}

TEST_F(ledger_db, a_lone_posting_the_database_refuses_fails_without_a_trace) {
  // A batch of one refused posting fails with internal, and nothing of it is written.
  fund(a_, 10'000);
  const posting_request lone = transfer(a_, b_, 4242, unique_key("lone"));
  batch_result r;
  {
    temporary_trigger trigger("wallet_test_refuse_lone_" + std::to_string(::getpid()),
                              "BEGIN IF NEW.amount = 4242 AND NEW.account_id = " + std::to_string(b_) +
                                  " THEN RAISE EXCEPTION 'test refuses 4242'; END IF; RETURN NULL; END",
                              "AFTER INSERT ON ledger_entry FOR EACH ROW");
    r = commit_batch(*app_, {lone});
  }
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].outcome, ledger::error_code::internal);
  EXPECT_EQ(entries_of(lone.transaction_id), 0);
  EXPECT_EQ(journal_rows_of(lone.transaction_id), 0);
  EXPECT_EQ(balance(a_), 10'000);
  EXPECT_EQ(balance(b_), 0);
  expect_caches_match_entries();
}

TEST_F(ledger_db, a_committed_key_replays_its_stored_answer) {
  // Replaying a committed key with the same request returns replayed=true, the stored status and
  // body and the original transaction id, and moves no money; a neighbour still commits.
  fund(a_, 1000);
  const std::string key = unique_key("replay");
  const posting_request original = transfer(a_, b_, 100, key);
  const batch_result first = commit_batch(*app_, {original});
  ASSERT_EQ(first.outcomes.at(0).outcome, ledger::error_code::ok);
  const std::string stored_body = first.outcomes[0].response_body;
  ASSERT_EQ(stored_body, ledger::receipt_json(ledger::transaction_type::transfer, original.transaction_id, 900,
                                              ledger::payment_receipt_fields(0, 100)));

  posting_request again = transfer(a_, b_, 100, key);  // a new transaction id, the same request hash
  ASSERT_EQ(again.request_hash, original.request_hash);
  ASSERT_NE(again.transaction_id, original.transaction_id);
  const posting_request neighbour = transfer(a_, d_, 10, unique_key("k"));
  const batch_result second = commit_batch(*app_, {again, neighbour});
  ASSERT_EQ(second.outcomes.size(), 2u);
  const auto& replay = second.outcomes[0];
  EXPECT_EQ(replay.outcome, ledger::error_code::ok);
  EXPECT_TRUE(replay.replayed);
  EXPECT_EQ(replay.transaction_id, original.transaction_id);
  EXPECT_EQ(replay.response_status, 201);
  EXPECT_EQ(replay.response_body, stored_body);
  EXPECT_TRUE(replay.entries.empty());
  EXPECT_EQ(second.outcomes[1].outcome, ledger::error_code::ok);
  EXPECT_EQ(second.outcomes[1].debit_balance_after, 890);
  EXPECT_EQ(entries_of(again.transaction_id), 0);
  EXPECT_EQ(journal_rows_of(again.transaction_id), 0);
  EXPECT_EQ(balance(a_), 890);
  EXPECT_EQ(balance(b_), 100);
  EXPECT_EQ(keys_committed(key), 1);
  expect_caches_match_entries();
}

TEST_F(ledger_db, a_key_twice_in_one_batch_commits_once) {
  // Two postings of one batch carrying the same key and request: one transaction commits, the
  // other answers with its stored receipt, and the money moves once.
  fund(a_, 1000);
  const std::string key = unique_key("twice");
  const posting_request first = transfer(a_, b_, 100, key);
  const posting_request second = transfer(a_, b_, 100, key);
  const batch_result r = commit_batch(*app_, {first, second});
  ASSERT_EQ(r.outcomes.size(), 2u);
  EXPECT_EQ(r.outcomes[0].outcome, ledger::error_code::ok);
  EXPECT_EQ(r.outcomes[1].outcome, ledger::error_code::ok);
  EXPECT_FALSE(r.outcomes[0].replayed);
  EXPECT_TRUE(r.outcomes[1].replayed);
  EXPECT_EQ(r.outcomes[1].transaction_id, first.transaction_id);
  EXPECT_EQ(r.outcomes[1].response_body, r.outcomes[0].response_body);
  EXPECT_EQ(balance(a_), 900);
  EXPECT_EQ(balance(b_), 100);
  EXPECT_EQ(keys_committed(key), 1);
  expect_caches_match_entries();
}

TEST_F(ledger_db, a_refused_posting_leaves_no_trace_and_its_key_stays_free) {
  // Business refusals (insufficient funds, unknown account) write no journal row, so the same key
  // commits later once the funds are there; the neighbours commit meanwhile.
  fund(a_, 100);
  const std::string key = unique_key("later");
  const batch_result r =
      commit_batch(*app_, {transfer(a_, b_, 150, key), transfer(a_, 999'999'999'999, 1, unique_key("k")),
                           transfer(a_, d_, 60, unique_key("k"))});
  ASSERT_EQ(r.outcomes.size(), 3u);
  EXPECT_EQ(r.outcomes[0].outcome, ledger::error_code::insufficient_funds);
  EXPECT_EQ(r.outcomes[1].outcome, ledger::error_code::not_found);
  EXPECT_EQ(r.outcomes[2].outcome, ledger::error_code::ok);
  // Refusals are decided under the rows' locks: the unlocked attempt gave way to a locked one.
  EXPECT_EQ(r.relocked, 1);
  EXPECT_EQ(r.attempts, 2);
  EXPECT_EQ(keys_committed(key), 0);
  EXPECT_EQ(balance(a_), 40);
  fund(a_, 110);
  const batch_result later = commit_batch(*app_, {transfer(a_, b_, 150, key)});
  EXPECT_EQ(later.outcomes.at(0).outcome, ledger::error_code::ok);
  EXPECT_EQ(balance(a_), 0);
  EXPECT_EQ(balance(b_), 150);
  EXPECT_EQ(keys_committed(key), 1);
  expect_caches_match_entries();
}

// Ends `conn`'s session from within, as a terminated backend or a proxy's reset would, and waits for
// libpqxx's silent reconnect on a later statement; returns the new session's answer to SHOW
// `setting`.
std::string reconnected_and_shown(pqxx::connection& conn, const std::string& setting) {
  const auto first = conn.backendpid();
  try {
    pqxx::nontransaction txn(conn);
    txn.exec("SELECT pg_terminate_backend(pg_backend_pid())");
  } catch (const pqxx::broken_connection&) {}
  std::string shown;
  for (int attempt = 0; attempt < 3 && shown.empty(); ++attempt) {
    try {
      pqxx::nontransaction txn(conn);
      shown = txn.exec1("SHOW " + setting)[0].as<std::string>();
    } catch (const pqxx::broken_connection&) {}
  }
  EXPECT_NE(conn.backendpid(), first);
  return shown;
}

std::string shown(pqxx::connection& conn, const std::string& setting) {
  pqxx::nontransaction txn(conn);
  return txn.exec1("SHOW " + setting)[0].as<std::string>();
}

// libpqxx 6 reconnects a connection whose session ended on its next statement, silently: the new
// session has the same timeouts, since they travel in the connection string rather than as SETs.
// Without them a writer that met a dropped connection would wait for a lock without end.
TEST(connections, a_session_that_ended_is_replaced_with_the_same_timeouts) {
  connection_options o = options_for(test_support::database_url(), k_application_name);
  o.lock_timeout_ms = 1'234;
  o.statement_timeout_ms = 4'321;
  auto conn = connect(o);
  EXPECT_EQ(shown(*conn, "lock_timeout"), "1234ms");
  EXPECT_EQ(reconnected_and_shown(*conn, "lock_timeout"), "1234ms");
  EXPECT_EQ(shown(*conn, "statement_timeout"), "4321ms");
  EXPECT_EQ(shown(*conn, "idle_in_transaction_session_timeout"), "8642ms");
}

// The same for the posting path's plan settings: a writer reconnected without them would plan its
// batches anew each time and could read whole tables (prepare_posting_statements).
TEST(connections, a_posting_connection_keeps_its_plan_settings_across_a_reconnect) {
  auto conn = connect(options_for(test_support::database_url(), k_application_name));
  prepare_posting_statements(*conn);
  EXPECT_EQ(shown(*conn, "enable_seqscan"), "off");
  EXPECT_EQ(reconnected_and_shown(*conn, "enable_seqscan"), "off");
  EXPECT_EQ(shown(*conn, "plan_cache_mode"), "force_generic_plan");
}

std::unique_ptr<pqxx::connection> app_connection_named(const std::string& application_name) {
  connection_options o = options_for(test_support::database_url(), k_application_name);
  o.application_name = application_name;
  auto conn = connect(o);
  prepare_posting_statements(*conn);
  return conn;
}

// Commits `batch` on a connection of its own while a transaction of `owner`'s holds the rows
// `change` writes: the batch starts, runs until it waits for one of those rows, and only then does
// `change` commit. The batch's answer once it is done.
batch_result commit_batch_meeting(pqxx::connection& owner, const std::vector<posting_request>& batch,
                                  const std::string& change) {
  auto waiting = app_connection_named(unique_key("batch-meets-change"));
  pqxx::work other(owner);
  other.exec(change);
  batch_result r;
  std::thread committing([&] { r = commit_batch(*waiting, batch); });
  const bool waited =
      test_support::eventually([&] { return test_support::backends_blocked_by(owner.backendpid()) > 0; });
  other.commit();
  committing.join();
  EXPECT_TRUE(waited) << "the batch never waited for the change: " << change;
  return r;
}

// A posting request with flow rows of its own, none of them set: planned and written as a plain
// transfer, but never read unlocked (only plain postings are), so the batch takes its locks first.
posting_request with_locked_rows(posting_request r) {
  r.rows = std::make_shared<const flow_rows>();
  return r;
}

class key_race : public ledger_db, public ::testing::WithParamInterface<bool> {};

TEST_P(key_race, a_key_committed_while_the_batch_waits_for_its_rows_is_replayed_not_refused) {
  // Another server commits key K (spending all of a's funds) while holding a's row lock; a batch
  // carrying the same K and request waits for that lock. Once it has the lock it must find K
  // committed and replay its stored answer; looking keys up before locking would plan the
  // transfer against the spent balance and refuse a committed transfer with insufficient_funds.
  // A plain batch reads its rows unlocked first and waits at its lock of a's row instead; it
  // must then find the row moved and redo the batch under the locks, with the same answer.
  const bool plain = GetParam();
  fund(a_, 500);
  const std::string key = unique_key("raced");
  const posting_request mine = plain ? transfer(a_, b_, 500, key) : with_locked_rows(transfer(a_, b_, 500, key));
  const std::string theirs = new_uuid();
  const std::string stored_body = ledger::receipt_json(ledger::transaction_type::transfer, theirs, 0);

  pqxx::work other(*owner_);
  other.exec("SELECT id FROM account WHERE id = " + std::to_string(a_) + " FOR UPDATE");

  const std::string name = unique_key("batch-waits");
  auto waiting = app_connection_named(name);
  batch_result r;
  std::thread batch([&] { r = commit_batch(*waiting, {mine}); });
  ASSERT_TRUE(test_support::eventually([&] { return test_support::backends_blocked_by(owner_->backendpid()) > 0; }));
  other.exec("INSERT INTO ledger_entry (transaction_id, account_id, currency, amount, balance_after) VALUES (" +
             sql_literal(theirs) + ", " + std::to_string(a_) + ", 'XTS', -500, 0), (" + sql_literal(theirs) + ", " +
             std::to_string(b_) + ", 'XTS', 500, 500)");
  other.exec(
      "INSERT INTO journal_transaction (id, principal_id, idempotency_key, request_hash, type,"
      " response_status, response_body, first_entry_id, last_entry_id) SELECT " +
      sql_literal(theirs) + ", " + std::to_string(principal_) + ", " + sql_literal(key) + ", " +
      sql_literal(mine.request_hash) + ", 'TRANSFER', 201, " + sql_literal(stored_body) +
      ", min(id), max(id) FROM ledger_entry WHERE transaction_id = " + sql_literal(theirs));
  other.exec("UPDATE account SET balance = balance - 500, version = version + 1 WHERE id = " + std::to_string(a_));
  other.exec("UPDATE account SET balance = balance + 500, version = version + 1 WHERE id = " + std::to_string(b_));
  other.commit();
  batch.join();

  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].outcome, ledger::error_code::ok);
  EXPECT_TRUE(r.outcomes[0].replayed);
  EXPECT_EQ(r.outcomes[0].transaction_id, theirs);
  EXPECT_EQ(r.outcomes[0].response_body, stored_body);
  EXPECT_EQ(r.relocked, plain ? 1 : 0);
  EXPECT_EQ(keys_committed(key), 1);
  EXPECT_EQ(balance(a_), 0);
  EXPECT_EQ(balance(b_), 500);
  expect_caches_match_entries();
}

INSTANTIATE_TEST_SUITE_P(unlocked_and_locked, key_race, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "plain_batch" : "batch_with_flow_rows"; });

class stamp_order : public ledger_db, public ::testing::WithParamInterface<bool> {};

TEST_P(stamp_order, an_entry_is_stamped_after_its_rows_are_held_so_a_balance_as_of_any_time_existed) {
  // A batch moves 10 from a to d and waits for a's row, which another transaction holds without
  // changing it. Meanwhile a second batch moves 50 from b to d and commits. Then the first gets its
  // rows and commits: its entry on d has the larger id and a balance_after that includes the 50,
  // so its created_at must not be earlier than the second's. (Stamped with the start of its
  // database transaction, it was: a balance as of a moment between the two stamps then read the
  // first entry's balance_after, 60, while only the 10 was stamped by then; no such balance ever
  // existed.) A plain batch waits at its write instead, finds d moved, and redoes the batch.
  const bool plain = GetParam();
  fund(a_, 100);
  fund(b_, 100);
  const posting_request mine =
      plain ? transfer(a_, d_, 10, unique_key("first")) : with_locked_rows(transfer(a_, d_, 10, unique_key("first")));
  const posting_request theirs = transfer(b_, d_, 50, unique_key("second"));

  pqxx::work other(*owner_);
  other.exec("SELECT id FROM account WHERE id = " + std::to_string(a_) + " FOR UPDATE");
  auto waiting = app_connection_named(unique_key("batch-waits"));
  batch_result first;
  std::thread batch([&] { first = commit_batch(*waiting, {mine}); });
  const bool waited =
      test_support::eventually([&] { return test_support::backends_blocked_by(owner_->backendpid()) > 0; });
  const auto second = commit_batch(*app_, {theirs});
  other.commit();
  batch.join();
  ASSERT_TRUE(waited);
  ASSERT_EQ(second.outcomes.at(0).outcome, ledger::error_code::ok);
  ASSERT_EQ(first.outcomes.at(0).outcome, ledger::error_code::ok);
  EXPECT_EQ(balance(d_), 60);

  // On d's row, entries in id order are in created_at order, and each entry's balance_after is
  // what the entries stamped at or before it add up to: the balance as of its time.
  const auto d = std::to_string(d_);
  EXPECT_EQ(int_of(*owner_,
                   "SELECT count(*) FROM (SELECT created_at < lag(created_at) OVER (ORDER BY id) AS back"
                   " FROM ledger_entry WHERE account_id = " +
                       d + ") s WHERE back"),
            0);
  EXPECT_EQ(int_of(*owner_, "SELECT count(*) FROM ledger_entry e WHERE e.account_id = " + d +
                                " AND e.balance_after <> (SELECT sum(f.amount) FROM ledger_entry f"
                                " WHERE f.account_id = e.account_id AND f.created_at <= e.created_at)"),
            0);
  expect_caches_match_entries();
}

INSTANTIATE_TEST_SUITE_P(unlocked_and_locked, stamp_order, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "plain_batch" : "batch_with_flow_rows"; });

TEST_F(ledger_db, a_hot_payer_whose_holds_the_database_refuses_to_expire_holds_back_no_other) {
  // A hot payer's held exceeds its main row and shards (an invariant broken behind the writers'
  // backs, written here with its trigger off): it holds 5 in two holds, 3 of them due, and has no
  // money. Lowering held to 2 by the due hold is still refused, by a trigger that checks at COMMIT. Expiring it together with another payer releases the other's
  // hold and names the hot payer as failed. (Refused at COMMIT, past the per-payer savepoints, the
  // whole call failed and the other payer's hold stayed held, at every tick.)
  const auto hot = new_hot_account();
  fund(b_, 10);
  const auto h = std::to_string(hot.id), b = std::to_string(b_), d = std::to_string(d_);
  const auto insert_hold = [&](const std::string& payer, int amount, const std::string& expires) {
    run(*owner_,
        "INSERT INTO hold (id, payer_id, payee_id, principal_id, idempotency_key, request_hash, response_body,"
        " currency, amount, expires_at) VALUES (gen_random_uuid(), " +
            payer + ", " + d + ", " + std::to_string(principal_) + ", " + sql_literal(unique_key("refused")) +
            ", 'h', '{}', 'XTS', " + std::to_string(amount) + ", " + expires + ")");
  };
  insert_hold(h, 3, "now() - interval '1 minute'");
  insert_hold(h, 2, "now() + interval '1 hour'");
  insert_hold(b, 1, "now() - interval '1 minute'");
  {
    pqxx::work txn(*owner_);
    txn.exec0("ALTER TABLE account DISABLE TRIGGER account_hot_held_main");
    txn.exec0("UPDATE account SET shard_count = 2, held = 5, held_version = held_version + 1 WHERE id = " + h);
    txn.exec0("ALTER TABLE account ENABLE TRIGGER account_hot_held_main");
    txn.commit();
  }
  run(*owner_, "UPDATE account SET held = held + 1, held_version = held_version + 1 WHERE id = " + b);
  std::vector<std::int64_t> others;
  for (const auto& row : run(*owner_,
                             "SELECT DISTINCT payer_id FROM hold WHERE status = 'ACTIVE' AND expires_at"
                             " <= now() AND payer_id NOT IN (" +
                                 h + ", " + b + ")")) {
    others.push_back(row[0].as<std::int64_t>());
  }

  const auto r = expire_due_holds(*app_, 10, others);
  EXPECT_EQ(r.failed, std::vector<std::int64_t>{hot.id});
  EXPECT_EQ(r.expired, 1);
  EXPECT_EQ(text_of(*owner_, "SELECT status FROM hold WHERE payer_id = " + b), "EXPIRED");
  EXPECT_EQ(int_of(*owner_, "SELECT held FROM account WHERE id = " + b), 0);
  EXPECT_EQ(int_of(*owner_, "SELECT count(*) FROM hold WHERE status = 'ACTIVE' AND payer_id = " + h), 2);
  EXPECT_EQ(int_of(*owner_, "SELECT held FROM account WHERE id = " + h), 5);
  // Leave no hold behind for other suites' expirers and reconciliations: the hot payer's are voided
  // by hand.
  pqxx::work txn(*owner_);
  txn.exec0("ALTER TABLE account DISABLE TRIGGER account_hot_held_main");
  txn.exec0("UPDATE hold SET status = 'VOIDED', settled_at = now() WHERE status = 'ACTIVE' AND payer_id = " + h);
  txn.exec0("UPDATE account SET held = 0, held_version = held_version + 1 WHERE id = " + h);
  txn.exec0("ALTER TABLE account ENABLE TRIGGER account_hot_held_main");
  txn.commit();
}

TEST_F(ledger_db, one_payers_backlog_of_due_holds_takes_only_its_share_of_an_expiry_statement) {
  // Payer a has more due holds than one expiry statement releases (5,000), all due before payer
  // b's one. Expiring both payers at once releases b's hold too: a's backlog takes its share of
  // the statement, not all of it. (Taking the longest due across both payers, a's backlog alone
  // filled the statement, tick after tick, while b's money stayed held past its expiry.)
  constexpr int k_backlog = 5'001;
  fund(a_, k_backlog);
  fund(b_, 10);
  const auto a = std::to_string(a_), b = std::to_string(b_), d = std::to_string(d_);
  const auto insert_holds = [&](const std::string& payer, int n, const std::string& due) {
    run(*owner_,
        "INSERT INTO hold (id, payer_id, payee_id, principal_id, idempotency_key, request_hash, response_body,"
        " currency, amount, expires_at) SELECT gen_random_uuid(), " +
            payer + ", " + d + ", " + std::to_string(principal_) + ", " + sql_literal(unique_key("expiry")) +
            " || '-' || n, 'h', '{}', 'XTS', 1, now() - interval '" + due + "' - n * interval '1 ms'" +
            " FROM generate_series(1, " + std::to_string(n) + ") AS n");
    run(*owner_, "UPDATE account SET held = held + " + std::to_string(n) + ", held_version = held_version + 1" +
                     " WHERE id = " + payer);
  };
  insert_holds(a, k_backlog, "1 hour");
  insert_holds(b, 1, "1 minute");
  // Other suites' payers with due holds, if any, are left out of this call.
  std::vector<std::int64_t> others;
  for (const auto& row : run(*owner_,
                             "SELECT DISTINCT payer_id FROM hold WHERE status = 'ACTIVE' AND expires_at"
                             " <= now() AND payer_id NOT IN (" +
                                 a + ", " + b + ")")) {
    others.push_back(row[0].as<std::int64_t>());
  }

  const auto first = expire_due_holds(*app_, 10, others);
  EXPECT_TRUE(first.failed.empty());
  EXPECT_EQ(text_of(*owner_, "SELECT status FROM hold WHERE payer_id = " + b), "EXPIRED");
  EXPECT_EQ(int_of(*owner_, "SELECT held FROM account WHERE id = " + b), 0);
  const auto a_left = int_of(*owner_, "SELECT count(*) FROM hold WHERE status = 'ACTIVE' AND payer_id = " + a);
  EXPECT_GT(a_left, 0);
  EXPECT_EQ(first.expired, 1 + (k_backlog - a_left));
  // The rest of a's backlog goes in later calls, the longest due first; held follows.
  for (int i = 0;
       i < 10 && int_of(*owner_, "SELECT count(*) FROM hold WHERE status = 'ACTIVE' AND payer_id = " + a) > 0; ++i) {
    expire_due_holds(*app_, 10, others);
  }
  EXPECT_EQ(int_of(*owner_, "SELECT count(*) FROM hold WHERE status = 'ACTIVE' AND payer_id = " + a), 0);
  EXPECT_EQ(int_of(*owner_, "SELECT held FROM account WHERE id = " + a), 0);
}

TEST_F(ledger_db, a_hot_accounts_page_never_ends_past_an_entry_still_in_flight) {
  // Two writers credit two shards of a hot account. The first has drawn its entry's id and holds
  // its shard's row, not yet committed; the second commits an entry with a larger id. A page read
  // now must not end at the second entry (its cursor would skip the first for good): it waits for
  // the first writer and returns both, in id order.
  const auto [hot, shard_a, shard_b] = new_hot_account();
  fund(d_, 1'000);

  const std::string first = new_uuid();
  const posting_request deposit =
      request(ledger::transaction_type::deposit, clearing_, shard_b, 50, unique_key("second"));
  pqxx::work writer(*owner_);
  writer.exec("UPDATE account SET balance = balance + 100, version = version + 1 WHERE id = " +
              std::to_string(shard_a));
  writer.exec("UPDATE account SET balance = balance - 100, version = version + 1 WHERE id = " + std::to_string(d_));
  insert_transfer(writer, first, d_, 900, shard_a, 100, 100);
  const auto second = commit_batch(*app_, {deposit});
  ASSERT_EQ(second.outcomes.at(0).outcome, ledger::error_code::ok);

  auto reader = connect(options_for(test_support::database_url(), k_application_name));
  prepare_history_statements(*reader);
  std::atomic<bool> read{false};
  entries_page page;
  std::thread reading([&] {
    page = list_entries(*reader, hot, 0, 10);
    read = true;
  });
  const bool waited = test_support::eventually(
      [&] { return read.load() || test_support::backends_blocked_by(owner_->backendpid()) > 0; });
  writer.commit();
  reading.join();
  EXPECT_TRUE(waited);
  ASSERT_EQ(page.entries.size(), 2u);
  EXPECT_EQ(page.entries[0].account_id, shard_a);
  EXPECT_EQ(page.entries[0].transaction_id, first);
  EXPECT_EQ(page.entries[1].account_id, shard_b);
  EXPECT_LT(page.entries[0].id, page.entries[1].id);
}

TEST_F(ledger_db, two_requests_that_make_one_account_hot_both_succeed) {
  // The first request holds the account's row and has added its shards when a second asks for
  // the same count: the second waits for the row, then finds the shards and adds none. (Counting
  // the shards its locking statement saw, none, it inserted the same shard numbers again: a unique
  // violation, answered 500.)
  const std::int64_t hot = new_account();
  const std::string id = std::to_string(hot);
  pqxx::work first(*owner_);
  first.exec("SELECT id FROM account WHERE id = " + id + " FOR NO KEY UPDATE");
  first.exec("INSERT INTO account (owner_id, currency, kind, parent_id, shard_no) SELECT " +
             std::to_string(principal_) + ", 'XTS', 'shard', " + id + ", n FROM generate_series(0, 3) AS n");
  first.exec("UPDATE account SET shard_count = 4 WHERE id = " + id);
  auto conn = app_connection_named(unique_key("make-hot"));
  std::optional<account_record> made;
  std::string failure;
  std::thread second([&] {
    try {
      made = make_hot(*conn, hot, 4, nullptr).account;
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  const bool waited =
      test_support::eventually([&] { return test_support::backends_blocked_by(owner_->backendpid()) > 0; });
  first.commit();
  second.join();
  EXPECT_TRUE(waited) << "the second request never waited for the first";
  EXPECT_EQ(failure, "");
  ASSERT_TRUE(made.has_value());
  EXPECT_EQ(made->shards.size(), 4u);
  EXPECT_EQ(int_of(*owner_, "SELECT count(*) FROM account WHERE parent_id = " + id), 4);
}

TEST_F(ledger_db, sweep_candidates_resume_after_an_account) {
  // The sweeper reads a bounded number of hot accounts a tick and resumes after the last one it
  // read, so that accounts past the first bound are swept too.
  std::vector<std::int64_t> hot;
  for (int i = 0; i < 3; ++i) {
    hot.push_back(new_account());
    run(*owner_, "INSERT INTO account (owner_id, currency, kind, parent_id, shard_no) VALUES (" +
                     std::to_string(principal_) + ", 'XTS', 'shard', " + std::to_string(hot.back()) + ", 0)");
    fund(int_of(*owner_, "SELECT id FROM account WHERE parent_id = " + std::to_string(hot.back())), 10);
  }
  auto mine = [&](ledger::account_id after) {
    std::vector<std::int64_t> out;
    for (const auto& c : sweep_candidates(*app_, 1'000, after)) {
      if (std::find(hot.begin(), hot.end(), c.account) != hot.end()) out.push_back(c.account);
    }
    return out;
  };
  EXPECT_EQ(mine(hot[0] - 1), hot);
  EXPECT_EQ(mine(hot[0]), (std::vector<std::int64_t>{hot[1], hot[2]}));
  EXPECT_EQ(mine(hot[2]), std::vector<std::int64_t>{});
}

TEST_F(ledger_db, a_plain_batch_reads_its_rows_without_locking_them) {
  // Another transaction holds FOR KEY SHARE on every row of the batch (as a foreign key check
  // would); the batch commits while it is still open, at its first attempt, none of it redone
  // under the rows' locks.
  fund(a_, 1'000);
  fund(d_, 1'000);
  const std::vector<posting_request> batch = {transfer(a_, b_, 100, unique_key("k")),
                                              transfer(d_, b_, 200, unique_key("k"))};
  connection_options o = options_for(test_support::database_url(), k_application_name);
  o.lock_timeout_ms = 30'000;  // a regression fails here instead of hanging
  auto conn = connect(o);
  prepare_posting_statements(*conn);
  pqxx::work other(*owner_);
  other.exec("SELECT id FROM account WHERE id IN (" + std::to_string(a_) + ", " + std::to_string(b_) + ", " +
             std::to_string(d_) + ") FOR KEY SHARE");
  const batch_result r = commit_batch(*conn, batch);
  other.abort();
  ASSERT_EQ(r.outcomes.size(), 2u);
  EXPECT_EQ(r.outcomes[0].outcome, ledger::error_code::ok);
  EXPECT_EQ(r.outcomes[1].outcome, ledger::error_code::ok);
  EXPECT_EQ(r.relocked, 0);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(balance(a_), 900);
  EXPECT_EQ(balance(b_), 300);
  EXPECT_EQ(balance(d_), 800);
  expect_caches_match_entries();
}

TEST_F(ledger_db, a_batch_that_locks_its_rows_does_not_wait_for_a_foreign_key_check) {
  // A writer placing a hold for payee b holds FOR KEY SHARE on b's row (the hold's foreign key)
  // until it commits, and may itself wait for a row this batch holds. The batch locks b to pay
  // from it: a lock that waited for the key share (FOR UPDATE) would close that circle, a
  // deadlock; FOR NO KEY UPDATE does not wait, so the batch commits while the other is open.
  fund(b_, 1'000);
  const std::vector<posting_request> batch = {with_locked_rows(transfer(b_, a_, 100, unique_key("k")))};
  connection_options o = options_for(test_support::database_url(), k_application_name);
  o.lock_timeout_ms = 30'000;  // a regression fails here instead of hanging
  auto conn = connect(o);
  prepare_posting_statements(*conn);
  pqxx::work other(*owner_);
  other.exec("SELECT id FROM account WHERE id IN (" + std::to_string(a_) + ", " + std::to_string(b_) +
             ") FOR KEY SHARE");
  batch_result r;
  EXPECT_NO_THROW(r = commit_batch(*conn, batch));
  other.abort();
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].outcome, ledger::error_code::ok);
  EXPECT_EQ(balance(b_), 900);
  EXPECT_EQ(balance(a_), 100);
  expect_caches_match_entries();
}

TEST_F(ledger_db, a_plain_batch_locks_its_rows_in_id_order) {
  // A hot payer's debit draws on its main row and reads its shard without changing it; the batch
  // holds the shard at the version it read. The payee's id is above the shard's. Another
  // transaction locks rows in ascending id order (as a locked attempt of another writer, an
  // operator's freeze or a reader of a hot account's history does): it holds the shard and then
  // asks for the payee while the batch waits for the shard. A batch that had taken the rows it
  // changes first and the rows it only read after would hold the payee by then, and the two would
  // wait for each other: a deadlock, which PostgreSQL breaks after a second by rolling one back.
  // Taken in ascending id order, the batch holds only the payer's main row while it waits.
  const std::int64_t hot = new_account();
  run(*owner_, "INSERT INTO account (owner_id, currency, kind, parent_id, shard_no) VALUES (" +
                   std::to_string(principal_) + ", 'XTS', 'shard', " + std::to_string(hot) + ", 0)");
  const std::int64_t shard = int_of(*owner_, "SELECT id FROM account WHERE parent_id = " + std::to_string(hot));
  const std::int64_t payee = new_account();
  ASSERT_LT(shard, payee);
  fund(hot, 1'000);
  posting_request debit = transfer(hot, payee, 100, unique_key("k"));
  debit.posting.debit_shards = {shard};
  connection_options o = options_for(test_support::database_url(), k_application_name);
  o.lock_timeout_ms = 30'000;  // a regression fails here instead of hanging
  auto conn = connect(o);
  prepare_posting_statements(*conn);

  pqxx::work other(*owner_);
  other.exec("SELECT id FROM account WHERE id = " + std::to_string(shard) + " FOR NO KEY UPDATE");
  batch_result r;
  std::string failure;
  std::thread writer([&] {
    try {
      r = commit_batch(*conn, {debit});
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  const bool waited =
      test_support::eventually([&] { return test_support::backends_blocked_by(owner_->backendpid()) > 0; });
  std::string other_failure;
  try {
    other.exec("SELECT id FROM account WHERE id = " + std::to_string(payee) + " FOR NO KEY UPDATE");
    other.commit();
  } catch (const std::exception& e) {
    other_failure = e.what();
  }
  writer.join();

  EXPECT_TRUE(waited) << "the batch never waited for the other transaction";
  EXPECT_EQ(other_failure, "");
  EXPECT_EQ(failure, "");
  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].outcome, ledger::error_code::ok);
  EXPECT_EQ(r.attempts, 1) << "the batch was rolled back (a deadlock) and redone";
  EXPECT_EQ(r.relocked, 0);
  EXPECT_EQ(balance(hot), 900);
  EXPECT_EQ(balance(payee), 100);
  expect_caches_match_entries();
}

TEST_F(ledger_db, a_freeze_committed_while_a_plain_batch_writes_is_never_overtaken) {
  // The batch reads a's row (active) unlocked and plans the debit; an operator's freeze of a,
  // begun before, holds a's row until the batch's update waits for it, then commits. The batch
  // must not debit the frozen account: its update finds a newer row than it read, and the batch
  // redone under the locks refuses the transfer.
  fund(a_, 1'000);
  const posting_request debit = transfer(a_, b_, 300, unique_key("k"));
  const posting_request neighbour = request(ledger::transaction_type::deposit, clearing_, d_, 50, unique_key("k"));
  const batch_result r = commit_batch_meeting(*owner_, {debit, neighbour},
                                              "UPDATE account SET status = 'frozen' WHERE id = " + std::to_string(a_));

  ASSERT_EQ(r.outcomes.size(), 2u);
  EXPECT_EQ(r.outcomes[0].outcome, ledger::error_code::account_inactive);
  EXPECT_EQ(r.outcomes[1].outcome, ledger::error_code::ok);
  EXPECT_EQ(r.relocked, 1);
  EXPECT_EQ(entries_of(debit.transaction_id), 0);
  EXPECT_EQ(entries_of(neighbour.transaction_id), 2);
  EXPECT_EQ(balance(a_), 1'000);
  EXPECT_EQ(balance(b_), 0);
  EXPECT_EQ(balance(d_), 50);
  run(*owner_, "UPDATE account SET status = 'active' WHERE id = " + std::to_string(a_));
  expect_caches_match_entries();
}

TEST_F(ledger_db, a_row_read_and_left_unchanged_is_held_at_the_version_read) {
  // A hot payer's debit reads its shard (the shard counts towards its funds) but draws on the main
  // row only. Another transaction moves that shard while the batch is being written: the batch
  // locks the shard at the version it read, finds a newer one, and is redone under the locks.
  const std::int64_t hot = new_account();
  run(*owner_, "INSERT INTO account (owner_id, currency, kind, parent_id, shard_no) VALUES (" +
                   std::to_string(principal_) + ", 'XTS', 'shard', " + std::to_string(hot) + ", 0)");
  const std::int64_t shard = int_of(*owner_, "SELECT id FROM account WHERE parent_id = " + std::to_string(hot));
  fund(hot, 1'000);
  fund(shard, 40);
  posting_request debit = transfer(hot, b_, 700, unique_key("k"));
  debit.posting.debit_shards = {shard};
  // A new version of the shard's row with the same content: its xmin is all that moves.
  const batch_result r =
      commit_batch_meeting(*owner_, {debit}, "UPDATE account SET status = status WHERE id = " + std::to_string(shard));

  ASSERT_EQ(r.outcomes.size(), 1u);
  EXPECT_EQ(r.outcomes[0].outcome, ledger::error_code::ok);
  EXPECT_EQ(r.relocked, 1);
  EXPECT_EQ(r.outcomes[0].debit_balance_after, 1'040 - 700);
  EXPECT_EQ(balance(hot), 300);
  EXPECT_EQ(balance(shard), 40);
  EXPECT_EQ(balance(b_), 700);
  expect_caches_match_entries();
}

TEST_F(ledger_db, the_isolation_fallback_answers_each_posting_by_what_became_of_it) {
  // A batch fails as a whole (a trigger refuses one posting's journal row), so its postings are
  // committed one by one; the last of them then waits past lock_timeout on its idempotency key,
  // which an uncommitted transaction here also inserted. The first posting committed and must
  // say so (with its rows); the one that timed out committed nothing and says
  // database_unavailable. Letting the timeout escape would answer the whole batch as not
  // committed, hiding the committed transfer.
  fund(a_, 10'000);
  fund(d_, 10'000);
  const std::string offender_key = unique_key("offender");
  const std::string contended_key = unique_key("contended");
  std::vector<posting_request> batch = {transfer(a_, b_, 100, unique_key("k")), transfer(a_, b_, 200, offender_key),
                                        transfer(d_, b_, 300, contended_key)};
  const std::string trigger = "wallet_test_refuse_key_" + std::to_string(::getpid());
  run(*owner_,
      "CREATE FUNCTION " + trigger + "() RETURNS trigger LANGUAGE plpgsql AS $fn$ BEGIN IF NEW.idempotency_key = " +
          sql_literal(offender_key) + " THEN RAISE EXCEPTION 'test refuses this key'; END IF; RETURN NEW; END $fn$");
  run(*owner_, "CREATE TRIGGER " + trigger + " BEFORE INSERT ON journal_transaction FOR EACH ROW EXECUTE FUNCTION " +
                   trigger + "()");
  pqxx::work holder(*owner_);
  holder.exec(
      "INSERT INTO journal_transaction (id, principal_id, idempotency_key, request_hash, type,"
      " response_status, response_body, first_entry_id, last_entry_id) VALUES (gen_random_uuid(), " +
      std::to_string(principal_) + ", " + sql_literal(contended_key) + ", 'held', 'TRANSFER', 201, '{}', 0, 0)");
  connection_options o = options_for(test_support::database_url(), k_application_name);
  o.lock_timeout_ms = 200;
  auto conn = connect(o);
  prepare_posting_statements(*conn);
  const batch_result r = commit_batch(*conn, batch);
  holder.abort();
  auto cleanup = owner_connection();
  run(*cleanup, "DROP TRIGGER " + trigger + " ON journal_transaction");
  run(*cleanup, "DROP FUNCTION " + trigger + "()");

  ASSERT_EQ(r.outcomes.size(), 3u);
  EXPECT_EQ(r.outcomes[0].outcome, ledger::error_code::ok);
  EXPECT_EQ(r.outcomes[1].outcome, ledger::error_code::internal);
  EXPECT_EQ(r.outcomes[2].outcome, ledger::error_code::database_unavailable);
  EXPECT_FALSE(r.connection_lost);
  EXPECT_EQ(entries_of(batch[0].transaction_id), 2);
  EXPECT_EQ(entries_of(batch[1].transaction_id), 0);
  EXPECT_EQ(entries_of(batch[2].transaction_id), 0);
  EXPECT_EQ(balance(a_), 10'000 - 100);
  EXPECT_EQ(balance(b_), 100);
  EXPECT_EQ(balance(d_), 10'000);
  bool a_row_reported = false;
  for (const auto& row : r.rows) a_row_reported = a_row_reported || (row.id == a_ && row.balance == 10'000 - 100);
  EXPECT_TRUE(a_row_reported);
  expect_caches_match_entries();
}

TEST_F(ledger_db, a_reload_reads_an_account_once_its_writer_has_ended) {
  // A writer has credited b and holds its row, its COMMIT not yet done (the server's connection
  // broke during it, say). A plain read shows b as it was; the reload waits for the writer and
  // shows the credit it committed.
  fund(a_, 1'000);
  const std::string tx = new_uuid();
  pqxx::work writer(*owner_);
  writer.exec("UPDATE account SET balance = balance - 100, version = version + 1 WHERE id = " + std::to_string(a_));
  writer.exec("UPDATE account SET balance = balance + 100, version = version + 1 WHERE id = " + std::to_string(b_));
  insert_transfer(writer, tx, a_, 900, b_, 100, 100);

  auto reader = app_connection();
  const auto before = find_account(*reader, b_);
  ASSERT_TRUE(before.has_value());
  EXPECT_EQ(before->balance, 0);
  std::atomic<bool> read{false};
  std::optional<account_record> reloaded;
  std::thread reading([&] {
    reloaded = find_account_after_writers(*reader, b_);
    read = true;
  });
  const bool waited = test_support::eventually(
      [&] { return read.load() || test_support::backends_blocked_by(owner_->backendpid()) > 0; });
  EXPECT_FALSE(read.load());
  writer.commit();
  reading.join();
  EXPECT_TRUE(waited);
  ASSERT_TRUE(reloaded.has_value());
  EXPECT_EQ(reloaded->balance, 100);
  EXPECT_EQ(reloaded->version, before->version + 1);
  // With no writer on the rows it reads at once, and takes no lock that outlives it.
  const auto again = find_account_after_writers(*reader, b_);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->balance, 100);
  EXPECT_EQ(commit_batch(*app_, {transfer(b_, a_, 100, unique_key("back"))}).outcomes.at(0).outcome,
            ledger::error_code::ok);
  EXPECT_EQ(balance(b_), 0);
}

TEST_F(ledger_db, a_reload_waiting_for_one_shard_holds_no_other_row) {
  // A writer holds the second shard of a hot account. The reload waits for it, and meanwhile the
  // main row and the first shard are free for other writers: it holds no lock while it waits.
  const auto [hot, shard_a, shard_b] = new_hot_account();
  fund(d_, 1'000);
  const std::string tx = new_uuid();
  pqxx::work writer(*owner_);
  writer.exec("UPDATE account SET balance = balance + 100, version = version + 1 WHERE id = " +
              std::to_string(shard_b));
  writer.exec("UPDATE account SET balance = balance - 100, version = version + 1 WHERE id = " + std::to_string(d_));
  insert_transfer(writer, tx, d_, 900, shard_b, 100, 100);

  auto reader = app_connection();
  std::atomic<bool> read{false};
  std::optional<account_record> reloaded;
  std::thread reading([&] {
    reloaded = find_account_after_writers(*reader, hot);
    read = true;
  });
  ASSERT_TRUE(test_support::eventually(
      [&] { return read.load() || test_support::backends_blocked_by(owner_->backendpid()) > 0; }));
  EXPECT_FALSE(read.load());
  auto other = app_connection();
  for (const auto row : {hot, shard_a}) {
    pqxx::work probe(*other);
    EXPECT_NO_THROW(probe.exec("SELECT id FROM account WHERE id = " + std::to_string(row) + " FOR UPDATE NOWAIT"))
        << "row " << row << " is locked while the reload waits for another";
  }
  writer.commit();
  reading.join();
  ASSERT_TRUE(reloaded.has_value());
  ASSERT_EQ(reloaded->shards.size(), 2u);
  EXPECT_EQ(reloaded->total_balance(), 100);
}

TEST_F(ledger_db, an_account_read_sees_its_shards_in_one_snapshot) {
  // Sweeps move money from a shard into its main row while another thread reads the account over
  // and over: every read must see the same total. Reading the main row and the shards in two
  // statements lets a sweep commit between them, and the read then misses the swept money.
  const std::int64_t hot = new_account();
  run(*owner_, "INSERT INTO account (owner_id, currency, kind, parent_id, shard_no) VALUES (" +
                   std::to_string(principal_) + ", 'XTS', 'shard', " + std::to_string(hot) + ", 0)");
  const std::int64_t shard = int_of(*owner_, "SELECT id FROM account WHERE parent_id = " + std::to_string(hot));
  constexpr std::int64_t k_sweeps = 300;
  fund(shard, k_sweeps);
  std::atomic<bool> done{false};
  std::atomic<int> wrong{0};
  std::atomic<int> reads{0};
  std::thread reader([&] {
    auto conn = app_connection();
    while (!done.load()) {
      const auto record = find_account(*conn, hot);
      if (!record || record->total_balance() != k_sweeps) ++wrong;
      ++reads;
    }
  });
  auto sweeper = app_connection();
  for (std::int64_t i = 0; i < k_sweeps; ++i) {
    posting_request sweep;
    sweep.posting.type = ledger::transaction_type::sweep;
    sweep.posting.debit_account = shard;
    sweep.posting.credit_account = hot;
    sweep.posting.credit_parent = hot;
    sweep.posting.amount = 0;
    sweep.posting.currency = k_currency;
    sweep.transaction_id = new_uuid();
    sweep.idempotency_key = "sweep:" + sweep.transaction_id;
    sweep.request_hash = "sweep";
    ASSERT_EQ(commit_batch(*sweeper, {sweep}).outcomes.at(0).outcome, ledger::error_code::ok);
    // Put one unit back on the shard for the next sweep (a transfer from main to shard keeps the total).
    ASSERT_EQ(commit_batch(*sweeper, {transfer(hot, shard, 1, unique_key("back"))}).outcomes.at(0).outcome,
              ledger::error_code::ok);
  }
  done = true;
  reader.join();
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace persistence
