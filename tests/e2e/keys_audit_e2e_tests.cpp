// End-to-end tests of API keys that rotate and revoke, balances as of a time, and the audit log
// (docs/keys-and-audit.md), over HTTP against a real wallet-server, PostgreSQL and Redis: a key is
// refused at once where it was revoked and within auth.key_cache_ttl_ms on another server of the
// same database; a balance as of an entry's createdAt is the sum of the balanceAfter of each row's
// last entry by then (a hot account's shards included); every operator action leaves one audit row,
// in order, and the database refuses to change one.

#include <gtest/gtest.h>

#include <boost/json/serialize.hpp>

#include <chrono>
#include <ctime>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "http/timestamps.hpp"
#include "tests/support/database.hpp"
#include "tests/support/support.hpp"

namespace ts = test_support;

namespace {

namespace json = boost::json;

std::string str(const json::value& v) { return std::string(v.as_string()); }

// Microseconds since the epoch as an RFC 3339 UTC date-time with six fraction digits.
std::string rfc3339(std::int64_t us) {
  constexpr std::int64_t k_us = 1'000'000;
  std::int64_t seconds = us / k_us;
  std::int64_t fraction = us % k_us;
  if (fraction < 0) {
    fraction += k_us;
    --seconds;
  }
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[96];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<long long>(fraction));
  return text;
}

std::int64_t micros(const std::string& rfc3339_text) {
  const auto us = api::parse_rfc3339_us(rfc3339_text);
  EXPECT_TRUE(us.has_value()) << rfc3339_text;
  return us.value_or(0);
}

class KeysAuditE2E : public ts::shared_server_test<KeysAuditE2E> {
 protected:
  // A request with a key and, optionally, a body, an Idempotency-Key and an X-Request-Id.
  static ts::response call(ts::http_client& c, const std::string& method, const std::string& target,
                           const std::string& key, const std::string& body = {}, const std::string& request_id = {},
                           const std::string& idempotency_key = {}) {
    std::map<std::string, std::string> headers{{"Authorization", "Bearer " + key}};
    if (!body.empty()) headers["Content-Type"] = "application/json";
    if (!request_id.empty()) headers["X-Request-Id"] = request_id;
    if (!idempotency_key.empty()) headers["Idempotency-Key"] = idempotency_key;
    return c.request(method, target, body, headers);
  }

  static std::string keys_path(std::int64_t principal) {
    return "/v1/principals/" + std::to_string(principal) + "/keys";
  }

  // The principal's keys as listed (by keyId).
  static std::vector<json::object> keys_of(ts::http_client& c, const std::string& key, std::int64_t principal) {
    auto r = c.get(keys_path(principal), key);
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<json::object> out;
    if (r.status != 200) return out;
    const auto listed = r.json();
    for (const auto& k : listed.as_object().at("keys").as_array()) out.push_back(k.as_object());
    return out;
  }

  // The id of the listed key whose hint is the last four characters of `api_key`.
  static std::int64_t key_id_of(ts::http_client& c, const std::string& lister, std::int64_t principal,
                                const std::string& api_key) {
    for (const auto& k : keys_of(c, lister, principal)) {
      if (k.at("hint").is_string() && str(k.at("hint")) == api_key.substr(api_key.size() - 4)) {
        return k.at("keyId").as_int64();
      }
    }
    ADD_FAILURE() << "no key of principal " << principal << " ends in " << api_key.substr(api_key.size() - 4);
    return 0;
  }

  // A second server that trusts a key it has seen for `ttl_ms` (auth.key_cache_ttl_ms): with an
  // hour, a key revoked through the suite's server is still known there.
  static ts::server_process::options trusting_keys_for(const char* ttl_ms) {
    ts::server_process::options o;
    o.env = ts::unlimited_rates();
    o.env["WALLET_AUTH_KEY_CACHE_TTL_MS"] = ttl_ms;
    return o;
  }

  // Whether `key` authenticates: 200 on a read of its own keys, 401 when it does not.
  static int status_with(ts::http_client& c, const std::string& key, std::int64_t principal) {
    return c.get(keys_path(principal), key).status;
  }

  // The balance answer for `account` as of `as_of` (none: no asOf).
  static json::object balance_as_of(ts::http_client& c, const std::string& key, std::int64_t account,
                                    const std::optional<std::string>& as_of = std::nullopt) {
    std::string target = "/v1/accounts/" + std::to_string(account) + "/balance";
    if (as_of) target += "?asOf=" + *as_of;
    auto r = c.get(target, key);
    EXPECT_EQ(r.status, 200) << target << ": " << r.body;
    return r.status == 200 ? r.json().as_object() : json::object{};
  }
  static std::int64_t balance_at(ts::http_client& c, const std::string& key, std::int64_t account,
                                 const std::string& as_of) {
    const auto o = balance_as_of(c, key, account, as_of);
    return o.contains("balance") ? std::stoll(str(o.at("balance"))) : -1;
  }

