#include "actors/service_core.hpp"

#include <caf/all.hpp>

#include "actors/outcomes.hpp"
#include "actors/runs.hpp"

namespace actors {
namespace {

// The bridge between callers outside the actor system and the actors that answer by response:
// it makes the request(...).then(...) and hands the answer to the caller's sink. (Debits do not
// pass here: the account actor answers their sink itself.)
//
// No timeout here on purpose: a posting handed to a writer always gets its true outcome (the
// database bounds every statement), and the single flight of its Idempotency-Key stays open
// until then, so a retry waits for that outcome instead of racing it. The client is answered
// on time by the HTTP layer's own deadline ("outcome unknown, retry with the same key").
//
// `reserved_wait` is an argument rather than a constant inside on purpose: CAF 0.17 spawns an
// actor function without arguments through a null argument tuple it then dereferences (UBSan:
// reference binding to null pointer, caf/detail/init_fun_factory.hpp), so every actor we spawn
// takes at least one.
caf::behavior bridge(caf::event_based_actor* self, std::chrono::milliseconds reserved_wait,
                     std::shared_ptr<account_runtime> runtime) {
  auto failed = [](caf::error&) {
    return unavailable(ledger::error_code::outcome_unknown,
                       "the server stopped before this request finished; retry with the same Idempotency-Key");
  };
  // A writer that answers with an error never answered the posting or run, so it never took it off
  // its queue counts (service_core::post and post_run put it there): that is done here instead.
  auto unqueue = [runtime](const caf::actor& writer, std::int64_t run_postings) {
    for (std::size_t i = 0; i < runtime->writers.size(); ++i) {
      if (runtime->writers[i] != writer) continue;
      --runtime->writer_gauges[i]->queued;
      runtime->writer_gauges[i]->run_postings_queued -= run_postings;
    }
  };
  return {
      [=](call_atom, caf::actor& registry, ledger::account_id id, amount_sink& sink) {
        // A read for display: bounded, and 0 (nothing known in flight) if the answer is late.
        self->request(registry, reserved_wait, reserved_atom::value, id)
            .then([sink](ledger::amount_minor reserved) { sink.deliver(reserved); },
                  [sink](caf::error&) { sink.deliver(0); });
      },
      [=](call_atom, caf::actor& writer, persistence::posting_request& request, reply_sink& sink) {
        self->request(writer, caf::infinite, posting_atom::value, std::move(request))
            .then([sink](persistence::posting_outcome& outcome) { sink.deliver(to_money_result(outcome)); },
                  [sink, failed, unqueue, writer](caf::error& e) {
                    unqueue(writer, 0);
                    sink.deliver(failed(e));
                  });
      },
      // A batch of transfers (actors/runs.hpp): no timeout, for the reason above.
      [=](call_atom, caf::actor& writer, posting_run& run, run_sink& sink) {
        const auto count = run.postings.size();
        self->request(writer, caf::infinite, run_atom::value, std::move(run))
            .then([sink](posting_run_outcome& outcome) { sink.deliver(std::move(outcome)); },
                  [sink, count, unqueue, writer](caf::error&) {
                    unqueue(writer, static_cast<std::int64_t>(count));
                    posting_run_outcome unknown;
                    unknown.outcomes.resize(count);
                    for (auto& o : unknown.outcomes) o.outcome = ledger::error_code::outcome_unknown;
                    sink.deliver(std::move(unknown));
                  });
      },
  };
}

}  // namespace

void service_core::post_run(std::size_t writer, posting_run run, run_sink sink) {
  ++runtime->writer_gauges[writer]->queued;
  caf::anon_send(any_bridge(), call_atom::value, runtime->writers[writer], std::move(run), std::move(sink));
}

void service_core::spawn_bridges(std::size_t count, std::chrono::milliseconds reserved_wait) {
  for (std::size_t i = 0; i < count; ++i) bridges.push_back(system->spawn(bridge, reserved_wait, runtime));
}

void service_core::post(std::size_t writer, persistence::posting_request request, reply_sink sink) {
  ++runtime->writer_gauges[writer]->queued;
  caf::anon_send(any_bridge(), call_atom::value, runtime->writers[writer], std::move(request), std::move(sink));
}

void service_core::reserved(ledger::account_id id, std::function<void(ledger::amount_minor)> done) {
  if (stopped.load()) return done(0);
  caf::anon_send(any_bridge(), call_atom::value, registry_for(id), id, amount_sink{std::move(done)});
}

money_result shutting_down() {
  return unavailable(ledger::error_code::server_busy,
                     "the server is shutting down; retry with the same Idempotency-Key on another server or later");
}

}  // namespace actors
