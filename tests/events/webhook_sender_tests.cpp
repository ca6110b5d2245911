// The webhook client's name lookups (events/name_lookup.*): a name that does not resolve in time
// delays only the deliveries to it, and a name nobody waits for any more is not looked up. A receiver on 127.0.0.1; host names are looked up by a lookup
// of the test's own that holds one name until the test lets it go.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "events/webhook_sender.hpp"
#include "tests/events/webhook_receiver.hpp"

namespace {

using namespace std::chrono_literals;

// A deadline for what must happen long before it; reaching it fails the test instead of hanging.
constexpr auto k_long_enough = 60s;

// Every name is 127.0.0.1; "slow.test" only once the test releases it.
class held_lookup {
 public:
  events::host_addresses operator()(const std::string& host) {
    std::unique_lock lock(mutex_);
    ++lookups_[host];
    changed_.notify_all();
    if (host == "slow.test") changed_.wait(lock, [this] { return released_; });
    return {{"127.0.0.1"}, {}};
  }

  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

  // Waits until `host` has been looked up `n` times; false at the deadline.
  bool wait_for_lookups(const std::string& host, int n) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, k_long_enough, [&] { return lookups_[host] >= n; });
  }

  int lookups(const std::string& host) {
    std::lock_guard lock(mutex_);
    return lookups_[host];
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, int> lookups_;
  bool released_ = false;
};

// The answers of the attempts, by delivery id.
class answers {
 public:
  std::function<void(events::webhook_response)> collect(std::int64_t id) {
    return [this, id](events::webhook_response r) {
      std::lock_guard lock(mutex_);
      got_[id] = std::move(r);
      changed_.notify_all();
    };
  }

  // Waits for the answer of `id`; nullopt at the deadline.
  std::optional<events::webhook_response> wait(std::int64_t id) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, k_long_enough, [&] { return got_.count(id) != 0; })) return std::nullopt;
    return got_[id];
  }

  bool has(std::int64_t id) {
    std::lock_guard lock(mutex_);
    return got_.count(id) != 0;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::int64_t, events::webhook_response> got_;
};

// Lets the held name go when a test ends early, before the sender waits for its lookup threads.
struct release_on_exit {
  held_lookup& names;
  ~release_on_exit() { names.release(); }
};

events::webhook_request request_to(const std::string& url, std::int64_t id) {
  events::webhook_request r;
  r.url = url;
  r.body = R"({"n":)" + std::to_string(id) + "}";
  r.signature = "t=1,v1=00";
  r.event_id = "event-" + std::to_string(id);
  r.delivery_id = id;
  return r;
}

}  // namespace

TEST(webhook_sender, a_name_that_does_not_resolve_delays_only_the_deliveries_to_it) {
  events_test::webhook_receiver receiver([](int) { return 204; });
  const auto port = std::to_string(receiver.port());
  held_lookup names;
  answers got;

  events::sender_config config;
  config.allow_loopback = true;
  config.timeout_ms = 120'000;  // no attempt here may end by its deadline
  config.lookup_threads = 2;
  config.lookup = [&names](const std::string& host) { return names(host); };
  events::webhook_sender sender(config);
  sender.start();
  const release_on_exit guard{names};

  // Two attempts to the slow name: they share its one lookup, which holds one of the two threads.
  sender.send(request_to("http://slow.test:" + port + "/slow", 1), got.collect(1));
  ASSERT_TRUE(names.wait_for_lookups("slow.test", 1));
  sender.send(request_to("http://slow.test:" + port + "/slow", 2), got.collect(2));

  // Deliveries to other names go on meanwhile, one after the other on the free thread.
  sender.send(request_to("http://fast.test:" + port + "/fast", 3), got.collect(3));
  sender.send(request_to("http://other.test:" + port + "/other", 4), got.collect(4));
  sender.send(request_to("http://127.0.0.1:" + port + "/literal", 5), got.collect(5));
  for (std::int64_t id : {3, 4, 5}) {
    const auto r = got.wait(id);
    ASSERT_TRUE(r) << "delivery " << id << " waited for the slow name";
    EXPECT_TRUE(r->delivered) << r->error;
    EXPECT_EQ(r->status_code, 204);
  }
  EXPECT_FALSE(got.has(1));
  EXPECT_FALSE(got.has(2));
  EXPECT_EQ(names.lookups("slow.test"), 1);
  EXPECT_EQ(names.lookups("127.0.0.1"), 0) << "an IP literal is not looked up";

  names.release();
  for (std::int64_t id : {1, 2}) {
    const auto r = got.wait(id);
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->delivered) << r->error;
  }
  EXPECT_EQ(names.lookups("slow.test"), 1) << "the two attempts shared one lookup";

  std::map<std::string, int> targets;
  for (const auto& q : receiver.requests()) ++targets[q.target];
  EXPECT_EQ(targets, (std::map<std::string, int>{{"/slow", 2}, {"/fast", 1}, {"/other", 1}, {"/literal", 1}}));
}

