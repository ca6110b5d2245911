// The plans the ledger writer's connection keeps. They are generic plans, made at each statement's
// first execution and kept until an ANALYZE of one of their tables invalidates them. On a new
// database that first execution meets empty tables, where reading a table whole looks cheapest; a
// plan made then would keep scanning the journal and the accounts for every batch as they grow.
// These tests make the plans on brand-new, never-analyzed tables (the scratch database's schema,
// dropped and migrated again) and require every one of them to find its rows through an index.

#include <boost/json.hpp>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "persistence/batch.hpp"
#include "persistence/database.hpp"
#include "persistence/history.hpp"
#include "persistence/holds.hpp"
#include "persistence/migrations.hpp"
#include "persistence/reconcile.hpp"
#include "tests/support/connections.hpp"
#include "tests/support/support.hpp"

namespace persistence {
namespace {

using test_support::options_for;

const std::string k_application_name = "posting-plan-tests";

class posting_plans : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      owner_ = connect(options_for(test_support::scratch_owner_database_url(), k_application_name));
    } catch (const std::exception& e) {
      FAIL() << "the scratch database is not reachable (scripts/services.sh reset-db makes it): " << e.what();
    }
    test_support::drop_public_schema(*owner_);  // the tables migrated next are new, never analyzed
    apply_migrations(options_for(test_support::scratch_owner_database_url(), k_application_name));
    writer_ = connect(options_for(test_support::scratch_database_url(), k_application_name));
    prepare_posting_statements(*writer_);
  }

  // The generic plan of the prepared statement `name` for these arguments: EXPLAIN of EXECUTE
  // shows the plan the connection keeps (plan_cache_mode = force_generic_plan), made now, on the
  // new tables, as the writer's first batch would make it. libpqxx prepares on first use, so the
  // statement is prepared here first.
  std::string plan_of(const std::string& name, const std::string& args) { return plan_of(*writer_, name, args); }
  // The same on `conn` (`args` empty: a statement without parameters).
  static std::string plan_of(pqxx::connection& conn, const std::string& name, const std::string& args) {
    conn.prepare_now(name);
    pqxx::work txn(conn);
    std::string plan;
    for (const auto& row : txn.exec("EXPLAIN EXECUTE " + name + (args.empty() ? "" : "(" + args + ")"))) {
      plan += row[0].as<std::string>() + "\n";
    }
    return plan;
  }

  // A connection of a background part's (the relay's, the webhook dispatcher's): sequential scans
  // priced out, as theirs are, and generic plans, as a statement gets once it has run a few times.
  static std::unique_ptr<pqxx::connection> background_connection() {
    auto conn = connect(options_for(test_support::scratch_database_url(), k_application_name));
    find_rows_by_key(*conn);
    conn->set_variable("plan_cache_mode", "force_generic_plan");
    return conn;
  }

  // The nested loops of that plan whose inner side is not an index probe, as "outer -> inner"
  // node types (EXPLAIN (FORMAT JSON)). A nested loop runs its inner side once per outer row: over
  // an index that is one probe per row, but over anything else (a function scan of an array
  // parameter, a CTE) it reads the whole inner side again for every outer row, which costs the
  // product of the two sides, quadratic in a batch's size.
  std::vector<std::string> rescanned_inner_sides(const std::string& name, const std::string& args) {
    return rescanned_inner_sides(*writer_, name, args);
  }
  static std::vector<std::string> rescanned_inner_sides(pqxx::connection& conn, const std::string& name,
                                                        const std::string& args) {
    conn.prepare_now(name);
    pqxx::work txn(conn);
    const auto plan = boost::json::parse(
        txn.exec1("EXPLAIN (FORMAT JSON) EXECUTE " + name + (args.empty() ? "" : "(" + args + ")"))[0].c_str());
    std::vector<std::string> found;
    std::function<void(const boost::json::object&)> walk = [&](const boost::json::object& node) {
      const auto* children = node.if_contains("Plans");
      if (!children) return;
      const auto& plans = children->as_array();
      if (node.at("Node Type").as_string() == "Nested Loop" && plans.size() == 2) {
        // Memoize keeps the inner side's answers per key, a Limit stops its probe early and a
        // subquery scan passes its rows on: what they probe is what counts.
        const auto* inner = &plans[1].as_object();
        for (;;) {
          const auto& type = inner->at("Node Type").as_string();
          if (type != "Memoize" && type != "Limit" && type != "Subquery Scan") break;
          inner = &inner->at("Plans").as_array().at(0).as_object();
        }
        const std::string type(inner->at("Node Type").as_string());
        if (type != "Index Scan" && type != "Index Only Scan") {
          found.push_back(std::string(plans[0].as_object().at("Node Type").as_string()) + " -> " + type);
        }
      }
      for (const auto& child : plans) walk(child.as_object());
    };
    walk(plan.as_array().at(0).as_object().at("Plan").as_object());
    return found;
  }

  // `n` empty arrays as arguments.
  static std::string empty_arrays(int n) {
    std::string args;
    for (int i = 0; i < n; ++i) args += (i == 0 ? "" : ", ") + std::string("'{}'");
    return args;
  }

  std::unique_ptr<pqxx::connection> owner_;
  std::unique_ptr<pqxx::connection> writer_;
};