  // The account's entries (a hot account's shards included), oldest first.
  static std::vector<json::object> entries_of(ts::http_client& c, const std::string& key, std::int64_t account) {
    auto r = c.get("/v1/accounts/" + std::to_string(account) + "/entries?limit=500", key);
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<json::object> out;
    if (r.status != 200) return out;
    const auto page = r.json();
    for (const auto& e : page.as_object().at("entries").as_array()) out.push_back(e.as_object());
    return out;
  }

  // Every audit row after `after` whose request id starts with `prefix`, following `next`.
  std::vector<json::object> audit_rows(ts::http_client& c, std::int64_t after, const std::string& prefix,
                                       int limit = 500) const {
    std::vector<json::object> out;
    for (int page = 0; page < 10'000; ++page) {
      auto r = c.get("/v1/admin/audit?after=" + std::to_string(after) + "&limit=" + std::to_string(limit), op());
      EXPECT_EQ(r.status, 200) << r.body;
      if (r.status != 200) break;
      const auto body = r.json().as_object();
      for (const auto& e : body.at("entries").as_array()) {
        const auto& row = e.as_object();
        if (str(row.at("requestId")).rfind(prefix, 0) == 0) out.push_back(row);
      }
      if (body.at("next").is_null()) break;
      after = std::stoll(str(body.at("next")));
    }
    return out;
  }

  // The id of the newest audit row now (0 when there is none): the cursor to read what follows.
  static std::int64_t audit_cursor() {
    const auto v = ts::query_value("SELECT COALESCE(max(id), 0) FROM audit_log");
    return std::stoll(v);
  }
};

// Rotation: a second key works beside the first; once the principal revokes the first with the
// second, this server refuses the first at once (it was cached here a moment before) while the
// second keeps working, the list shows the revocation (who, when, the last four characters, never
// the key), and revoking it again changes nothing.
TEST_F(KeysAuditE2E, ARotatedKeyWorksBesideTheOldOneAndTheRevokedOneIsRefusedAtOnce) {
  ts::http_client c(port());
  const auto alice = ts::create_principal(c, op());
  auto r = c.post(keys_path(alice.id), op(), "");
  ASSERT_EQ(r.status, 201) << r.body;
  const auto created = r.json().as_object();
  const auto second = str(created.at("apiKey"));
  EXPECT_EQ(created.at("principalId").as_int64(), alice.id);
  EXPECT_EQ(str(created.at("hint")), second.substr(second.size() - 4));
  EXPECT_TRUE(created.at("active").as_bool());
  EXPECT_NE(second, alice.key);

  EXPECT_EQ(status_with(c, alice.key, alice.id), 200);
  EXPECT_EQ(status_with(c, second, alice.id), 200);

  const auto first_id = key_id_of(c, second, alice.id, alice.key);
  r = call(c, "DELETE", keys_path(alice.id) + "/" + std::to_string(first_id), second);
  ASSERT_EQ(r.status, 200) << r.body;
  const auto revoked = r.json().as_object();
  EXPECT_FALSE(revoked.at("active").as_bool());
  EXPECT_EQ(revoked.at("revokedBy").as_int64(), alice.id);

  const auto refused = c.get(keys_path(alice.id), alice.key);
  EXPECT_EQ(refused.status, 401) << refused.body;
  EXPECT_EQ(str(refused.json().as_object().at("code")), "unauthorized");
  EXPECT_EQ(status_with(c, second, alice.id), 200);

  const auto listed = keys_of(c, second, alice.id);
  ASSERT_EQ(listed.size(), 2u);
  for (const auto& k : listed) {
    const bool is_first = k.at("keyId").as_int64() == first_id;
    EXPECT_EQ(k.at("active").as_bool(), !is_first);
    EXPECT_EQ(k.at("revokedAt").is_null(), !is_first);
    const auto text = json::serialize(k);
    EXPECT_EQ(text.find(alice.key), std::string::npos);
    EXPECT_EQ(text.find(second), std::string::npos);
  }

  // Again: the same answer, the same revocation time, and no second audit row.
  const auto rows_before = audit_cursor();
  r = call(c, "DELETE", keys_path(alice.id) + "/" + std::to_string(first_id), op());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("revokedAt")), str(revoked.at("revokedAt")));
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM audit_log WHERE id > " + std::to_string(rows_before) +
                            " AND action = 'key.revoke' AND target = 'key:" + std::to_string(first_id) + "'"),
            "0");
}

