// The account actor's state machine and the ledger writer's batching, driven by CAF's test
// coordinator: no thread, no sleep, no database. Every message is delivered when the test says
// so, so each interleaving named below happens exactly as written, every run.
//
// The account registry and its actors run as in the server; the ledger writer they talk to is a
// scripted actor whose answers the test gives, and account loads are answered by the test too.
// The writer's own tests run the real writer behaviour over a scripted backend.

#define CAF_SUITE actors_deterministic

#include <caf/test/dsl.hpp>
// This suite is its own program: CAF's test engine provides main().
#include <caf/test/unit_test_impl.hpp>

#include <pqxx/except>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "actors/accounts.hpp"
#include "actors/ledger_writer.hpp"
#include "actors/messages.hpp"
#include "actors/outcomes.hpp"
#include "actors/runs.hpp"

using namespace actors;
using ledger::error_code;

namespace {

constexpr ledger::account_id k_payer = 10;
constexpr ledger::account_id k_payee = 20;
constexpr ledger::principal_id k_owner = 7;

// A posting the account actor handed to the writer, waiting for the test's answer.
struct held_posting {
  persistence::posting_request request;
  caf::response_promise promise;
};

struct writer_script {
  std::vector<held_posting> held;
};

using answer_atom = caf::atom_constant<caf::atom("answer")>;

// A ledger writer that holds every posting until the test answers it (a promise is delivered
// from its own actor's context, so the answer goes through the writer).
caf::behavior scripted_writer(caf::event_based_actor* self, writer_script* script) {
  return {
      [=](posting_atom, persistence::posting_request& request) {
        auto promise = self->make_response_promise();
        script->held.push_back({std::move(request), promise});
        return promise;
      },
      [=](answer_atom, std::size_t i, persistence::posting_outcome& out) {
        script->held.at(i).promise.deliver(std::move(out));
      },
  };
}

struct account_fixture : test_coordinator_fixture<> {
  writer_script script;
  caf::actor writer;
  std::shared_ptr<account_runtime> rt = std::make_shared<account_runtime>();
  caf::actor registry;
  std::vector<std::pair<ledger::account_id, caf::actor>> loads;
  std::vector<bool> loads_after_writers;  // per load: whether it was to wait for the writers
  std::vector<money_result> answers;
  int keys = 0;

  account_fixture() {
    writer = sys.spawn(scripted_writer, &script);
    rt->writers = {writer};
    rt->writer_gauges = {std::make_shared<writer_gauges>()};
    rt->load = [this](ledger::account_id id, caf::actor actor, bool after_writers) {
      loads.emplace_back(id, std::move(actor));
      loads_after_writers.push_back(after_writers);
    };
    rt->inflight_max = 3;
    rt->idle_ms = 1'000;
    rt->live_max_per_shard = 16;
    rt->writer_queue_max = 100;
    registry = spawn_account_registry(sys, rt);
    consume_messages();
  }

  ~account_fixture() override {
    // The registry re-arms its scan timer forever: stop it before the base class runs out the clock.
    caf::anon_send_exit(registry, caf::exit_reason::user_shutdown);
    consume_messages();
  }

  account_facts payer_facts(int shards = 0) const {
    account_facts f{k_payer, k_owner, "EUR", ledger::account_kind::user, {}};
    for (int i = 0; i < shards; ++i) f.shards.push_back(k_payer + 100 + i);
    return f;
  }

  // Sends a debit of `amount` from the payer to the registry and lets every actor run.
  void debit(ledger::amount_minor amount, std::optional<account_facts> payer) {
    caf::anon_send(registry, debit_atom::value, transfer(amount, "key-" + std::to_string(++keys), std::move(payer)),
                   reply_sink{[this](money_result r) { answers.push_back(std::move(r)); }});
    consume_messages();
  }

  // A transfer of `amount` from the payer to the payee, as its money flow hands it to the registry.
  static debit_request transfer(ledger::amount_minor amount, const std::string& key,
                                std::optional<account_facts> payer) {
    debit_request req;
    req.owner = k_owner;
    req.posting.posting.type = ledger::transaction_type::transfer;
    req.posting.posting.debit_account = k_payer;
    req.posting.posting.credit_account = k_payee;
    req.posting.posting.credit_parent = k_payee;
    req.posting.posting.amount = amount;
    req.posting.posting.currency = "EUR";
    req.posting.transaction_id = "tx-" + key;
    req.posting.principal = k_owner;
    req.posting.idempotency_key = key;
    req.posting.request_hash = key;
    req.payer = std::move(payer);
    return req;
  }

  // Answers held posting `i` as committed, with the payer's main row now at (balance, version).
  void commit(std::size_t i, ledger::amount_minor balance, std::int64_t version) {
    persistence::posting_outcome out;
    out.transaction_id = "tx-" + std::to_string(i);
    out.response_status = 201;
    out.response_body = "{}";
    out.rows_after.push_back({k_payer, balance, version, 0});
    answer(i, std::move(out));
  }

  void fail(std::size_t i, error_code code) {
    persistence::posting_outcome out;
    out.outcome = code;
    answer(i, std::move(out));
  }

  void answer(std::size_t i, persistence::posting_outcome out) {
    --rt->writer_gauges[0]->queued;
    caf::anon_send(writer, answer_atom::value, i, std::move(out));
    consume_messages();
  }

  // Answers load `i` with the payer's record: main row at (balance, version), and `status`.
  void loaded(std::size_t i, ledger::amount_minor balance, std::int64_t version,
              ledger::account_status status = ledger::account_status::active, bool found = true) {
    auto result = payer_record(balance, version);
    result.found = found;
    result.record.status = status;
    answer_load(i, std::move(result));
  }

  // The payer's record as a load reads it, with its main row at (balance, version).
  static account_loaded payer_record(ledger::amount_minor balance, std::int64_t version) {
    account_loaded result;
    result.found = true;
    result.record.id = k_payer;
    result.record.owner_id = k_owner;
    result.record.currency = "EUR";
    result.record.balance = balance;
    result.record.version = version;
    return result;
  }

  void answer_load(std::size_t i, account_loaded result) {
    caf::anon_send(loads.at(i).second, loaded_atom::value, std::move(result));
    consume_messages();
  }