// The key lookup reads the journal, the stored batches and the holds, each by its unique key.
TEST_F(posting_plans, the_key_lookup_probes_the_unique_key_on_new_tables) {
  const auto plan = plan_of("posting_find_committed", empty_arrays(4));
  for (const auto* index : {"journal_transaction_principal_id_idempotency_key_key", "transfer_batch_pkey",
                            "hold_principal_id_idempotency_key_key"}) {
    EXPECT_NE(plan.find(std::string("Scan using ") + index), std::string::npos) << index << ":\n" << plan;
  }
  EXPECT_EQ(plan.find("Seq Scan"), std::string::npos) << plan;
}

TEST_F(posting_plans, the_account_rows_and_their_parents_are_read_by_primary_key_on_new_tables) {
  // Locked, and unlocked (the first attempt of a plain batch).
  for (const auto& name : std::vector<std::string>{"posting_lock_accounts", "posting_read_accounts"}) {
    const auto plan = plan_of(name, empty_arrays(1));
    EXPECT_NE(plan.find("account_pkey"), std::string::npos) << name << ":\n" << plan;
    EXPECT_EQ(plan.find("Seq Scan"), std::string::npos) << name << ":\n" << plan;
  }
}

TEST_F(posting_plans, the_rows_are_locked_and_the_balance_caches_updated_by_primary_key_on_new_tables) {
  // The batch's writes take 23 parameters: 19 arrays, the outbox payload (jsonb), and three more
  // arrays (the updated rows' versions, the unchanged rows and theirs). Both the lock of every row
  // read and the update of the changed ones probe the primary key.
  const auto plan = plan_of("posting_write_batch", empty_arrays(19) + ", 'null', " + empty_arrays(3));
  std::size_t probes = 0;
  for (auto at = plan.find("Index Scan using account_pkey on account"); at != std::string::npos;
       at = plan.find("Index Scan using account_pkey on account", at + 1)) {
    ++probes;
  }
  EXPECT_EQ(probes, 2u) << plan;
  EXPECT_EQ(plan.find("Seq Scan"), std::string::npos) << plan;
}