// Who may manage keys, and the bounds: another principal's keys are not found (404), a principal
// may not revoke its own last active key (409) but an operator may (the principal is then locked
// out), a principal has auth.active_keys_max active keys at most (409), and a key id of another
// principal is not found. Nothing refused changes anything.
TEST_F(KeysAuditE2E, KeysAreManagedByTheirPrincipalOrAnOperatorWithinTheirBounds) {
  ts::http_client c(port());
  const auto alice = ts::create_principal(c, op());
  const auto bob = ts::create_principal(c, op());

  EXPECT_EQ(c.post(keys_path(bob.id), alice.key, "").status, 404);
  EXPECT_EQ(c.get(keys_path(bob.id), alice.key).status, 404);
  const auto bob_key = key_id_of(c, op(), bob.id, bob.key);
  EXPECT_EQ(call(c, "DELETE", keys_path(bob.id) + "/" + std::to_string(bob_key), alice.key).status, 404);
  // Bob's key named under Alice's id is not one of Alice's keys.
  EXPECT_EQ(call(c, "DELETE", keys_path(alice.id) + "/" + std::to_string(bob_key), alice.key).status, 404);
  EXPECT_EQ(status_with(c, bob.key, bob.id), 200);
  EXPECT_EQ(c.get("/v1/admin/audit", alice.key).status, 403);
  EXPECT_EQ(c.post(keys_path(9'000'000'000'000), op(), "").status, 404);

  const auto alice_key = key_id_of(c, alice.key, alice.id, alice.key);
  auto r = call(c, "DELETE", keys_path(alice.id) + "/" + std::to_string(alice_key), alice.key);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("code")), "conflict");
  EXPECT_EQ(status_with(c, alice.key, alice.id), 200);

  r = call(c, "DELETE", keys_path(alice.id) + "/" + std::to_string(alice_key), op());
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(status_with(c, alice.key, alice.id), 401);

  // The default bound is 10 active keys: Bob has one and gets nine more, then no eleventh.
  for (int i = 0; i < 9; ++i) ASSERT_EQ(c.post(keys_path(bob.id), bob.key, "").status, 201) << i;
  r = c.post(keys_path(bob.id), bob.key, "");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(keys_of(c, bob.key, bob.id).size(), 10u);
}

