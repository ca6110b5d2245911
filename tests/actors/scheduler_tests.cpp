// The actors' scheduler policy (actors/scheduler.hpp) under real threads: every message sent from
// many threads at once is handled exactly once, by workers that park between bursts and must be
// woken for each; and the workers run as batch threads.

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "actors/scheduler.hpp"

namespace actors {
namespace {

struct scheduler_config : caf::actor_system_config {
  explicit scheduler_config(std::size_t workers) {
    load<caf::scheduler::coordinator<sharing_policy>>();
    set("scheduler.max-threads", workers);
    set("logger.console", caf::atom("none"));
  }
};

// An actor that adds what it is sent to a shared total and answers with its own count.
caf::behavior adder(caf::stateful_actor<std::int64_t>* self, std::atomic<std::int64_t>* total) {
  return {[=](std::int64_t value) {
    total->fetch_add(value);
    return ++self->state;
  }};
}

TEST(SharingPolicy, EveryMessageFromManyThreadsIsHandledExactlyOnce) {
  constexpr int senders = 4;
  constexpr int actors_count = 16;
  constexpr int per_sender = 5'000;
  for (std::size_t workers : {std::size_t{1}, std::size_t{2}, std::size_t{4}}) {
    std::atomic<std::int64_t> total{0};
    scheduler_config cfg(workers);
    caf::actor_system system(cfg);
    std::vector<caf::actor> targets;
    for (int i = 0; i < actors_count; ++i) targets.push_back(system.spawn(adder, &total));

    // Each sender asks and waits for every answer before its next burst, so the workers run dry
    // and park between bursts: every burst must wake them again.
    std::atomic<std::int64_t> answered{0};
    std::vector<std::thread> threads;
    for (int s = 0; s < senders; ++s) {
      threads.emplace_back([&, s] {
        caf::scoped_actor self(system);
        for (int burst = 0; burst < per_sender / 50; ++burst) {
          for (int i = 0; i < 50; ++i) {
            const auto& target = targets[static_cast<std::size_t>((s * 7 + burst + i) % actors_count)];
            self->request(target, caf::infinite, std::int64_t{1})
                .receive([&](std::int64_t) { ++answered; }, [](caf::error&) { ADD_FAILURE() << "a request failed"; });
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(answered.load(), senders * per_sender) << workers << " workers";
    EXPECT_EQ(total.load(), senders * per_sender) << workers << " workers";
  }
}

TEST(SharingPolicy, OneWayMessagesSentFasterThanHandledAreAllHandled) {
  std::atomic<std::int64_t> total{0};
  scheduler_config cfg(2);
  caf::actor_system system(cfg);
  auto target = system.spawn(adder, &total);
  std::vector<std::thread> threads;
  for (int s = 0; s < 4; ++s) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20'000; ++i) caf::anon_send(target, std::int64_t{1});
    });
  }
  for (auto& t : threads) t.join();
  // Every message above is in the mailbox before this request, so its answer counts them all.
  caf::scoped_actor self(system);
  std::int64_t handled = 0;
  self->request(target, caf::infinite, std::int64_t{0})
      .receive([&](std::int64_t count) { handled = count; },
               [](caf::error&) { ADD_FAILURE() << "the request failed"; });
  EXPECT_EQ(handled, 80'001);
  EXPECT_EQ(total.load(), 80'000);
}

TEST(SharingPolicy, WorkersRunAsBatchThreads) {
  scheduler_config cfg(2);
  caf::actor_system system(cfg);
  auto probe = system.spawn(
      []() -> caf::behavior { return {[](std::int64_t) { return std::int64_t{sched_getscheduler(0)}; }}; });
  caf::scoped_actor self(system);
  std::int64_t policy = -1;
  self->request(probe, caf::infinite, std::int64_t{0})
      .receive([&](std::int64_t p) { policy = p; }, [](caf::error&) { ADD_FAILURE() << "the request failed"; });
  EXPECT_EQ(policy, SCHED_BATCH);
}

}  // namespace
}  // namespace actors