// Every nested loop of the writer's statements probes an index on its inner side, so that a batch
// costs in proportion to its size. The balance caches' update once joined the locked rows to its
// array of new balances with a nested loop over that array: every locked row read the whole array
// again, and at 500 transfers a batch that one join cost more than the rest of the batch together.
// Checked on new tables and again on ten thousand accounts, each updated once, with statistics:
// the plans are made from whatever statistics the tables have when a plan is made.
TEST_F(posting_plans, every_nested_loop_of_the_writers_statements_probes_an_index) {
  const std::vector<std::pair<std::string, std::string>> statements{
      {"posting_write_batch", empty_arrays(19) + ", 'null', " + empty_arrays(3)},
      {"posting_lock_accounts", empty_arrays(1)},
      {"posting_read_accounts", empty_arrays(1)},
      {"posting_find_committed", empty_arrays(4)},
      {"posting_find_payments", empty_arrays(2)},
      {"posting_find_hold_keys", empty_arrays(2)},
  };
  const auto check = [&](const std::string& tables) {
    for (const auto& [name, args] : statements) {
      const auto rescanned = rescanned_inner_sides(name, args);
      EXPECT_TRUE(rescanned.empty()) << name << " on " << tables
                                     << " tables rescans: " << testing::PrintToString(rescanned);
    }
  };
  check("new");
  {
    pqxx::work txn(*owner_);
    txn.exec(
        "INSERT INTO principal (name, role) VALUES ('plans', 'user');"
        "INSERT INTO account (owner_id, currency, kind, allow_negative)"
        "  SELECT 1, 'XTS', 'user', TRUE FROM generate_series(1, 10000);"
        // Every account's row updated once, as a ledger's rows soon are: the update moves them away
        // from the order of their ids, which is what made the planner choose the quadratic join.
        "UPDATE account SET version = version;");
    txn.commit();
  }
  {
    pqxx::nontransaction txn(*owner_);
    txn.exec("ANALYZE account");
    txn.exec("ANALYZE principal");
  }
  // A new connection makes its plans anew, from these statistics.
  writer_ = connect(options_for(test_support::scratch_database_url(), k_application_name));
  prepare_posting_statements(*writer_);
  check("analyzed");
}

TEST_F(posting_plans, the_provider_payment_and_hold_key_lookups_probe_their_keys_on_new_tables) {
  for (const auto& name : std::vector<std::string>{"posting_find_payments", "posting_find_hold_keys"}) {
    const auto plan = plan_of(name, empty_arrays(2));
    EXPECT_NE(plan.find("Index Cond"), std::string::npos) << name << ":\n" << plan;
    EXPECT_EQ(plan.find("Seq Scan"), std::string::npos) << name << ":\n" << plan;
  }
  // A placement's key is looked up among the holds, the journal and the stored batches.
  const auto plan = plan_of("posting_find_hold_keys", empty_arrays(2));
  for (const auto* index : {"hold_principal_id_idempotency_key_key",
                            "journal_transaction_principal_id_idempotency_key_key", "transfer_batch_pkey"}) {
    EXPECT_NE(plan.find(std::string("Scan using ") + index), std::string::npos) << index << ":\n" << plan;
  }
}

// The hold expirer's scans for due holds (a reader's connection, every 200 ms) find them through the
// expiry index, whatever the number of active holds that are not due: the time they compare with
// is an index condition. With sequential scans priced out, so that these tiny tables do not hide
// which conditions an index could take.
TEST_F(posting_plans, the_expirers_scans_take_due_holds_from_the_expiry_index) {
  auto reader = connect(options_for(test_support::scratch_database_url(), k_application_name));
  expire_due_holds(*reader, 10);  // prepares the statements it runs
  expire_held_back_payers(*reader, 10, {}, 0, std::chrono::milliseconds(1));
  // Defined by those calls; libpqxx registers a statement with the server at its first use.
  for (const auto* name : {"hold_lock_due_payers", "hold_due_payers", "hold_lock_due_payer", "hold_expire"}) {
    reader->prepare_now(name);
  }
  pqxx::work txn(*reader);
  txn.exec0("SET LOCAL enable_seqscan = off");
  // The payers with due holds; one of them, locked; the due holds of the payers locked.
  for (const auto& [name, args] : std::vector<std::pair<std::string, std::string>>{{"hold_lock_due_payers", "10, '{}'"},
                                                                                   {"hold_due_payers", "10, '{}', 0"},
                                                                                   {"hold_lock_due_payer", "1"},
                                                                                   {"hold_expire", "'{1}', 10"}}) {
    std::string plan;
    bool expiry_bounds_an_index = false;
    for (const auto& row : txn.exec("EXPLAIN EXECUTE " + name + "(" + args + ")")) {
      const auto line = row[0].as<std::string>();
      plan += line + "\n";
      if (line.find("Index Cond:") != std::string::npos && line.find("expires_at <=") != std::string::npos) {
        expiry_bounds_an_index = true;
      }
    }
    EXPECT_TRUE(expiry_bounds_an_index) << name << ":\n" << plan;
  }
}

