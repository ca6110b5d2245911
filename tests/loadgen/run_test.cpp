#include "tests/loadgen/fake_wallet.hpp"
#include "tools/loadgen/loadgen.hpp"
#include "tools/loadgen/stats.hpp"

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <thread>
#include <iostream>
#include <fstream>
#include <sstream>

namespace {

using loadgen::run_loadgen;
using loadgen_test::fake_behaviour;
using loadgen_test::fake_wallet;

const std::string k_operator_key = "test-operator-key";

loadgen::options short_run(std::uint16_t port, loadgen::workload_kind workload) {
  loadgen::options o;
  o.port = port;
  o.operator_key = k_operator_key;
  o.workload = workload;
  o.accounts = 20;
  o.hot_shards = 4;
  o.fund_amount_minor = 100'000;
  o.rate = 300;
  o.duration_s = 1;
  o.connections = 16;
  o.quiet = true;
  return o;
}

// Makes `o` a short open-loop spike: `rate` per second, `multiplier` times that for 1 s from t = 1 s
// (ramps of 0.5 s), `duration_s` in all, no warm-up.
void make_short_spike(loadgen::options& o, double rate, double multiplier, double duration_s) {
  o.mode = loadgen::run_mode::open;
  o.profile = loadgen::profile_kind::spike;
  o.rate = rate;
  o.spike_multiplier = multiplier;
  o.spike_start_s = 1;
  o.spike_ramp_s = 0.5;
  o.spike_duration_s = 1;
  o.duration_s = duration_s;
  o.warmup_s = 0;
}

// With LOADGEN_TEST_SHOW set, a test prints the report it got, to look at the tool's output.
void show(const std::ostringstream& out, const std::ostringstream& err) {
  if (std::getenv("LOADGEN_TEST_SHOW")) std::cout << err.str() << out.str() << std::endl;
}

std::string text_of(const loadgen::verification& v) {
  std::string text;
  for (const auto& f : v.failures) text += f + "\n";
  return text;
}

// Against a correct test double, an open-loop hot-merchant run sends every scheduled request, each
// is answered 201, and the verification passes (exit code 0, PASS in the report).
TEST(run, correct_server_passes_verification) {
  fake_wallet server(k_operator_key, {});
  std::ostringstream out, err;
  const auto outcome = run_loadgen(short_run(server.port(), loadgen::workload_kind::hot_merchant), out, err);
  ASSERT_TRUE(outcome.verdict) << err.str();
  EXPECT_TRUE(outcome.verdict->pass) << text_of(*outcome.verdict) << err.str();
  EXPECT_EQ(outcome.exit_code, 0);
  EXPECT_EQ(outcome.total.scheduled, 300);
  EXPECT_EQ(outcome.total.finished, 300);
  EXPECT_EQ(outcome.total.classes.at("201").count, 300);
  EXPECT_EQ(server.transfers_recorded(), 300);
  EXPECT_NE(out.str().find("verification: PASS"), std::string::npos) << out.str();
  show(out, err);
}

// SIGINT during the load ends it early: nothing more is sent, what was sent is answered and
// verified (PASS, exit code 0), and the report says so, with rates over the time the load ran.
TEST(run, sigint_ends_the_load_early_and_what_was_sent_is_verified) {
  fake_wallet server(k_operator_key, {});
  auto o = short_run(server.port(), loadgen::workload_kind::hot_merchant);
  o.duration_s = 600;
  std::ostringstream out, err;
  auto run = std::async(std::launch::async, [&] { return run_loadgen(o, out, err); });
  // The load phase has begun (its handler is in place) once transfers arrive.
  const auto bound = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (server.transfers_recorded() < 100 && std::chrono::steady_clock::now() < bound) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GE(server.transfers_recorded(), 100);
  ASSERT_EQ(::kill(::getpid(), SIGINT), 0);
  ASSERT_EQ(run.wait_for(std::chrono::seconds(120)), std::future_status::ready) << "the run did not end early";
  const auto outcome = run.get();
  ASSERT_TRUE(outcome.verdict) << err.str();
  EXPECT_TRUE(outcome.verdict->pass) << text_of(*outcome.verdict) << err.str();
  EXPECT_EQ(outcome.exit_code, 0);
  EXPECT_LT(outcome.total.scheduled, 300 * 600);
  EXPECT_EQ(outcome.total.finished, outcome.total.scheduled);
  EXPECT_EQ(outcome.total.classes.at("201").count, outcome.total.scheduled);
  EXPECT_EQ(server.transfers_recorded(), outcome.total.scheduled);
  EXPECT_NE(out.str().find("ended early by a signal"), std::string::npos) << out.str();
  EXPECT_NE(err.str().find("interrupted: the load ended early"), std::string::npos) << err.str();
  show(out, err);
}

// A server that acknowledges one transfer with 201 but never writes it is caught: that transaction
// is missing and two balances are off, so the run ends in FAIL with a non-zero exit code.
TEST(run, server_that_loses_one_transfer_fails_verification) {
  fake_behaviour broken;
  broken.lose_transfer_number = 57;
  fake_wallet server(k_operator_key, broken);
  std::ostringstream out, err;
  const auto outcome = run_loadgen(short_run(server.port(), loadgen::workload_kind::hot_merchant), out, err);
  ASSERT_TRUE(outcome.verdict) << err.str();
  EXPECT_FALSE(outcome.verdict->pass);
  EXPECT_EQ(outcome.exit_code, 1);
  EXPECT_EQ(server.transfers_answered(), 300);
  EXPECT_EQ(server.transfers_recorded(), 299);
  const auto failures = text_of(*outcome.verdict);
  EXPECT_NE(failures.find("not in the ledger"), std::string::npos) << failures;
  EXPECT_NE(failures.find("expected"), std::string::npos) << failures;
  EXPECT_NE(out.str().find("verification: FAIL"), std::string::npos) << out.str();
  show(out, err);
}

// Verification reads the acknowledged transactions in bulk: a run of 1,200 transfers (two lookups
// of up to 1,000 ids) against a double that acknowledges the 1,100th without recording it sends
// no single GET /v1/transactions/{id}, and still names the lost transaction as missing.
TEST(run, verification_looks_transactions_up_in_bulk_and_finds_the_lost_one) {
  fake_behaviour broken;
  broken.lose_transfer_number = 1'100;
  fake_wallet server(k_operator_key, broken);
  std::ostringstream out, err;
  auto o = short_run(server.port(), loadgen::workload_kind::p2p);
  o.rate = 1'200;
  o.fund_amount_minor = 1'000'000'000;
  const auto outcome = run_loadgen(o, out, err);
  ASSERT_TRUE(outcome.verdict) << err.str();
  EXPECT_EQ(server.transfers_answered(), 1'200);
  EXPECT_EQ(server.transfers_recorded(), 1'199);
  EXPECT_EQ(outcome.acknowledged, 1'200);
  EXPECT_EQ(server.transaction_lookups(), 2);
  EXPECT_EQ(outcome.verdict->lookup_requests, 2);
  EXPECT_EQ(server.transaction_reads(), 0);
  EXPECT_FALSE(outcome.verdict->pass);
  const auto failures = text_of(*outcome.verdict);
  EXPECT_NE(failures.find("was answered 201 but is not in the ledger"), std::string::npos) << failures;
  EXPECT_NE(out.str().find("verification: FAIL"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("2 lookups"), std::string::npos) << out.str();
  show(out, err);
}

// A server whose own reconciliation reports a problem fails the run even when every transfer is in
// place.
TEST(run, failed_reconciliation_fails_verification) {
  fake_behaviour broken;
  broken.reconciliation_broken = true;
  fake_wallet server(k_operator_key, broken);
  std::ostringstream out, err;
  auto o = short_run(server.port(), loadgen::workload_kind::p2p);
  o.rate = 100;
  const auto outcome = run_loadgen(o, out, err);
  ASSERT_TRUE(outcome.verdict);
  EXPECT_FALSE(outcome.verdict->pass);
  EXPECT_NE(text_of(*outcome.verdict).find("reconciliation"), std::string::npos);
}

// With retries on, every 429 (answered to the first attempt of every fourth key, Retry-After 0)
// is retried with the same Idempotency-Key: all requests end in 201, each throttled request was
// retried exactly once, and nothing applies twice (verification passes with exact balances).
// This is a closed-loop payday run, so the employer's single key pays everyone.
TEST(run, retries_follow_retry_after_and_apply_once) {
  fake_behaviour throttled;
  throttled.throttle_every = 4;
  fake_wallet server(k_operator_key, throttled);
  std::ostringstream out, err;
  auto o = short_run(server.port(), loadgen::workload_kind::payday);
  o.mode = loadgen::run_mode::closed;
  o.concurrency = 8;
  o.retries = true;
  // The double throttles a key once, so one retry is enough whatever the clients' timing.
  o.retries_max = 1;
  // A closed loop sends as many salaries as the machine manages in the run: fund the employer for
  // far more than any machine sends, so that every request can end in 201.
  o.fund_amount_minor = 1'000'000'000'000;
  const auto outcome = run_loadgen(o, out, err);
  ASSERT_TRUE(outcome.verdict) << err.str();
  EXPECT_TRUE(outcome.verdict->pass) << text_of(*outcome.verdict);
  EXPECT_EQ(outcome.total.classes.count("429"), 0u);
  EXPECT_EQ(outcome.total.classes.at("201").count, outcome.total.finished);
  ASSERT_GT(outcome.total.first_attempt.at("429"), 0);
  EXPECT_EQ(outcome.total.retries, outcome.total.first_attempt.at("429"));
  EXPECT_EQ(server.transfers_recorded(), outcome.total.finished);
}

TEST(run, without_retries_429_is_counted_as_final) {
  fake_behaviour throttled;
  throttled.throttle_every = 5;
  fake_wallet server(k_operator_key, throttled);
  std::ostringstream out, err;
  const auto outcome = run_loadgen(short_run(server.port(), loadgen::workload_kind::p2p), out, err);
  ASSERT_TRUE(outcome.verdict);
  EXPECT_TRUE(outcome.verdict->pass) << text_of(*outcome.verdict);
  EXPECT_EQ(outcome.total.classes.at("429").count, 60);
  EXPECT_EQ(outcome.total.classes.at("201").count, 240);
}

// The mix workload (payments into the hot merchant, P2P, salaries from the hot employer, and
// balance reads), sent from two I/O threads, runs against the correct double and passes: reads
// answer 200, transfers 201, and every acknowledged transfer of all three kinds is accounted for
// in the balances.
TEST(run, mixed_traffic_with_reads_passes_verification) {
  fake_wallet server(k_operator_key, {});
  std::ostringstream out, err;
  auto o = short_run(server.port(), loadgen::workload_kind::mix);
  o.read_fraction = 0.25;
  o.io_threads = 2;
  const auto outcome = run_loadgen(o, out, err);
  ASSERT_TRUE(outcome.verdict) << err.str();
  EXPECT_TRUE(outcome.verdict->pass) << text_of(*outcome.verdict);
  EXPECT_GT(outcome.total.classes.at("200").count, 30);
  EXPECT_GT(outcome.total.classes.at("201").count, 150);
  EXPECT_EQ(outcome.total.classes.at("200").count + outcome.total.classes.at("201").count, 300);
  EXPECT_EQ(server.transfers_recorded(), outcome.total.classes.at("201").count);
}

// A transfer whose answer is lost after it applied (the connection closes instead, twice, as when
// a server dies mid-request) ends the load with an unknown outcome; replayed with its own
// Idempotency-Key it is found committed, so it is acknowledged once and the money adds up.
// Every 50th key of 300 loses its answers: exactly 6 such transfers.
TEST(run, answers_lost_after_commit_are_replayed_and_found_committed) {
  fake_behaviour lossy;
  lossy.lost_answer_every = 50;
  lossy.lost_answer_attempts = 2;
  lossy.lost_answer_after_apply = true;
  fake_wallet server(k_operator_key, lossy);
  std::ostringstream out, err;
  const auto outcome = run_loadgen(short_run(server.port(), loadgen::workload_kind::hot_merchant), out, err);
  ASSERT_TRUE(outcome.verdict) << err.str();
  EXPECT_TRUE(outcome.verdict->pass) << text_of(*outcome.verdict) << err.str();
  ASSERT_TRUE(outcome.unknown);
  EXPECT_EQ(outcome.unknown->replayed, 6);
  EXPECT_EQ(outcome.unknown->found_committed, 6);
  EXPECT_EQ(outcome.unknown->applied_on_replay, 0);
  EXPECT_EQ(outcome.unknown->unresolved, 0);
  EXPECT_EQ(outcome.acknowledged, 300);
  EXPECT_EQ(server.transfers_recorded(), 300);
  EXPECT_EQ(outcome.total.classes.at("201").count, 294);
  EXPECT_NE(out.str().find("unknown outcomes replayed with their Idempotency-Key: 6; 6 had committed"),
            std::string::npos)
      << out.str();
  show(out, err);
}

// A transfer whose connection is closed before it applied (a request lost with a crashing server)
// is unknown too; its replay applies it then, so it is not lost: all 300 end acknowledged and in
// the ledger, and the summary names how each unknown outcome was resolved.
TEST(run, requests_lost_before_applying_are_replayed_and_applied) {
  fake_behaviour lossy;
  lossy.lost_answer_every = 50;
  lossy.lost_answer_attempts = 2;
  lossy.lost_answer_after_apply = false;
  fake_wallet server(k_operator_key, lossy);
  const auto dir = std::filesystem::path(::testing::TempDir()) / "loadgen_lost_requests";
  std::filesystem::remove_all(dir);
  std::ostringstream out, err;
  auto o = short_run(server.port(), loadgen::workload_kind::hot_merchant);
  o.out_dir = dir.string();
  const auto outcome = run_loadgen(o, out, err);
  ASSERT_TRUE(outcome.verdict) << err.str();
  EXPECT_TRUE(outcome.verdict->pass) << text_of(*outcome.verdict) << err.str();
  ASSERT_TRUE(outcome.unknown);
  EXPECT_EQ(outcome.unknown->replayed, 6);
  EXPECT_EQ(outcome.unknown->found_committed, 0);
  EXPECT_EQ(outcome.unknown->applied_on_replay, 6);
  EXPECT_EQ(outcome.acknowledged, 300);
  EXPECT_EQ(server.transfers_recorded(), 300);
  std::ifstream summary(dir / "summary.json");
  std::stringstream text;
  text << summary.rdbuf();
  EXPECT_NE(text.str().find(R"("acknowledged":300)"), std::string::npos) << text.str();
  EXPECT_NE(
      text.str().find(
          R"("unknown_outcomes":{"replayed":6,"found_committed":0,"applied_on_replay":6,"refused":0,"unresolved":0})"),
      std::string::npos)
      << text.str();
  std::filesystem::remove_all(dir);
}

// A transfer that committed although its answer was 503 (a deadline passed first) is retried
// with its own Idempotency-Key during the load and answered from the stored result: counted as
// found committed, acknowledged once, never applied twice. Every 50th key of 300: exactly 6.
TEST(run, retries_after_503_find_the_committed_result) {
  fake_behaviour late;
  late.lost_answer_every = 50;
  late.lost_answer_attempts = 1;
  late.lost_answer_after_apply = true;
  late.lost_answer_as_503 = true;
  fake_wallet server(k_operator_key, late);
  std::ostringstream out, err;
  auto o = short_run(server.port(), loadgen::workload_kind::hot_merchant);
  o.retries = true;
  const auto outcome = run_loadgen(o, out, err);
  ASSERT_TRUE(outcome.verdict) << err.str();
  EXPECT_TRUE(outcome.verdict->pass) << text_of(*outcome.verdict) << err.str();
  EXPECT_EQ(outcome.total.retried_requests, 6);
  EXPECT_EQ(outcome.retries_found_committed, 6);
  ASSERT_TRUE(outcome.unknown);
  EXPECT_EQ(outcome.unknown->replayed, 0);
  EXPECT_EQ(outcome.acknowledged, 300);
  EXPECT_EQ(server.transfers_recorded(), 300);
  EXPECT_NE(out.str().find("6 answered from the stored result of an earlier attempt"), std::string::npos) << out.str();
}

// Which answers leave a transfer's outcome unknown: any transport failure after the request may
// have left (a refused connect counts too: the load generator cannot tell it from a reset after
// the server read the request, and a replay is always safe) and any 5xx; never a 4xx, a 201, or a
// request that never left the client's queue.
TEST(outcome, transport_errors_and_5xx_are_unknown) {
  auto with_error = [](loadgen::transport_error e) {
    loadgen::http_response r;
    r.error = e;
    return r;
  };
  auto with_status = [](int status) {
    loadgen::http_response r;
    r.status = status;
    return r;
  };
  EXPECT_TRUE(loadgen::is_outcome_unknown(with_error(loadgen::transport_error::connect)));
  EXPECT_TRUE(loadgen::is_outcome_unknown(with_error(loadgen::transport_error::io)));
  EXPECT_TRUE(loadgen::is_outcome_unknown(with_error(loadgen::transport_error::timeout)));
  EXPECT_FALSE(loadgen::is_outcome_unknown(with_error(loadgen::transport_error::queue_full)));
  EXPECT_TRUE(loadgen::is_outcome_unknown(with_status(503)));
  EXPECT_TRUE(loadgen::is_outcome_unknown(with_status(500)));
  EXPECT_FALSE(loadgen::is_outcome_unknown(with_status(422)));
  EXPECT_FALSE(loadgen::is_outcome_unknown(with_status(201)));
}

// A spike's two p99s of accepted requests: until accepted counts the Retry-After wait of a throttled
// first attempt, the accepted answer's own latency does not. Every key's first attempt is answered
// 429 with Retry-After 1, so every request's accepted answer came at least a second after its
// schedule, and each answer's own latency is its total less at least that second (percentiles keep
// the pointwise order; the histogram's two digits leave ~1% of slack).
TEST(run, a_spike_reports_accepted_answers_apart_from_retry_waits) {
  fake_behaviour throttled;
  throttled.throttle_every = 1;
  throttled.throttle_retry_after_s = 1;
  fake_wallet server(k_operator_key, throttled);
  std::ostringstream out, err;
  auto o = short_run(server.port(), loadgen::workload_kind::hot_merchant);
  make_short_spike(o, 20, 3, 4);
  o.retries = true;
  o.retries_max = 1;
  const auto spike = run_loadgen(o, out, err);
  show(out, err);
  ASSERT_TRUE(spike.spike);
  EXPECT_TRUE(spike.verdict && spike.verdict->pass) << err.str();
  EXPECT_EQ(spike.total.retries, spike.total.scheduled);
  EXPECT_GE(spike.spike->p99_accepted_us, 990'000);
  EXPECT_GT(spike.spike->p99_accepted_answer_us, 0);
  EXPECT_LE(spike.spike->p99_accepted_answer_us, spike.spike->p99_accepted_us - 900'000);
}

// A search run steps the rate up, and the spike run's report files exist and name the phases: the
// HTML holds inline SVG charts and the summary the numbers scripts read.
TEST(run, search_and_spike_runs_write_their_reports) {
  fake_wallet server(k_operator_key, {});
  const auto dir = std::filesystem::path(::testing::TempDir()) / "loadgen_reports";
  std::filesystem::remove_all(dir);
  std::ostringstream out, err;
  auto o = short_run(server.port(), loadgen::workload_kind::hot_merchant);
  o.mode = loadgen::run_mode::search;
  o.search_start_rate = 100;
  o.search_step_factor = 2;
  o.search_max_rate = 400;
  o.search_step_seconds = 1;
  // What this checks is the reports, not this machine's latency: the step rule's p99 is out of the
  // way (search_test.cpp checks the steps' sequence with a stub). A step that a busy machine
  // could not send at 90% of its rate is run again, so the climb has three steps at least.
  o.p99_target_ms = 60'000;
  o.out_dir = (dir / "search").string();
  const auto search = run_loadgen(o, out, err);
  ASSERT_TRUE(search.search);
  EXPECT_GE(search.search->steps.size(), 3u);
  EXPECT_TRUE(search.verdict && search.verdict->pass);
  EXPECT_TRUE(std::filesystem::exists(dir / "search" / "summary.json"));

  make_short_spike(o, 50, 4, 6);
  o.out_dir = (dir / "spike").string();
  const auto spike = run_loadgen(o, out, err);
  ASSERT_TRUE(spike.spike);
  EXPECT_TRUE(spike.verdict && spike.verdict->pass);
  show(out, err);
  std::ifstream html(dir / "spike" / "report.html");
  std::stringstream text;
  text << html.rdbuf();
  EXPECT_NE(text.str().find("<svg"), std::string::npos);
  std::ifstream summary(dir / "spike" / "summary.json");
  std::stringstream summary_text;
  summary_text << summary.rdbuf();
  EXPECT_NE(summary_text.str().find("\"recovery_s\""), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace

namespace {}  // namespace
