// Webhooks end to end, through wallet-server children on the suite's own PostgreSQL and Redis, with
// receivers on 127.0.0.1 started by each test (webhooks.allow_loopback on, except where the test
// is about refusing such addresses): signed deliveries, in order per endpoint, retried with backoff
// until they are delivered or the retry span ends; a dead endpoint never holds up another; private
// addresses refused; a deleted endpoint gets nothing more; nobody sees another principal's
// endpoints. Every wait is for a condition, with a generous bound.

#include <algorithm>
#include <atomic>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>

#include "tests/events/fixture.hpp"
#include "tests/events/webhook_receiver.hpp"
#include "tests/support/hmac.hpp"
#include "tests/support/process.hpp"

namespace events_test {
namespace {

namespace json = boost::json;
using test_support::eventually;
using test_support::metric_value;

// Where an endpoint stands in the feed (migration 029): a following endpoint at the fan-out's shared
// position or at its own cursor, whichever is further; any other at its own cursor.
constexpr const char* k_standing =
    "CASE WHEN follows_fan_out THEN GREATEST(feed_cursor, (SELECT cursor FROM webhook_fan_out)) ELSE feed_cursor END";

// Settings that make retries quick: the backoff in tens of milliseconds, a short poll.
std::map<std::string, std::string> quick_webhooks(std::map<std::string, std::string> extra = {}) {
  std::map<std::string, std::string> env{{"WALLET_WEBHOOKS_ALLOW_LOOPBACK", "true"},
                                         {"WALLET_WEBHOOKS_POLL_INTERVAL_MS", "5"},
                                         {"WALLET_WEBHOOKS_BACKOFF_BASE_MS", "20"},
                                         {"WALLET_WEBHOOKS_BACKOFF_CAP_MS", "100"},
                                         {"WALLET_WEBHOOKS_TIMEOUT_MS", "5000"}};
  for (auto& [k, v] : extra) env[k] = v;
  return env;
}

struct party {
  std::int64_t id = 0;  // principal
  std::string key;
  std::int64_t account = 0;
};

party make_party(http_client& c, const std::string& op, const std::string& role, std::int64_t deposit = 0) {
  const auto who = test_support::create_principal(c, op, role);
  party p{who.id, who.key, test_support::create_account(c, op, who.id, "EUR")};
  if (deposit > 0) test_support::deposit(c, op, p.account, deposit);
  return p;
}

struct endpoint {
  std::int64_t id = 0;
  std::string secret;
};

test_support::response register_endpoint(http_client& c, const std::string& key, const std::string& body) {
  return c.request("POST", "/v1/webhook-endpoints", body,
                   {{"Authorization", "Bearer " + key}, {"Content-Type", "application/json"}});
}

endpoint create_endpoint(http_client& c, const std::string& key, const std::string& url,
                         const std::string& events = R"(["*"])") {
  const auto r = register_endpoint(c, key, R"({"url":")" + url + R"(","events":)" + events + "}");
  EXPECT_EQ(r.status, 201) << r.body;
  if (r.status != 201) return {};
  const auto o = r.json().as_object();
  return {o.at("id").as_int64(), std::string(o.at("signingSecret").as_string())};
}

json::array deliveries(http_client& c, const std::string& key, std::int64_t endpoint_id) {
  const auto r = c.get("/v1/webhook-endpoints/" + std::to_string(endpoint_id) + "/deliveries", key);
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return {};
  return r.json().as_object().at("deliveries").as_array();
}

std::string field(const json::value& v, const char* name) {
  const auto& f = v.as_object().at(name);
  return f.is_string() ? std::string(f.as_string()) : json::serialize(f);
}

int count_with_status(const json::array& list, const std::string& status) {
  int n = 0;
  for (const auto& d : list) n += field(d, "status") == status ? 1 : 0;
  return n;
}

// True when `header` is "t=<unix>,v1=<hex>" signing `body` with `secret`, made within 5 minutes.
bool signed_by(const std::string& header, const std::string& secret, const std::string& body) {
  const auto comma = header.find(",v1=");
  if (header.rfind("t=", 0) != 0 || comma == std::string::npos) return false;
  const auto t = header.substr(2, comma - 2);
  const auto age = std::time(nullptr) - std::stoll(t);
  return age < 300 && age > -300 && header.substr(comma + 4) == test_support::hmac_sha256_hex(secret, t + "." + body);
}

// Which of `secrets` made each v1 of a "t=<unix>,v1=...[,v1=...]" header over `body`, in the
// header's order ("?" for a v1 that none of them made); empty when the header is not of that shape
// or its t is more than 5 minutes away.
std::vector<std::string> signers(const std::string& header, const std::string& body,
                                 const std::vector<std::string>& secrets) {
  if (header.rfind("t=", 0) != 0) return {};
  const auto first = header.find(",v1=");
  if (first == std::string::npos) return {};
  const auto t = header.substr(2, first - 2);
  const auto age = std::time(nullptr) - std::stoll(t);
  if (age >= 300 || age <= -300) return {};
  std::vector<std::string> out;
  for (auto at = first; at != std::string::npos;) {
    const auto next = header.find(",v1=", at + 4);
    const auto v1 = header.substr(at + 4, next == std::string::npos ? std::string::npos : next - at - 4);
    std::string who = "?";
    for (const auto& secret : secrets) {
      if (test_support::hmac_sha256_hex(secret, t + "." + body) == v1) who = secret;
    }
    out.push_back(who);
    at = next;
  }
  return out;
}

// The events `key` sees in the feed after `after`, by event id.
std::map<std::string, json::value> feed_events(http_client& c, const std::string& key, const std::string& after) {
  std::map<std::string, json::value> out;
  const auto r = c.get("/v1/events?limit=1000&after=" + after, key);
  EXPECT_EQ(r.status, 200) << r.body;
  const auto page = r.json();
  for (const auto& e : page.as_object().at("events").as_array()) out[field(e, "eventId")] = e;
  return out;
}

std::string feed_end(http_client& c, const std::string& op) {
  std::string after = "0";
  for (int i = 0; i < 10'000; ++i) {
    const auto r = c.get("/v1/events?limit=1000&after=" + after, op);
    const auto o = r.json().as_object();
    after = std::string(o.at("next").as_string());
    if (!o.at("hasMore").as_bool()) break;
  }
  return after;
}

class webhooks_e2e : public events_suite {
 protected:
  // Every test starts with no live endpoint: those of earlier tests (a dead one still retrying)
  // would otherwise be served by this test's servers and show in its metrics.
  void SetUp() override {
    events_suite::SetUp();
    if (HasFatalFailure()) return;
    sql_value(owner_url(),
              "WITH d AS (UPDATE webhook_endpoint SET deleted_at = now() WHERE deleted_at IS NULL RETURNING 1)"
              " SELECT count(*) FROM d");
  }
};

TEST_F(webhooks_e2e, a_receiver_that_fails_three_times_gets_every_event_once_it_accepts_signed_and_in_order) {
  // A merchant's endpoint answers 500, 302 and 404 to its first three requests, then 200. Five payments to the
  // merchant: the first event is tried four times (three failures, then accepted), and only then
  // do the other four follow, one each, in feed order; every request carries a Wallet-Signature
  // that an independent HMAC confirms, and its body is the event exactly as the feed shows it.
  server_process server(server_options(quick_webhooks()));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto head = feed_end(c, op);
  const auto merchant = make_party(c, op, "merchant");
  const auto payer = make_party(c, op, "user", 100'000);
  // 500, then a redirect (never followed), then 404: three failures.
  const std::vector<int> first_answers{500, 302, 404};
  webhook_receiver receiver([&](int n) { return n <= 3 ? first_answers[static_cast<std::size_t>(n - 1)] : 200; });
  const auto ep = create_endpoint(c, merchant.key, receiver.url("/wallet?x=1"));
  ASSERT_GT(ep.id, 0);
  EXPECT_EQ(ep.secret.rfind("whsec_", 0), 0u);

  std::vector<std::string> paid;
  for (int i = 0; i < 5; ++i) paid.push_back(transfer(c, payer.key, payer.account, merchant.account, 100 + i));
  ASSERT_TRUE(eventually([&] { return count_with_status(deliveries(c, merchant.key, ep.id), "DELIVERED") == 5; },
                         std::chrono::seconds(60), std::chrono::milliseconds(20)));

  const auto got = receiver.requests();
  ASSERT_EQ(got.size(), 8u);  // 3 failed attempts + 5 deliveries
  std::vector<std::string> order;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const auto& r = got[i];
    EXPECT_EQ(r.target, "/wallet?x=1");
    EXPECT_EQ(r.headers.at("content-type"), "application/json");
    EXPECT_TRUE(signed_by(r.headers.at("wallet-signature"), ep.secret, r.body)) << r.headers.at("wallet-signature");
    EXPECT_FALSE(signed_by(r.headers.at("wallet-signature"), ep.secret + "x", r.body));
    const auto event = json::parse(r.body);
    EXPECT_EQ(r.headers.at("wallet-event-id"), field(event, "eventId"));
    EXPECT_EQ(r.answered, i < 3 ? first_answers[i] : 200);
    order.push_back(field(event, "eventId"));
  }
  // The first event four times, then the others once each, in the order they were paid.
  EXPECT_EQ(order, (std::vector<std::string>{paid[0], paid[0], paid[0], paid[0], paid[1], paid[2], paid[3], paid[4]}));
  const auto feed = feed_events(c, merchant.key, head);
  for (std::size_t i = 3; i < got.size(); ++i) {
    const auto event = json::parse(got[i].body);
    ASSERT_TRUE(feed.count(field(event, "eventId")));
    EXPECT_EQ(event, feed.at(field(event, "eventId")));
  }

  const auto list = deliveries(c, merchant.key, ep.id);
  ASSERT_EQ(list.size(), 5u);
  for (std::size_t i = 0; i < list.size(); ++i) {
    EXPECT_EQ(field(list[i], "eventId"), paid[i]);
    EXPECT_EQ(field(list[i], "eventType"), "TRANSFER");
    EXPECT_EQ(field(list[i], "attempts"), i == 0 ? "4" : "1");
    EXPECT_EQ(field(list[i], "lastStatusCode"), "200");
    EXPECT_EQ(field(list[i], "nextAttemptAt"), "null");
  }
  // The counters move after the rows commit: waited for, not read once.
  EXPECT_TRUE(eventually([&] { return metric_value(server.port(), "wallet_webhook_deliveries_sent_total") == 5; },
                         std::chrono::seconds(30), std::chrono::milliseconds(20)));
  EXPECT_EQ(metric_value(server.port(), "wallet_webhook_retries_total"), 3);
  EXPECT_EQ(metric_value(server.port(), "wallet_webhook_deliveries_failed_total"), 0);
}

TEST_F(webhooks_e2e, a_receiver_that_never_answers_is_retried_until_failed_and_a_healthy_endpoint_is_unaffected) {
  // Two endpoints of one merchant: one never answers (every attempt runs into webhooks.timeout_ms,
  // 200 ms), one answers 200. Three payments. The healthy endpoint gets all three, once each and
  // first time, while the first delivery of the dead one is still being retried; that delivery is
  // tried again and again with growing pauses and marked FAILED once the retry span (3 s) is spent,
  // the receiver having seen each attempt, and the endpoint is disabled. An operator's retry makes
  // the delivery PENDING again (only an operator may, and only a FAILED delivery); it is attempted
  // again once the endpoint is enabled.
  server_process server(server_options(quick_webhooks({{"WALLET_WEBHOOKS_TIMEOUT_MS", "200"},
                                                       {"WALLET_WEBHOOKS_RETRY_SPAN_MS", "3000"},
                                                       {"WALLET_WEBHOOKS_BACKOFF_BASE_MS", "50"},
                                                       {"WALLET_WEBHOOKS_BACKOFF_CAP_MS", "400"}})));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto merchant = make_party(c, op, "merchant");
  const auto payer = make_party(c, op, "user", 100'000);
  webhook_receiver dead([](int) { return 0; });
  webhook_receiver healthy([](int) { return 204; });
  const auto dead_ep = create_endpoint(c, merchant.key, dead.url());
  const auto healthy_ep = create_endpoint(c, merchant.key, healthy.url(), R"(["TRANSFER"])");
  std::vector<std::string> paid;
  for (int i = 0; i < 3; ++i) paid.push_back(transfer(c, payer.key, payer.account, merchant.account, 10 + i));

  ASSERT_TRUE(
      eventually([&] { return count_with_status(deliveries(c, merchant.key, healthy_ep.id), "DELIVERED") == 3; },
                 std::chrono::seconds(60), std::chrono::milliseconds(20)));
  ASSERT_TRUE(eventually([&] { return count_with_status(deliveries(c, merchant.key, dead_ep.id), "FAILED") >= 1; },
                         std::chrono::seconds(60), std::chrono::milliseconds(50)));
  const auto healthy_list = deliveries(c, merchant.key, healthy_ep.id);
  for (const auto& d : healthy_list) EXPECT_EQ(field(d, "attempts"), "1");
  std::vector<std::string> healthy_order;
  for (const auto& r : healthy.requests()) healthy_order.push_back(field(json::parse(r.body), "eventId"));
  EXPECT_EQ(healthy_order, paid);

  const auto dead_list = deliveries(c, merchant.key, dead_ep.id);
  ASSERT_GE(dead_list.size(), 1u);
  const auto& first = dead_list[0];
  EXPECT_EQ(field(first, "eventId"), paid[0]);
  EXPECT_EQ(field(first, "status"), "FAILED");
  EXPECT_EQ(field(first, "nextAttemptAt"), "null");
  EXPECT_EQ(field(first, "lastStatusCode"), "null");
  EXPECT_NE(field(first, "lastError").find("timed out"), std::string::npos) << field(first, "lastError");
  const auto attempts = std::stoi(field(first, "attempts"));
  EXPECT_GE(attempts, 3);
  // The healthy endpoint was done before the dead one's first delivery was given up.
  EXPECT_LT(field(healthy_list.back(), "completedAt"), field(first, "completedAt"));
  // Each attempt reached the receiver; the first event's attempts came before any other event's.
  const auto seen = dead.requests();
  int first_event_attempts = 0;
  bool later_event_seen = false;
  for (const auto& r : seen) {
    const auto id = field(json::parse(r.body), "eventId");
    if (id == paid[0]) {
      ++first_event_attempts;
      EXPECT_FALSE(later_event_seen) << "an event was sent before the one ahead of it was settled";
    } else {
      later_event_seen = true;
    }
  }
  EXPECT_EQ(first_event_attempts, attempts);
  EXPECT_GE(metric_value(server.port(), "wallet_webhook_retries_total"), attempts - 1);
  // The counters move just after the rows are written: waited for, not read once.
  EXPECT_TRUE(eventually([&] { return metric_value(server.port(), "wallet_webhook_deliveries_failed_total") >= 1; },
                         std::chrono::seconds(60), std::chrono::milliseconds(20)));
  EXPECT_GE(metric_value(server.port(), "wallet_webhook_timeouts_total"), attempts);
  EXPECT_TRUE(eventually([&] { return metric_value(server.port(), "wallet_webhook_endpoints_disabled_total") == 1; },
                         std::chrono::seconds(60), std::chrono::milliseconds(20)));

  // Retry: only an operator, only a FAILED delivery.
  const auto first_id = field(first, "id");
  const auto retry_path = "/v1/webhook-endpoints/" + std::to_string(dead_ep.id) + "/deliveries/" + first_id + "/retry";
  EXPECT_EQ(c.post(retry_path, merchant.key, "").status, 403);
  const auto retried = c.post(retry_path, op, "");
  ASSERT_EQ(retried.status, 200) << retried.body;
  EXPECT_EQ(field(retried.json(), "status"), "PENDING");
  const auto healthy_first = field(healthy_list[0], "id");
  const auto not_failed = c.post(
      "/v1/webhook-endpoints/" + std::to_string(healthy_ep.id) + "/deliveries/" + healthy_first + "/retry", op, "");
  EXPECT_EQ(not_failed.status, 409);
  EXPECT_EQ(field(not_failed.json(), "code"), "delivery_not_failed");
  EXPECT_EQ(
      c.post("/v1/webhook-endpoints/" + std::to_string(healthy_ep.id) + "/deliveries/" + first_id + "/retry", op, "")
          .status,
      404);
  // The retried delivery is attempted again once its endpoint is enabled.
  const auto enabled = c.post("/v1/webhook-endpoints/" + std::to_string(dead_ep.id) + "/enable", merchant.key, "");
  ASSERT_EQ(enabled.status, 200) << enabled.body;
  EXPECT_EQ(field(enabled.json(), "status"), "ENABLED");
  EXPECT_TRUE(eventually(
      [&] {
        int n = 0;
        for (const auto& r : dead.requests()) n += field(json::parse(r.body), "eventId") == paid[0] ? 1 : 0;
        return n > attempts;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(20)));
}

// The endpoint `id` as `key` lists it; an empty object when it is not listed.
json::object listed_endpoint(http_client& c, const std::string& key, std::int64_t id) {
  const auto r = c.get("/v1/webhook-endpoints", key);
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return {};
  const auto page = r.json();
  for (const auto& e : page.as_object().at("endpoints").as_array()) {
    if (e.as_object().at("id").as_int64() == id) return e.as_object();
  }
  return {};
}

// The event ids of the requests `r` answered 2xx, in the order they came.
std::vector<std::string> accepted_events(const webhook_receiver& r) {
  std::vector<std::string> out;
  for (const auto& q : r.requests()) {
    if (q.answered >= 200 && q.answered < 300) out.push_back(field(json::parse(q.body), "eventId"));
  }
  return out;
}

bool received(const webhook_receiver& r, const std::string& event_id) {
  const auto accepted = accepted_events(r);
  return std::find(accepted.begin(), accepted.end(), event_id) != accepted.end();
}

TEST_F(webhooks_e2e, a_given_up_delivery_disables_its_endpoint_and_enabling_it_misses_no_event) {
  // A merchant's endpoint whose receiver answers 503 has its first delivery given up once the retry
  // span (1 s) is spent: the endpoint is DISABLED and says which delivery and what it got. A payment
  // made meanwhile reaches the merchant's other endpoint and makes no delivery for the disabled one.
  // Another principal can neither enable nor disable it (404). The receiver recovers and the owner
  // enables the endpoint: the given-up delivery is sent again, then the payment made while it was
  // disabled, each accepted once, in that order. The owner then pauses it: the next payment waits
  // until an operator enables it. Enabling an enabled endpoint changes nothing. Each change is
  // audited once.
  server_process server(server_options(quick_webhooks({{"WALLET_WEBHOOKS_RETRY_SPAN_MS", "1000"},
                                                       {"WALLET_WEBHOOKS_BACKOFF_BASE_MS", "50"},
                                                       {"WALLET_WEBHOOKS_BACKOFF_CAP_MS", "200"}})));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto merchant = make_party(c, op, "merchant");
  const auto payer = make_party(c, op, "user", 100'000);
  std::atomic<bool> up{false};
  webhook_receiver flaky([&up](int) { return up.load() ? 204 : 503; });
  webhook_receiver witness([](int) { return 204; });
  const auto ep = create_endpoint(c, merchant.key, flaky.url(), R"(["TRANSFER"])");
  const auto witness_ep = create_endpoint(c, merchant.key, witness.url(), R"(["TRANSFER"])");
  ASSERT_NE(ep.id, 0);
  ASSERT_NE(witness_ep.id, 0);
  EXPECT_EQ(field(listed_endpoint(c, merchant.key, ep.id), "status"), "ENABLED");
  const auto path = "/v1/webhook-endpoints/" + std::to_string(ep.id);

  const auto first = transfer(c, payer.key, payer.account, merchant.account, 10);
  ASSERT_TRUE(eventually([&] { return field(listed_endpoint(c, merchant.key, ep.id), "status") == "DISABLED"; },
                         std::chrono::seconds(60), std::chrono::milliseconds(20)));
  const auto disabled = listed_endpoint(c, merchant.key, ep.id);
  auto list = deliveries(c, merchant.key, ep.id);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(field(list[0], "eventId"), first);
  EXPECT_EQ(field(list[0], "status"), "FAILED");
  EXPECT_EQ(field(disabled, "disabledReason"), "delivery " + field(list[0], "id") + " was given up after " +
                                                   field(list[0], "attempts") + " attempts: answered 503");
  EXPECT_NE(field(disabled, "disabledAt"), "null");
  EXPECT_TRUE(eventually([&] { return metric_value(server.port(), "wallet_webhook_endpoints_disabled_total") == 1; },
                         std::chrono::seconds(60), std::chrono::milliseconds(20)));

  // The witness endpoint (a higher id, fanned out after this one in each round) gets the second
  // payment: had the disabled endpoint been fanned out, its delivery would exist by now.
  const auto second = transfer(c, payer.key, payer.account, merchant.account, 11);
  ASSERT_TRUE(
      eventually([&] { return received(witness, second); }, std::chrono::seconds(60), std::chrono::milliseconds(20)));
  EXPECT_EQ(deliveries(c, merchant.key, ep.id).size(), 1u);
  EXPECT_TRUE(accepted_events(flaky).empty());

  const auto other = make_party(c, op, "merchant");
  EXPECT_EQ(c.post(path + "/enable", other.key, "").status, 404);
  EXPECT_EQ(c.post(path + "/disable", other.key, "").status, 404);
  EXPECT_EQ(c.post("/v1/webhook-endpoints/999999999/enable", op, "").status, 404);
  EXPECT_EQ(field(listed_endpoint(c, merchant.key, ep.id), "status"), "DISABLED");

  up = true;
  const auto enabled = c.post(path + "/enable", merchant.key, "");
  ASSERT_EQ(enabled.status, 200) << enabled.body;
  EXPECT_EQ(field(enabled.json(), "status"), "ENABLED");
  EXPECT_EQ(field(enabled.json(), "disabledAt"), "null");
  EXPECT_EQ(field(enabled.json(), "disabledReason"), "null");
  ASSERT_TRUE(eventually([&] { return count_with_status(deliveries(c, merchant.key, ep.id), "DELIVERED") == 2; },
                         std::chrono::seconds(60), std::chrono::milliseconds(20)));
  EXPECT_EQ(accepted_events(flaky), (std::vector<std::string>{first, second}));

  // Paused on request: the next payment waits, and is sent once an operator enables it.
  const auto paused = c.post(path + "/disable", merchant.key, "");
  ASSERT_EQ(paused.status, 200) << paused.body;
  EXPECT_EQ(field(paused.json(), "status"), "DISABLED");
  EXPECT_EQ(field(paused.json(), "disabledReason"), "disabled on request of principal " + std::to_string(merchant.id));
  const auto third = transfer(c, payer.key, payer.account, merchant.account, 12);
  ASSERT_TRUE(
      eventually([&] { return received(witness, third); }, std::chrono::seconds(60), std::chrono::milliseconds(20)));
  EXPECT_EQ(deliveries(c, merchant.key, ep.id).size(), 2u);
  ASSERT_EQ(c.post(path + "/enable", op, "").status, 200);
  ASSERT_TRUE(eventually([&] { return count_with_status(deliveries(c, merchant.key, ep.id), "DELIVERED") == 3; },
                         std::chrono::seconds(60), std::chrono::milliseconds(20)));
  EXPECT_EQ(accepted_events(flaky), (std::vector<std::string>{first, second, third}));

  const auto again = c.post(path + "/enable", merchant.key, "");
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(field(again.json(), "status"), "ENABLED");
  EXPECT_EQ(sql_value(owner_url(),
                      "SELECT string_agg(action, ',' ORDER BY id) FROM audit_log WHERE target = "
                      "'webhook_endpoint:" +
                          std::to_string(ep.id) + "' AND action <> 'webhook_endpoint.create'"),
            "webhook_endpoint.enable,webhook_endpoint.disable,webhook_endpoint.enable");
}

TEST_F(webhooks_e2e, urls_at_private_addresses_and_bad_registrations_are_refused_and_change_nothing) {
  // With the default settings, a URL whose host is or resolves to a private, loopback, link-local,
  // unspecified or multicast address answers 400 webhook_url_refused; a bad scheme, a bad events
  // list or a missing field answers 400 invalid_request; none leaves an endpoint behind.
  server_process server(server_options());
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto merchant = make_party(c, op, "merchant");
  for (const std::string& url : std::vector<std::string>{
           "http://10.1.2.3/hook", "https://192.168.0.10/hook", "http://127.0.0.1:9/hook", "http://localhost:9/hook",
           "http://[::1]:9/hook", "http://169.254.169.254/latest", "http://0.0.0.0/", "http://224.0.0.1/",
           "http://[fd00::1]/", "http://[::ffff:10.0.0.1]/"}) {
    const auto r = register_endpoint(c, merchant.key, R"({"url":")" + url + R"(","events":["*"]})");
    EXPECT_EQ(r.status, 400) << url;
    EXPECT_EQ(field(r.json(), "code"), "webhook_url_refused") << url << ": " << r.body;
  }
  for (const std::string& body : std::vector<std::string>{
           R"({"url":"ftp://example.com/","events":["*"]})", R"({"url":"http://u:p@example.com/","events":["*"]})",
           R"({"url":"http://example.com/","events":[]})", R"({"url":"http://example.com/","events":["NOPE"]})",
           R"({"url":"http://example.com/","events":["*","TRANSFER"]})", R"({"url":"http://example.com/"})",
           R"({"events":["*"]})", R"({"url":"http://example.com/","events":"*"})",
           R"({"url":"http://example.com/","events":["*"],"secret":"x"})", R"([1])", R"(not json)"}) {
    const auto r = register_endpoint(c, merchant.key, body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_EQ(field(r.json(), "code"), "invalid_request") << body << ": " << r.body;
  }
  const auto list = c.get("/v1/webhook-endpoints", merchant.key);
  ASSERT_EQ(list.status, 200);
  EXPECT_TRUE(list.json().as_object().at("endpoints").as_array().empty());
}

TEST_F(webhooks_e2e, a_deleted_endpoint_gets_no_further_delivery) {
  // Two endpoints of one merchant get the first payment. One is deleted; the second payment reaches
  // the other only: the deleted one gets no delivery row and no request for it, its deliveries are
  // no longer listed (404), and deleting it again is 404.
  server_process server(server_options(quick_webhooks()));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto merchant = make_party(c, op, "merchant");
  const auto payer = make_party(c, op, "user", 100'000);
  webhook_receiver kept([](int) { return 200; });
  webhook_receiver dropped([](int) { return 200; });
  const auto kept_ep = create_endpoint(c, merchant.key, kept.url());
  const auto dropped_ep = create_endpoint(c, merchant.key, dropped.url());
  const auto first = transfer(c, payer.key, payer.account, merchant.account, 5);
  ASSERT_TRUE(eventually([&] { return kept.requests().size() == 1 && dropped.requests().size() == 1; },
                         std::chrono::seconds(60), std::chrono::milliseconds(20)));

  const auto path = "/v1/webhook-endpoints/" + std::to_string(dropped_ep.id);
  const auto deleted = c.request("DELETE", path, "", {{"Authorization", "Bearer " + merchant.key}});
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  const auto second = transfer(c, payer.key, payer.account, merchant.account, 6);
  ASSERT_TRUE(
      eventually([&] { return kept.requests().size() == 2; }, std::chrono::seconds(60), std::chrono::milliseconds(20)));
  EXPECT_EQ(field(json::parse(kept.requests()[1].body), "eventId"), second);
  ASSERT_EQ(dropped.requests().size(), 1u);
  EXPECT_EQ(field(json::parse(dropped.requests()[0].body), "eventId"), first);
  EXPECT_EQ(sql_value(owner_url(),
                      "SELECT count(*) FROM webhook_delivery WHERE endpoint_id = " + std::to_string(dropped_ep.id)),
            "1");
  EXPECT_EQ(c.get(path + "/deliveries", merchant.key).status, 404);
  EXPECT_EQ(c.request("DELETE", path, "", {{"Authorization", "Bearer " + merchant.key}}).status, 404);
  const auto list = c.get("/v1/webhook-endpoints", merchant.key).json().as_object().at("endpoints").as_array();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].as_object().at("id").as_int64(), kept_ep.id);
}

TEST_F(webhooks_e2e, a_deleted_endpoints_pending_deliveries_end_with_it) {
  // A receiver that fails every request has three payments' deliveries pending when its endpoint
  // is deleted: all three end FAILED at once ("the endpoint was deleted"), so none waits for good.
  server_process server(server_options(quick_webhooks()));
  http_client c(server.port());
  const auto merchant = make_party(c, server.operator_key(), "merchant");
  const auto payer = make_party(c, server.operator_key(), "user", 100'000);
  webhook_receiver failing([](int) { return 500; });
  const auto ep = create_endpoint(c, merchant.key, failing.url());
  for (int i = 1; i <= 3; ++i) transfer(c, payer.key, payer.account, merchant.account, i);
  const auto of_endpoint = " FROM webhook_delivery WHERE endpoint_id = " + std::to_string(ep.id);
  ASSERT_TRUE(eventually([&] { return sql_value(owner_url(), "SELECT count(*)" + of_endpoint) == "3"; },
                         std::chrono::seconds(60), std::chrono::milliseconds(20)));
  ASSERT_EQ(sql_value(owner_url(), "SELECT count(*)" + of_endpoint + " AND status = 'PENDING'"), "3");
  const auto deleted = c.request("DELETE", "/v1/webhook-endpoints/" + std::to_string(ep.id), "",
                                 {{"Authorization", "Bearer " + merchant.key}});
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(sql_value(owner_url(), "SELECT string_agg(status || ':' || last_error, ',')" + of_endpoint),
            "FAILED:the endpoint was deleted,FAILED:the endpoint was deleted,FAILED:the endpoint was deleted");
}

TEST_F(webhooks_e2e, a_principal_neither_sees_nor_deletes_another_principals_endpoints) {
  // A's endpoint is not in B's list, and B's GET of its deliveries and DELETE of it answer 404; B
  // cannot register an endpoint for A's account (404). An operator lists every endpoint (the
  // signing secret never again) and may delete A's.
  server_process server(server_options(quick_webhooks()));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto a = make_party(c, op, "merchant");
  const auto b = make_party(c, op, "user");
  webhook_receiver receiver([](int) { return 200; });
  const auto ep = create_endpoint(c, a.key, receiver.url());
  const auto path = "/v1/webhook-endpoints/" + std::to_string(ep.id);

  const auto b_list = c.get("/v1/webhook-endpoints", b.key);
  ASSERT_EQ(b_list.status, 200);
  EXPECT_TRUE(b_list.json().as_object().at("endpoints").as_array().empty());
  EXPECT_EQ(c.get(path + "/deliveries", b.key).status, 404);
  const auto b_delete = c.request("DELETE", path, "", {{"Authorization", "Bearer " + b.key}});
  EXPECT_EQ(b_delete.status, 404);
  EXPECT_EQ(field(b_delete.json(), "code"), "not_found");
  const auto foreign = register_endpoint(
      c, b.key, R"({"url":")" + receiver.url() + R"(","events":["*"],"accountId":)" + std::to_string(a.account) + "}");
  EXPECT_EQ(foreign.status, 404) << foreign.body;
  const auto own = register_endpoint(
      c, a.key,
      R"({"url":")" + receiver.url() + R"(","events":["DEPOSIT"],"accountId":)" + std::to_string(a.account) + "}");
  ASSERT_EQ(own.status, 201) << own.body;
  EXPECT_EQ(own.json().as_object().at("accountId").as_int64(), a.account);

  const auto a_list = c.get("/v1/webhook-endpoints", a.key).json().as_object().at("endpoints").as_array();
  EXPECT_EQ(a_list.size(), 2u);
  std::set<std::int64_t> seen_by_operator;
  const auto op_list = c.get("/v1/webhook-endpoints", op);
  const auto op_page = op_list.json();
  for (const auto& e : op_page.as_object().at("endpoints").as_array()) {
    seen_by_operator.insert(e.as_object().at("id").as_int64());
    EXPECT_FALSE(e.as_object().contains("signingSecret"));
  }
  EXPECT_TRUE(seen_by_operator.count(ep.id));
  EXPECT_EQ(op_list.body.find(ep.secret), std::string::npos);
  EXPECT_EQ(c.get(path + "/deliveries", op).status, 200);
  EXPECT_EQ(c.request("DELETE", path, "", {{"Authorization", "Bearer " + op}}).status, 200);
  EXPECT_EQ(c.get(path + "/deliveries", a.key).status, 404);
}

TEST_F(webhooks_e2e, an_address_refused_at_connect_time_is_never_reached) {
  // The host is judged again at every attempt, not only at registration: an endpoint on 127.0.0.1
  // registered by a server that allowed loopback, then served by one that does not (the default),
  // gets attempts that fail with "refused" before any connection, and its receiver sees nothing.
  webhook_receiver receiver([](int) { return 200; });
  party merchant, payer;
  endpoint ep;
  {
    server_process permissive(server_options(quick_webhooks({{"WALLET_WEBHOOKS_ENABLED", "false"}})));
    http_client c(permissive.port());
    merchant = make_party(c, permissive.operator_key(), "merchant");
    payer = make_party(c, permissive.operator_key(), "user", 1'000);
    ep = create_endpoint(c, merchant.key, receiver.url());
    ASSERT_GT(ep.id, 0);
  }
  server_process strict(server_options({{"WALLET_WEBHOOKS_POLL_INTERVAL_MS", "5"},
                                        {"WALLET_WEBHOOKS_BACKOFF_BASE_MS", "20"},
                                        {"WALLET_WEBHOOKS_BACKOFF_CAP_MS", "100"}}));
  http_client c(strict.port());
  transfer(c, payer.key, payer.account, merchant.account, 7);
  ASSERT_TRUE(eventually(
      [&] {
        const auto list = deliveries(c, merchant.key, ep.id);
        return list.size() == 1 && std::stoi(field(list[0], "attempts")) >= 2;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(20)));
  const auto first = deliveries(c, merchant.key, ep.id).at(0);
  EXPECT_EQ(field(first, "status"), "PENDING");
  EXPECT_NE(field(first, "lastError").find("refused: 127.0.0.1 (loopback) is not a public address"), std::string::npos)
      << field(first, "lastError");
  EXPECT_TRUE(receiver.requests().empty());
}

// A self-signed certificate and its key, `<dir>/<name>.pem` and `<dir>/<name>.key`, naming
// `subject_alt_name` (e.g. "IP:127.0.0.1"), made by the openssl command.
bool make_certificate(const std::string& dir, const std::string& name, const std::string& subject_alt_name) {
  const auto r = test_support::run_program(
      "/usr/bin/openssl",
      {"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=wallet-test-" + name, "-addext",
       "subjectAltName=" + subject_alt_name, "-keyout", dir + "/" + name + ".key", "-out", dir + "/" + name + ".pem"},
      test_support::current_environment(), std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0;
}

TEST_F(webhooks_e2e, https_destinations_are_verified_against_the_ca_file_and_their_host_name) {
  // Three https receivers on 127.0.0.1 with self-signed certificates: one in the CA file
  // (webhooks.ca_file) naming 127.0.0.1, one in the CA file naming another host, one unknown.
  // The first gets the event, signed; the others' attempts fail in the TLS handshake, so they never
  // see a request.
  const auto dir = test_support::build_dir() + "/events/webhook-tls";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(make_certificate(dir, "good", "IP:127.0.0.1"));
  ASSERT_TRUE(make_certificate(dir, "other_name", "DNS:example.com"));
  ASSERT_TRUE(make_certificate(dir, "unknown", "IP:127.0.0.1"));
  {
    std::ofstream ca(dir + "/ca.pem", std::ios::trunc);
    ca << std::ifstream(dir + "/good.pem").rdbuf() << std::ifstream(dir + "/other_name.pem").rdbuf();
  }
  server_process server(server_options(quick_webhooks({{"WALLET_WEBHOOKS_CA_FILE", dir + "/ca.pem"}})));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto merchant = make_party(c, op, "merchant");
  const auto payer = make_party(c, op, "user", 1'000);
  webhook_receiver good([](int) { return 200; }, dir + "/good.pem", dir + "/good.key");
  webhook_receiver other_name([](int) { return 200; }, dir + "/other_name.pem", dir + "/other_name.key");
  webhook_receiver unknown([](int) { return 200; }, dir + "/unknown.pem", dir + "/unknown.key");
  const auto good_ep = create_endpoint(c, merchant.key, good.url());
  const auto other_ep = create_endpoint(c, merchant.key, other_name.url());
  const auto unknown_ep = create_endpoint(c, merchant.key, unknown.url());
  const auto paid = transfer(c, payer.key, payer.account, merchant.account, 9);
  auto tried = [&](const endpoint& ep) {
    const auto list = deliveries(c, merchant.key, ep.id);
    return list.size() == 1 && field(list[0], "lastError") != "null";
  };
  ASSERT_TRUE(eventually(
      [&] {
        return count_with_status(deliveries(c, merchant.key, good_ep.id), "DELIVERED") == 1 && tried(other_ep) &&
               tried(unknown_ep);
      },
      std::chrono::seconds(60), std::chrono::milliseconds(20)));
  ASSERT_EQ(good.requests().size(), 1u);
  EXPECT_TRUE(signed_by(good.requests()[0].headers.at("wallet-signature"), good_ep.secret, good.requests()[0].body));
  EXPECT_EQ(field(json::parse(good.requests()[0].body), "eventId"), paid);
  for (const auto* ep : {&other_ep, &unknown_ep}) {
    const auto d = deliveries(c, merchant.key, ep->id).at(0);
    EXPECT_EQ(field(d, "status"), "PENDING");
    EXPECT_NE(field(d, "lastError").find("TLS handshake"), std::string::npos) << field(d, "lastError");
  }
  EXPECT_TRUE(other_name.requests().empty());
  EXPECT_TRUE(unknown.requests().empty());
  EXPECT_GE(other_name.failed_handshakes(), 1);
  EXPECT_GE(unknown.failed_handshakes(), 1);
}

// The request of `receiver` that carried the event `event_id`, once it came (an empty body: it did
// not within the bound).
received_request request_for(const webhook_receiver& receiver, const std::string& event_id) {
  received_request got;
  eventually(
      [&] {
        for (const auto& r : receiver.requests()) {
          if (field(json::parse(r.body), "eventId") == event_id) {
            got = r;
            return true;
          }
        }
        return false;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(20));
  return got;
}

TEST_F(webhooks_e2e, a_rotated_secret_signs_beside_the_previous_one_until_that_one_expires) {
  // A rotation with the default window: the next delivery's Wallet-Signature carries two v1, the new
  // secret's first and then the old one's, so a receiver holding either accepts it, and the
  // endpoint shows until when the old one signs. A rotation with 0 s: only the newest signs. A
  // rotation with 1 s (by an operator): once the endpoint shows no previous secret any more, only
  // the newest signs again. Another principal's rotation answers 404 and bad bodies 400, changing
  // nothing; each rotation is in the audit log, never with a secret.
  server_process server(server_options(quick_webhooks()));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto merchant = make_party(c, op, "merchant");
  const auto payer = make_party(c, op, "user", 100'000);
  const auto other = make_party(c, op, "user");
  webhook_receiver receiver([](int) { return 200; });
  const auto ep = create_endpoint(c, merchant.key, receiver.url());
  ASSERT_GT(ep.id, 0);
  const auto path = "/v1/webhook-endpoints/" + std::to_string(ep.id);
  const auto rotate = [&](const std::string& key, const std::string& body) {
    return c.request("POST", path + "/rotate-secret", body,
                     {{"Authorization", "Bearer " + key}, {"Content-Type", "application/json"}});
  };
  const auto delivered = [&](std::int64_t amount) {
    return request_for(receiver, transfer(c, payer.key, payer.account, merchant.account, amount));
  };
  const auto signed_with = [](const received_request& r, const std::vector<std::string>& secrets) {
    return signers(r.headers.at("wallet-signature"), r.body, secrets);
  };

  const auto s0 = ep.secret;
  const auto before = delivered(1);
  ASSERT_FALSE(before.body.empty());
  EXPECT_EQ(signed_with(before, {s0}), std::vector<std::string>{s0});

  const auto foreign = rotate(other.key, "");
  EXPECT_EQ(foreign.status, 404) << foreign.body;
  EXPECT_EQ(field(foreign.json(), "code"), "not_found");
  for (const std::string& body : std::vector<std::string>{
           R"({"previousSecretExpiresInSeconds":-1})", R"({"previousSecretExpiresInSeconds":604801})",
           R"({"previousSecretExpiresInSeconds":"soon"})", R"({"signingSecret":"whsec_of-my-own-choosing"})", R"([1])",
           R"(not json)"}) {
    const auto r = rotate(merchant.key, body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_EQ(field(r.json(), "code"), "invalid_request") << body << ": " << r.body;
  }
  EXPECT_EQ(signed_with(delivered(2), {s0}), std::vector<std::string>{s0});

  // The default window: a day.
  const auto first = rotate(merchant.key, "");
  ASSERT_EQ(first.status, 200) << first.body;
  const auto s1 = field(first.json(), "signingSecret");
  EXPECT_EQ(s1.rfind("whsec_", 0), 0u);
  EXPECT_NE(s1, s0);
  EXPECT_NE(field(first.json(), "secretRotatedAt"), "null");
  EXPECT_NE(field(first.json(), "previousSecretExpiresAt"), "null");
  EXPECT_EQ(signed_with(delivered(3), {s0, s1}), (std::vector<std::string>{s1, s0}));
  const auto listed = c.get("/v1/webhook-endpoints", merchant.key);
  ASSERT_EQ(listed.status, 200);
  EXPECT_EQ(listed.body.find(s1), std::string::npos);
  EXPECT_EQ(field(listed.json().as_object().at("endpoints").as_array().at(0), "previousSecretExpiresAt"),
            field(first.json(), "previousSecretExpiresAt"));
  const auto one = c.get(path, merchant.key);
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_FALSE(one.json().as_object().contains("signingSecret"));
  EXPECT_EQ(field(one.json(), "secretRotatedAt"), field(first.json(), "secretRotatedAt"));
  EXPECT_EQ(c.get(path, other.key).status, 404);
  EXPECT_EQ(c.get(path, op).status, 200);

  // No window: the secret replaced stops signing at once, and the one before it is long gone.
  const auto second = rotate(merchant.key, R"({"previousSecretExpiresInSeconds":0})");
  ASSERT_EQ(second.status, 200) << second.body;
  const auto s2 = field(second.json(), "signingSecret");
  EXPECT_EQ(field(second.json(), "previousSecretExpiresAt"), "null");
  EXPECT_EQ(signed_with(delivered(4), {s0, s1, s2}), std::vector<std::string>{s2});

  // One second: after it, the endpoint shows no previous secret, and none signs.
  const auto third = rotate(op, R"({"previousSecretExpiresInSeconds":1})");
  ASSERT_EQ(third.status, 200) << third.body;
  const auto s3 = field(third.json(), "signingSecret");
  EXPECT_NE(field(third.json(), "previousSecretExpiresAt"), "null");
  ASSERT_TRUE(eventually([&] { return field(c.get(path, merchant.key).json(), "previousSecretExpiresAt") == "null"; },
                         std::chrono::seconds(30), std::chrono::milliseconds(50)));
  EXPECT_EQ(signed_with(delivered(5), {s0, s1, s2, s3}), std::vector<std::string>{s3});

  const auto target = "'webhook_endpoint:" + std::to_string(ep.id) + "'";
  EXPECT_EQ(sql_value(owner_url(),
                      "SELECT count(*) FROM audit_log WHERE action = 'webhook_endpoint.rotate_secret'"
                      " AND target = " +
                          target),
            "3");
  EXPECT_EQ(sql_value(owner_url(),
                      "SELECT string_agg(detail->>'previousSecretValidSeconds', ',' ORDER BY id)"
                      " FROM audit_log WHERE action = 'webhook_endpoint.rotate_secret' AND target = " +
                          target),
            "86400,0,1");
  EXPECT_EQ(sql_value(owner_url(), "SELECT count(*) FROM audit_log WHERE detail::text LIKE '%whsec\\_%'"), "0");
}

TEST_F(webhooks_e2e, an_endpoint_changed_in_place_keeps_its_place_and_sends_to_its_new_url_and_types) {
  // An endpoint for TRANSFER events gets a payment at its first URL. Given a new URL, the next
  // payment goes there (the old receiver gets nothing more). Given DEPOSIT instead, a payment and
  // then a deposit make one delivery: the deposit's. Its deliveries are the three, in feed order.
  // Another principal's change answers 404; bad bodies 400 invalid_request, and a private address
  // 400 webhook_url_refused, changing nothing; each change is in the audit log, with what changed.
  server_process server(server_options(quick_webhooks()));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto merchant = make_party(c, op, "merchant");
  const auto payer = make_party(c, op, "user", 100'000);
  const auto other = make_party(c, op, "user");
  webhook_receiver old_home([](int) { return 200; });
  webhook_receiver new_home([](int) { return 200; });
  const auto ep = create_endpoint(c, merchant.key, old_home.url(), R"(["TRANSFER"])");
  ASSERT_GT(ep.id, 0);
  const auto path = "/v1/webhook-endpoints/" + std::to_string(ep.id);
  const auto patch = [&](const std::string& key, const std::string& body) {
    return c.request("PATCH", path, body, {{"Authorization", "Bearer " + key}, {"Content-Type", "application/json"}});
  };

  const auto t1 = transfer(c, payer.key, payer.account, merchant.account, 1);
  ASSERT_FALSE(request_for(old_home, t1).body.empty());

  const auto moved_url = new_home.url("/moved");
  EXPECT_EQ(patch(other.key, R"({"url":")" + moved_url + R"("})").status, 404);
  for (const std::string& body :
       std::vector<std::string>{R"({})", R"({"accountId":"x1"})", R"({"accountId":-4})", R"({"url":""})",
                                R"({"url":"ftp://example.com/"})", R"({"events":[]})", R"({"events":["NOPE"]})",
                                R"({"url":")" + moved_url + R"(","signingSecret":"x"})", R"(not json)"}) {
    const auto r = patch(merchant.key, body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_EQ(field(r.json(), "code"), "invalid_request") << body << ": " << r.body;
  }
  const auto refused = patch(merchant.key, R"({"url":"http://10.1.2.3/hook"})");
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(field(refused.json(), "code"), "webhook_url_refused") << refused.body;
  const auto unchanged = c.get("/v1/webhook-endpoints", merchant.key).json().as_object().at("endpoints").as_array();
  ASSERT_EQ(unchanged.size(), 1u);
  EXPECT_EQ(field(unchanged[0], "url"), old_home.url());
  EXPECT_EQ(field(unchanged[0], "events"), R"(["TRANSFER"])");

  const auto moved = patch(merchant.key, R"({"url":")" + moved_url + R"("})");
  ASSERT_EQ(moved.status, 200) << moved.body;
  EXPECT_EQ(moved.json().as_object().at("id").as_int64(), ep.id);
  EXPECT_EQ(field(moved.json(), "url"), moved_url);
  EXPECT_EQ(field(moved.json(), "events"), R"(["TRANSFER"])");
  EXPECT_FALSE(moved.json().as_object().contains("signingSecret"));
  const auto t2 = transfer(c, payer.key, payer.account, merchant.account, 2);
  const auto at_new_home = request_for(new_home, t2);
  ASSERT_FALSE(at_new_home.body.empty());
  EXPECT_EQ(at_new_home.target, "/moved");
  EXPECT_TRUE(signed_by(at_new_home.headers.at("wallet-signature"), ep.secret, at_new_home.body));

  const auto retyped = patch(merchant.key, R"({"events":["DEPOSIT"]})");
  ASSERT_EQ(retyped.status, 200) << retyped.body;
  EXPECT_EQ(field(retyped.json(), "events"), R"(["DEPOSIT"])");
  EXPECT_EQ(field(retyped.json(), "url"), moved_url);
  EXPECT_EQ(c.get(path, merchant.key).json(), retyped.json());
  const auto t3 = transfer(c, payer.key, payer.account, merchant.account, 3);
  const auto d = test_support::deposit(c, op, merchant.account, 50);
  ASSERT_FALSE(request_for(new_home, d).body.empty());

  // The deposit came after the third payment in the feed, so that payment was judged by then.
  const auto list = deliveries(c, merchant.key, ep.id);
  std::vector<std::string> events;
  for (const auto& item : list) events.push_back(field(item, "eventId"));
  EXPECT_EQ(events, (std::vector<std::string>{t1, t2, d}));
  EXPECT_EQ(old_home.requests().size(), 1u);
  EXPECT_EQ(new_home.requests().size(), 2u);
  EXPECT_EQ(sql_value(owner_url(),
                      "SELECT string_agg(detail::text, ' ' ORDER BY id) FROM audit_log"
                      " WHERE action = 'webhook_endpoint.update' AND target = 'webhook_endpoint:" +
                          std::to_string(ep.id) + "'"),
            R"({"url": ")" + moved_url + R"("} {"events": ["DEPOSIT"]})");
}

TEST_F(webhooks_e2e, an_endpoints_account_is_changed_in_place_and_judges_the_events_after_it) {
  // A merchant with two accounts has one endpoint for both. Narrowed to the second account, a
  // payment to the first is not sent and one to the second is; widened again (null), a payment to
  // the first is. Another principal's account is not found for the merchant; an operator naming an
  // account of someone else's for the merchant's endpoint is refused (400) and changes nothing; an
  // operator naming one of the merchant's accounts changes it. Each change is audited.
  server_process server(server_options(quick_webhooks()));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto merchant = make_party(c, op, "merchant");
  const auto second = test_support::create_account(c, op, merchant.id, "EUR");
  const auto payer = make_party(c, op, "user", 100'000);
  webhook_receiver receiver([](int) { return 200; });
  const auto ep = create_endpoint(c, merchant.key, receiver.url());
  ASSERT_GT(ep.id, 0);
  const auto path = "/v1/webhook-endpoints/" + std::to_string(ep.id);
  const auto patch = [&](const std::string& key, const std::string& body) {
    return c.request("PATCH", path, body, {{"Authorization", "Bearer " + key}, {"Content-Type", "application/json"}});
  };
  const auto account_of = [&](const test_support::response& r) { return field(r.json(), "accountId"); };

  const auto narrowed = patch(merchant.key, R"({"accountId":")" + std::to_string(second) + R"("})");
  ASSERT_EQ(narrowed.status, 200) << narrowed.body;
  EXPECT_EQ(account_of(narrowed), std::to_string(second));
  const auto to_first = transfer(c, payer.key, payer.account, merchant.account, 1);
  const auto to_second = transfer(c, payer.key, payer.account, second, 2);
  ASSERT_FALSE(request_for(receiver, to_second).body.empty());

  const auto widened = patch(merchant.key, R"({"accountId":null})");
  ASSERT_EQ(widened.status, 200) << widened.body;
  EXPECT_EQ(account_of(widened), "null");
  const auto again = transfer(c, payer.key, payer.account, merchant.account, 3);
  ASSERT_FALSE(request_for(receiver, again).body.empty());
  std::vector<std::string> events;
  for (const auto& item : deliveries(c, merchant.key, ep.id)) events.push_back(field(item, "eventId"));
  EXPECT_EQ(events, (std::vector<std::string>{to_second, again}));
  for (const auto& r : receiver.requests()) EXPECT_NE(field(json::parse(r.body), "eventId"), to_first);

  const auto stranger = make_party(c, op, "user");
  const auto hidden = patch(merchant.key, R"({"accountId":)" + std::to_string(stranger.account) + "}");
  EXPECT_EQ(hidden.status, 404) << hidden.body;
  EXPECT_EQ(field(hidden.json(), "code"), "not_found") << hidden.body;
  const auto foreign = patch(op, R"({"accountId":)" + std::to_string(stranger.account) + "}");
  EXPECT_EQ(foreign.status, 400) << foreign.body;
  EXPECT_EQ(field(foreign.json(), "code"), "invalid_request") << foreign.body;
  EXPECT_NE(field(foreign.json(), "detail").find("not an account of the endpoint's owner"), std::string::npos)
      << foreign.body;
  EXPECT_EQ(account_of(c.get(path, merchant.key)), "null");
  const auto by_operator = patch(op, R"({"accountId":)" + std::to_string(merchant.account) + "}");
  ASSERT_EQ(by_operator.status, 200) << by_operator.body;
  EXPECT_EQ(account_of(c.get(path, merchant.key)), std::to_string(merchant.account));

  EXPECT_EQ(sql_value(owner_url(),
                      "SELECT string_agg(detail::text, ' ' ORDER BY id) FROM audit_log"
                      " WHERE action = 'webhook_endpoint.update' AND target = 'webhook_endpoint:" +
                          std::to_string(ep.id) + "'"),
            R"({"accountId": )" + std::to_string(second) + R"(} {"accountId": null} {"accountId": )" +
                std::to_string(merchant.account) + "}");
}

TEST_F(webhooks_e2e, a_registration_or_rotation_under_an_idempotency_key_is_answered_again_and_done_once) {
  // Registration and rotation show a secret once, in their answer. Under an Idempotency-Key:
  // eight registrations sent at once (each sent again while the server answers 503) make one
  // endpoint, and each gets its answer (the same secret);
  // a rotation sent again gets the same new secret and rotates nothing more; another request
  // under a key used is 422; a refused request leaves its key free.
  server_process server(server_options(quick_webhooks()));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto merchant = make_party(c, op, "merchant");
  webhook_receiver receiver([](int) { return 200; });
  const auto send = [&](http_client& client, const std::string& method, const std::string& path,
                        const std::string& body, const std::string& key) {
    return client.request(
        method, path, body,
        {{"Authorization", "Bearer " + merchant.key}, {"Content-Type", "application/json"}, {"Idempotency-Key", key}});
  };
  const auto registration = R"({"url":")" + receiver.url() + R"(","events":["*"]})";

  std::vector<test_support::response> answers(8);
  {
    std::vector<std::thread> senders;
    for (std::size_t i = 0; i < answers.size(); ++i) {
      senders.emplace_back([&, i] {
        http_client own(server.port());
        // Registrations looking hosts up at once are bounded: a 503 is sent again, as a client would.
        for (int attempt = 0; attempt < 1'000; ++attempt) {
          answers[i] = send(own, "POST", "/v1/webhook-endpoints", registration, "register-1");
          if (answers[i].status != 503) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
      });
    }
    for (auto& t : senders) t.join();
  }
  test_support::expect_done_once(answers, 201);
  ASSERT_EQ(answers[0].status, 201) << answers[0].body;
  const auto id = answers[0].json().as_object().at("id").as_int64();
  const auto secret = field(answers[0].json(), "signingSecret");
  const auto listed = c.get("/v1/webhook-endpoints", merchant.key).json().as_object().at("endpoints").as_array();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].as_object().at("id").as_int64(), id);
  const auto again = send(c, "POST", "/v1/webhook-endpoints", registration, "register-1");
  EXPECT_EQ(again.status, 201);
  EXPECT_EQ(again.header("idempotent-replayed"), "true");
  EXPECT_EQ(again.body, answers[0].body);
  const auto other = send(c, "POST", "/v1/webhook-endpoints",
                          R"({"url":")" + receiver.url("/other") + R"(","events":["*"]})", "register-1");
  EXPECT_EQ(other.status, 422) << other.body;
  EXPECT_EQ(field(other.json(), "code"), "idempotency_key_reused");

  // A refused registration leaves its key free for the request that follows.
  const auto refused =
      send(c, "POST", "/v1/webhook-endpoints", R"({"url":"http://10.1.2.3/hook","events":["*"]})", "register-2");
  EXPECT_EQ(refused.status, 400);
  const auto second = send(c, "POST", "/v1/webhook-endpoints",
                           R"({"url":")" + receiver.url("/second") + R"(","events":["*"]})", "register-2");
  EXPECT_EQ(second.status, 201) << second.body;
  EXPECT_EQ(second.header("idempotent-replayed"), "");

  // Rotation: sent twice, one new secret, the one answered both times.
  const auto rotate_path = "/v1/webhook-endpoints/" + std::to_string(id) + "/rotate-secret";
  const auto rotated = send(c, "POST", rotate_path, R"({"previousSecretExpiresInSeconds":0})", "rotate-1");
  ASSERT_EQ(rotated.status, 200) << rotated.body;
  const auto new_secret = field(rotated.json(), "signingSecret");
  EXPECT_NE(new_secret, secret);
  const auto rotated_again = send(c, "POST", rotate_path, R"({"previousSecretExpiresInSeconds":0})", "rotate-1");
  EXPECT_EQ(rotated_again.status, 200);
  EXPECT_EQ(rotated_again.header("idempotent-replayed"), "true");
  EXPECT_EQ(rotated_again.body, rotated.body);
  const auto other_window = send(c, "POST", rotate_path, R"({"previousSecretExpiresInSeconds":60})", "rotate-1");
  EXPECT_EQ(other_window.status, 422) << other_window.body;
  EXPECT_EQ(sql_value(owner_url(), "SELECT signing_secret FROM webhook_endpoint WHERE id = " + std::to_string(id)),
            new_secret);

  const auto audited = [&](const std::string& action) {
    return sql_value(owner_url(), "SELECT count(*) FROM audit_log WHERE action = '" + action +
                                      "' AND principal_id = " + std::to_string(merchant.id));
  };
  EXPECT_EQ(audited("webhook_endpoint.create"), "2");
  EXPECT_EQ(audited("webhook_endpoint.rotate_secret"), "1");
}

TEST_F(webhooks_e2e, a_kept_answer_past_its_retention_is_deleted_and_its_key_names_a_new_request) {
  // Two registrations under keys; one answer made to be 25 hours old. With the default retention
  // of 24 hours, the pruner (every 20 ms here) deletes exactly that one, and its key then makes a
  // second endpoint with another secret, while the other key is still answered from its row.
  server_process server(server_options(quick_webhooks({{"WALLET_LEDGER_REPLAY_PRUNE_INTERVAL_MS", "20"}})));
  http_client c(server.port());
  const auto merchant = make_party(c, server.operator_key(), "merchant");
  webhook_receiver receiver([](int) { return 200; });
  const auto registration = R"({"url":")" + receiver.url() + R"(","events":["*"]})";
  const auto register_under = [&](const std::string& key) {
    return c.request(
        "POST", "/v1/webhook-endpoints", registration,
        {{"Authorization", "Bearer " + merchant.key}, {"Content-Type", "application/json"}, {"Idempotency-Key", key}});
  };
  const auto old_answer = register_under("kept-old");
  const auto young_answer = register_under("kept-young");
  ASSERT_EQ(old_answer.status, 201) << old_answer.body;
  ASSERT_EQ(young_answer.status, 201) << young_answer.body;
  const auto kept = [&](const std::string& key) {
    return sql_value(owner_url(), "SELECT count(*) FROM request_replay WHERE principal_id = " +
                                      std::to_string(merchant.id) + " AND idempotency_key = '" + key + "'");
  };
  ASSERT_EQ(kept("kept-old"), "1");
  sql_value(owner_url(), "UPDATE request_replay SET created_at = now() - interval '25 hours' WHERE principal_id = " +
                             std::to_string(merchant.id) + " AND idempotency_key = 'kept-old' RETURNING 1");

  ASSERT_TRUE(
      eventually([&] { return kept("kept-old") == "0"; }, std::chrono::seconds(30), std::chrono::milliseconds(20)));
  // The counter moves after the delete commits.
  EXPECT_TRUE(eventually([&] { return metric_value(server.port(), "wallet_replays_pruned_total") == 1; },
                         std::chrono::seconds(30), std::chrono::milliseconds(20)));
  EXPECT_EQ(kept("kept-young"), "1");

  const auto young_again = register_under("kept-young");
  EXPECT_EQ(young_again.header("idempotent-replayed"), "true");
  EXPECT_EQ(young_again.body, young_answer.body);
  const auto old_again = register_under("kept-old");
  ASSERT_EQ(old_again.status, 201) << old_again.body;
  EXPECT_EQ(old_again.header("idempotent-replayed"), "");
  EXPECT_NE(old_again.json().as_object().at("id"), old_answer.json().as_object().at("id"));
  EXPECT_NE(field(old_again.json(), "signingSecret"), field(old_answer.json(), "signingSecret"));
  EXPECT_EQ(c.get("/v1/webhook-endpoints", merchant.key).json().as_object().at("endpoints").as_array().size(), 3u);
}

TEST_F(webhooks_e2e, finished_deliveries_past_their_retention_are_deleted_and_nothing_else) {
  // Three payments delivered to one endpoint; two of them made to have ended 31 days ago. A second,
  // disabled endpoint has a FAILED delivery that ended 40 days ago and disabled it (the endpoint
  // names it), and a PENDING one made 40 days ago. With the default retention of 30 days, the
  // dispatcher (pruning every 20 ms here) deletes exactly the two old delivered ones.
  server_process server(server_options(quick_webhooks({{"WALLET_WEBHOOKS_PRUNE_INTERVAL_MS", "20"}})));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto merchant = make_party(c, op, "merchant");
  const auto payer = make_party(c, op, "user", 100'000);
  webhook_receiver receiver([](int) { return 200; });
  const auto ep = create_endpoint(c, merchant.key, receiver.url());
  const auto idle = create_endpoint(c, merchant.key, receiver.url("/idle"), R"(["SWEEP"])");
  ASSERT_GT(idle.id, 0);
  for (int i = 1; i <= 3; ++i) transfer(c, payer.key, payer.account, merchant.account, i);
  ASSERT_TRUE(eventually([&] { return count_with_status(deliveries(c, merchant.key, ep.id), "DELIVERED") == 3; },
                         std::chrono::seconds(60), std::chrono::milliseconds(20)));
  const auto ids = deliveries(c, merchant.key, ep.id);
  const auto id = [&](std::size_t i) { return field(ids.at(i), "id"); };

  const auto idle_id = std::to_string(idle.id);
  // The FAILED delivery and the endpoint naming it in one statement: a prune never sees the one
  // without the other.
  const auto failed =
      sql_value(owner_url(),
                "WITH f AS (INSERT INTO webhook_delivery (endpoint_id, event_cursor, event_id, event_type, body,"
                " status, attempts, span_attempts, completed_at, created_at) VALUES (" +
                    idle_id +
                    ", 1, 'e-failed', 'SWEEP', '{}', 'FAILED', 1, 1, now() - interval '40 days',"
                    " now() - interval '41 days') RETURNING id),"
                    " e AS (UPDATE webhook_endpoint SET disabled_at = now(), disabled_reason = 'given up',"
                    " disabled_by_delivery = (SELECT id FROM f) WHERE id = " +
                    idle_id + ") SELECT id FROM f");
  // Made once the endpoint is disabled, so that no attempt delivers it.
  const auto pending =
      sql_value(owner_url(),
                "INSERT INTO webhook_delivery (endpoint_id, event_cursor, event_id, event_type, body,"
                " created_at) VALUES (" +
                    idle_id + ", 2, 'e-pending', 'SWEEP', '{}', now() - interval '40 days') RETURNING id");
  sql_value(owner_url(), "UPDATE webhook_delivery SET completed_at = now() - interval '31 days' WHERE id IN (" + id(0) +
                             ", " + id(1) + ") RETURNING id");

  ASSERT_TRUE(eventually([&] { return metric_value(server.port(), "wallet_webhook_deliveries_pruned_total") == 2; },
                         std::chrono::seconds(30), std::chrono::milliseconds(20)));
  EXPECT_EQ(sql_value(owner_url(),
                      "SELECT string_agg(id::text, ',' ORDER BY id) FROM webhook_delivery"
                      " WHERE endpoint_id IN (" +
                          std::to_string(ep.id) + ", " + idle_id + ")"),
            id(2) + "," + failed + "," + pending);
  const auto listed = deliveries(c, merchant.key, ep.id);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(field(listed[0], "id"), id(2));
}

TEST_F(webhooks_e2e, two_servers_never_send_one_endpoints_events_at_the_same_time_nor_twice) {
  // Two wallet-servers on one database both dispatch. Forty payments to a merchant whose receiver
  // holds each request a few milliseconds (to widen any overlap) and counts how many are open at
  // once: it never sees two at once, gets every event exactly once, in payment order, and the two
  // servers' attempts add up to exactly forty (every earlier test's endpoint is deleted first).
  server_process a(server_options(quick_webhooks()));
  server_process b(server_options(quick_webhooks()));
  http_client c(a.port());
  const auto& op = a.operator_key();
  const auto merchant = make_party(c, op, "merchant");
  const auto payer = make_party(c, op, "user", 100'000);
  std::atomic<int> open{0}, most_open{0};
  webhook_receiver receiver([&](int) {
    const int now = ++open;
    int seen = most_open.load();
    while (now > seen && !most_open.compare_exchange_weak(seen, now)) {}
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    --open;
    return 200;
  });
  const auto ep = create_endpoint(c, merchant.key, receiver.url());
  std::vector<std::string> paid;
  for (int i = 0; i < 40; ++i) paid.push_back(transfer(c, payer.key, payer.account, merchant.account, 1 + i));
  ASSERT_TRUE(eventually([&] { return count_with_status(deliveries(c, merchant.key, ep.id), "DELIVERED") == 40; },
                         std::chrono::seconds(90), std::chrono::milliseconds(20)));
  std::vector<std::string> order;
  for (const auto& r : receiver.requests()) order.push_back(field(json::parse(r.body), "eventId"));
  EXPECT_EQ(order, paid);
  EXPECT_EQ(most_open.load(), 1);
  // One attempt each: no delivery was sent twice, by one server or by both.
  int attempts = 0;
  for (const auto& d : deliveries(c, merchant.key, ep.id)) attempts += std::stoi(field(d, "attempts"));
  EXPECT_EQ(attempts, 40);
  EXPECT_EQ(
      metric_value(a.port(), "wallet_webhook_attempts_total") + metric_value(b.port(), "wallet_webhook_attempts_total"),
      40);
}

TEST_F(webhooks_e2e, a_pending_delivery_survives_a_restart) {
  // A receiver that answers 503 until the test lets it accept. The server that made the delivery
  // retries it, then stops; a new server on the same database delivers it once the receiver accepts.
  std::atomic<bool> accept{false};
  webhook_receiver receiver([&](int) { return accept.load() ? 200 : 503; });
  party merchant;
  endpoint ep;
  std::string paid;
  const auto settings = quick_webhooks({{"WALLET_WEBHOOKS_TIMEOUT_MS", "1000"}});
  {
    server_process first(server_options(settings));
    http_client c(first.port());
    merchant = make_party(c, first.operator_key(), "merchant");
    const auto payer = make_party(c, first.operator_key(), "user", 1'000);
    ep = create_endpoint(c, merchant.key, receiver.url());
    paid = transfer(c, payer.key, payer.account, merchant.account, 3);
    ASSERT_TRUE(eventually(
        [&] {
          const auto list = deliveries(c, merchant.key, ep.id);
          return list.size() == 1 && std::stoi(field(list[0], "attempts")) >= 2;
        },
        std::chrono::seconds(60), std::chrono::milliseconds(20)));
  }
  accept = true;
  server_process second(server_options(settings));
  http_client c(second.port());
  ASSERT_TRUE(eventually([&] { return count_with_status(deliveries(c, merchant.key, ep.id), "DELIVERED") == 1; },
                         std::chrono::seconds(90), std::chrono::milliseconds(20)));
  const auto got = receiver.requests();
  ASSERT_GE(got.size(), 3u);
  EXPECT_EQ(got.back().answered, 200);
  for (const auto& r : got) EXPECT_EQ(field(json::parse(r.body), "eventId"), paid);
}

TEST_F(webhooks_e2e, an_endpoint_disabled_past_the_feeds_retention_goes_on_from_the_oldest_event_kept) {
  // An endpoint disabled before three payments; every outbox row is then made 31 days old, and the
  // relay (pruning every 20 ms) deletes all but the feed's last row, the third payment's: a
  // disabled endpoint holds nothing back. Enabled again, it gets the third payment alone, and the
  // server counts the gap it could not deliver.
  server_process server(server_options(quick_webhooks({{"WALLET_EVENTS_PRUNE_INTERVAL_MS", "20"}})));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto merchant = make_party(c, op, "merchant");
  const auto payer = make_party(c, op, "user", 1'000);
  webhook_receiver receiver([](int) { return 200; });
  const auto ep = create_endpoint(c, merchant.key, receiver.url());
  const auto path = "/v1/webhook-endpoints/" + std::to_string(ep.id);
  ASSERT_EQ(c.post(path + "/disable", merchant.key, "").status, 200);
  const auto start = feed_end(c, op);
  std::vector<std::string> paid;
  for (int i = 1; i <= 3; ++i) paid.push_back(transfer(c, payer.key, payer.account, merchant.account, i));
  ASSERT_TRUE(eventually(
      [&] {
        return feed_events(c, op, start).count(paid[2]) != 0 &&
               sql_value(owner_url(), "SELECT count(*) FROM outbox_event WHERE published_at IS NULL") == "0";
      },
      std::chrono::seconds(60), std::chrono::milliseconds(20)));
  const auto gaps_before = metric_value(server.port(), "wallet_webhook_feed_gaps_total");
  sql_value(owner_url(), "UPDATE outbox_event SET created_at = now() - interval '31 days' RETURNING 1");
  ASSERT_TRUE(eventually([&] { return sql_value(owner_url(), "SELECT count(*) FROM outbox_event") == "1"; },
                         std::chrono::seconds(30), std::chrono::milliseconds(20)));

  ASSERT_EQ(c.post(path + "/enable", merchant.key, "").status, 200);
  ASSERT_TRUE(eventually([&] { return count_with_status(deliveries(c, merchant.key, ep.id), "DELIVERED") == 1; },
                         std::chrono::seconds(60), std::chrono::milliseconds(20)));
  EXPECT_EQ(accepted_events(receiver), std::vector<std::string>{paid[2]});
  EXPECT_EQ(deliveries(c, merchant.key, ep.id).size(), 1u);
  EXPECT_EQ(metric_value(server.port(), "wallet_webhook_feed_gaps_total") - gaps_before, 1);
}

TEST_F(webhooks_e2e, endpoints_of_many_owners_share_one_read_of_the_feed_and_get_only_their_own_events) {
  // Four merchants with an endpoint each, an operator's endpoint for the second merchant's account
  // and an endpoint of the first merchant's for deposits only, all made before any payment so that
  // their cursors move together. Once a first payment reached every endpoint, twenty payments go
  // round the merchants: each endpoint gets exactly the events its rule gives it, in order, and the
  // fan-out read the feed at most once for every outbox row those payments made (a read per
  // endpoint would be six a row), and wrote no endpoint's row: the endpoints follow the shared
  // position (migration 029), which every step moves alone.
  server_process server(server_options(quick_webhooks()));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto payer = make_party(c, op, "user", 100'000);
  std::vector<party> merchants;
  for (int i = 0; i < 4; ++i) merchants.push_back(make_party(c, op, "merchant"));
  webhook_receiver receiver([](int) { return 200; });
  std::vector<endpoint> own;
  for (std::size_t i = 0; i < merchants.size(); ++i)
    own.push_back(create_endpoint(c, merchants[i].key, receiver.url("/m" + std::to_string(i))));
  const auto watched = register_endpoint(c, op,
                                         R"({"url":")" + receiver.url("/op") + R"(","events":["*"],"accountId":)" +
                                             std::to_string(merchants[1].account) + "}");
  ASSERT_EQ(watched.status, 201) << watched.body;
  const auto watched_id = watched.json().as_object().at("id").as_int64();
  const auto deposits_only = create_endpoint(c, merchants[0].key, receiver.url("/deposits"), R"(["DEPOSIT"])");

  const auto warmup = transfer(c, payer.key, payer.account, merchants[0].account, 1);
  ASSERT_TRUE(
      eventually([&] { return received(receiver, warmup); }, std::chrono::seconds(60), std::chrono::milliseconds(20)));
  // Every endpoint past the warm-up payment, following the shared position: the fan-out is at rest.
  const auto cursors_at_rest = [&] {
    return sql_value(owner_url(), std::string("SELECT count(*) FROM webhook_endpoint WHERE deleted_at IS NULL AND "
                                              "disabled_at IS NULL AND (NOT follows_fan_out OR ") +
                                      k_standing + " < (SELECT max(feed_seq) << 16 FROM outbox_event))") == "0";
  };
  ASSERT_TRUE(eventually(cursors_at_rest, std::chrono::seconds(60), std::chrono::milliseconds(20)));
  // Every version of the endpoints' rows, to see that no step writes one.
  const auto endpoint_rows = [&] {
    return sql_value(owner_url(), "SELECT string_agg(id || ':' || xmin, ',' ORDER BY id) FROM webhook_endpoint");
  };
  const auto rows_at_rest = endpoint_rows();
  const auto rows_before = std::stoll(sql_value(owner_url(), "SELECT count(*) FROM outbox_event"));
  const auto reads_before = metric_value(server.port(), "wallet_webhook_feed_reads_total");

  std::vector<std::vector<std::string>> paid(merchants.size());
  for (int i = 0; i < 20; ++i) {
    const auto m = static_cast<std::size_t>(i) % merchants.size();
    paid[m].push_back(transfer(c, payer.key, payer.account, merchants[m].account, 10 + i));
  }
  for (std::size_t m = 0; m < merchants.size(); ++m) {
    const auto expected = static_cast<int>(paid[m].size()) + (m == 0 ? 1 : 0);
    ASSERT_TRUE(eventually(
        [&] { return count_with_status(deliveries(c, merchants[m].key, own[m].id), "DELIVERED") == expected; },
        std::chrono::seconds(60), std::chrono::milliseconds(20)))
        << "merchant " << m;
  }
  ASSERT_TRUE(eventually([&] { return count_with_status(deliveries(c, op, watched_id), "DELIVERED") == 5; },
                         std::chrono::seconds(60), std::chrono::milliseconds(20)));
  ASSERT_TRUE(eventually(cursors_at_rest, std::chrono::seconds(60), std::chrono::milliseconds(20)));
  EXPECT_EQ(endpoint_rows(), rows_at_rest) << "a fan-out step wrote an endpoint's row";
  const auto reads = metric_value(server.port(), "wallet_webhook_feed_reads_total") - reads_before;
  const auto rows = std::stoll(sql_value(owner_url(), "SELECT count(*) FROM outbox_event")) - rows_before;

  std::map<std::string, std::vector<std::string>> by_target;
  for (const auto& r : receiver.requests()) by_target[r.target].push_back(field(json::parse(r.body), "eventId"));
  for (std::size_t m = 0; m < merchants.size(); ++m) {
    auto expected = paid[m];
    if (m == 0) expected.insert(expected.begin(), warmup);
    EXPECT_EQ(by_target["/m" + std::to_string(m)], expected) << "merchant " << m;
  }
  EXPECT_EQ(by_target["/op"], paid[1]);
  EXPECT_EQ(by_target.count("/deposits"), 0u);
  EXPECT_TRUE(deliveries(c, merchants[0].key, deposits_only.id).empty());
  EXPECT_GE(rows, 1);
  EXPECT_GE(reads, 1);
  EXPECT_LE(reads, rows) << "the fan-out read the feed more often than it grew";
  std::cout << "fan-out: " << reads << " reads of the feed for " << rows << " outbox rows and "
            << sql_value(owner_url(),
                         "SELECT count(*) FROM webhook_endpoint WHERE deleted_at IS NULL AND disabled_at "
                         "IS NULL")
            << " live endpoints" << std::endl;
}

TEST_F(webhooks_e2e, a_step_with_more_deliveries_than_one_statement_carries_is_written_whole) {
  // Three endpoints of one merchant, disabled while 700 payments are made to it, then enabled in one
  // statement, so that one page of the feed serves all three at the same cursor: 2,100 deliveries,
  // more than one statement carries (2,000), so their steps are written in two. Each endpoint gets
  // every payment exactly once, in order, and its cursor ends past the last; then it follows the
  // fan-out's shared position.
  server_process server(server_options(quick_webhooks()));
  http_client c(server.port());
  const auto& op = server.operator_key();
  const auto merchant = make_party(c, op, "merchant");
  const auto payer = make_party(c, op, "user", 1'000'000);
  webhook_receiver receiver([](int) { return 200; });
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(create_endpoint(c, merchant.key, receiver.url("/e" + std::to_string(i))).id);
    ASSERT_EQ(c.post("/v1/webhook-endpoints/" + std::to_string(ids.back()) + "/disable", merchant.key, "").status, 200);
  }
  std::vector<std::string> paid;
  for (int i = 0; i < 700; ++i) paid.push_back(transfer(c, payer.key, payer.account, merchant.account, 1 + i % 50));
  const auto list = std::to_string(ids[0]) + "," + std::to_string(ids[1]) + "," + std::to_string(ids[2]);
  sql_value(owner_url(), "UPDATE webhook_endpoint SET disabled_at = NULL, disabled_reason = NULL WHERE id IN (" + list +
                             ") RETURNING 1");
  ASSERT_TRUE(eventually(
      [&] {
        return sql_value(owner_url(), "SELECT count(*) FROM webhook_delivery WHERE endpoint_id IN (" + list + ")") ==
               "2100";
      },
      std::chrono::seconds(60), std::chrono::milliseconds(20)));
  for (const auto id : ids) {
    const auto events =
        sql_column(owner_url(), "SELECT event_id FROM webhook_delivery WHERE endpoint_id = " + std::to_string(id) +
                                    " ORDER BY event_cursor");
    EXPECT_EQ(events, paid) << "endpoint " << id;
  }
  EXPECT_EQ(sql_value(owner_url(),
                      "SELECT count(*) FROM webhook_endpoint WHERE id IN (" + list + ") AND " + k_standing +
                          " >= (SELECT max(event_cursor) FROM webhook_delivery WHERE endpoint_id IN (" + list + "))"),
            "3");
  // Caught up by steps of their own, the three join the fan-out's shared position, and the next
  // payment reaches each of them through it.
  ASSERT_TRUE(eventually(
      [&] {
        return sql_value(owner_url(),
                         "SELECT count(*) FROM webhook_endpoint WHERE follows_fan_out AND id IN (" + list + ")") == "3";
      },
      std::chrono::seconds(60), std::chrono::milliseconds(20)));
  const auto next = transfer(c, payer.key, payer.account, merchant.account, 7);
  ASSERT_TRUE(eventually(
      [&] {
        return sql_value(owner_url(), "SELECT count(*) FROM webhook_delivery WHERE endpoint_id IN (" + list +
                                          ") AND event_id = '" + next + "'") == "3";
      },
      std::chrono::seconds(60), std::chrono::milliseconds(20)));
  EXPECT_EQ(sql_value(owner_url(), "SELECT count(*) FROM webhook_delivery WHERE endpoint_id IN (" + list + ")"),
            "2103");
}

}  // namespace
}  // namespace events_test