// A transaction's entries are read through its journal row's range of entry ids (migration 024):
// the readers' plans take each range from ledger_entry's primary key, never the whole table, for
// one transaction and for a thousand at once, on a ledger the planner has statistics of.
TEST_F(posting_plans, a_transactions_entries_are_read_as_ranges_of_the_primary_key) {
  {
    pqxx::work txn(*owner_);
    txn.exec(
        "INSERT INTO principal (name, role) VALUES ('plans', 'user');"
        "INSERT INTO account (owner_id, currency, kind, allow_negative)"
        "  SELECT 1, 'XTS', 'user', TRUE FROM generate_series(1, 100);"
        "CREATE TEMP TABLE plan_tx AS SELECT gen_random_uuid() AS id, i FROM generate_series(1, 20000) AS i;"
        "INSERT INTO ledger_entry (transaction_id, account_id, currency, amount, balance_after)"
        "  SELECT id, 1 + (i + leg) % 100, 'XTS', CASE leg WHEN 0 THEN -1 ELSE 1 END, 0"
        "    FROM plan_tx, (VALUES (0), (1)) AS legs(leg) ORDER BY i, leg;"
        "INSERT INTO journal_transaction (id, principal_id, idempotency_key, request_hash, type, response_status,"
        "                                 response_body, first_entry_id, last_entry_id)"
        "  SELECT transaction_id, 1, 'plan-' || transaction_id, 'h', 'TRANSFER', 201, '{}', min(id), max(id)"
        "    FROM ledger_entry GROUP BY transaction_id;");
    txn.commit();
  }
  {
    pqxx::nontransaction txn(*owner_);
    txn.exec("ANALYZE ledger_entry");
    txn.exec("ANALYZE journal_transaction");
  }
  const auto one = "'" + test_support::text_of(*owner_, "SELECT id::text FROM journal_transaction LIMIT 1") + "'";
  const auto many = "'" +
                    test_support::text_of(*owner_,
                                          "SELECT array_agg(id)::text FROM (SELECT id FROM journal_transaction"
                                          " ORDER BY random() LIMIT 1000) t") +
                    "'";
  auto reader = connect(options_for(test_support::scratch_database_url(), k_application_name));
  prepare_history_statements(*reader);
  prepare_reconcile_statements(*reader);
  for (const auto& [name, args] :
       std::vector<std::pair<std::string, std::string>>{{"history_transaction_entries", one},
                                                        {"history_lookup_entries", many},
                                                        {"reconcile_transaction_sums", many}}) {
    reader->prepare_now(name);
    pqxx::work txn(*reader);
    std::string plan;
    for (const auto& row : txn.exec("EXPLAIN EXECUTE " + name + "(" + args + ")")) {
      plan += row[0].as<std::string>() + "\n";
    }
    EXPECT_NE(plan.find("using ledger_entry_pkey on ledger_entry"), std::string::npos) << name << ":\n" << plan;
    EXPECT_EQ(plan.find("Seq Scan on ledger_entry"), std::string::npos) << name << ":\n" << plan;
    txn.abort();
    // And a thousand ids cost a thousand probes, not a thousand times a thousand rows.
    const auto rescanned = rescanned_inner_sides(*reader, name, args);
    EXPECT_TRUE(rescanned.empty()) << name << " rescans: " << testing::PrintToString(rescanned);
  }
}

