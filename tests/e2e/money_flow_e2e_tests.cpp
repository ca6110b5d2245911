// End-to-end tests of the money flows (docs/money-flows.md) over HTTP: a real wallet-server,
// PostgreSQL and Redis. Deposits from providers and their signed events, two-step withdrawals,
// refunds and chargebacks of deposits: the entries each flow makes, the races each one must win
// exactly once, and the signatures that must not verify.

#include <gtest/gtest.h>

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <cctype>
#include <chrono>
#include <future>
#include <map>
#include <set>

#include "http/signature.hpp"
#include "tests/support/database.hpp"
#include "tests/support/metrics.hpp"
#include "tests/support/process.hpp"
#include "tests/support/support.hpp"

namespace ts = test_support;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t k_fee = 50;  // the EUR withdrawal fee of this suite's server

std::int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string json_of(const boost::json::object& o) { return boost::json::serialize(o); }

std::string str(const boost::json::value& v) { return std::string(v.as_string()); }

class MoneyFlowE2E : public ts::shared_server_test<MoneyFlowE2E> {
 public:
  static ts::server_process::options options() {
    auto o = ts::shared_server_test<MoneyFlowE2E>::options();
    o.env["WALLET_LEDGER_WITHDRAWAL_FEES"] = "EUR:" + std::to_string(k_fee);
    // Amounts up to the largest balance, so that a balance can be taken beyond it
    // (ABalanceBeyondItsLimitIs400AndPostsNothing).
    o.env["WALLET_LEDGER_AMOUNT_MINOR_MAX"] = "9223372036854775807";
    return o;
  }

 protected:
  struct provider {
    std::string name;
    std::string secret;
  };

  provider new_provider(ts::http_client& c) const {
    const auto name = "p" + std::to_string(now_s() % 100000) + "-" + ts::unique_key("x").substr(0, 12);
    boost::json::object body;
    body["name"] = name;
    auto r = c.post("/v1/providers", op(), json_of(body));
    EXPECT_EQ(r.status, 201) << r.body;
    const auto j = r.json();
    return provider{name, str(j.as_object().at("signingSecret"))};
  }

  // A principal with one empty EUR account.
  std::pair<ts::principal, std::int64_t> wallet(ts::http_client& c) const {
    auto who = ts::create_principal(c, op());
    return {who, ts::create_account(c, op(), who.id)};
  }