// A key revoked through one server stops working on another server of the same database within
// that server's auth.key_cache_ttl_ms, although it had the key cached: server B (TTL 300 ms)
// refuses it within a bounded wait, while server C (TTL one hour) still accepts it, which shows the
// refusal on B is its TTL at work and not the absence of a cache. Restarted, C no longer loads
// the revoked key.
TEST_F(KeysAuditE2E, ARevokedKeyStopsWorkingOnAnotherServerWithinItsTtl) {
  ts::server_process short_ttl(trusting_keys_for("300"));
  ts::server_process long_ttl(trusting_keys_for("3600000"));
  ts::http_client a(port());
  ts::http_client b(short_ttl.port());
  ts::http_client cc(long_ttl.port());

  const auto alice = ts::create_principal(a, op());
  auto r = a.post(keys_path(alice.id), alice.key, "");
  ASSERT_EQ(r.status, 201) << r.body;
  const auto rotated = str(r.json().as_object().at("apiKey"));
  const auto rotated_id = r.json().as_object().at("keyId").as_int64();
  // Both other servers learn the key (a read each) and cache it.
  ASSERT_EQ(status_with(b, rotated, alice.id), 200);
  ASSERT_EQ(status_with(cc, rotated, alice.id), 200);

  r = call(a, "DELETE", keys_path(alice.id) + "/" + std::to_string(rotated_id), alice.key);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(status_with(a, rotated, alice.id), 401);

  int last = 0;
  EXPECT_TRUE(ts::eventually(
      [&] {
        last = status_with(b, rotated, alice.id);
        return last == 401;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(20)))
      << "server B (TTL 300 ms) still answers " << last;
  EXPECT_EQ(status_with(cc, rotated, alice.id), 200) << "server C trusts its cached key for its TTL";
  EXPECT_EQ(status_with(b, alice.key, alice.id), 200);

  EXPECT_EQ(long_ttl.terminate(), 0);
  long_ttl.restart();
  ts::http_client restarted(long_ttl.port());
  EXPECT_EQ(status_with(restarted, rotated, alice.id), 401);
  EXPECT_EQ(status_with(restarted, alice.key, alice.id), 200);
}

// A revoked key that another server still knows (within its TTL) may still read there, but it can
// no longer change keys: making a key with it, or revoking one, is 401 and changes nothing, so a
// stolen key cannot outlive its revocation by minting a fresh one. An operator's revocation of
// every key of a principal at once leaves no key of it able to make another.
TEST_F(KeysAuditE2E, ARevokedKeyMakesAndRevokesNoKeyOnAServerThatStillKnowsIt) {
  ts::server_process long_ttl(trusting_keys_for("3600000"));
  ts::http_client a(port());
  ts::http_client cc(long_ttl.port());
  const auto active_keys = [](std::int64_t principal) {
    return ts::query_value("SELECT count(*) FROM api_key WHERE revoked_at IS NULL AND principal_id = " +
                           std::to_string(principal));
  };

  const auto alice = ts::create_principal(a, op());
  auto r = a.post(keys_path(alice.id), alice.key, "");
  ASSERT_EQ(r.status, 201) << r.body;
  const auto stolen = str(r.json().as_object().at("apiKey"));
  const auto stolen_id = r.json().as_object().at("keyId").as_int64();
  ASSERT_EQ(status_with(cc, stolen, alice.id), 200);  // server C caches it
  ASSERT_EQ(status_with(cc, alice.key, alice.id), 200);
  r = call(a, "DELETE", keys_path(alice.id) + "/" + std::to_string(stolen_id), op());
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(status_with(cc, stolen, alice.id), 200) << "server C trusts its cached key for its TTL";

  r = cc.post(keys_path(alice.id), stolen, "");
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(r.header("WWW-Authenticate"), "Bearer error=\"invalid_token\"");
  EXPECT_EQ(active_keys(alice.id), "1");
  const auto first_id = ts::query_value("SELECT min(id) FROM api_key WHERE principal_id = " + std::to_string(alice.id));
  r = call(cc, "DELETE", keys_path(alice.id) + "/" + first_id, stolen);
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(active_keys(alice.id), "1");

  // Every key at once: only an operator; then not even a key C still knows makes a new one.
  for (int i = 0; i < 2; ++i) ASSERT_EQ(a.post(keys_path(alice.id), alice.key, "").status, 201);
  r = call(a, "DELETE", keys_path(alice.id), alice.key);
  EXPECT_EQ(r.status, 403) << r.body;
  r = call(a, "DELETE", keys_path(alice.id), op());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().as_object().at("revokedKeys").as_int64(), 3);
  EXPECT_EQ(active_keys(alice.id), "0");
  EXPECT_EQ(status_with(a, alice.key, alice.id), 401);
  r = cc.post(keys_path(alice.id), alice.key, "");
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(active_keys(alice.id), "0");
  r = call(a, "DELETE", keys_path(999'999'999'999), op());
  EXPECT_EQ(r.status, 404) << r.body;
  // Not its own: an operator would lock itself out.
  const auto other_operator = ts::create_operator();
  r = call(a, "DELETE", keys_path(other_operator.id), other_operator.key);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(active_keys(other_operator.id), "1");
}

// Nor does a revoked operator key make other lasting credentials on a server that still knows it:
// a principal (with its API key), a provider or a provider's new signing secret is 401 there, and
// nothing is made or changed.
TEST_F(KeysAuditE2E, ARevokedOperatorKeyMakesNoPrincipalNorProviderSecretOnAServerThatStillKnowsIt) {
  ts::server_process long_ttl(trusting_keys_for("3600000"));
  ts::http_client a(port());
  ts::http_client cc(long_ttl.port());
  const auto boss = ts::create_operator();
  auto r = a.post(keys_path(boss.id), boss.key, "");
  ASSERT_EQ(r.status, 201) << r.body;
  const auto stolen = str(r.json().as_object().at("apiKey"));
  const auto stolen_id = r.json().as_object().at("keyId").as_int64();
  ASSERT_EQ(status_with(cc, stolen, boss.id), 200);  // server C caches it
  const auto provider = ts::unique_key("prov").substr(0, 30);
  ASSERT_EQ(a.post("/v1/providers", boss.key, R"({"name":")" + provider + R"("})").status, 201);
  const auto secret_of = [&] {
    return ts::query_value("SELECT signing_secret FROM provider WHERE name = '" + provider + "'");
  };
  const auto secret = secret_of();
  r = call(a, "DELETE", keys_path(boss.id) + "/" + std::to_string(stolen_id), boss.key);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(status_with(cc, stolen, boss.id), 200) << "server C trusts its cached key for its TTL";

  const auto name = ts::unique_key("minted");
  r = cc.post("/v1/principals", stolen, R"({"name":")" + name + R"(","role":"merchant"})");
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(r.header("WWW-Authenticate"), "Bearer error=\"invalid_token\"");
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM principal WHERE name = '" + name + "'"), "0");
  const auto other_provider = ts::unique_key("p2").substr(0, 30);
  r = cc.post("/v1/providers", stolen, R"({"name":")" + other_provider + R"("})");
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM provider WHERE name = '" + other_provider + "'"), "0");
  r = cc.post("/v1/providers/" + provider + "/rotate-secret", stolen, "");
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(secret_of(), secret);
  // The operator's own key, still active, does all three there.
  EXPECT_EQ(cc.post("/v1/principals", boss.key, R"({"name":")" + name + R"(","role":"merchant"})").status, 201);
  EXPECT_EQ(cc.post("/v1/providers/" + provider + "/rotate-secret", boss.key, "").status, 200);
  EXPECT_NE(secret_of(), secret);
}

// Balance as of a time: 0 before the first entry, then at each entry's createdAt the balance
// right after it (for payer and payee alike), the same instant written with another offset, now
// when asOf is absent or still to come; a malformed asOf is 400 and another principal's account 404.
TEST_F(KeysAuditE2E, ABalanceAsOfAnEntrysTimeIsTheBalanceRightAfterIt) {
  ts::http_client c(port());
  const auto alice = ts::create_principal(c, op());
  const auto bob = ts::create_principal(c, op());
  const auto a = ts::create_account(c, op(), alice.id);
  const auto b = ts::create_account(c, op(), bob.id);
  ts::deposit(c, op(), a, 1'000);
  for (std::int64_t amount : {300, 200}) {
    auto r = c.post("/v1/transfers", alice.key, ts::transfer_body(a, b, amount), ts::unique_key("pay"));
    ASSERT_EQ(r.status, 201) << r.body;
  }
  const auto entries = entries_of(c, alice.key, a);
  ASSERT_EQ(entries.size(), 3u);
  std::vector<std::int64_t> at;
  for (const auto& e : entries) at.push_back(micros(str(e.at("createdAt"))));
  ASSERT_LT(at[0], at[1]);
  ASSERT_LT(at[1], at[2]);

  EXPECT_EQ(balance_at(c, alice.key, a, rfc3339(at[0] - 1)), 0);
  EXPECT_EQ(balance_at(c, alice.key, a, rfc3339(at[0])), 1'000);
  EXPECT_EQ(balance_at(c, alice.key, a, rfc3339(at[1] - 1)), 1'000);
  EXPECT_EQ(balance_at(c, alice.key, a, rfc3339(at[1])), 700);
  EXPECT_EQ(balance_at(c, alice.key, a, rfc3339(at[2])), 500);
  EXPECT_EQ(balance_at(c, bob.key, b, rfc3339(at[1] - 1)), 0);
  EXPECT_EQ(balance_at(c, bob.key, b, rfc3339(at[1])), 300);
  EXPECT_EQ(balance_at(c, bob.key, b, rfc3339(at[2])), 500);
  EXPECT_EQ(balance_at(c, op(), a, rfc3339(at[1])), 700);

  // The answer names the instant it used, in UTC with microseconds.
  const auto exact = balance_as_of(c, alice.key, a, rfc3339(at[1]));
  EXPECT_EQ(str(exact.at("asOf")), rfc3339(at[1]));
  EXPECT_EQ(exact.at("accountId").as_int64(), a);
  EXPECT_EQ(str(exact.at("currency")), "EUR");
  // The same instant an hour east of UTC, with '+' sent as %2B and as is.
  auto plus_one = rfc3339(at[1] + 3'600'000'000LL);
  plus_one.replace(plus_one.size() - 1, 1, "+01:00");
  EXPECT_EQ(balance_at(c, alice.key, a, plus_one), 700) << plus_one;
  auto encoded = plus_one;
  encoded.replace(encoded.find('+'), 1, "%2B");
  EXPECT_EQ(balance_at(c, alice.key, a, encoded), 700) << encoded;

  // Now, and a time still to come (answered as of now, which the answer says).
  const auto now = balance_as_of(c, alice.key, a);
  EXPECT_EQ(str(now.at("balance")), "500");
  EXPECT_GE(micros(str(now.at("asOf"))), at[2]);
  const auto future = balance_as_of(c, alice.key, a, "9999-12-31T23:59:59Z");
  EXPECT_EQ(str(future.at("balance")), "500");
  EXPECT_LT(micros(str(future.at("asOf"))), micros("9999-12-31T23:59:59Z"));
  EXPECT_EQ(ts::balance(c, alice.key, a), 500);

  for (const char* bad : {"yesterday", "2026-02-30T00:00:00Z", "2026-11-30T01:59:00", "", "%zz"}) {
    auto r = c.get("/v1/accounts/" + std::to_string(a) + "/balance?asOf=" + bad, alice.key);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
    EXPECT_EQ(str(r.json().as_object().at("code")), "invalid_request") << bad;
    EXPECT_NE(str(r.json().as_object().at("detail")).find("asOf"), std::string::npos) << bad;
  }
  EXPECT_EQ(c.get("/v1/accounts/" + std::to_string(b) + "/balance", alice.key).status, 404);
}

// A hot account's balance as of a time is its main row plus each shard's last balanceAfter by
// then. Checked at the createdAt of every entry of the account against the sum of the amounts of
// its entries up to then (invariant 2 from the other side), through payments that land on the
// shards and the sweeps (shard to main) that the sweeper makes at any moment and on request.
TEST_F(KeysAuditE2E, AHotAccountsBalanceAsOfIncludesItsShards) {
  ts::http_client c(port());
  const auto payer = ts::create_principal(c, op());
  const auto shop = ts::create_principal(c, op(), "merchant");
  const auto p = ts::create_account(c, op(), payer.id);
  const auto m = ts::create_account(c, op(), shop.id, "EUR", 4);
  ts::deposit(c, op(), p, 10'000);
  const std::vector<std::int64_t> amounts{100, 250, 400, 75, 1'000, 30};
  std::int64_t total = 0;
  for (auto amount : amounts) {
    auto r = c.post("/v1/transfers", payer.key, ts::transfer_body(p, m, amount), ts::unique_key("hot"));
    ASSERT_EQ(r.status, 201) << r.body;
    total += amount;
  }
  // Sweep every shard into the main row now (or let the sweeper's timer have done it).
  auto r = c.post("/v1/admin/sweeps", op(), "");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(ts::eventually(
      [&] {
        for (const auto& e : entries_of(c, shop.key, m)) {
          if (str(e.at("type")) == "SWEEP") return true;
        }
        return false;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(50)));

  const auto entries = entries_of(c, shop.key, m);
  int payments = 0;
  for (const auto& e : entries) {
    if (str(e.at("type")) != "TRANSFER") continue;
    ++payments;
    EXPECT_NE(e.at("accountId").as_int64(), m) << "a payment into a hot account lands on a shard";
  }
  EXPECT_EQ(payments, static_cast<int>(amounts.size()));
  for (const auto& e : entries) {
    const auto at = micros(str(e.at("createdAt")));
    std::int64_t expected = 0;
    for (const auto& other : entries) {
      if (micros(str(other.at("createdAt"))) <= at) expected += std::stoll(str(other.at("amount")));
    }
    EXPECT_EQ(balance_at(c, shop.key, m, str(e.at("createdAt"))), expected) << json::serialize(e);
  }
  EXPECT_EQ(balance_at(c, shop.key, m, rfc3339(micros(str(entries.front().at("createdAt"))) - 1)), 0);
  EXPECT_EQ(balance_at(c, shop.key, m, str(entries.back().at("createdAt"))), total);
  EXPECT_EQ(std::stoll(str(balance_as_of(c, shop.key, m).at("balance"))), total);
  EXPECT_EQ(ts::balance(c, shop.key, m), total);
}

// Every operator action leaves one audit row, in the order the actions were made, with who made it,
// what it acted on, a detail without any secret, and the request id: principals and keys, accounts
// created, made hot, frozen and unfrozen, providers, deposits (a replay adds none), a withdrawal
// confirmed and one failed, a deposit's refund and chargeback, a reconciliation run, a sweep, a
// fee schedule, an operator's refund of a payment, a settlement report and the resolution of its
// exception. A refused action leaves none; pages of one row list the same rows; the database refuses to change
// or delete a row.
TEST_F(KeysAuditE2E, EveryOperatorActionLeavesOneAuditRowInOrder) {
  ts::http_client c(port());
  const auto prefix = ts::unique_key("audit").substr(0, 40) + "-";
  int n = 0;
  auto rid = [&] { return prefix + std::to_string(n++); };
  const auto cursor = audit_cursor();
  struct expected {
    std::string action;
    std::string target;
    std::string request_id;
  };
  std::vector<expected> want;
  std::vector<std::string> secrets;
  auto ok = [&](const ts::response& r, int status) {
    EXPECT_EQ(r.status, status) << r.body;
    return r.status == status ? r.json().as_object() : json::object{};
  };

  auto id = rid();
  auto o = ok(call(c, "POST", "/v1/principals", op(), R"({"name":"audited","role":"user"})", id), 201);
  const auto alice = o.at("id").as_int64();
  const auto alice_key = str(o.at("apiKey"));
  secrets.push_back(alice_key);
  want.push_back({"principal.create", "principal:" + std::to_string(alice), id});

  id = rid();
  o = ok(call(c, "POST", keys_path(alice), op(), "", id), 201);
  secrets.push_back(str(o.at("apiKey")));
  const auto second_key = o.at("keyId").as_int64();
  want.push_back({"key.create", "key:" + std::to_string(second_key), id});

  id = rid();
  ok(call(c, "DELETE", keys_path(alice) + "/" + std::to_string(second_key), alice_key, "", id), 200);
  want.push_back({"key.revoke", "key:" + std::to_string(second_key), id});

  id = rid();
  o = ok(call(c, "POST", "/v1/accounts", op(), R"({"ownerId":)" + std::to_string(alice) + R"(,"currency":"EUR"})", id),
         201);
  const auto a = o.at("id").as_int64();
  want.push_back({"account.create", "account:" + std::to_string(a), id});

  id = rid();
  ok(call(c, "POST", "/v1/accounts/" + std::to_string(a) + "/hot", op(), R"({"shards":2})", id), 200);
  want.push_back({"account.make_hot", "account:" + std::to_string(a), id});
  id = rid();
  ok(call(c, "POST", "/v1/accounts/" + std::to_string(a) + "/freeze", op(), "", id), 200);
  want.push_back({"account.freeze", "account:" + std::to_string(a), id});
  id = rid();
  ok(call(c, "POST", "/v1/accounts/" + std::to_string(a) + "/unfreeze", op(), "", id), 200);
  want.push_back({"account.unfreeze", "account:" + std::to_string(a), id});
  // Refused: no row.
  EXPECT_EQ(call(c, "POST", "/v1/accounts/9000000000000/freeze", op(), "", rid()).status, 404);

  const auto provider_name = "aud-" + ts::unique_key("p").substr(0, 20);
  id = rid();
  o = ok(call(c, "POST", "/v1/providers", op(), R"({"name":")" + provider_name + R"("})", id), 201);
  secrets.push_back(str(o.at("signingSecret")));
  want.push_back({"provider.create", "provider:" + provider_name, id});

  const auto deposit_key = ts::unique_key("audit-dep");
  id = rid();
  o = ok(call(c, "POST", "/v1/deposits", op(), R"({"accountId":)" + std::to_string(a) + R"(,"amount":5000})", id,
              deposit_key),
         201);
  const auto deposit_tx = str(o.at("transactionId"));
  want.push_back({"deposit.create", "account:" + std::to_string(a), id});
  // The same deposit again is a replay: no second row.
  auto replay = call(c, "POST", "/v1/deposits", op(), R"({"accountId":)" + std::to_string(a) + R"(,"amount":5000})",
                     rid(), deposit_key);
  EXPECT_EQ(replay.status, 201) << replay.body;
  EXPECT_EQ(replay.header("idempotent-replayed"), "true");

  std::vector<std::string> withdrawals;
  for (int i = 0; i < 2; ++i) {
    o = ok(call(c, "POST", "/v1/withdrawals", alice_key, R"({"accountId":)" + std::to_string(a) + R"(,"amount":500})",
                rid(), ts::unique_key("audit-wd")),
           201);
    withdrawals.push_back(str(o.at("id")));
  }
  id = rid();
  ok(call(c, "POST", "/v1/withdrawals/" + withdrawals[0] + "/confirm", op(), "", id, ts::unique_key("audit-c")), 201);
  want.push_back({"withdrawal.confirm", "withdrawal:" + withdrawals[0], id});
  id = rid();
  ok(call(c, "POST", "/v1/withdrawals/" + withdrawals[1] + "/fail", op(), "", id, ts::unique_key("audit-f")), 201);
  want.push_back({"withdrawal.fail", "withdrawal:" + withdrawals[1], id});

  id = rid();
  ok(call(c, "POST", "/v1/deposits/" + deposit_tx + "/refunds", op(), R"({"amount":100,"reason":"asked"})", id,
          ts::unique_key("audit-r")),
     201);
  want.push_back({"deposit.refund", "deposit:" + deposit_tx, id});
  id = rid();
  ok(call(c, "POST", "/v1/deposits/" + deposit_tx + "/chargebacks", op(), R"({"amount":200})", id,
          ts::unique_key("audit-cb")),
     201);
  want.push_back({"deposit.chargeback", "deposit:" + deposit_tx, id});

  id = rid();
  o = ok(call(c, "POST", "/v1/admin/reconciliation", op(), "", id), 202);
  want.push_back({"reconciliation.start", "reconciliation_run:" + std::to_string(o.at("runId").as_int64()), id});
  id = rid();
  ok(call(c, "POST", "/v1/admin/sweeps", op(), "", id), 200);
  want.push_back({"sweep.run", "hot_accounts", id});

  id = rid();
  ok(call(c, "PUT", "/v1/accounts/" + std::to_string(a) + "/fees", op(), R"({"feeBps":100,"feeFixed":5})", id), 200);
  want.push_back({"account.set_fees", "account:" + std::to_string(a), id});

  // A payment from Alice to Bob, refunded in part by an operator (Alice's payment itself is no
  // operator action).
  const auto bob = ts::create_principal(c, op());
  const auto b = ts::create_account(c, op(), bob.id);
  o = ok(call(c, "POST", "/v1/transfers", alice_key, ts::transfer_body(a, b, 300), rid(), ts::unique_key("audit-t")),
         201);
  const auto payment = str(o.at("transactionId"));
  id = rid();
  ok(call(c, "POST", "/v1/transfers/" + payment + "/refunds", op(), R"({"amount":100})", id,
          ts::unique_key("audit-pr")),
     201);
  want.push_back({"payment.refund", "transfer:" + payment, id});

  // A settlement report of the new provider naming a payment the ledger never saw: one exception,
  // which an operator then resolves.
  id = rid();
  std::map<std::string, std::string> csv_headers{
      {"Authorization", "Bearer " + op()}, {"Content-Type", "text/csv"}, {"X-Request-Id", id}};
  const auto settled_at =
      rfc3339(std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
                  .count());
  auto imported = c.request("POST", "/v1/admin/settlements",
                            "provider,paymentId,type,amount,currency,settledAt\n" + provider_name +
                                ",pay_unknown,payment,4000,EUR," + settled_at + "\n",
                            csv_headers);
  o = ok(imported, 200);
  want.push_back({"settlement.import", "settlement_import:" + std::to_string(o.at("importId").as_int64()), id});
  std::int64_t exception_id = 0;
  std::int64_t import_id = 0;
  for (std::string after = "0"; exception_id == 0 && after != "null";) {
    const auto page = ok(call(c, "GET", "/v1/admin/reconciliation-exceptions?limit=500&after=" + after, op()), 200);
    for (const auto& e : page.at("exceptions").as_array()) {
      if (str(e.as_object().at("provider")) == provider_name) {
        exception_id = e.as_object().at("id").as_int64();
        import_id = e.as_object().at("importId").as_int64();
      }
    }
    after = page.at("next").is_null() ? "null" : str(page.at("next"));
  }
  ASSERT_NE(exception_id, 0);
  id = rid();
  ok(call(c, "POST", "/v1/admin/reconciliation-exceptions/" + std::to_string(exception_id) + "/resolve", op(),
          R"({"note":"a test payment","owner":"finance","importId":)" + std::to_string(import_id) + "}", id),
     200);
  want.push_back({"settlement_exception.resolve", "settlement_exception:" + std::to_string(exception_id), id});

  const auto rows = audit_rows(c, cursor, prefix);
  ASSERT_EQ(rows.size(), want.size());
  const auto operator_id = rows.front().at("principalId").as_int64();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(want[i].action);
    EXPECT_EQ(str(rows[i].at("action")), want[i].action);
    EXPECT_EQ(str(rows[i].at("target")), want[i].target);
    EXPECT_EQ(str(rows[i].at("requestId")), want[i].request_id);
    // The key revocation was Alice's own; everything else was the operator's.
    EXPECT_EQ(rows[i].at("principalId").as_int64(), want[i].action == "key.revoke" ? alice : operator_id);
    const auto detail = json::serialize(rows[i].at("detail"));
    for (const auto& secret : secrets) EXPECT_EQ(detail.find(secret), std::string::npos) << detail;
    if (i > 0) {
      EXPECT_LT(rows[i - 1].at("id").as_int64(), rows[i].at("id").as_int64());
    }
  }
  // The money flows' rows name their transaction and the amount posted.
  const auto& deposit_row = rows[8].at("detail").as_object();
  EXPECT_EQ(str(deposit_row.at("transactionId")), deposit_tx);
  EXPECT_EQ(str(deposit_row.at("amount")), "5000");
  EXPECT_EQ(str(rows[12].at("detail").as_object().at("amount")), "200");
  EXPECT_EQ(str(rows[11].at("detail").as_object().at("reason")), "asked");
  EXPECT_EQ(str(rows[15].at("detail").as_object().at("feeFixed")), "5");
  EXPECT_EQ(str(rows[16].at("detail").as_object().at("amount")), "100");
  EXPECT_EQ(str(rows[18].at("detail").as_object().at("owner")), "finance");

  // Pages of one row, following next, list the same rows.
  const auto paged = audit_rows(c, cursor, prefix, 1);
  ASSERT_EQ(paged.size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(paged[i].at("id"), rows[i].at("id"));

  const auto first = std::to_string(rows.front().at("id").as_int64());
  EXPECT_THROW(ts::execute_sql("UPDATE audit_log SET action = 'principal.create' WHERE id = " + first), std::exception);
  EXPECT_THROW(ts::execute_sql("DELETE FROM audit_log WHERE id = " + first), std::exception);
  EXPECT_THROW(ts::execute_sql("UPDATE audit_log SET target = 'x' WHERE id = " + first, false), std::exception);
  EXPECT_EQ(ts::query_value("SELECT action FROM audit_log WHERE id = " + first), "principal.create");
}

}  // namespace
