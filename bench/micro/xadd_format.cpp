// What the relay's thread spends putting a batch's events into its Redis connection's output
// buffer: hiredis's redisAppendCommandArgv per event (each argument formatted with sdscatfmt into
// a new command, then copied into the buffer), as the relay did before events::append_xadd,
// against the pipeline written by hand and copied in once. 130 events, a large batch's worth.
// `bench/micro.sh xadd_format_bench`.

#include <benchmark/benchmark.h>
extern "C" {  // hiredis's sds.h declares its functions without C linkage (and hiredis.h includes it)
#include <hiredis/sds.h>
}
#include <hiredis/hiredis.h>

#include <string>
#include <vector>

#include "events/stream_entry.hpp"

namespace {

constexpr int k_events = 130;

std::vector<persistence::event_record> batch() {
  std::vector<persistence::event_record> events;
  for (int i = 0; i < k_events; ++i) {
    persistence::event_record e;
    e.transaction_id = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f" + std::to_string(1000 + i);
    e.type = "TRANSFER";
    e.currency = "EUR";
    e.created_at = "2026-12-07T15:04:05.123456Z";
    e.cursor = 1'000'000 + i;
    persistence::event_leg payer, payee;
    payer.account = 1000 + i;
    payer.amount = -1250;
    payer.currency = "EUR";
    payee.account = 42;
    payee.amount = 1250;
    payee.currency = "EUR";
    e.legs = {payer, payee};
    events.push_back(e);
  }
  return events;
}

const std::string k_maxlen = "1000000";

void hiredis_argv_per_event(benchmark::State& state) {
  const auto events = batch();
  sds obuf = sdsempty();
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (auto _ : state) {
    sdsclear(obuf);
    for (const auto& e : events) {
      const auto fields = events::to_stream_fields(e);
      argv.clear();
      lengths.clear();
      auto add = [&](const std::string& s) {
        argv.push_back(s.data());
        lengths.push_back(s.size());
      };
      static const std::string xadd = "XADD", maxlen = "MAXLEN", about = "~", auto_id = "*", key = events::k_stream_key;
      add(xadd);
      add(key);
      add(maxlen);
      add(about);
      add(k_maxlen);
      add(auto_id);
      for (const auto& [name, value] : fields) {
        add(name);
        add(value);
      }
      sds cmd = nullptr;
      const int len = redisFormatSdsCommandArgv(&cmd, static_cast<int>(argv.size()), argv.data(), lengths.data());
      obuf = sdscatlen(obuf, cmd, static_cast<std::size_t>(len));
      sdsfree(cmd);
    }
    benchmark::DoNotOptimize(obuf);
  }
  sdsfree(obuf);
  state.SetItemsProcessed(state.iterations() * k_events);
}
BENCHMARK(hiredis_argv_per_event);

void pipeline_by_hand(benchmark::State& state) {
  const auto events = batch();
  sds obuf = sdsempty();
  std::string commands;
  for (auto _ : state) {
    sdsclear(obuf);
    commands.clear();
    for (const auto& e : events)
      events::append_xadd(commands, events::k_stream_key, k_maxlen, events::to_stream_fields(e));
    obuf = sdscatlen(obuf, commands.data(), commands.size());
    benchmark::DoNotOptimize(obuf);
  }
  sdsfree(obuf);
  state.SetItemsProcessed(state.iterations() * k_events);
}
BENCHMARK(pipeline_by_hand);

}  // namespace

BENCHMARK_MAIN();