  // Provider `p` pays 5,000 EUR into `account` (event "<prefix>-pay", payment "<prefix>-1"), and
  // `who` withdraws 1,000 of it through `p`: the withdrawal's id ("" if either failed).
  std::string paid_in_then_withdrawn(ts::http_client& c, const provider& p, const ts::principal& who,
                                     std::int64_t account, const std::string& prefix) const {
    auto r = signed_event(
        c, p,
        event(p, prefix + "-pay", "payment.succeeded",
              {{"paymentId", prefix + "-1"}, {"accountId", account}, {"amount", 5'000}, {"currency", "EUR"}}));
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return {};
    r = post_money(c, "/v1/withdrawals", who.key,
                   R"({"accountId":)" + std::to_string(account) + R"(,"amount":1000,"provider":")" + p.name + R"("})");
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? str(r.json().as_object().at("id")) : std::string();
  }

  // The id and balance of a system account (0 when it does not exist yet).
  // A system account and its shards (fee_revenue is hot).
  static std::int64_t system_balance(const std::string& role) {
    const auto v = ts::query_value(
        "SELECT COALESCE(sum(a.balance), 0) FROM account a JOIN account s ON a.id = s.id OR a.parent_id = s.id"
        " WHERE s.currency = 'EUR' AND s.system_role = '" +
        role + "'");
    return std::stoll(v);
  }

  ts::response signed_event(ts::http_client& c, const provider& p, const std::string& body, std::int64_t at = 0) const {
    return c.request("POST", "/v1/provider-events", body,
                     {{"Content-Type", "application/json"},
                      {"Wallet-Signature", api::sign(p.secret, at == 0 ? now_s() : at, body)}});
  }

  static std::string event(const provider& p, const std::string& event_id, const std::string& type,
                           boost::json::object fields) {
    fields["provider"] = p.name;
    fields["eventId"] = event_id;
    fields["type"] = type;
    return json_of(fields);
  }

  ts::response post_money(ts::http_client& c, const std::string& path, const std::string& key,
                          const std::string& body) const {
    return c.post(path, key, body, ts::unique_key("flow"));
  }

  // The entries of a transaction as (account, amount), as an operator sees them.
  std::map<std::int64_t, std::int64_t> entries(ts::http_client& c, const std::string& transaction_id) const {
    auto r = c.get("/v1/transactions/" + transaction_id, op());
    EXPECT_EQ(r.status, 200) << r.body;
    const auto j = r.json();
    std::map<std::int64_t, std::int64_t> out;
    for (const auto& e : j.as_object().at("entries").as_array()) {
      out[e.as_object().at("accountId").as_int64()] += std::stoll(str(e.as_object().at("amount")));
    }
    return out;
  }

  static std::int64_t system_id(const std::string& role) {
    return std::stoll(
        ts::query_value("SELECT id FROM account WHERE currency = 'EUR' AND system_role = '" + role + "'"));
  }
};

// A provider's payment.succeeded deposits into the wallet from clearing:<provider>; its refund,
// a withdrawal with its fee, the withdrawal's payout, a failed payout and a chargeback bigger than
// what the wallet holds each post the entries of their row in the money-event table, and the
// ledger still reconciles.
TEST_F(MoneyFlowE2E, EachFlowPostsTheEntriesOfItsRow) {
  ts::http_client c(port());
  const auto p = new_provider(c);
  const auto [alice, a] = wallet(c);
  const auto clearing = "clearing:" + p.name;

  // DEPOSIT: clearing:<provider> → wallet.
  auto r = signed_event(c, p,
                        event(p, "ev-pay-1", "payment.succeeded",
                              {{"paymentId", "pay-1"}, {"accountId", a}, {"amount", 10'000}, {"currency", "EUR"}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const auto deposit_tx = str(r.json().as_object().at("transactionId"));
  EXPECT_EQ(entries(c, deposit_tx),
            (std::map<std::int64_t, std::int64_t>{{system_id(clearing), -10'000}, {a, 10'000}}));
  EXPECT_EQ(ts::balance(c, alice.key, a), 10'000);

  // DEPOSIT_REFUND: wallet → clearing:<provider>.
  r = post_money(c, "/v1/deposits/" + deposit_tx + "/refunds", op(), R"({"amount":1000,"reason":"customer asked"})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(entries(c, str(r.json().as_object().at("transactionId"))),
            (std::map<std::int64_t, std::int64_t>{{a, -1'000}, {system_id(clearing), 1'000}}));
  EXPECT_EQ(ts::balance(c, alice.key, a), 9'000);

  // WITHDRAWAL: wallet → pending_withdrawal (amount) + fee_revenue (fee).
  const auto pending_before = system_balance("pending_withdrawal");
  const auto fees_before = system_balance("fee_revenue");
  r = post_money(c, "/v1/withdrawals", alice.key,
                 R"({"accountId":)" + std::to_string(a) + R"(,"amount":2000,"provider":")" + p.name + R"("})");
  ASSERT_EQ(r.status, 201) << r.body;
  auto w = r.json().as_object();
  EXPECT_EQ(str(w.at("status")), "PENDING");
  EXPECT_EQ(str(w.at("fee")), std::to_string(k_fee));
  const auto paid_id = str(w.at("id"));
  EXPECT_EQ(entries(c, str(w.at("transactionId"))),
            (std::map<std::int64_t, std::int64_t>{
                {a, -2'000 - k_fee}, {system_id("pending_withdrawal"), 2'000}, {system_id("fee_revenue"), k_fee}}));
  EXPECT_EQ(ts::balance(c, alice.key, a), 9'000 - 2'000 - k_fee);
  EXPECT_EQ(system_balance("fee_revenue"), fees_before + k_fee);

  // PAYOUT, by the provider's event: pending_withdrawal → clearing:<provider>.
  r = signed_event(c, p, event(p, "ev-payout-1", "payout.paid", {{"withdrawalId", paid_id}, {"paymentId", "po-1"}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(
      entries(c, str(r.json().as_object().at("transactionId"))),
      (std::map<std::int64_t, std::int64_t>{{system_id("pending_withdrawal"), -2'000}, {system_id(clearing), 2'000}}));
  auto got = c.get("/v1/withdrawals/" + paid_id, alice.key);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(str(got.json().as_object().at("status")), "PAID");

  // PAYOUT_FAILED, by an operator: pending_withdrawal → wallet; the fee is kept.
  r = post_money(c, "/v1/withdrawals", alice.key, R"({"accountId":)" + std::to_string(a) + R"(,"amount":1000})");
  ASSERT_EQ(r.status, 201) << r.body;
  const auto failed_id = str(r.json().as_object().at("id"));
  r = post_money(c, "/v1/withdrawals/" + failed_id + "/fail", op(), "");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("status")), "FAILED");
  EXPECT_EQ(entries(c, str(r.json().as_object().at("transactionId"))),
            (std::map<std::int64_t, std::int64_t>{{system_id("pending_withdrawal"), -1'000}, {a, 1'000}}));
  const auto left = 9'000 - 2'000 - k_fee - k_fee;
  EXPECT_EQ(ts::balance(c, alice.key, a), left);
  EXPECT_EQ(system_balance("pending_withdrawal"), pending_before);

  // CHARGEBACK of what is left of the deposit (9,000), bigger than the wallet holds: the wallet
  // ends at 0 and the rest is booked to chargeback_loss.
  const auto loss_before = system_balance("chargeback_loss");
  const auto chargeback_event = event(p, "ev-cb-1", "chargeback.created", {{"paymentId", "pay-1"}});
  r = signed_event(c, p, chargeback_event);
  ASSERT_EQ(r.status, 200) << r.body;
  // Delivered again, the event is a duplicate of the same transaction, not a second chargeback.
  const auto redelivered = signed_event(c, p, chargeback_event);
  ASSERT_EQ(redelivered.status, 200) << redelivered.body;
  EXPECT_TRUE(redelivered.json().as_object().at("duplicate").as_bool());
  EXPECT_EQ(str(redelivered.json().as_object().at("transactionId")), str(r.json().as_object().at("transactionId")));
  EXPECT_EQ(entries(c, str(r.json().as_object().at("transactionId"))),
            (std::map<std::int64_t, std::int64_t>{
                {a, -left}, {system_id("chargeback_loss"), -(9'000 - left)}, {system_id(clearing), 9'000}}));
  EXPECT_EQ(ts::balance(c, alice.key, a), 0);
  EXPECT_EQ(system_balance("chargeback_loss"), loss_before - (9'000 - left));

  // The wallet's entries name the type of each transaction, in order.
  auto page = c.get("/v1/accounts/" + std::to_string(a) + "/entries", alice.key);
  ASSERT_EQ(page.status, 200) << page.body;
  std::vector<std::string> types;
  const auto listed = page.json();
  for (const auto& e : listed.as_object().at("entries").as_array()) types.push_back(str(e.as_object().at("type")));
  EXPECT_EQ(types, (std::vector<std::string>{"DEPOSIT", "DEPOSIT_REFUND", "WITHDRAWAL", "WITHDRAWAL", "PAYOUT_FAILED",
                                             "CHARGEBACK"}));

  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// The same event delivered twenty times at once posts once: twenty equal answers with one
// transactionId, nineteen of them duplicates, one provider_event row, one journal transaction.
TEST_F(MoneyFlowE2E, TheSameEventDeliveredTwentyTimesAtOncePostsOnce) {
  ts::http_client c(port());
  const auto p = new_provider(c);
  const auto [alice, a] = wallet(c);
  const auto body = event(p, "ev-dup", "payment.succeeded",
                          {{"paymentId", "pay-dup"}, {"accountId", a}, {"amount", 700}, {"currency", "EUR"}});
  const auto signature = api::sign(p.secret, now_s(), body);
  std::vector<std::future<ts::response>> answers;
  for (int i = 0; i < 20; ++i) {
    answers.push_back(std::async(std::launch::async, [&] {
      ts::http_client client(port());
      return client.request("POST", "/v1/provider-events", body,
                            {{"Content-Type", "application/json"}, {"Wallet-Signature", signature}});
    }));
  }
  std::set<std::string> transactions;
  int duplicates = 0;
  for (auto& f : answers) {
    auto r = f.get();
    ASSERT_EQ(r.status, 200) << r.body;
    const auto j = r.json().as_object();
    transactions.insert(str(j.at("transactionId")));
    duplicates += j.at("duplicate").as_bool() ? 1 : 0;
  }
  EXPECT_EQ(transactions.size(), 1u);
  EXPECT_EQ(duplicates, 19);
  EXPECT_EQ(ts::balance(c, alice.key, a), 700);
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM provider_event e JOIN provider p ON p.id = e.provider_id"
                            " WHERE p.name = '" +
                            p.name + "'"),
            "1");
}

// A bad signature, an old timestamp, or a captured signature replayed with a changed body is
// refused 401 bad_signature and leaves no trace; an API key is no substitute for a signature.
TEST_F(MoneyFlowE2E, EventsThatDoNotVerifyAreRefusedWithoutATrace) {
  ts::http_client c(port());
  const auto p = new_provider(c);
  const auto [alice, a] = wallet(c);
  const auto body = event(p, "ev-sig", "payment.succeeded",
                          {{"paymentId", "pay-sig"}, {"accountId", a}, {"amount", 500}, {"currency", "EUR"}});
  auto expect_refused = [&](const ts::response& r, const char* what) {
    EXPECT_EQ(r.status, 401) << what << ": " << r.body;
    EXPECT_EQ(str(r.json().as_object().at("code")), "bad_signature") << what;
  };
  expect_refused(c.request("POST", "/v1/provider-events", body,
                           {{"Content-Type", "application/json"},
                            {"Wallet-Signature", api::sign("whsec_not-the-secret-of-this-provider", now_s(), body)}}),
                 "another secret");
  expect_refused(signed_event(c, p, body, now_s() - 600), "ten minutes old");
  const auto captured = api::sign(p.secret, now_s(), body);
  const auto changed = event(p, "ev-sig", "payment.succeeded",
                             {{"paymentId", "pay-sig"}, {"accountId", a}, {"amount", 50'000}, {"currency", "EUR"}});
  expect_refused(c.request("POST", "/v1/provider-events", changed,
                           {{"Content-Type", "application/json"}, {"Wallet-Signature", captured}}),
                 "a captured signature with a changed body");
  expect_refused(c.request("POST", "/v1/provider-events", body,
                           {{"Content-Type", "application/json"}, {"Authorization", "Bearer " + op()}}),
                 "an operator's API key and no signature");
  // A body that lacks what an event needs is refused for its signature first: an unsigned request
  // learns nothing of the fields.
  const auto incomplete = event(p, "ev-sig-2", "payment.succeeded", {{"paymentId", "pay-sig-2"}});
  expect_refused(signed_event(c, p, incomplete, now_s() - 600), "an incomplete event, badly signed");
  expect_refused(c.request("POST", "/v1/provider-events", R"({"provider":")" + p.name + R"(","surprise":1})",
                           {{"Content-Type", "application/json"},
                            {"Wallet-Signature", api::sign("whsec_not-the-secret-of-this-provider", now_s(), "x")}}),
                 "an unknown field, badly signed");
  auto complete_later = signed_event(c, p, incomplete);
  EXPECT_EQ(complete_later.status, 400) << complete_later.body;
  EXPECT_NE(complete_later.body.find("accountId"), std::string::npos) << complete_later.body;
  EXPECT_EQ(ts::balance(c, alice.key, a), 0);
  const auto events_of_provider =
      "SELECT count(*) FROM provider_event e JOIN provider p ON p.id = e.provider_id"
      " WHERE p.name = '" +
      p.name + "'";
  EXPECT_EQ(ts::query_value(events_of_provider), "0");
  // The genuine delivery still posts.
  auto r = signed_event(c, p, body);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ts::balance(c, alice.key, a), 500);
}

// An event naming an account, a payment or a withdrawal the ledger does not know is refused 422
// with its code, and changes nothing (the provider may deliver it again later).
// A rotated provider secret: the new one verifies at once; the old one goes on verifying for the
// window the rotation gave (a day by default), and not at all after a rotation with 0 s, which
// also drops the one before it. Only operators rotate (403 otherwise); an unknown name is 404, the
// manual provider (no secret) 409, a bad body 400, none of them changing anything. Each rotation is
// in the audit log, never with a secret.
TEST_F(MoneyFlowE2E, ARotatedProviderSecretVerifiesBesideTheOldOneForItsWindow) {
  ts::http_client c(port());
  const auto p = new_provider(c);
  const auto [alice, a] = wallet(c);
  int paid = 0;
  // A payment event signed with `secret`: its answer's status.
  auto pay_signed_with = [&](const std::string& secret) {
    ++paid;
    const auto body = event(
        p, "ev-rot-" + std::to_string(paid), "payment.succeeded",
        {{"paymentId", "pay-rot-" + std::to_string(paid)}, {"accountId", a}, {"amount", 10}, {"currency", "EUR"}});
    return c
        .request("POST", "/v1/provider-events", body,
                 {{"Content-Type", "application/json"}, {"Wallet-Signature", api::sign(secret, now_s(), body)}})
        .status;
  };
  const auto path = "/v1/providers/" + p.name + "/rotate-secret";
  auto rotate = [&](const std::string& key, const std::string& body) {
    return c.request("POST", path, body, {{"Authorization", "Bearer " + key}, {"Content-Type", "application/json"}});
  };
  const auto s0 = p.secret;
  EXPECT_EQ(pay_signed_with(s0), 200);

  EXPECT_EQ(rotate(alice.key, "").status, 403);
  EXPECT_EQ(
      c.request("POST", "/v1/providers/nobody-by-this-name/rotate-secret", "", {{"Authorization", "Bearer " + op()}})
          .status,
      404);
  EXPECT_EQ(
      c.request("POST", "/v1/providers/NOT%20A%20NAME/rotate-secret", "", {{"Authorization", "Bearer " + op()}}).status,
      404);
  const auto manual =
      c.request("POST", "/v1/providers/manual/rotate-secret", "", {{"Authorization", "Bearer " + op()}});
  EXPECT_EQ(manual.status, 409) << manual.body;
  for (const std::string& body : std::vector<std::string>{R"({"previousSecretExpiresInSeconds":-1})",
                                                          R"({"previousSecretExpiresInSeconds":604801})",
                                                          R"({"signingSecret":"whsec_mine"})", R"(not json)"}) {
    const auto r = rotate(op(), body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_EQ(str(r.json().as_object().at("code")), "invalid_request") << body << ": " << r.body;
  }
  EXPECT_EQ(pay_signed_with(s0), 200);

  const auto first = rotate(op(), "");
  ASSERT_EQ(first.status, 200) << first.body;
  const auto s1 = str(first.json().as_object().at("signingSecret"));
  EXPECT_NE(s1, s0);
  EXPECT_FALSE(first.json().as_object().at("previousSecretExpiresAt").is_null());
  EXPECT_FALSE(first.json().as_object().at("secretRotatedAt").is_null());
  EXPECT_EQ(pay_signed_with(s1), 200);
  EXPECT_EQ(pay_signed_with(s0), 200);
  EXPECT_EQ(pay_signed_with("whsec_not-the-secret-of-this-provider-at-all"), 401);

  const auto second = rotate(op(), R"({"previousSecretExpiresInSeconds":0})");
  ASSERT_EQ(second.status, 200) << second.body;
  const auto s2 = str(second.json().as_object().at("signingSecret"));
  EXPECT_TRUE(second.json().as_object().at("previousSecretExpiresAt").is_null());
  EXPECT_EQ(pay_signed_with(s2), 200);
  EXPECT_EQ(pay_signed_with(s1), 401);
  EXPECT_EQ(pay_signed_with(s0), 401);

  // The list shows the rotation, never a secret; the manual provider sends no events.
  const auto list = c.get("/v1/providers", op());
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(list.body.find("whsec_"), std::string::npos);
  int listed = 0;
  const auto providers = list.json();
  for (const auto& item : providers.as_object().at("providers").as_array()) {
    const auto& o = item.as_object();
    if (str(o.at("name")) == "manual") {
      EXPECT_FALSE(o.at("sendsEvents").as_bool());
    }
    if (str(o.at("name")) != p.name) continue;
    ++listed;
    EXPECT_TRUE(o.at("sendsEvents").as_bool());
    EXPECT_EQ(o.at("secretRotatedAt"), second.json().as_object().at("secretRotatedAt"));
    EXPECT_TRUE(o.at("previousSecretExpiresAt").is_null());
  }
  EXPECT_EQ(listed, 1);
  EXPECT_EQ(c.get("/v1/providers", alice.key).status, 403);

  // Five payments verified, 10 each: two with s0 before any rotation, s1 and s0 in the window, s2.
  EXPECT_EQ(ts::balance(c, alice.key, a), 50);
  EXPECT_EQ(ts::query_value("SELECT string_agg(detail->>'previousSecretValidSeconds', ',' ORDER BY id) FROM audit_log"
                            " WHERE action = 'provider.rotate_secret' AND target = 'provider:" +
                            p.name + "'"),
            "86400,0");
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM audit_log WHERE detail::text LIKE '%whsec\\_%'"), "0");

  // wallet-admin rotates too: "provider <id> (<name>): signing secret <secret>", with no window here.
  const auto admin = ts::run_program(ts::build_dir() + "/tools/admin/wallet-admin",
                                     {"providers", "rotate-secret", p.name, "--previous-valid-seconds", "0"},
                                     ts::current_environment(), std::chrono::seconds(60));
  ASSERT_EQ(admin.exit_code, 0) << admin.output;
  const auto secret_at = admin.output.rfind("signing secret ");
  ASSERT_NE(secret_at, std::string::npos) << admin.output;
  auto s3 = admin.output.substr(secret_at + 15);
  s3.erase(s3.find_last_not_of(" \r\n") + 1);
  EXPECT_EQ(s3.rfind("whsec_", 0), 0u) << admin.output;
  const auto unknown = ts::run_program(ts::build_dir() + "/tools/admin/wallet-admin",
                                       {"providers", "rotate-secret", "nobody-by-this-name"}, ts::current_environment(),
                                       std::chrono::seconds(60));
  EXPECT_EQ(unknown.exit_code, 1) << unknown.output;
  // The server cached the provider when it rotated it through the API; within auth.key_cache_ttl_ms
  // it may still verify with s2, so the admin's secret is checked once that cache has moved on.
  EXPECT_TRUE(ts::eventually([&] { return pay_signed_with(s3) == 200; }, 30s, 50ms));
  EXPECT_TRUE(ts::eventually([&] { return pay_signed_with(s2) == 401; }, 30s, 50ms));
}

// A rotation sent with an Idempotency-Key whose answer was lost is sent again and gets the same
// answer, the same new secret, rotating nothing more; another request under the key is 422, and a
// malformed key 400.
TEST_F(MoneyFlowE2E, AProviderRotationUnderAnIdempotencyKeyIsAnsweredAgainAndDoneOnce) {
  ts::http_client c(port());
  const auto p = new_provider(c);
  const auto path = "/v1/providers/" + p.name + "/rotate-secret";
  auto rotate = [&](const std::string& body, const std::string& key) {
    return c.request(
        "POST", path, body,
        {{"Authorization", "Bearer " + op()}, {"Content-Type", "application/json"}, {"Idempotency-Key", key}});
  };
  const auto first = rotate(R"({"previousSecretExpiresInSeconds":0})", "rotate-" + p.name);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.header("idempotent-replayed"), "");
  const auto again = rotate(R"({"previousSecretExpiresInSeconds":0})", "rotate-" + p.name);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.header("idempotent-replayed"), "true");
  EXPECT_EQ(again.body, first.body);
  const auto other = rotate(R"({"previousSecretExpiresInSeconds":60})", "rotate-" + p.name);
  EXPECT_EQ(other.status, 422) << other.body;
  EXPECT_EQ(str(other.json().as_object().at("code")), "idempotency_key_reused");
  const auto bad_key = rotate("", "has space");
  EXPECT_EQ(bad_key.status, 400) << bad_key.body;
  // The secret answered is the provider's, and it was rotated once.
  EXPECT_EQ(ts::query_value("SELECT signing_secret FROM provider WHERE name = '" + p.name + "'"),
            str(first.json().as_object().at("signingSecret")));
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM audit_log WHERE action = 'provider.rotate_secret' AND target = "
                            "'provider:" +
                            p.name + "'"),
            "1");
}

// A rotation made through one server is known to another of the same database within
// auth.key_cache_ttl_ms: there, the new secret comes to verify, and the old one (rotated out with no
// window) comes to be refused.
TEST_F(MoneyFlowE2E, AProviderSecretRotatedOnOneServerIsKnownOnAnotherWithinTheCacheTtl) {
  ts::http_client c(port());
  auto other_options = options();
  other_options.env["WALLET_AUTH_KEY_CACHE_TTL_MS"] = "300";
  ts::server_process other(other_options);
  ts::http_client d(other.port());
  const auto p = new_provider(c);
  const auto [alice, a] = wallet(c);
  int paid = 0;
  auto pay_there_signed_with = [&](const std::string& secret) {
    ++paid;
    const auto body =
        event(p, "ev-ttl-" + std::to_string(paid), "payment.succeeded",
              {{"paymentId", "pay-ttl-" + std::to_string(paid)}, {"accountId", a}, {"amount", 1}, {"currency", "EUR"}});
    return d
        .request("POST", "/v1/provider-events", body,
                 {{"Content-Type", "application/json"}, {"Wallet-Signature", api::sign(secret, now_s(), body)}})
        .status;
  };
  // The other server reads the provider, and keeps it.
  ASSERT_EQ(pay_there_signed_with(p.secret), 200);
  const auto rotated =
      c.request("POST", "/v1/providers/" + p.name + "/rotate-secret", R"({"previousSecretExpiresInSeconds":0})",
                {{"Authorization", "Bearer " + op()}, {"Content-Type", "application/json"}});
  ASSERT_EQ(rotated.status, 200) << rotated.body;
  const auto fresh = str(rotated.json().as_object().at("signingSecret"));
  EXPECT_TRUE(ts::eventually([&] { return pay_there_signed_with(fresh) == 200; }, 30s, 20ms));
  EXPECT_TRUE(ts::eventually([&] { return pay_there_signed_with(p.secret) == 401; }, 30s, 20ms));
  // Once refused, it stays refused.
  EXPECT_EQ(pay_there_signed_with(p.secret), 401);
}

// Events naming providers the server has not read cost a database read each, so they spend the
// client address's allowance for requests without a known credential: past it (a burst of 3, 1 a
// second here) they are 429 before any read. A provider the server knows is never held back.
TEST_F(MoneyFlowE2E, EventsNamingUnknownProvidersAreLimitedPerAddressBeforeTheirRead) {
  auto limited_options = options();
  limited_options.env["WALLET_AUTH_UNAUTHENTICATED_PER_SECOND"] = "1";
  limited_options.env["WALLET_AUTH_UNAUTHENTICATED_BURST"] = "3";
  limited_options.env["WALLET_AUTH_KEY_CACHE_TTL_MS"] = "600000";
  // The test counts the reads its requests cause: the background work that reads through the same
  // pool (sweeps, hold expiry, the check for revoked keys) waits while it runs.
  limited_options.env["WALLET_LEDGER_SWEEP_INTERVAL_MS"] = "600000";
  limited_options.env["WALLET_LEDGER_HOLD_EXPIRY_INTERVAL_MS"] = "600000";
  ts::server_process server(limited_options);
  ts::http_client c(server.port());
  const auto& op = server.operator_key();
  // Made through this server, so it knows the provider without reading it.
  const auto name = "p" + ts::unique_key("known").substr(0, 20);
  const auto made = c.post("/v1/providers", op, R"({"name":")" + name + R"("})");
  ASSERT_EQ(made.status, 201) << made.body;
  const provider known{name, str(made.json().as_object().at("signingSecret"))};
  const auto who = ts::create_principal(c, op);
  const auto account = ts::create_account(c, op, who.id);

  const auto reads = [&] { return ts::metric_value(c, "wallet_reader_jobs_total"); };
  const auto started = std::chrono::steady_clock::now();
  const auto reads_before = reads();
  int unsigned_reads = 0, limited = 0;
  for (int i = 0; i < 30; ++i) {
    const provider made_up{"nobody-" + std::to_string(i), "whsec_guessed-secret-guessed-secret-guessed"};
    const auto r = signed_event(c, made_up, event(made_up, "ev-" + std::to_string(i), "payment.succeeded", {}));
    if (r.status == 401) {
      ++unsigned_reads;
    } else {
      ASSERT_EQ(r.status, 429) << r.body;
      EXPECT_EQ(str(r.json().as_object().at("code")), "rate_limited");
      EXPECT_FALSE(r.header("Retry-After").empty());
      ++limited;
    }
  }
  const auto elapsed_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LE(unsigned_reads, 3 + elapsed_s + 1);
  EXPECT_EQ(unsigned_reads + limited, 30);
  EXPECT_LE(reads() - reads_before, unsigned_reads);
  const auto paid =
      signed_event(c, known,
                   event(known, "ev-known", "payment.succeeded",
                         {{"paymentId", "pay-known"}, {"accountId", account}, {"amount", 5}, {"currency", "EUR"}}));
  EXPECT_EQ(paid.status, 200) << paid.body;
  EXPECT_EQ(ts::balance(c, who.key, account), 5);
}

TEST_F(MoneyFlowE2E, EventsNamingUnknownThingsAre422) {
  ts::http_client c(port());
  const auto p = new_provider(c);
  auto code_of = [&](const std::string& body) {
    auto r = signed_event(c, p, body);
    EXPECT_EQ(r.status, 422) << r.body;
    return str(r.json().as_object().at("code"));
  };
  EXPECT_EQ(
      code_of(event(p, "u1", "payment.succeeded",
                    {{"paymentId", "x"}, {"accountId", 9'000'000'000'000LL}, {"amount", 1}, {"currency", "EUR"}})),
      "unknown_account");
  EXPECT_EQ(code_of(event(p, "u2", "payment.refunded", {{"paymentId", "no-such-payment"}})), "unknown_payment");
  EXPECT_EQ(code_of(event(p, "u3", "payout.paid", {{"withdrawalId", "01234567-89ab-7def-8123-456789abcdef"}})),
            "unknown_withdrawal");
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM provider_event e JOIN provider p ON p.id = e.provider_id"
                            " WHERE p.name = '" +
                            p.name + "'"),
            "0");
}

// An event that names a currency other than that of the deposit or withdrawal it settles is
// refused and changes nothing: its amount would be taken in the wrong currency.
TEST_F(MoneyFlowE2E, EventsInAnotherCurrencyThanWhatTheySettleAre422) {
  ts::http_client c(port());
  const auto p = new_provider(c);
  const auto [alice, a] = wallet(c);
  const auto withdrawal = paid_in_then_withdrawn(c, p, alice, a, "cur");
  ASSERT_FALSE(withdrawal.empty());
  ts::response r;
  const auto balance_before = ts::balance(c, alice.key, a);
  for (const auto& body :
       {event(p, "cur-refund", "payment.refunded", {{"paymentId", "cur-1"}, {"amount", 100}, {"currency", "USD"}}),
        event(p, "cur-cb", "chargeback.created", {{"paymentId", "cur-1"}, {"currency", "JPY"}}),
        event(p, "cur-failed", "payout.failed", {{"withdrawalId", withdrawal}, {"currency", "USD"}})}) {
    auto refused = signed_event(c, p, body);
    EXPECT_EQ(refused.status, 422) << refused.body;
    EXPECT_EQ(str(refused.json().as_object().at("code")), "currency_mismatch") << refused.body;
  }
  EXPECT_EQ(ts::balance(c, alice.key, a), balance_before);
  auto w = c.get("/v1/withdrawals/" + withdrawal, alice.key);
  ASSERT_EQ(w.status, 200) << w.body;
  EXPECT_EQ(str(w.json().as_object().at("status")), "PENDING");
  // In the right currency the same events go through.
  r = signed_event(
      c, p,
      event(p, "cur-refund-eur", "payment.refunded", {{"paymentId", "cur-1"}, {"amount", 100}, {"currency", "EUR"}}));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ts::balance(c, alice.key, a), balance_before - 100);
}

// An event that contradicts what it settles is refused without a trace: a payout of another sum
// than its withdrawal's (a payout settles all of it), a refund or chargeback naming another account
// than its deposit's. The same events saying what is true go through.
TEST_F(MoneyFlowE2E, EventsThatContradictWhatTheySettleAre400) {
  ts::http_client c(port());
  const auto p = new_provider(c);
  const auto [alice, a] = wallet(c);
  const auto [bob, b] = wallet(c);
  const auto withdrawal = paid_in_then_withdrawn(c, p, alice, a, "amt");
  ASSERT_FALSE(withdrawal.empty());
  ts::response r;
  const auto balance_before = ts::balance(c, alice.key, a);
  for (const auto& body :
       {event(p, "amt-paid", "payout.paid", {{"withdrawalId", withdrawal}, {"amount", 400}, {"currency", "EUR"}}),
        event(p, "amt-failed", "payout.failed", {{"withdrawalId", withdrawal}, {"amount", 1}}),
        event(p, "amt-refund", "payment.refunded", {{"paymentId", "amt-1"}, {"accountId", b}, {"amount", 100}}),
        event(p, "amt-cb", "chargeback.created", {{"paymentId", "amt-1"}, {"accountId", b}})}) {
    auto refused = signed_event(c, p, body);
    EXPECT_EQ(refused.status, 400) << refused.body;
    EXPECT_EQ(str(refused.json().as_object().at("code")), "invalid_request") << refused.body;
  }
  EXPECT_EQ(ts::balance(c, alice.key, a), balance_before);
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM provider_event e JOIN provider p ON p.id = e.provider_id"
                            " WHERE p.name = " +
                            ts::sql_literal(p.name) + " AND e.event_id <> 'amt-pay'"),
            "0");
  auto w = c.get("/v1/withdrawals/" + withdrawal, alice.key);
  ASSERT_EQ(w.status, 200) << w.body;
  EXPECT_EQ(str(w.json().as_object().at("status")), "PENDING");
  r = signed_event(
      c, p, event(p, "amt-refund-a", "payment.refunded", {{"paymentId", "amt-1"}, {"accountId", a}, {"amount", 100}}));
  EXPECT_EQ(r.status, 200) << r.body;
  r = signed_event(c, p, event(p, "amt-paid-all", "payout.paid", {{"withdrawalId", withdrawal}, {"amount", 1'000}}));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ts::balance(c, alice.key, a), balance_before - 100);
  w = c.get("/v1/withdrawals/" + withdrawal, alice.key);
  EXPECT_EQ(str(w.json().as_object().at("status")), "PAID") << w.body;
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// A withdrawal and a payment racing for a wallet that holds enough for only one of them: exactly
// one succeeds, every time (the wallet's actor serializes its debits; the writer checks funds).
TEST_F(MoneyFlowE2E, AWithdrawalRacingAPaymentFromTheSameWalletWinsOrLosesWhole) {
  ts::http_client c(port());
  for (int round = 0; round < 20; ++round) {
    const auto [alice, a] = wallet(c);
    const auto [bob, b] = wallet(c);
    ts::deposit(c, op(), a, 1'000);
    auto withdrawal = std::async(std::launch::async, [&, a = a, key = alice.key] {
      ts::http_client client(port());
      return client.post("/v1/withdrawals", key, R"({"accountId":)" + std::to_string(a) + R"(,"amount":950})",
                         ts::unique_key("w"));
    });
    auto payment = std::async(std::launch::async, [&, a = a, b = b, key = alice.key] {
      ts::http_client client(port());
      return client.post("/v1/transfers", key, ts::transfer_body(a, b, 1'000), ts::unique_key("t"));
    });
    const auto w = withdrawal.get();
    const auto t = payment.get();
    EXPECT_EQ((w.status == 201) + (t.status == 201), 1) << "round " << round << ": " << w.body << " / " << t.body;
    EXPECT_TRUE(w.status == 201 || w.status == 422) << w.body;
    EXPECT_TRUE(t.status == 201 || t.status == 422) << t.body;
    EXPECT_EQ(ts::balance(c, alice.key, a), 0);
    EXPECT_EQ(ts::balance(c, bob.key, b), t.status == 201 ? 1'000 : 0);
  }
}

// A confirm racing a fail of one withdrawal: exactly one settles it, the other gets 409
// already_settled; a settled withdrawal never settles again.
TEST_F(MoneyFlowE2E, AConfirmRacingAFailSettlesOnce) {
  ts::http_client c(port());
  for (int round = 0; round < 10; ++round) {
    const auto [alice, a] = wallet(c);
    ts::deposit(c, op(), a, 2'000);
    auto r = post_money(c, "/v1/withdrawals", alice.key, R"({"accountId":)" + std::to_string(a) + R"(,"amount":1000})");
    ASSERT_EQ(r.status, 201) << r.body;
    const auto id = str(r.json().as_object().at("id"));
    auto settle = [&](const char* how) {
      return std::async(std::launch::async, [&, how] {
        ts::http_client client(port());
        return client.post("/v1/withdrawals/" + id + "/" + how, op(), "", ts::unique_key(how));
      });
    };
    auto confirm = settle("confirm");
    auto fail = settle("fail");
    const auto cr = confirm.get();
    const auto fr = fail.get();
    EXPECT_EQ((cr.status == 201) + (fr.status == 201), 1) << cr.body << " / " << fr.body;
    const auto& loser = cr.status == 201 ? fr : cr;
    EXPECT_EQ(loser.status, 409) << loser.body;
    EXPECT_EQ(str(loser.json().as_object().at("code")), "already_settled");
    const auto status = str(c.get("/v1/withdrawals/" + id, alice.key).json().as_object().at("status"));
    EXPECT_EQ(status, cr.status == 201 ? "PAID" : "FAILED");
    EXPECT_EQ(ts::balance(c, alice.key, a), cr.status == 201 ? 2'000 - 1'000 - k_fee : 2'000 - k_fee);
    EXPECT_EQ(ts::query_value("SELECT count(*) FROM journal_transaction WHERE type IN ('PAYOUT', 'PAYOUT_FAILED')"
                              " AND metadata->>'withdrawalId' = '" +
                              id + "'"),
              "1");
  }
}

// Refunds racing for one deposit never exceed it: of two concurrent refunds of 600 of a deposit of
// 1,000 (into a wallet that holds 2,000), exactly one is made and the other is 422
// refund_exceeds_payment.
TEST_F(MoneyFlowE2E, RefundsRacingForOneDepositNeverExceedIt) {
  ts::http_client c(port());
  for (int round = 0; round < 10; ++round) {
    const auto [alice, a] = wallet(c);
    const auto deposit_tx = ts::deposit(c, op(), a, 1000);
    ASSERT_FALSE(deposit_tx.empty());
    // Another deposit, so that the wallet could pay both refunds: only the first deposit's limit stops one.
    ts::deposit(c, op(), a, 1'000);
    std::vector<std::future<ts::response>> refunds;
    for (int i = 0; i < 2; ++i) {
      refunds.push_back(std::async(std::launch::async, [&] {
        ts::http_client client(port());
        return client.post("/v1/deposits/" + deposit_tx + "/refunds", op(), R"({"amount":600})", ts::unique_key("r"));
      }));
    }
    int made = 0;
    for (auto& f : refunds) {
      const auto x = f.get();
      if (x.status == 201) {
        ++made;
      } else {
        EXPECT_EQ(x.status, 422) << x.body;
        EXPECT_EQ(str(x.json().as_object().at("code")), "refund_exceeds_payment");
      }
    }
    EXPECT_EQ(made, 1);
    EXPECT_EQ(ts::balance(c, alice.key, a), 1'400);
    EXPECT_EQ(ts::query_value("SELECT refunded FROM deposit_payment WHERE transaction_id = '" + deposit_tx + "'"),
              "600");
  }
}

// A refund without an amount takes what is left of the deposit when the writer holds its row, not
// when its request read it: here a refund of 300 commits first, while the second refund (of the
// rest, read as 1,000) waits behind it, and the second takes the 700 left instead of being refused.
TEST_F(MoneyFlowE2E, ARefundOfTheRestTakesWhatIsLeftWhenItIsWritten) {
  ts::http_client c(port());
  const auto [alice, a] = wallet(c);
  const auto deposit_tx = ts::deposit(c, op(), a, 1000);
  ASSERT_FALSE(deposit_tx.empty());
  ts::deposit(c, op(), a, 1'000);  // the wallet could pay more than the deposit allows

  ts::account_lock lock({a});
  auto part = std::async(std::launch::async, [&] {
    ts::http_client client(port());
    return client.post("/v1/deposits/" + deposit_tx + "/refunds", op(), R"({"amount":300})", ts::unique_key("r"));
  });
  ASSERT_TRUE(ts::eventually([&] { return lock.waiters() >= 1; }, 15s, 10ms)) << "the first refund is not waiting";
  auto rest = std::async(std::launch::async, [&] {
    ts::http_client client(port());
    return client.post("/v1/deposits/" + deposit_tx + "/refunds", op(), "", ts::unique_key("r"));
  });
  // The second has read the deposit (1,000 left) and waits at the writer behind the first (both
  // debit one wallet, so one writer has both; the first counts from when it was sent).
  ASSERT_TRUE(ts::eventually([&] { return ts::metric_value(c, "wallet_writer_postings_queued") >= 2; }, 15s, 10ms));
  lock.release();
  const auto first = part.get();
  ASSERT_EQ(first.status, 201) << first.body;
  const auto second = rest.get();
  ASSERT_EQ(second.status, 201) << second.body;
  EXPECT_EQ(str(second.json().as_object().at("amount")), "700");
  EXPECT_EQ(ts::query_value("SELECT refunded FROM deposit_payment WHERE transaction_id = '" + deposit_tx + "'"),
            "1000");
  EXPECT_EQ(ts::balance(c, alice.key, a), 1'000);
  // Nothing is left: a third refund of the rest is refused, saying so.
  auto r = c.post("/v1/deposits/" + deposit_tx + "/refunds", op(), "", ts::unique_key("r"));
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("code")), "refund_exceeds_payment");
}

// A deposit that would take a balance beyond 64 bits is refused by the ledger writer's own check:
// 400 invalid_request saying so (not a 500), and nothing is posted.
TEST_F(MoneyFlowE2E, ABalanceBeyondItsLimitIs400AndPostsNothing) {
  ts::http_client c(port());
  // A provider of the test's own: its clearing account takes the other side, from zero.
  const auto p = new_provider(c);
  const auto [alice, a] = wallet(c);
  const auto deposit = [&](const std::string& amount) {
    return c.post(
        "/v1/deposits", op(),
        R"({"accountId":)" + std::to_string(a) + R"(,"amount":")" + amount + R"(","provider":")" + p.name + R"("})",
        ts::unique_key("big"));
  };
  ASSERT_EQ(deposit("9000000000000000000").status, 201);
  const auto r = deposit("300000000000000000");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("code")), "invalid_request") << r.body;
  EXPECT_NE(r.body.find("nothing was posted"), std::string::npos) << r.body;
  EXPECT_EQ(ts::balance(c, alice.key, a), 9'000'000'000'000'000'000);
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM ledger_entry WHERE account_id = " + std::to_string(a)), "1");
}

// In a batch that is not atomic, an item whose amount the ledger writer cannot apply (it would take
// the payee's balance beyond 64 bits) is that item's own refusal: 400 invalid_request in its
// result while the other item commits, and the answer is stored and replayed as given.
TEST_F(MoneyFlowE2E, ABatchItemBeyondABalancesLimitIsRefusedAlone) {
  ts::http_client c(port());
  const auto p = new_provider(c);
  const auto [alice, a] = wallet(c);
  const auto [bob, b] = wallet(c);
  const auto [rich, m] = wallet(c);
  auto r = c.post(
      "/v1/deposits", op(),
      R"({"accountId":)" + std::to_string(m) + R"(,"amount":"9223372036854775000","provider":")" + p.name + R"("})",
      ts::unique_key("full"));
  ASSERT_EQ(r.status, 201) << r.body;
  r = c.post("/v1/deposits", op(), R"({"accountId":)" + std::to_string(a) + R"(,"amount":2000})", ts::unique_key("a"));
  ASSERT_EQ(r.status, 201) << r.body;
  const auto body = R"({"atomic":false,"transfers":[{"fromAccountId":)" + std::to_string(a) + R"(,"toAccountId":)" +
                    std::to_string(b) + R"(,"amount":10},{"fromAccountId":)" + std::to_string(a) +
                    R"(,"toAccountId":)" + std::to_string(m) + R"(,"amount":1000}]})";
  const auto key = ts::unique_key("batch");
  r = c.post("/v1/transfers/batch", alice.key, body, key);
  ASSERT_EQ(r.status, 201) << r.body;
  const auto results = r.json().as_object().at("results").as_array();
  ASSERT_EQ(results.size(), 2U);
  EXPECT_EQ(results[0].as_object().at("status").as_int64(), 201);
  EXPECT_EQ(results[1].as_object().at("status").as_int64(), 400);
  EXPECT_EQ(str(results[1].as_object().at("code")), "invalid_request");
  EXPECT_EQ(ts::balance(c, alice.key, a), 1'990);
  EXPECT_EQ(ts::balance(c, bob.key, b), 10);
  EXPECT_EQ(ts::balance(c, rich.key, m), 9'223'372'036'854'775'000);
  const auto again = c.post("/v1/transfers/batch", alice.key, body, key);
  EXPECT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(again.body, r.body);
  EXPECT_EQ(again.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(ts::balance(c, alice.key, a), 1'990);
}

// Two deposits whose text fields differ only in where a newline falls are different requests: the
// second under the first one's Idempotency-Key is 422 idempotency_key_reused, not answered as a
// replay of a deposit that was never made. A deposit without newlines replays as before.
TEST_F(MoneyFlowE2E, DepositsThatDifferOnlyWhereANewlineFallsAreDifferentRequests) {
  ts::http_client c(port());
  const auto p = new_provider(c);
  const auto [alice, a] = wallet(c);
  const auto account = std::to_string(a);
  const auto key = ts::unique_key("nl");
  const auto payment = ts::unique_key("nl-pay");
  const auto first_body = R"({"accountId":)" + account + R"(,"amount":100,"externalRef":"r\n)" + p.name +
                          R"(","provider":"manual","providerPaymentId":")" + payment + R"("})";
  const auto second_body = R"({"accountId":)" + account + R"(,"amount":100,"externalRef":"r","provider":")" + p.name +
                           R"(","providerPaymentId":"manual\n)" + payment + R"("})";
  auto r = c.post("/v1/deposits", op(), first_body, key);
  ASSERT_EQ(r.status, 201) << r.body;
  r = c.post("/v1/deposits", op(), second_body, key);
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("code")), "idempotency_key_reused") << r.body;
  r = c.post("/v1/deposits", op(), first_body, key);
  EXPECT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(ts::balance(c, alice.key, a), 100);

  const auto plain_key = ts::unique_key("plain");
  const auto plain = R"({"accountId":)" + account + R"(,"amount":50,"externalRef":"ref-2"})";
  ASSERT_EQ(c.post("/v1/deposits", op(), plain, plain_key).status, 201);
  r = c.post("/v1/deposits", op(), plain, plain_key);
  EXPECT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.header("Idempotent-Replayed"), "true");
  EXPECT_EQ(ts::balance(c, alice.key, a), 150);
}

// A deposit is charged back once (409 already_charged_back), a refund beyond what is left is 422,
// and the database refuses what the code might let through: its CHECK and trigger hold even
// for the owner role.
TEST_F(MoneyFlowE2E, TheDatabaseHoldsTheLimitsOfADeposit) {
  ts::http_client c(port());
  const auto [alice, a] = wallet(c);
  const auto deposit_tx = ts::deposit(c, op(), a, 1000);
  ASSERT_FALSE(deposit_tx.empty());
  auto r = post_money(c, "/v1/deposits/" + deposit_tx + "/chargebacks", op(), R"({"amount":300})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("walletAmount")), "300");
  EXPECT_EQ(str(r.json().as_object().at("lossAmount")), "0");
  r = post_money(c, "/v1/deposits/" + deposit_tx + "/chargebacks", op(), R"({"amount":100})");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("code")), "already_charged_back");
  r = post_money(c, "/v1/deposits/" + deposit_tx + "/refunds", op(), R"({"amount":701})");
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("code")), "refund_exceeds_payment");
  r = post_money(c, "/v1/deposits/" + deposit_tx + "/refunds", op(), "");
  ASSERT_EQ(r.status, 201) << r.body;  // all that is left: 700
  EXPECT_EQ(str(r.json().as_object().at("amount")), "700");
  EXPECT_EQ(ts::balance(c, alice.key, a), 0);

  EXPECT_THROW(
      ts::execute_sql("UPDATE deposit_payment SET refunded = refunded + 1 WHERE transaction_id = '" + deposit_tx + "'"),
      std::exception);
  EXPECT_THROW(ts::execute_sql("UPDATE deposit_payment SET chargeback_transaction_id = gen_random_uuid()"
                               " WHERE transaction_id = '" +
                               deposit_tx + "'"),
               std::exception);
}

// A second settlement of a settled withdrawal is 409 even when it comes from the database side:
// the trigger refuses to change a settled withdrawal for any role.
// A wallet frozen while its withdrawal is pending still gets its money back when the payout
// fails: the withdrawal settles FAILED and pending_withdrawal gives the amount back, while a
// payment to the frozen wallet is refused as before.
TEST_F(MoneyFlowE2E, AFailedPayoutReachesAFrozenWallet) {
  ts::http_client c(port());
  const auto [alice, a] = wallet(c);
  const auto [bob, b] = wallet(c);
  ts::deposit(c, op(), a, 5'000);
  ts::deposit(c, op(), b, 5'000);
  auto r = post_money(c, "/v1/withdrawals", alice.key, R"({"accountId":)" + std::to_string(a) + R"(,"amount":1000})");
  ASSERT_EQ(r.status, 201) << r.body;
  const auto id = str(r.json().as_object().at("id"));
  EXPECT_EQ(ts::balance(c, alice.key, a), 5'000 - 1'000 - k_fee);
  const auto pending_before = system_balance("pending_withdrawal");
  ASSERT_EQ(c.post("/v1/accounts/" + std::to_string(a) + "/freeze", op(), "{}").status, 200);

  auto paid = c.post("/v1/transfers", bob.key, ts::transfer_body(b, a, 10), ts::unique_key("to-frozen"));
  EXPECT_EQ(paid.status, 422) << paid.body;
  EXPECT_EQ(paid.json().as_object().at("code").as_string(), "account_inactive");

  r = post_money(c, "/v1/withdrawals/" + id + "/fail", op(), "");
  ASSERT_EQ(r.status, 201) << r.body;
  auto w = c.get("/v1/withdrawals/" + id, op());
  ASSERT_EQ(w.status, 200) << w.body;
  EXPECT_EQ(str(w.json().as_object().at("status")), "FAILED");
  EXPECT_EQ(system_balance("pending_withdrawal"), pending_before - 1'000);
  ASSERT_EQ(c.post("/v1/accounts/" + std::to_string(a) + "/unfreeze", op(), "{}").status, 200);
  EXPECT_EQ(ts::balance(c, alice.key, a), 5'000 - k_fee);
}

// A refund the provider reports has happened already: the cardholder has the money back. Against
// a wallet that is frozen and holds less than the refund, it takes what the wallet holds and books
// the rest to refund_shortfall (which may go negative: what the operator recovers), so the clearing
// account follows the provider's books. The same refund asked by an operator is a decision, and is
// refused.
TEST_F(MoneyFlowE2E, AProviderRefundReachesAFrozenWalletAndBooksWhatItLacks) {
  ts::http_client c(port());
  const auto p = new_provider(c);
  const auto [alice, a] = wallet(c);
  const auto [bob, b] = wallet(c);
  const auto clearing = "clearing:" + p.name;
  for (const auto& [payment, amount] : {std::pair{"short-1", 1'000}, std::pair{"short-2", 500}}) {
    auto r = signed_event(c, p,
                          event(p, std::string("ev-") + payment, "payment.succeeded",
                                {{"paymentId", payment}, {"accountId", a}, {"amount", amount}, {"currency", "EUR"}}));
    ASSERT_EQ(r.status, 200) << r.body;
  }
  auto paid = c.post("/v1/transfers", alice.key, ts::transfer_body(a, b, 1'300), ts::unique_key("spent"));
  ASSERT_EQ(paid.status, 201) << paid.body;
  ASSERT_EQ(c.post("/v1/accounts/" + std::to_string(a) + "/freeze", op(), "{}").status, 200);

  // An operator's refund of the second deposit is refused: the wallet is frozen.
  const auto second = ts::query_value(
      "SELECT transaction_id FROM deposit_payment WHERE payment_id = 'short-2' AND provider_id = (SELECT id FROM "
      "provider WHERE name = '" +
      p.name + "')");
  auto by_operator = post_money(c, "/v1/deposits/" + second + "/refunds", op(), R"({"amount":100})");
  EXPECT_EQ(by_operator.status, 422) << by_operator.body;

  const auto shortfall_before = system_balance("refund_shortfall");
  const auto clearing_before = system_balance(clearing);
  const auto refunded = event(p, "ev-refund-short-1", "payment.refunded", {{"paymentId", "short-1"}});
  auto r = signed_event(c, p, refunded);
  ASSERT_EQ(r.status, 200) << r.body;
  const auto tx = str(r.json().as_object().at("transactionId"));
  EXPECT_EQ(entries(c, tx), (std::map<std::int64_t, std::int64_t>{
                                {a, -200}, {system_id("refund_shortfall"), -800}, {system_id(clearing), 1'000}}));
  EXPECT_EQ(system_balance("refund_shortfall"), shortfall_before - 800);
  EXPECT_EQ(system_balance(clearing), clearing_before + 1'000);
  const auto redelivered = signed_event(c, p, refunded);
  ASSERT_EQ(redelivered.status, 200) << redelivered.body;
  EXPECT_TRUE(redelivered.json().as_object().at("duplicate").as_bool());
  EXPECT_EQ(str(redelivered.json().as_object().at("transactionId")), tx);

  ASSERT_EQ(c.post("/v1/accounts/" + std::to_string(a) + "/unfreeze", op(), "{}").status, 200);
  EXPECT_EQ(ts::balance(c, alice.key, a), 0);
  EXPECT_TRUE(ts::reconciliation_ok(c, op()));
}

// A provider's payment for a frozen wallet is refused and leaves no trace, so the same event
// delivered again once the wallet is unfrozen posts (once).
TEST_F(MoneyFlowE2E, APaymentForAFrozenWalletPostsWhenDeliveredAfterTheUnfreeze) {
  ts::http_client c(port());
  const auto p = new_provider(c);
  const auto [alice, a] = wallet(c);
  ASSERT_EQ(c.post("/v1/accounts/" + std::to_string(a) + "/freeze", op(), "{}").status, 200);
  const auto paid = event(p, "ev-frozen-pay", "payment.succeeded",
                          {{"paymentId", "frozen-1"}, {"accountId", a}, {"amount", 700}, {"currency", "EUR"}});
  auto r = signed_event(c, p, paid);
  ASSERT_EQ(r.status, 422) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("code")), "account_inactive");
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM ledger_entry WHERE account_id = " + std::to_string(a)), "0");

  ASSERT_EQ(c.post("/v1/accounts/" + std::to_string(a) + "/unfreeze", op(), "{}").status, 200);
  r = signed_event(c, p, paid);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(r.json().as_object().at("duplicate").as_bool());
  r = signed_event(c, p, paid);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.json().as_object().at("duplicate").as_bool());
  EXPECT_EQ(ts::balance(c, alice.key, a), 700);
}

TEST_F(MoneyFlowE2E, ASettledWithdrawalNeverChangesAgain) {
  ts::http_client c(port());
  const auto [alice, a] = wallet(c);
  ts::deposit(c, op(), a, 5'000);
  auto r = post_money(c, "/v1/withdrawals", alice.key, R"({"accountId":)" + std::to_string(a) + R"(,"amount":1000})");
  ASSERT_EQ(r.status, 201) << r.body;
  const auto id = str(r.json().as_object().at("id"));
  // The id in upper case names the same withdrawal.
  std::string upper = id;
  for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  const auto key = ts::unique_key("confirm");
  auto confirmed = c.post("/v1/withdrawals/" + upper + "/confirm", op(), "", key);
  ASSERT_EQ(confirmed.status, 201) << confirmed.body;
  // The same confirm again is its stored answer, not a refusal: it committed.
  auto again = c.post("/v1/withdrawals/" + id + "/confirm", op(), "", key);
  EXPECT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(again.header("idempotent-replayed"), "true");
  EXPECT_EQ(again.body, confirmed.body);
  r = post_money(c, "/v1/withdrawals/" + id + "/fail", op(), "");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_THROW(ts::execute_sql("UPDATE withdrawal SET status = 'FAILED' WHERE id = '" + id + "'"), std::exception);
  // Another principal does not see it; an unknown one is 404.
  const auto [bob, b] = wallet(c);
  EXPECT_EQ(c.get("/v1/withdrawals/" + id, bob.key).status, 404);
  EXPECT_EQ(c.get("/v1/withdrawals/not-a-uuid", alice.key).status, 404);
}

}  // namespace