  // Load `i` fails: the database did not answer.
  void load_failed(std::size_t i) {
    account_loaded result;
    result.failed = true;
    caf::anon_send(loads.at(i).second, loaded_atom::value, std::move(result));
    consume_messages();
  }

  // What the writer sends after a batch of unknown outcome that may have credited the payer.
  void uncertain_notice() {
    balance_notice notice;
    notice.uncertain = true;
    notice.rows.push_back({k_payer, 0, -1, 0});
    caf::anon_send(registry, notice_atom::value, std::move(notice));
    consume_messages();
  }

  std::int64_t live() const { return rt->live_actors.load(); }

  // Cluster mode, with this node holding the payer's partition at `epoch` (7 at first; a later
  // epoch: the partition was another node's in between).
  std::shared_ptr<cluster::ownership> owned;
  void hold_payers_partition(std::int64_t epoch = 7) {
    if (!owned) owned = std::make_shared<cluster::ownership>("node-a", 4);
    rt->ownership = owned;
    owned->hold(owned->partition_of(k_payer), epoch, cluster::ownership::clock::now() + std::chrono::hours(1));
  }

  // Sends a batch's items of the payer (actors/runs.hpp) to the registry as one run and lets every
  // actor run; the decision lands in `decisions`.
  std::vector<run_decision> decisions;
  void debit_run_of(const std::vector<ledger::amount_minor>& amounts, bool atomic) {
    debit_run run;
    run.owner = k_owner;
    for (auto amount : amounts) run.postings.push_back(transfer(amount, "item-" + std::to_string(++keys), {}).posting);
    run.payer = payer_facts();
    run.stop_at_first_refusal = atomic;
    run.done = [this](run_decision d) { decisions.push_back(std::move(d)); };
    caf::anon_send(registry, batch_atom::value, std::move(run));
    consume_messages();
  }
};

}  // namespace

CAF_TEST_FIXTURE_SCOPE(account_actor_tests, account_fixture)

// An actor that starts from the directory's facts sends its first debit to the writer without
// knowing the balance (the writer checks it under its lock); the writer's answer teaches it the
// committed balance, and a later debit beyond it is refused before any database work.
CAF_TEST(the_first_answer_teaches_the_balance_and_later_refusals_need_no_writer) {
  debit(60, payer_facts());
  CAF_REQUIRE_EQUAL(script.held.size(), 1u);
  CAF_CHECK(loads.empty());
  commit(0, 40, 1);
  CAF_REQUIRE_EQUAL(answers.size(), 1u);
  CAF_CHECK(answers[0].outcome == error_code::ok);
  debit(50, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 1u);
  CAF_REQUIRE_EQUAL(answers.size(), 2u);
  CAF_CHECK(answers[1].outcome == error_code::insufficient_funds);
  CAF_CHECK(answers[1].decided_before_writer);
}