TEST(webhook_sender, a_name_held_past_the_deadline_times_out_and_its_late_answer_sends_nothing) {
  events_test::webhook_receiver receiver([](int) { return 204; });
  held_lookup names;
  answers got;

  events::sender_config config;
  config.allow_loopback = true;
  config.timeout_ms = 300;
  config.lookup_threads = 1;
  config.lookup = [&names](const std::string& host) { return names(host); };
  events::webhook_sender sender(config);
  sender.start();
  const release_on_exit guard{names};

  const auto port = std::to_string(receiver.port());
  sender.send(request_to("http://slow.test:" + port + "/slow", 1), got.collect(1));
  const auto r = got.wait(1);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->delivered);
  EXPECT_TRUE(r->timed_out) << r->error;

  // The lookup answers after the attempt ended: that answer is dropped, nothing is sent. The next
  // name goes through the same lookup thread, which posts the late answer to the sender's thread
  // before it takes that name, so the late answer is handled before the next attempt's is. (The
  // next attempt may itself end by its deadline on a slow machine: either answer will do.)
  names.release();
  sender.send(request_to("http://after.test:" + port + "/after", 2), got.collect(2));
  ASSERT_TRUE(got.wait(2));
  for (const auto& q : receiver.requests()) EXPECT_NE(q.target, "/slow");
}

// The pool itself: a name queued behind a held one whose every waiter has stopped wanting it is
// dropped without a lookup (its callback never runs), and the next name is looked up at once.
TEST(lookup_pool, a_name_nobody_wants_any_more_is_not_looked_up) {
  held_lookup names;
  std::mutex mutex;
  std::condition_variable answered;
  std::map<std::string, int> answers;
  const auto note = [&](const std::string& host) {
    return [&, host](const events::host_addresses&) {
      std::lock_guard lock(mutex);
      ++answers[host];
      answered.notify_all();
    };
  };
  std::atomic<bool> stale_wanted{true};
  events::lookup_pool pool([&names](const std::string& host) { return names(host); }, 1);
  const release_on_exit guard{names};

  pool.lookup("slow.test", note("slow.test"));
  ASSERT_TRUE(names.wait_for_lookups("slow.test", 1));
  pool.lookup("stale.test", note("stale.test"), [&] { return stale_wanted.load(); });
  pool.lookup("stale.test", note("stale.test"), [&] { return stale_wanted.load(); });
  pool.lookup("fresh.test", note("fresh.test"), [] { return true; });
  stale_wanted = false;
  names.release();

  std::unique_lock lock(mutex);
  ASSERT_TRUE(answered.wait_for(lock, k_long_enough, [&] { return answers["fresh.test"] == 1; }));
  EXPECT_EQ(answers["slow.test"], 1);
  EXPECT_EQ(answers["stale.test"], 0);
  EXPECT_EQ(names.lookups("stale.test"), 0);
  EXPECT_EQ(names.lookups("fresh.test"), 1);
}

TEST(webhook_sender, the_systems_resolver_finds_localhost) {
  const auto found = events::lookup_host("localhost");
  EXPECT_TRUE(found.error.empty()) << found.error;
  ASSERT_FALSE(found.addresses.empty());
  for (const auto& a : found.addresses) EXPECT_TRUE(a == "127.0.0.1" || a == "::1") << a;
}