// The webhook dispatcher's claim, planned as a generic plan on new tables (the dispatcher's
// connection prices sequential scans out): the endpoints with deliveries pending are walked through
// the pending index, one descent each, each one's endpoint probed by primary key, and the heads are
// then read by primary key. Joined to the heads, a plan made on new tables read every pending
// delivery once per endpoint, so that a claim took the product of the two (159 ms with 200 endpoints
// and 1,000 deliveries pending); probing every endpoint's head cost a claim one probe per endpoint
// registered, whether it had anything to send or not.
TEST_F(posting_plans, the_webhook_claim_reads_each_endpoints_head_by_key_on_new_tables) {
  auto dispatcher = background_connection();
  const auto plan = plan_of(*dispatcher, "webhook_claim", "8, '{}', 1000");
  EXPECT_NE(plan.find("Index Cond: (endpoint_id > p.endpoint_id)"), std::string::npos) << plan;
  EXPECT_NE(plan.find("Index Cond: (id = p_1.endpoint_id)"), std::string::npos) << plan;
  // An endpoint is found by its key, never by filtering an index of endpoints for its id.
  EXPECT_EQ(plan.find("Filter: (id = p"), std::string::npos) << plan;
  EXPECT_NE(plan.find("Index Cond: (id = ANY ("), std::string::npos) << plan;
  EXPECT_NE(plan.find("webhook_delivery_pkey"), std::string::npos) << plan;
  // Neither the pending deliveries nor the endpoints are ever read as a whole set.
  EXPECT_EQ(plan.find("Recheck Cond: (status = 'PENDING'::text)"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("Seq Scan on webhook_delivery"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("Seq Scan on webhook_endpoint"), std::string::npos) << plan;
  EXPECT_TRUE(rescanned_inner_sides(*dispatcher, "webhook_claim", "8, '{}', 1000").empty()) << plan;
}

// The fan-out's step of its shared position (migration 029) reads the following endpoints of the
// owners its events touch and the operators' through their partial indexes, never every endpoint.
TEST_F(posting_plans, a_fan_out_step_reads_only_the_endpoints_its_events_may_be_for_on_new_tables) {
  auto dispatcher = background_connection();
  const auto plan = plan_of(*dispatcher, "webhook_following_endpoints", "'{1,2}'");
  EXPECT_NE(plan.find("webhook_endpoint_following_owner"), std::string::npos) << plan;
  EXPECT_NE(plan.find("Index Cond: (owner_id = ANY ("), std::string::npos) << plan;
  EXPECT_NE(plan.find("webhook_endpoint_following_all"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("Seq Scan on webhook_endpoint"), std::string::npos) << plan;
  EXPECT_EQ(plan.find("webhook_endpoint_pkey"), std::string::npos) << plan;
  // Every round asks whether an endpoint does not follow, and those join: the index of the
  // endpoints that do not follow answers both, whatever the number of endpoints that do.
  for (const auto& [name, args] :
       std::vector<std::pair<std::string, std::string>>{{"webhook_fan_out_state", ""},
                                                        {"webhook_join_position", "0"},
                                                        {"webhook_lagging_endpoints", "-1, 0, 500"}}) {
    const auto statement_plan = plan_of(*dispatcher, name, args);
    EXPECT_NE(statement_plan.find("webhook_endpoint_lagging_cursor"), std::string::npos) << name << ":\n"
                                                                                         << statement_plan;
    EXPECT_EQ(statement_plan.find("Seq Scan on webhook_endpoint"), std::string::npos) << name << ":\n"
                                                                                      << statement_plan;
  }
}

// The outbox relay's statements and the feed's, planned as generic plans on new tables on a
// connection that prices sequential scans out, as the relay's is: none reads outbox_event whole,
// and every nested loop probes an index on its inner side.
TEST_F(posting_plans, the_relays_and_the_feeds_statements_read_the_outbox_by_index_on_new_tables) {
  auto relay = background_connection();
  for (const auto& [name, args] : std::vector<std::pair<std::string, std::string>>{{"outbox_sequence", "50"},
                                                                                   {"outbox_claim", "50"},
                                                                                   {"outbox_lag", ""},
                                                                                   {"outbox_rows_by_id", "'{}'"},
                                                                                   {"outbox_feed_rows", "0, 0, 64"},
                                                                                   {"outbox_prune", "30, 1000"},
                                                                                   {"outbox_pruned_through", ""}}) {
    const auto plan = plan_of(*relay, name, args);
    EXPECT_EQ(plan.find("Seq Scan on outbox_event"), std::string::npos) << name << ":\n" << plan;
    EXPECT_TRUE(rescanned_inner_sides(*relay, name, args).empty()) << name << ":\n" << plan;
  }
}

}  // namespace
}  // namespace persistence