// A debit reaches an actor without the account's facts (a refund, a reversal), so the actor reads
// the account first. A credit commits after that read's snapshot and its notice arrives before the
// read's answer: the notice's newer main row is kept, not replaced by the older one the load
// brings, and the debit it funds goes to the writer instead of being refused for funds.
CAF_TEST(a_credit_noticed_during_the_first_load_is_not_lost) {
  debit(100, std::nullopt);
  CAF_REQUIRE_EQUAL(loads.size(), 1u);
  CAF_CHECK(!loads_after_writers.at(0));  // a first load does not wait for the writers
  CAF_CHECK(script.held.empty());
  balance_notice notice;
  notice.rows.push_back({k_payer, 1'000, 5, 0});
  caf::anon_send(registry, notice_atom::value, std::move(notice));
  consume_messages();
  loaded(0, 0, 4);
  CAF_CHECK(answers.empty());
  CAF_CHECK_EQUAL(script.held.size(), 1u);
}

// Debits in flight are reserved: with 100 committed, a debit of 60 in flight leaves 40, so a
// second 60 is refused at once; when the writer refuses the first, its reservation is released
// and the same 60 goes through to the writer.
CAF_TEST(debits_in_flight_are_reserved_until_the_writer_answers) {
  debit(1, payer_facts());
  commit(0, 100, 1);
  debit(60, payer_facts());
  CAF_REQUIRE_EQUAL(script.held.size(), 2u);
  debit(60, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 2u);
  CAF_REQUIRE_EQUAL(answers.size(), 2u);
  CAF_CHECK(answers[1].outcome == error_code::insufficient_funds);
  fail(1, error_code::insufficient_funds);
  CAF_REQUIRE_EQUAL(answers.size(), 3u);
  CAF_CHECK(answers[2].outcome == error_code::insufficient_funds);
  debit(60, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 3u);
}

// A debit of 80 of the 100 committed is in flight when another writer's credit of 5 commits after
// it and its notice overtakes the debit's own answer: the main row then says 25, which already
// leaves out the 80 still reserved. A debit of 10 that 25 pays is sent to the writer, not refused
// as if 80 were to be taken from 25 again; once the last debit in flight is answered, the actor
// refuses before the writer again.
CAF_TEST(a_notice_that_overtakes_a_debits_answer_does_not_count_that_debit_twice) {
  debit(1, payer_facts());
  commit(0, 100, 1);
  debit(80, payer_facts());
  CAF_REQUIRE_EQUAL(script.held.size(), 2u);
  balance_notice credit;
  credit.rows.push_back({k_payer, 25, 3, 0});
  caf::anon_send(registry, notice_atom::value, std::move(credit));
  consume_messages();
  debit(10, payer_facts());
  CAF_REQUIRE_EQUAL(script.held.size(), 3u);
  CAF_CHECK_EQUAL(answers.size(), 1u);
  // Even counted as in the rows already, 30 does not fit in 25: refused at once.
  debit(30, payer_facts());
  CAF_REQUIRE_EQUAL(answers.size(), 2u);
  CAF_CHECK(answers[1].outcome == error_code::insufficient_funds);
  CAF_CHECK(answers[1].decided_before_writer);
  commit(1, 20, 2);  // the debit of 80's own answer, older than the notice: its rows change nothing
  commit(2, 15, 4);
  CAF_REQUIRE_EQUAL(answers.size(), 4u);
  debit(16, payer_facts());
  CAF_REQUIRE_EQUAL(answers.size(), 5u);
  CAF_CHECK(answers[4].outcome == error_code::insufficient_funds);
  CAF_CHECK(answers[4].decided_before_writer);
  CAF_CHECK_EQUAL(script.held.size(), 3u);
}

// Two debits of one writer's batch are answered with the rows as the whole batch left them: after
// the first answer, the rows include the second debit, which is still reserved until its own
// answer. A debit the account can pay meanwhile goes to the writer.
CAF_TEST(a_batchs_answer_that_includes_another_debit_in_flight_does_not_count_it_twice) {
  debit(1, payer_facts());
  commit(0, 100, 1);
  debit(60, payer_facts());
  debit(30, payer_facts());
  CAF_REQUIRE_EQUAL(script.held.size(), 3u);
  commit(1, 10, 2);  // the batch took 60 and 30
  debit(5, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 4u);
  CAF_CHECK_EQUAL(answers.size(), 2u);
}

// A hot account's funds are decided by the writer: a sweep's notice (main row credited, shard
// emptied) may arrive after a later credit's notice of the same shard, and the actor would then
// count the swept money nowhere.
CAF_TEST(a_hot_accounts_debits_are_refused_for_funds_by_the_writer_only) {
  const auto facts = payer_facts(1);
  debit(1, facts);
  CAF_REQUIRE_EQUAL(loads.size(), 1u);
  auto record = payer_record(100, 1);
  record.record.shards.push_back({k_payer + 100, 0, 50, 1});
  answer_load(0, std::move(record));
  commit(0, 99, 2);
  // 149 known (99 + the shard's 50): a debit of 500 still goes to the writer.
  debit(500, facts);
  CAF_CHECK_EQUAL(script.held.size(), 2u);
  CAF_CHECK_EQUAL(answers.size(), 1u);
}

// An unknown commit outcome makes the actor forget what it believed and reload; debits that
// arrive meanwhile wait, and once the load answers they are decided in arrival order against the
// reloaded balance.
CAF_TEST(an_unknown_outcome_reloads_and_waiting_debits_are_decided_in_order) {
  debit(10, payer_facts());
  fail(0, error_code::outcome_unknown);
  CAF_REQUIRE_EQUAL(answers.size(), 1u);
  CAF_CHECK(answers[0].outcome == error_code::outcome_unknown);
  CAF_REQUIRE_EQUAL(loads.size(), 1u);
  debit(30, payer_facts());
  debit(30, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 1u);
  CAF_CHECK_EQUAL(answers.size(), 1u);
  loaded(0, 50, 4);
  CAF_REQUIRE_EQUAL(script.held.size(), 2u);
  CAF_CHECK_EQUAL(script.held[1].request.posting.amount, 30);
  CAF_REQUIRE_EQUAL(answers.size(), 2u);
  CAF_CHECK(answers[1].outcome == error_code::insufficient_funds);
}

// An operator's freeze that reaches the actor while its load is on the way wins over the load,
// which may have read the status before the freeze committed: the next debit is refused.
CAF_TEST(a_status_change_during_a_load_wins_over_the_load) {
  debit(10, payer_facts(2));  // a hot payer: its actor reads its state in the background
  CAF_REQUIRE_EQUAL(loads.size(), 1u);
  caf::anon_send(registry, status_atom::value, k_payer, ledger::account_status::frozen, std::int64_t{1});
  consume_messages();
  loaded(0, 500, 3, ledger::account_status::active);
  debit(10, payer_facts(2));
  CAF_REQUIRE_EQUAL(answers.size(), 1u);
  CAF_CHECK(answers[0].outcome == error_code::account_inactive);
  CAF_CHECK(answers[0].decided_before_writer);
  CAF_CHECK_EQUAL(script.held.size(), 1u);
  caf::anon_send(registry, status_atom::value, k_payer, ledger::account_status::active, std::int64_t{2});
  consume_messages();
  debit(10, payer_facts(2));
  CAF_CHECK_EQUAL(script.held.size(), 2u);
}

// Two operators freeze and unfreeze an account at once: the unfreeze commits last (status version
// 2), but the freeze's notice (version 1) reaches the actor after it. The actor keeps the newer
// status, active, as the database holds it, and the next debit goes to the writer; a load that
// read the account before both (version 0) changes nothing either.
CAF_TEST(a_status_notice_older_than_the_status_known_changes_nothing) {
  debit(10, payer_facts());
  CAF_REQUIRE_EQUAL(script.held.size(), 1u);
  caf::anon_send(registry, status_atom::value, k_payer, ledger::account_status::active, std::int64_t{2});
  caf::anon_send(registry, status_atom::value, k_payer, ledger::account_status::frozen, std::int64_t{1});
  consume_messages();
  debit(10, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 2u);
  CAF_CHECK(answers.empty());
}

// A freeze learnt from an operator's notice outlasts a reload that failed: the next debit brings
// the account's facts and the actor serves from them again, but the facts carry no status, so the
// debit is still refused as the freeze says, not sent on as if the account were active.
CAF_TEST(a_status_from_a_notice_outlasts_a_failed_reload) {
  debit(10, payer_facts());
  fail(0, error_code::outcome_unknown);
  CAF_REQUIRE_EQUAL(loads.size(), 1u);
  caf::anon_send(registry, status_atom::value, k_payer, ledger::account_status::frozen, std::int64_t{1});
  consume_messages();
  load_failed(0);
  debit(10, payer_facts());
  CAF_REQUIRE_EQUAL(answers.size(), 2u);
  CAF_CHECK(answers[1].outcome == error_code::account_inactive);
  CAF_CHECK(answers[1].decided_before_writer);
  CAF_CHECK_EQUAL(script.held.size(), 1u);
}

// At most account_inflight_max debits of one account are in flight; the next is shed with 503
// account_busy and changes nothing.
CAF_TEST(debits_over_the_in_flight_bound_are_shed) {
  debit(1, payer_facts());
  commit(0, 1000, 1);
  for (int i = 0; i < 3; ++i) debit(1, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 4u);
  debit(1, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 4u);
  CAF_REQUIRE_EQUAL(answers.size(), 2u);
  CAF_CHECK(answers[1].outcome == error_code::account_busy);
}

// An account that does not exist answers not_found, and its actor stops at once rather than
// answering not_found to an account created later under the same id.
CAF_TEST(an_account_that_does_not_exist_leaves_no_actor_behind) {
  debit(10, std::nullopt);
  CAF_CHECK_EQUAL(live(), 1);
  CAF_REQUIRE_EQUAL(loads.size(), 1u);
  loaded(0, 0, 0, ledger::account_status::active, false);
  CAF_REQUIRE_EQUAL(answers.size(), 1u);
  CAF_CHECK(answers[0].outcome == error_code::not_found);
  CAF_CHECK_EQUAL(live(), 0);
}

// An idle actor stops only when it has seen everything forwarded to it: here a debit reaches its
// mailbox behind the registry's idle probe, so its offer to stop is declined and the debit is
// served; once idle again, it stops.
CAF_TEST(an_idle_actor_stops_only_when_nothing_forwarded_is_unseen) {
  debit(1, payer_facts());
  commit(0, 100, 1);
  CAF_CHECK_EQUAL(live(), 1);
  advance_time(std::chrono::milliseconds(2'000));  // the registry's scan sends the actor a tick
  caf::anon_send(registry, debit_atom::value, transfer(5, "late", payer_facts()),
                 reply_sink{[this](money_result r) { answers.push_back(std::move(r)); }});
  // The registry forwards the debit before the actor handles its tick.
  sched.prioritize(registry);
  sched.run_once();
  consume_messages();
  CAF_CHECK_EQUAL(live(), 1);
  CAF_REQUIRE_EQUAL(script.held.size(), 2u);
  commit(1, 95, 2);
  CAF_CHECK_EQUAL(answers.size(), 2u);
  advance_time(std::chrono::milliseconds(2'000));
  consume_messages();
  CAF_CHECK_EQUAL(live(), 0);
}

// A batch's items of one payer are decided in one run, in order, against what the account holds
// less its debits in flight and the run's earlier items; the accepted ones stay reserved until the
// run is released, so a single debit meanwhile cannot spend them; the release ends the reservation.
CAF_TEST(a_debit_run_reserves_its_items_in_order_until_it_is_released) {
  debit(1, payer_facts());
  commit(0, 100, 1);
  debit(60, payer_facts());  // in flight: 40 left
  CAF_REQUIRE_EQUAL(script.held.size(), 2u);
  debit_run_of({30, 20, 5}, false);
  CAF_REQUIRE_EQUAL(decisions.size(), 1u);
  const auto& d = decisions[0];
  CAF_CHECK(d.decided[0].outcome == error_code::ok);
  CAF_CHECK(d.decided[1].outcome == error_code::insufficient_funds);
  CAF_CHECK(d.decided[2].outcome == error_code::ok);
  CAF_CHECK(!d.refused_at);
  CAF_CHECK(static_cast<bool>(d.release));
  // 100 − 60 − 35 leaves 5: a single debit of 10 is refused at once.
  debit(10, payer_facts());
  CAF_REQUIRE_EQUAL(answers.size(), 2u);
  CAF_CHECK(answers[1].outcome == error_code::insufficient_funds);
  // The run committed: the account's main row is at 65 (100 − 35); 60 are still in flight.
  decisions[0].release.release({{k_payer, 65, 3, 0}}, false);
  consume_messages();
  debit(5, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 3u);
  // The release's rows came while the 60 was in flight, and may include it already (its answer
  // and the release travel apart): a debit is now refused at once only when 65 cannot pay it,
  // and one that 65 − 60 − 5 cannot pay goes to the writer.
  debit(66, payer_facts());
  CAF_REQUIRE_EQUAL(answers.size(), 3u);
  CAF_CHECK(answers[2].outcome == error_code::insufficient_funds);
  debit(1, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 4u);
}

// An atomic batch's run stops at its first refused item and reserves nothing; a release that is
// dropped uncalled ends its reservation too.
CAF_TEST(an_atomic_run_with_a_refused_item_reserves_nothing) {
  debit(1, payer_facts());
  commit(0, 40, 1);
  debit_run_of({30, 50, 5}, true);
  CAF_REQUIRE_EQUAL(decisions.size(), 1u);
  CAF_REQUIRE(decisions[0].refused_at.has_value());
  CAF_CHECK_EQUAL(*decisions[0].refused_at, 1u);
  CAF_CHECK(decisions[0].decided[1].outcome == error_code::insufficient_funds);
  CAF_CHECK(!decisions[0].release);
  debit(40, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 2u);
  fail(1, error_code::insufficient_funds);  // its reservation ends
  debit_run_of({40}, true);
  CAF_REQUIRE_EQUAL(decisions.size(), 2u);
  CAF_CHECK(!decisions[1].refused_at);
  debit(1, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 2u);  // all 40 reserved by the run
  decisions.pop_back();                     // the run's release dropped uncalled
  consume_messages();
  debit(1, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 3u);
}

// A batch of unknown outcome may have credited an account whose actor knows its balance. The
// writer's uncertain notice makes the actor read the account again, and a debit that only the
// missed credit pays waits for that read instead of being refused.
CAF_TEST(an_uncertain_notice_reloads_an_account_a_lost_batch_may_have_credited) {
  debit(1, payer_facts());
  commit(0, 40, 1);
  uncertain_notice();
  CAF_REQUIRE_EQUAL(loads.size(), 1u);
  CAF_CHECK(loads_after_writers.at(0));
  debit(100, payer_facts());
  CAF_CHECK_EQUAL(answers.size(), 1u);
  CAF_CHECK_EQUAL(script.held.size(), 1u);
  loaded(0, 140, 2);  // the credit had committed
  CAF_CHECK_EQUAL(script.held.size(), 2u);
}

// A reload asked for while a load runs cannot trust that load: it may have read the rows before
// the commit that made the reload necessary. The actor reads once more, and debits wait for it.
// Both reads are reloads: each waits for the writers that hold the rows (a COMMIT still under way).
CAF_TEST(a_reload_asked_for_during_a_load_reads_the_account_again) {
  debit(60, payer_facts());
  fail(0, error_code::outcome_unknown);
  CAF_REQUIRE_EQUAL(loads.size(), 1u);
  CAF_CHECK(loads_after_writers.at(0));
  uncertain_notice();
  CAF_CHECK_EQUAL(loads.size(), 1u);
  loaded(0, 100, 1);
  CAF_REQUIRE_EQUAL(loads.size(), 2u);
  CAF_CHECK(loads_after_writers.at(1));
  debit(120, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 1u);
  loaded(1, 150, 2);
  CAF_CHECK_EQUAL(script.held.size(), 2u);
}

// A reload that fails (its wait for the writers timed out) leaves the next load to wait for them
// too: a writer whose COMMIT was cut off may still hold the rows, and a plain read would show them
// as they were before it.
CAF_TEST(a_failed_reload_leaves_the_next_load_waiting_for_the_writers) {
  debit(60, payer_facts());
  fail(0, error_code::outcome_unknown);
  CAF_REQUIRE_EQUAL(loads.size(), 1u);
  CAF_CHECK(loads_after_writers.at(0));
  load_failed(0);
  debit(10, std::nullopt);  // no facts: the actor reads the account before it decides
  CAF_REQUIRE_EQUAL(loads.size(), 2u);
  CAF_CHECK(loads_after_writers.at(1));
  loaded(1, 100, 2);
  debit(10, std::nullopt);
  CAF_CHECK_EQUAL(loads.size(), 2u);  // loaded: nothing more is read
}

// An actor that started from the account's facts knows no balance (the writer checks funds), so
// only the bound on money in flight limits what it reserves. A run of a thousand items counts as
// one debit in flight, so without that bound a few large runs overflowed the reservations. A run
// or debit past it is answered 503 and reserves nothing; the reservations within it stand, and a
// release makes room again.
CAF_TEST(money_in_flight_from_an_account_of_unknown_balance_is_bounded) {
  constexpr ledger::amount_minor big = 2'000'000'000'000'000'000;
  debit_run_of({big, big}, false);
  CAF_REQUIRE_EQUAL(decisions.size(), 1u);
  CAF_CHECK(!decisions[0].refused_at);
  CAF_CHECK(decisions[0].decided[0].outcome == error_code::ok);
  CAF_CHECK(decisions[0].decided[1].outcome == error_code::ok);
  debit_run_of({big}, false);  // 6e18 in flight: past the bound
  CAF_REQUIRE_EQUAL(decisions.size(), 2u);
  CAF_REQUIRE(decisions[1].refused_at.has_value());
  CAF_CHECK(decisions[1].decided[0].outcome == error_code::account_busy);
  CAF_CHECK(!decisions[1].release);
  debit_run_of({big, big, big, big, big}, false);  // its own total is past int64
  CAF_REQUIRE_EQUAL(decisions.size(), 3u);
  CAF_CHECK(decisions[2].decided[4].outcome == error_code::account_busy);
  debit(big, payer_facts());
  CAF_REQUIRE_EQUAL(answers.size(), 1u);
  CAF_CHECK(answers[0].outcome == error_code::account_busy);
  CAF_CHECK(script.held.empty());
  decisions[0].release.release({}, false);
  consume_messages();
  debit(big, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 1u);
}

// Cluster mode: a batch's items are decided only under the lease of the payer's partition and go
// to the writer fenced by it, as a single debit does. Without the lease the run is refused (503
// not_partition_owner) and reserves nothing; after the partition changed hands the actor reads
// the account again before it decides more.
CAF_TEST(a_run_is_decided_under_the_partitions_lease_and_fenced_by_it) {
  auto owned = std::make_shared<cluster::ownership>("node-a", 4);
  rt->ownership = owned;
  const int partition = owned->partition_of(k_payer);
  debit_run_of({10}, false);
  CAF_REQUIRE_EQUAL(decisions.size(), 1u);
  CAF_CHECK(decisions[0].decided[0].outcome == error_code::not_partition_owner);
  CAF_CHECK(!decisions[0].release);
  owned->hold(partition, 7, cluster::ownership::clock::now() + std::chrono::hours(1));
  debit_run_of({10}, false);
  CAF_REQUIRE_EQUAL(decisions.size(), 2u);
  CAF_CHECK(decisions[1].decided[0].outcome == error_code::ok);
  CAF_REQUIRE(decisions[1].postings[0].fence.has_value());
  CAF_CHECK_EQUAL(decisions[1].postings[0].fence->partition, partition);
  CAF_CHECK_EQUAL(decisions[1].postings[0].fence->epoch, 7);
  CAF_CHECK_EQUAL(decisions[1].postings[0].fence->node_id, "node-a");
  owned->hold(partition, 8, cluster::ownership::clock::now() + std::chrono::hours(1));
  debit_run_of({10}, false);
  CAF_REQUIRE_EQUAL(decisions.size(), 3u);
  CAF_CHECK(decisions[2].decided[0].outcome == error_code::account_busy);
  CAF_CHECK_EQUAL(loads.size(), 1u);
  rt->ownership = nullptr;
}

// A writer that stopped answers nothing: a debit sent to it is answered outcome_unknown, its
// reservation ends, and the writer's queue count does not keep it (which would refuse every later
// debit with writer_busy once it reached the bound).
CAF_TEST(a_debit_sent_to_a_stopped_writer_leaves_no_count_behind) {
  caf::anon_send_exit(writer, caf::exit_reason::user_shutdown);
  consume_messages();
  debit(10, payer_facts());
  CAF_REQUIRE_EQUAL(answers.size(), 1u);
  CAF_CHECK(answers[0].outcome == error_code::outcome_unknown);
  CAF_CHECK_EQUAL(rt->writer_gauges[0]->queued.load(), 0);
  CAF_CHECK(script.held.empty());
}

// Cluster mode: other nodes credit the account and change its status, and their writers' notices
// reach only their own actors. A debit this actor believes unfunded, or of an account it believes
// frozen, single or in a run, is decided by the writer under the row lock instead of refused here.
CAF_TEST(in_cluster_mode_the_writer_decides_funds_and_status) {
  hold_payers_partition();
  debit(60, payer_facts());
  CAF_REQUIRE_EQUAL(script.held.size(), 1u);
  commit(0, 0, 1);  // the actor now knows a balance of 0
  debit(500, payer_facts());
  CAF_REQUIRE_EQUAL(script.held.size(), 2u);
  CAF_CHECK_EQUAL(answers.size(), 1u);
  // Another node's deposit of 1,000 committed meanwhile: the writer pays it.
  commit(1, 500, 3);
  CAF_REQUIRE_EQUAL(answers.size(), 2u);
  CAF_CHECK(answers[1].outcome == error_code::ok);
  caf::anon_send(registry, status_atom::value, k_payer, ledger::account_status::frozen, std::int64_t{1});
  consume_messages();
  debit(10, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 3u);
  CAF_CHECK_EQUAL(answers.size(), 2u);
  debit_run_of({10'000}, false);
  CAF_REQUIRE_EQUAL(decisions.size(), 1u);
  CAF_CHECK(decisions[0].decided[0].outcome == error_code::ok);
  CAF_CHECK(decisions[0].release);
  decisions[0].release.release({}, false);
  consume_messages();
  // Without ownership (one node), the same actor refuses both before the writer.
  rt->ownership = nullptr;
  debit(10, payer_facts());
  CAF_REQUIRE_EQUAL(answers.size(), 3u);
  CAF_CHECK(answers[2].outcome == error_code::account_inactive);
  CAF_CHECK(answers[2].decided_before_writer);
}

// In cluster mode, debits waiting for a reload find, when it answers, that the partition changed
// hands meanwhile: the first makes the actor read the account again, and the others wait for that
// read behind it instead of being decided on what the previous holder may have changed since.
CAF_TEST(in_cluster_mode_debits_waiting_when_the_lease_changed_hands_wait_for_the_next_load) {
  hold_payers_partition();
  debit(10, payer_facts());
  CAF_REQUIRE_EQUAL(loads.size(), 1u);
  loaded(0, 100, 1);
  fail(0, error_code::outcome_unknown);
  CAF_REQUIRE_EQUAL(loads.size(), 2u);
  debit(20, payer_facts());
  debit(30, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 1u);
  hold_payers_partition(8);
  loaded(1, 100, 2);
  CAF_CHECK_EQUAL(script.held.size(), 1u);
  CAF_REQUIRE_EQUAL(loads.size(), 3u);
  loaded(2, 100, 3);
  CAF_REQUIRE_EQUAL(script.held.size(), 3u);
  CAF_CHECK_EQUAL(script.held[1].request.posting.amount, 20);
  CAF_CHECK_EQUAL(script.held[2].request.posting.amount, 30);
}

// In cluster mode an actor that starts from the directory's facts also reads the account in the
// background: shards added through another node are not among this node's facts, and once the
// load tells them, the payer's debits carry them (their money counts towards its funds).
CAF_TEST(in_cluster_mode_an_actor_learns_shards_its_facts_do_not_name) {
  hold_payers_partition();
  debit(10, payer_facts());
  CAF_REQUIRE_EQUAL(script.held.size(), 1u);
  CAF_REQUIRE_EQUAL(loads.size(), 1u);
  auto result = payer_record(0, 1);
  result.record.shards.push_back({k_payer + 100, 0, 500, 2});
  answer_load(0, std::move(result));
  debit(20, payer_facts());
  CAF_REQUIRE_EQUAL(script.held.size(), 2u);
  CAF_CHECK_EQUAL(script.held[1].request.posting.debit_shards.size(), 1u);
}

CAF_TEST_FIXTURE_SCOPE_END()

// Holds (docs/money-flows.md, "Holds"): what the account's active holds keep, as its actor counts it.
namespace {

// A hold of `amount` on the payer (`place`), or the capture of `captures` of a hold of `hold`.
debit_request hold_request(ledger::amount_minor amount, const std::string& key, ledger::amount_minor hold = 0) {
  auto req = account_fixture::transfer(amount, key, std::nullopt);
  req.posting.posting.type = ledger::transaction_type::capture;
  auto rows = std::make_shared<persistence::flow_rows>();
  rows->hold = persistence::flow_rows::hold_change{
      hold == 0 ? persistence::flow_rows::hold_change::kind::place : persistence::flow_rows::hold_change::kind::capture,
      "hold-" + key, k_payee, 60};
  req.posting.posting.releases_held = hold;
  if (hold != 0) req.owner = 0;
  req.posting.rows = std::move(rows);
  return req;
}

}  // namespace

struct hold_fixture : account_fixture {
  void send(debit_request req) {
    caf::anon_send(registry, debit_atom::value, std::move(req),
                   reply_sink{[this](money_result r) { answers.push_back(std::move(r)); }});
    consume_messages();
  }
  // Answers held posting `i` as committed: the payer's main row at (balance, version), its holds
  // keeping `held` as of `held_version`.
  void commit_held(std::size_t i, ledger::amount_minor balance, std::int64_t version, ledger::amount_minor held,
                   std::int64_t held_version) {
    persistence::posting_outcome out;
    out.response_status = 201;
    out.response_body = "{}";
    out.rows_after.push_back({k_payer, balance, version, 0, held, held_version});
    answer(i, std::move(out));
  }
  void notice(ledger::amount_minor balance, std::int64_t version, ledger::amount_minor held,
              std::int64_t held_version) {
    balance_notice n;
    n.rows.push_back({k_payer, balance, version, 0, held, held_version});
    caf::anon_send(registry, notice_atom::value, std::move(n));
    consume_messages();
  }
};

CAF_TEST_FIXTURE_SCOPE(account_actor_hold_tests, hold_fixture)

// A hold counts against available like a debit in flight while it travels and as held money once
// committed: debits and holds beyond what it leaves are refused before any database work, and its
// capture may spend exactly what it keeps.
CAF_TEST(a_hold_counts_against_available_and_its_capture_spends_it) {
  debit(1, payer_facts());
  commit(0, 1'000, 1);
  send(hold_request(600, "h1"));
  CAF_REQUIRE_EQUAL(script.held.size(), 2u);
  // In flight: reserved. 400 is left, so a hold of 401 is refused at once.
  send(hold_request(401, "h2"));
  CAF_REQUIRE_EQUAL(answers.size(), 2u);
  CAF_CHECK(answers[1].outcome == error_code::hold_exceeds_available);
  CAF_CHECK(answers[1].decided_before_writer);
  commit_held(1, 1'000, 1, 600, 1);
  debit(401, payer_facts());
  CAF_REQUIRE_EQUAL(answers.size(), 4u);
  CAF_CHECK(answers[3].outcome == error_code::insufficient_funds);
  CAF_CHECK_EQUAL(script.held.size(), 2u);
  debit(400, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 3u);
  // Nothing is left but the hold, and its own capture may take all of it.
  send(hold_request(600, "c1", 600));
  CAF_CHECK_EQUAL(script.held.size(), 4u);
  send(hold_request(601, "c2", 600));
  CAF_CHECK_EQUAL(script.held.size(), 4u);
  CAF_CHECK(answers.back().outcome == error_code::insufficient_funds);
}

// A void or an expiry reaches a live actor as a notice with a newer held_version: the money is
// spendable at once; an older notice (a writer's answer overtaken by the expiry) changes nothing.
CAF_TEST(a_newer_held_version_releases_and_an_older_one_is_ignored) {
  debit(1, payer_facts());
  commit_held(0, 1'000, 1, 700, 4);
  debit(301, payer_facts());
  CAF_CHECK(answers.back().outcome == error_code::insufficient_funds);
  notice(1'000, 1, 0, 5);
  notice(1'000, 1, 700, 4);
  debit(1'000, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 2u);
}

// After a reload (a restart, or an unknown outcome) the actor counts the active holds it read
// with the account.
CAF_TEST(a_load_counts_the_active_holds) {
  debit(10, payer_facts());
  fail(0, error_code::outcome_unknown);
  CAF_REQUIRE_EQUAL(loads.size(), 1u);
  auto result = payer_record(1'000, 3);
  result.record.held = 700;
  result.record.held_version = 2;
  answer_load(0, std::move(result));
  debit(301, payer_facts());
  CAF_CHECK(answers.back().outcome == error_code::insufficient_funds);
  CAF_CHECK_EQUAL(script.held.size(), 1u);
  debit(300, payer_facts());
  CAF_CHECK_EQUAL(script.held.size(), 2u);
}

CAF_TEST_FIXTURE_SCOPE_END()

namespace {

// A writer backend that records every commit and answers from a script.
struct scripted_backend final : writer_backend {
  std::vector<std::size_t> commits;  // postings per commit
  int connects = 0;
  int disconnects = 0;
  bool throw_broken_once = false;
  // The next commit loses its connection while isolating postings one by one: the first posting
  // committed, the second's COMMIT is in doubt, the rest were never sent.
  bool lose_while_isolating_once = false;
  bool connected = false;

  bool connect() override {
    if (!connected) ++connects;
    connected = true;
    return true;
  }
  persistence::batch_result commit(const std::vector<persistence::posting_request>& requests) override {
    commits.push_back(requests.size());
    if (throw_broken_once) {
      throw_broken_once = false;
      throw pqxx::broken_connection("the test cut the connection");
    }
    persistence::batch_result r;
    for (const auto& q : requests) {
      persistence::posting_outcome out;
      out.transaction_id = q.transaction_id;
      out.response_status = 201;
      r.outcomes.push_back(std::move(out));
    }
    if (lose_while_isolating_once) {
      lose_while_isolating_once = false;
      r.connection_lost = true;
      for (std::size_t i = 1; i < r.outcomes.size(); ++i) {
        r.outcomes[i].outcome = i == 1 ? error_code::outcome_unknown : error_code::database_unavailable;
        r.outcomes[i].response_status = 0;
      }
    }
    return r;
  }
  void disconnect() override {
    ++disconnects;
    connected = false;
  }
  bool usable() const override { return connected; }
};

struct writer_fixture : test_coordinator_fixture<> {
  std::shared_ptr<scripted_backend> backend = std::make_shared<scripted_backend>();
  std::shared_ptr<writer_gauges> gauges = std::make_shared<writer_gauges>();
  caf::actor writer;
  std::vector<persistence::posting_outcome> outcomes;

  void start(std::size_t batch_max) {
    writer_config config;
    config.batch_postings_max = batch_max;
    config.batch_wait_us = 0;
    writer = spawn_ledger_writer(sys, config, gauges, backend, false);
    consume_messages();
  }

  // A registry stand-in that keeps every notice the writer sends it.
  std::vector<balance_notice> notices;
  caf::actor notice_sink;
  void record_notices() {
    notice_sink = sys.spawn([this](caf::event_based_actor*) -> caf::behavior {
      return {[this](notice_atom, balance_notice& n) { notices.push_back(std::move(n)); }};
    });
    caf::anon_send(writer, registry_handles{{notice_sink}});
    consume_messages();
  }
  ~writer_fixture() {
    if (notice_sink) {
      caf::anon_send_exit(notice_sink, caf::exit_reason::user_shutdown);
      consume_messages();
    }
  }

  static persistence::posting_request paying(std::string id, ledger::account_id credit, ledger::account_id parent) {
    persistence::posting_request r;
    r.transaction_id = std::move(id);
    r.posting.debit_account = 1;
    r.posting.credit_account = credit;
    r.posting.credit_parent = parent;
    return r;
  }

  // The rows of the one uncertain notice sent, as (id, parent_id).
  std::vector<std::pair<ledger::account_id, ledger::account_id>> uncertain_rows() const {
    std::vector<std::pair<ledger::account_id, ledger::account_id>> out;
    for (const auto& n : notices) {
      CAF_CHECK(n.uncertain);
      for (const auto& row : n.rows) out.emplace_back(row.id, row.parent_id);
    }
    return out;
  }

  // Sends `n` postings before the writer runs, as a burst that is already in its mailbox, lets
  // the writer run, and collects the answers.
  void burst(int n) {
    using handle = decltype(self->request(writer, caf::infinite, posting_atom::value, persistence::posting_request{}));
    std::vector<handle> handles;
    for (int i = 0; i < n; ++i) {
      persistence::posting_request request;
      request.transaction_id = "tx-" + std::to_string(outcomes.size()) + "-" + std::to_string(i);
      ++gauges->queued;
      handles.push_back(self->request(writer, caf::infinite, posting_atom::value, std::move(request)));
    }
    consume_messages();
    for (auto& h : handles) {
      h.receive([&](persistence::posting_outcome& out) { outcomes.push_back(std::move(out)); },
                [&](caf::error& err) { CAF_FAIL("the writer failed: " << sys.render(err)); });
    }
  }
};

}  // namespace

CAF_TEST_FIXTURE_SCOPE(ledger_writer_tests, writer_fixture)

// Postings already waiting when the writer runs are committed together, in one transaction.
CAF_TEST(a_burst_is_committed_as_one_batch) {
  start(500);
  burst(3);
  CAF_REQUIRE_EQUAL(backend->commits.size(), 1u);
  CAF_CHECK_EQUAL(backend->commits[0], 3u);
  CAF_CHECK_EQUAL(gauges->queued.load(), 0);
  CAF_REQUIRE_EQUAL(outcomes.size(), 3u);
  for (const auto& out : outcomes) CAF_CHECK(out.outcome == error_code::ok);
}

// A batch never exceeds writer.batch_postings_max: five postings with a bound of two commit as
// two, two and one.
CAF_TEST(batches_are_bounded) {
  start(2);
  burst(5);
  CAF_CHECK_EQUAL(backend->commits, (std::vector<std::size_t>{2, 2, 1}));
  CAF_CHECK_EQUAL(gauges->queued.load(), 0);
}

// A connection lost during a commit answers every posting of the batch outcome_unknown (the
// commit may or may not have happened), drops the connection, and the next batch reconnects.
CAF_TEST(a_lost_connection_answers_outcome_unknown_and_reconnects) {
  start(500);
  backend->throw_broken_once = true;
  burst(2);
  CAF_REQUIRE_EQUAL(outcomes.size(), 2u);
  for (const auto& out : outcomes) CAF_CHECK(out.outcome == error_code::outcome_unknown);
  CAF_CHECK_EQUAL(backend->disconnects, 1);
  CAF_CHECK_EQUAL(gauges->failures.load(), 1u);
  CAF_CHECK_EQUAL(gauges->queued.load(), 0);
  burst(1);
  CAF_CHECK_EQUAL(backend->connects, 2);
  CAF_CHECK_EQUAL(backend->commits, (std::vector<std::size_t>{2, 1}));
  CAF_REQUIRE_EQUAL(outcomes.size(), 3u);
  CAF_CHECK(outcomes[2].outcome == error_code::ok);
}

// The accounts a lost batch may have credited get no answer of their own: the writer names them
// to the registry in an uncertain notice (a shard under its parent), so their actors read them again.
CAF_TEST(a_lost_batch_names_the_accounts_it_may_have_credited) {
  start(500);
  record_notices();
  backend->throw_broken_once = true;
  persistence::posting_request plain = paying("tx-plain", 2, 2);
  persistence::posting_request to_shard = paying("tx-shard", 31, 3);
  // A reversal's credit back onto a hot account's shard names the shard's account in its leg.
  persistence::posting_request legs = paying("tx-legs", 5, 5);
  legs.posting.legs = {{1, -7, "EUR", {}, 0}, {5, 2, "EUR", {}, 5}, {41, 5, "EUR", {}, 4}};
  gauges->queued += 3;
  auto first = self->request(writer, caf::infinite, posting_atom::value, std::move(plain));
  auto second = self->request(writer, caf::infinite, posting_atom::value, std::move(to_shard));
  auto third = self->request(writer, caf::infinite, posting_atom::value, std::move(legs));
  consume_messages();
  for (auto* h : {&first, &second, &third}) {
    h->receive([](persistence::posting_outcome& out) { CAF_CHECK(out.outcome == error_code::outcome_unknown); },
               [](caf::error&) { CAF_FAIL("the writer failed"); });
  }
  CAF_REQUIRE_EQUAL(notices.size(), 1u);
  using rows = std::vector<std::pair<ledger::account_id, ledger::account_id>>;
  // 5 twice (the routing credit and its leg): its actor reloads once either way.
  CAF_CHECK_EQUAL(uncertain_rows(), (rows{{2, 0}, {31, 3}, {5, 0}, {5, 0}, {41, 4}}));
}

// A connection lost while a refused batch's postings were isolated one by one: the posting that
// committed is answered ok, the one in doubt outcome_unknown, the unsent one unavailable, and only
// the one in doubt has its credits named in an uncertain notice.
CAF_TEST(a_batch_lost_while_isolating_names_only_the_postings_in_doubt) {
  start(500);
  record_notices();
  backend->lose_while_isolating_once = true;
  gauges->queued += 3;
  auto first = self->request(writer, caf::infinite, posting_atom::value, paying("tx-1", 2, 2));
  auto second = self->request(writer, caf::infinite, posting_atom::value, paying("tx-2", 31, 3));
  auto third = self->request(writer, caf::infinite, posting_atom::value, paying("tx-3", 4, 4));
  consume_messages();
  std::vector<error_code> codes;
  for (auto* h : {&first, &second, &third}) {
    h->receive([&codes](persistence::posting_outcome& out) { codes.push_back(out.outcome); },
               [](caf::error&) { CAF_FAIL("the writer failed"); });
  }
  CAF_CHECK(codes ==
            (std::vector<error_code>{error_code::ok, error_code::outcome_unknown, error_code::database_unavailable}));
  CAF_CHECK_EQUAL(backend->disconnects, 1);
  CAF_REQUIRE_EQUAL(notices.size(), 1u);
  using rows = std::vector<std::pair<ledger::account_id, ledger::account_id>>;
  CAF_CHECK_EQUAL(uncertain_rows(), (rows{{31, 3}}));
}

// A batch of transfers (a run) whose commit is lost: every item is answered outcome_unknown, and
// the accounts its items credit are named, as for a lost batch of single postings.
CAF_TEST(a_lost_run_names_the_accounts_it_may_have_credited) {
  start(500);
  record_notices();
  backend->throw_broken_once = true;
  posting_run run;
  run.postings = {paying("tx-a", 2, 2), paying("tx-b", 31, 3)};
  auto handle = self->request(writer, caf::infinite, run_atom::value, std::move(run));
  consume_messages();
  handle.receive(
      [](posting_run_outcome& out) {
        CAF_REQUIRE_EQUAL(out.outcomes.size(), 2u);
        for (const auto& o : out.outcomes) CAF_CHECK(o.outcome == error_code::outcome_unknown);
      },
      [](caf::error&) { CAF_FAIL("the writer failed"); });
  CAF_REQUIRE_EQUAL(notices.size(), 1u);
  using rows = std::vector<std::pair<ledger::account_id, ledger::account_id>>;
  CAF_CHECK_EQUAL(uncertain_rows(), (rows{{2, 0}, {31, 3}}));
}

CAF_TEST_FIXTURE_SCOPE_END()