// A new endpoint's host (events::destination_judge): a name that does not resolve within the wait
// is refused then, without waiting for the lookup, whose late answer goes nowhere; once the name
// answers, it is judged by its addresses.
TEST(destination_judge, a_name_that_does_not_resolve_in_time_is_refused_then) {
  held_lookup names;
  const release_on_exit guard{names};
  auto judge =
      std::make_shared<events::destination_judge>([&names](const std::string& host) { return names(host); }, 1, 50ms);

  const auto slow = judge->refused("slow.test", true);
  ASSERT_TRUE(slow.has_value());
  EXPECT_NE(slow->find("did not resolve within 50 ms"), std::string::npos) << *slow;
  EXPECT_EQ(names.lookups("slow.test"), 1);

  names.release();
  // The same name again: its first lookup's answer, or a lookup of its own, but an answer. Asked
  // until it comes within the 50 ms (the one lookup thread may first have to finish the first
  // lookup on a busy machine), 1,200 times (a minute) at most.
  bool answered = false;
  for (int asked = 0; asked < 1'200 && !answered; ++asked) answered = !judge->refused("slow.test", true).has_value();
  EXPECT_TRUE(answered);
  const auto loopback = judge->refused("slow.test", false);
  ASSERT_TRUE(loopback.has_value());
  // A name is refused in one way, whatever it resolves to (the log says what).
  EXPECT_EQ(*loopback,
            "the host slow.test does not resolve, or resolves to an address that is not public: webhooks go to public "
            "addresses only");
}

// Every address counts: one private address among public ones refuses the name; a name that does
// not resolve says why; IP literals are judged without a lookup.
TEST(destination_judge, every_address_of_the_host_is_judged) {
  std::mutex mutex;
  std::map<std::string, int> looked_up;
  auto judge = std::make_shared<events::destination_judge>(
      [&](const std::string& host) -> events::host_addresses {
        {
          std::lock_guard lock(mutex);
          ++looked_up[host];
        }
        if (host == "mixed.test") return {{"93.184.216.34", "10.1.2.3"}, {}};
        if (host == "public.test") return {{"93.184.216.34", "2606:2800:220:1::1"}, {}};
        return {{}, "Name or service not known"};
      },
      2, k_long_enough);

  const auto mixed = judge->refused("mixed.test", false);
  ASSERT_TRUE(mixed.has_value());
  EXPECT_EQ(*mixed,
            "the host mixed.test does not resolve, or resolves to an address that is not public: webhooks go "
            "to public addresses only");
  EXPECT_EQ(judge->refused("public.test", false), std::nullopt);
  // A name that does not resolve is refused as one resolving to a private address is: the caller
  // learns nothing of the server's network.
  EXPECT_EQ(judge->refused("nowhere.test", true),
            "the host nowhere.test does not resolve, or resolves to an address "
            "that is not public: webhooks go to public addresses only");

  EXPECT_EQ(judge->refused("93.184.216.34", false), std::nullopt);
  const auto literal = judge->refused("127.0.0.1", false);
  ASSERT_TRUE(literal.has_value());
  EXPECT_NE(literal->find("127.0.0.1 is a loopback address"), std::string::npos) << *literal;
  EXPECT_EQ(judge->refused("127.0.0.1", true), std::nullopt);
  std::lock_guard lock(mutex);
  EXPECT_EQ(looked_up.count("93.184.216.34") + looked_up.count("127.0.0.1"), 0U);
}

// At most `at_once` judgements are admitted at a time; a place frees when its ticket goes, and a
// ticket keeps the judge alive after its owner has let it go.
TEST(destination_judge, at_most_so_many_judgements_at_once) {
  auto judge = std::make_shared<events::destination_judge>(
      [](const std::string&) {
        return events::host_addresses{{"93.184.216.34"}, {}};
      },
      2, k_long_enough);
  auto first = judge->admit();
  auto second = judge->admit();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(judge->admit(), nullptr);
  first.reset();
  auto third = judge->admit();
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(judge->admit(), nullptr);

  judge.reset();
  EXPECT_EQ(third->refused("public.test", false), std::nullopt);
  second.reset();
  EXPECT_NE(third->admit(), nullptr);
}
