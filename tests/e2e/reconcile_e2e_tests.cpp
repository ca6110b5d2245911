// End-to-end tests of reconciliation over HTTP: a real wallet-server, PostgreSQL and Redis. Runs
// start on POST and are polled to their end; no request scans the ledger. These tests keep the
// shared database whole (breaking a ledger on purpose happens in tests/persistence/reconcile_tests
// on the scratch database).

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include <chrono>
#include <string>
#include <thread>

#include "tests/support/support.hpp"

namespace ts = test_support;

namespace {

// Polls for a condition the tests wait on (a phase, a metric, a timer's run), and the pause
// between polls: generous, since the machine is shared.
constexpr int k_polls_max = 600;
constexpr std::chrono::milliseconds k_poll{50};

// Limits no test here meets: the default of the fixture.
class ReconcileE2E : public ts::shared_server_test<ReconcileE2E> {
 protected:
  // POSTs until this caller starts a run of its own (a run of someone else's in progress is
  // waited out first); returns the 202 answer.
  boost::json::object start_own_run(ts::http_client& c, const std::string& body = "{}") const {
    for (int attempt = 0; attempt < 20; ++attempt) {
      auto r = c.post("/v1/admin/reconciliation", op(), body);
      EXPECT_EQ(r.status, 202) << r.body;
      if (r.status != 202) return {};
      auto claim = r.json().as_object();
      if (claim.at("started").as_bool()) {
        EXPECT_EQ(r.header("Location"),
                  "/v1/admin/reconciliation/runs/" + std::to_string(claim.at("runId").as_int64()));
        return claim;
      }
      ts::wait_for_reconciliation_run(c, op(), claim.at("runId").as_int64());
    }
    ADD_FAILURE() << "no run of this caller started";
    return {};
  }
};

// A posted run covers what was written before the POST: it ends finished and clean with every
// check's flag true and a watermark at or past the last entry written; GET
// /v1/admin/reconciliation then answers from a finished run at least as recent, and the server's
// metrics count the run.
TEST_F(ReconcileE2E, APostedRunIsPolledToItsVerdict) {
  ts::http_client c(port());
  const auto alice = ts::create_principal(c, op());
  const auto bob = ts::create_principal(c, op());
  const auto a = ts::create_account(c, op(), alice.id);
  const auto b = ts::create_account(c, op(), bob.id);
  ts::deposit(c, op(), a, 1'000);
  ASSERT_EQ(c.post("/v1/transfers", alice.key, ts::transfer_body(a, b, 250), ts::unique_key("t")).status, 201);
  const auto last_entry = std::stoll(ts::query_value("SELECT max(id) FROM ledger_entry"));

  const auto claim = start_own_run(c);
  ASSERT_FALSE(claim.empty());
  const auto run = ts::wait_for_reconciliation_run(c, op(), claim.at("runId").as_int64());
  ASSERT_FALSE(run.empty());
  EXPECT_EQ(run.at("status").as_string(), "finished") << boost::json::serialize(run);
  EXPECT_TRUE(run.at("ok").as_bool()) << boost::json::serialize(run);
  EXPECT_GE(run.at("throughEntryId").as_int64(), last_entry);
  for (const char* flag : {"zeroSumPerCurrency", "transactionsBalanced", "cachesMatchEntries",
                           "balanceAfterMatchesEntries", "noDisallowedNegatives", "entriesReferenceAccounts"}) {
    EXPECT_TRUE(run.at(flag).as_bool()) << flag;
  }
  EXPECT_TRUE(run.at("findings").as_array().empty());
  EXPECT_EQ(std::string(run.at("requestedBy").as_string()).rfind("operator ", 0), 0u);

  auto latest = c.get("/v1/admin/reconciliation", op());
  ASSERT_EQ(latest.status, 200) << latest.body;
  const auto l = latest.json().as_object();
  EXPECT_GE(l.at("runId").as_int64(), claim.at("runId").as_int64());
  EXPECT_EQ(l.at("status").as_string(), "finished");
  EXPECT_TRUE(l.at("ok").is_bool());
  EXPECT_TRUE(l.contains("runningRunId"));

  double runs = -1;
  for (int poll = 0; poll < k_polls_max && runs < 1; ++poll) {
    runs = ts::metric_value(c, "wallet_reconciliation_runs_total");
    if (runs < 1) std::this_thread::sleep_for(k_poll);
  }
  EXPECT_GE(runs, 1);
  EXPECT_EQ(ts::metric_value(c, "wallet_reconciliation_ok"), 1);
  EXPECT_GE(ts::metric_value(c, "wallet_reconciliation_watermark_entry_id"), static_cast<double>(last_entry));
}

// While a run waits for a transaction that holds ledger_entry's write lock (it might still add
// entries below the run's watermark), every POST, incremental or full, to this server or to a
// second server on the same database, answers 202 with that same run; once the transaction has
// ended, the run ends clean.
TEST_F(ReconcileE2E, PostsWhileARunIsInProgressNameThatRun) {
  ts::http_client c(port());
  pqxx::connection owner(ts::owner_database_url());
  pqxx::work writer(owner);
  writer.exec("LOCK TABLE ledger_entry IN ROW EXCLUSIVE MODE");

  const auto claim = start_own_run(c);
  ASSERT_FALSE(claim.empty());
  const auto id = claim.at("runId").as_int64();
  std::string phase;
  for (int poll = 0; poll < k_polls_max && phase != "waiting"; ++poll) {
    auto r = c.get("/v1/admin/reconciliation/runs/" + std::to_string(id), op());
    ASSERT_EQ(r.status, 200) << r.body;
    // The parsed answer is kept: a reference into r.json()'s temporary would dangle.
    const auto run = r.json();
    const auto& p = run.as_object().at("phase");
    phase = p.is_string() ? std::string(p.as_string()) : std::string();
    if (phase != "waiting") std::this_thread::sleep_for(k_poll);
  }
  ASSERT_EQ(phase, "waiting");

  for (const std::string body : {"{}", R"({"full":true})", ""}) {
    auto again = c.post("/v1/admin/reconciliation", op(), body);
    ASSERT_EQ(again.status, 202) << again.body;
    EXPECT_EQ(again.json().as_object().at("runId").as_int64(), id) << body;
    EXPECT_FALSE(again.json().as_object().at("started").as_bool()) << body;
  }
  {
    ts::server_process second;
    ts::http_client c2(second.port());
    auto elsewhere = c2.post("/v1/admin/reconciliation", second.operator_key(), "{}");
    ASSERT_EQ(elsewhere.status, 202) << elsewhere.body;
    EXPECT_EQ(elsewhere.json().as_object().at("runId").as_int64(), id);
    EXPECT_FALSE(elsewhere.json().as_object().at("started").as_bool());
  }

  writer.abort();
  const auto run = ts::wait_for_reconciliation_run(c, op(), id);
  ASSERT_FALSE(run.empty());
  EXPECT_EQ(run.at("status").as_string(), "finished") << boost::json::serialize(run);
  EXPECT_TRUE(run.at("ok").as_bool()) << boost::json::serialize(run);
}

// Bad requests get a problem with a stable code and start no run: a non-operator (403), a body
// that is not a JSON object of the one known field (400, 415), an unknown run (404), another
// method (405 with Allow).
TEST_F(ReconcileE2E, BadRequestsAreRefusedAndStartNothing) {
  ts::http_client c(port());
  const auto user = ts::create_principal(c, op());
  const auto runs_before = ts::query_value("SELECT count(*) FROM reconciliation_run");
  auto code_of = [](const ts::response& r) { return std::string(r.json().as_object().at("code").as_string()); };

  for (const auto& r : {c.get("/v1/admin/reconciliation", user.key), c.post("/v1/admin/reconciliation", user.key, "{}"),
                        c.get("/v1/admin/reconciliation/runs/1", user.key)}) {
    EXPECT_EQ(r.status, 403) << r.body;
    EXPECT_EQ(code_of(r), "forbidden");
  }
  for (const std::string body : {R"({"full":"yes"})", R"({"fast":true})", "[true]", "{"}) {
    auto r = c.post("/v1/admin/reconciliation", op(), body);
    EXPECT_EQ(r.status, 400) << body << ": " << r.body;
    EXPECT_EQ(code_of(r), "invalid_request") << body;
  }
  auto text = c.request("POST", "/v1/admin/reconciliation", "full",
                        {{"Authorization", "Bearer " + op()}, {"Content-Type", "text/plain"}});
  EXPECT_EQ(text.status, 415) << text.body;
  for (const std::string id : {"abc", "0", "999999999999"}) {
    auto r = c.get("/v1/admin/reconciliation/runs/" + id, op());
    EXPECT_EQ(r.status, 404) << id << ": " << r.body;
    EXPECT_EQ(code_of(r), "not_found");
  }
  auto put = c.request("PUT", "/v1/admin/reconciliation", "{}", {{"Authorization", "Bearer " + op()}});
  EXPECT_EQ(put.status, 405);
  EXPECT_EQ(put.header("Allow"), "GET, POST");
  auto post_run = c.post("/v1/admin/reconciliation/runs/1", op(), "{}");
  EXPECT_EQ(post_run.status, 405);
  EXPECT_EQ(post_run.header("Allow"), "GET");
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM reconciliation_run"), runs_before);
}

// The timers: a server whose incremental timer ticks every second runs incremental runs of its
// own while the latest full run is younger than the full interval, and a full run when it is
// older (here: a full interval of one second).
TEST(ReconcileTimers, IncrementalRunsTickAndTheFullAuditHasItsOwnInterval) {
  {
    ts::server_process shared;
    ts::http_client c(shared.port());
    ASSERT_TRUE(ts::reconciliation_ok(c, shared.operator_key(), true));
  }
  auto timer_run_after = [](std::int64_t after, const std::string& kind) {
    std::string found = "0";
    for (int poll = 0; poll < k_polls_max && found == "0"; ++poll) {
      found = ts::query_value(
          "SELECT count(*) FROM reconciliation_run WHERE requested_by = 'timer'"
          " AND status = 'finished' AND kind = '" +
          kind + "' AND id > " + std::to_string(after));
      if (found == "0") std::this_thread::sleep_for(k_poll);
    }
    return found != "0";
  };
  auto last_run = [] { return std::stoll(ts::query_value("SELECT COALESCE(max(id), 0) FROM reconciliation_run")); };

  ts::server_process::options hourly;
  hourly.env["WALLET_LEDGER_RECONCILE_INTERVAL_S"] = "1";
  hourly.env["WALLET_LEDGER_RECONCILE_FULL_INTERVAL_S"] = "3600";
  {
    const auto before = last_run();
    ts::server_process server(hourly);
    EXPECT_TRUE(timer_run_after(before, "incremental"));
    EXPECT_EQ(ts::query_value("SELECT count(*) FROM reconciliation_run WHERE requested_by = 'timer' AND kind = 'full'"
                              " AND id > " +
                              std::to_string(before)),
              "0");
  }
  ts::server_process::options every_second = hourly;
  every_second.env["WALLET_LEDGER_RECONCILE_FULL_INTERVAL_S"] = "1";
  {
    const auto before = last_run();
    ts::server_process server(every_second);
    EXPECT_TRUE(timer_run_after(before, "full"));
  }
}

}  // namespace
