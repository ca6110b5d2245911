// End-to-end tests of settlement reconciliation (docs/settlements.md): a real wallet-server,
// PostgreSQL and Redis. Money moves through the API (deposits, a refund, a paid withdrawal) of a
// payment provider made for each test, so that tests sharing the database never see each other's
// imports or exceptions; reports are CSV bodies timed by the database's own clock.

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include <future>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/support/net.hpp"
#include "tests/support/support.hpp"

namespace ts = test_support;

namespace {

const std::string k_header = "provider,paymentId,type,amount,currency,settledAt\n";

std::string line(const std::string& provider, const std::string& payment_id, const std::string& type,
                 std::int64_t amount, const std::string& settled_at, const std::string& currency = "EUR") {
  return provider + "," + payment_id + "," + type + "," + std::to_string(amount) + "," + currency + "," + settled_at +
         "\n";
}

class SettlementE2E : public ts::shared_server_test<SettlementE2E> {
 protected:
  // A provider of this test's own, a user with an EUR account, and a clock reading taken before
  // any of its money moved (settledAt values at and after it cover the test's transactions).
  struct world {
    std::string provider;
    ts::principal user;
    std::int64_t account = 0;
    std::string before;  // RFC 3339, the database's clock before the first transaction
  };

  world make_world(ts::http_client& c) const {
    world w;
    w.provider = ts::unique_key("s");
    auto r = c.post("/v1/providers", op(), R"({"name":")" + w.provider + R"("})");
    EXPECT_EQ(r.status, 201) << r.body;
    w.user = ts::create_principal(c, op());
    w.account = ts::create_account(c, op(), w.user.id);
    w.before = now();
    return w;
  }

  // The database's clock, as RFC 3339 UTC with microseconds.
  static std::string now(const std::string& plus = "0 seconds") {
    return ts::query_value("SELECT to_char((now() + interval '" + plus +
                           "') AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')");
  }

  // A deposit from the provider (with a payment id unless empty); returns its transaction id.
  std::string deposit(ts::http_client& c, const world& w, std::int64_t amount, const std::string& payment_id) const {
    std::string body = R"({"accountId":)" + std::to_string(w.account) + R"(,"amount":)" + std::to_string(amount) +
                       R"(,"provider":")" + w.provider + "\"";
    if (!payment_id.empty()) body += R"(,"providerPaymentId":")" + payment_id + "\"";
    auto r = c.post("/v1/deposits", op(), body + "}", ts::unique_key("dep"));
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? std::string(r.json().as_object().at("transactionId").as_string()) : std::string();
  }

  ts::response import(ts::http_client& c, const std::string& csv, const std::string& key = {}) const {
    return c.request("POST", "/v1/admin/settlements", csv,
                     {{"Authorization", "Bearer " + (key.empty() ? op() : key)}, {"Content-Type", "text/csv"}});
  }

  // Every exception of `provider`, paging through GET /v1/admin/reconciliation-exceptions `limit`
  // at a time (ids strictly increasing across pages; a page bound keeps a broken `next` finite).
  std::vector<boost::json::object> exceptions_of(ts::http_client& c, const std::string& provider,
                                                 const std::string& status = {}, int limit = 500) const {
    std::vector<boost::json::object> out;
    std::string after = "0";
    std::int64_t last_id = 0;
    for (int page = 0; page < 10'000; ++page) {
      std::string target = "/v1/admin/reconciliation-exceptions?limit=" + std::to_string(limit) + "&after=" + after;
      if (!status.empty()) target += "&status=" + status;
      auto r = c.get(target, op());
      EXPECT_EQ(r.status, 200) << r.body;
      if (r.status != 200) return out;
      const auto body = r.json().as_object();
      for (const auto& v : body.at("exceptions").as_array()) {
        const auto& e = v.as_object();
        EXPECT_GT(e.at("id").as_int64(), last_id);
        last_id = e.at("id").as_int64();
        if (e.at("provider").as_string() == provider) out.push_back(e);
      }
      if (body.at("next").is_null()) return out;
      after = std::string(body.at("next").as_string());
    }
    ADD_FAILURE() << "the pages never ended";
    return out;
  }

  // A payment ("pay_r", 10,000) with a first refund of 100 that a first report (settling the
  // payment and another one, "pay_s") leaves unsettled: one open posted_not_settled exception.
  // Then a second refund of 200, after that report's period. The two refunds' transaction ids.
  struct two_refunds {
    std::string first;
    std::string second;
  };
  two_refunds refunds_around_a_first_report(ts::http_client& c, const world& w) const {
    two_refunds out;
    const auto paid = deposit(c, w, 10'000, "pay_r");
    const auto refund = [&](std::int64_t amount) {
      auto r = c.post("/v1/deposits/" + paid + "/refunds", op(), R"({"amount":)" + std::to_string(amount) + "}",
                      ts::unique_key("refund"));
      EXPECT_EQ(r.status, 201) << r.body;
      return r.status == 201 ? std::string(r.json().as_object().at("transactionId").as_string()) : std::string();
    };
    out.first = refund(100);
    deposit(c, w, 500, "pay_s");
    // The first report's period runs from its earliest settlement to its latest: the refund is in it.
    auto r = import(c, k_header + line(w.provider, "pay_r", "payment", 10'000, w.before) +
                           line(w.provider, "pay_s", "payment", 500, now()));
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status == 200) {
      EXPECT_EQ(r.json().as_object().at("exceptions").as_object().at("postedNotSettled").as_int64(), 1);
    }
    out.second = refund(200);
    return out;
  }

  static std::string text(const boost::json::object& o, const char* field) {
    const auto& v = o.at(field);
    return v.is_null() ? std::string("null") : std::string(v.as_string());
  }

  static std::string count(const std::string& sql) { return ts::query_value(sql); }
};

// A report that agrees with some of the provider's transactions and differs from others in each
// way yields exactly one exception per difference, of the right kind, with both sides' amounts
// and the ledger's transaction: a payment and its refund and a payout that match; a payment
// reported with another amount; a payment and a deposit without payment id that the report
// omits; a payment the ledger never saw. Money of the provider is on its own clearing account.
TEST_F(SettlementE2E, EachKindOfDifferenceBecomesExactlyOneException) {
  ts::http_client c(port());
  const auto w = make_world(c);
  const auto p1 = deposit(c, w, 10'000, "pay_1");
  const auto p2 = deposit(c, w, 2'000, "pay_2");
  const auto p3 = deposit(c, w, 3'000, "pay_3");
  const auto no_id = deposit(c, w, 500, "");
  auto r = c.post("/v1/deposits/" + p1 + "/refunds", op(), R"({"amount":300})", ts::unique_key("refund"));
  ASSERT_EQ(r.status, 201) << r.body;
  r = c.post("/v1/withdrawals", w.user.key,
             R"({"accountId":)" + std::to_string(w.account) + R"(,"amount":700,"provider":")" + w.provider + "\"}",
             ts::unique_key("wd"));
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string withdrawal(r.json().as_object().at("id").as_string());
  r = c.post("/v1/withdrawals/" + withdrawal + "/confirm", op(), R"({"providerPaymentId":"po_1"})",
             ts::unique_key("c"));
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(count("SELECT count(*) FROM ledger_entry e JOIN account a ON a.id = e.account_id"
                  " WHERE a.system_role = 'clearing:" +
                  w.provider + "'"),
            "6")
      << "each of the provider's six transactions has an entry on its clearing account";
  const auto after = now("1 second");

  const auto report =
      k_header + line(w.provider, "pay_1", "payment", 10'000, w.before) +
      line(w.provider, "pay_1", "refund", 300, after) + line(w.provider, "pay_2", "payment", 1'999, after) +
      line(w.provider, "pay_4", "payment", 4'000, after) + line(w.provider, "po_1", "payout", 700, after);
  r = import(c, report);
  ASSERT_EQ(r.status, 200) << r.body;
  const auto summary = r.json().as_object();
  EXPECT_EQ(summary.at("provider").as_string(), w.provider);
  EXPECT_EQ(summary.at("lines").as_int64(), 5);
  EXPECT_EQ(summary.at("matched").as_int64(), 3);
  EXPECT_EQ(summary.at("exceptions").as_object().at("postedNotSettled").as_int64(), 2);
  EXPECT_EQ(summary.at("exceptions").as_object().at("settledNotPosted").as_int64(), 1);
  EXPECT_EQ(summary.at("exceptions").as_object().at("amountMismatch").as_int64(), 1);
  EXPECT_EQ(summary.at("newExceptions").as_int64(), 4);
  EXPECT_EQ(summary.at("resolvedExceptions").as_int64(), 0);
  EXPECT_EQ(summary.at("fileSha256").as_string().size(), 64u);

  std::map<std::string, boost::json::object> by_key;  // kind + paymentId
  for (const auto& e : exceptions_of(c, w.provider)) by_key[text(e, "kind") + " " + text(e, "paymentId")] = e;
  ASSERT_EQ(by_key.size(), 4u);
  const auto& mismatch = by_key.at("amount_mismatch pay_2");
  EXPECT_EQ(text(mismatch, "type"), "DEPOSIT");
  EXPECT_EQ(text(mismatch, "ledgerAmount"), "2000");
  EXPECT_EQ(text(mismatch, "reportAmount"), "1999");
  EXPECT_EQ(text(mismatch, "transactionId"), p2);
  EXPECT_EQ(text(mismatch, "currency"), "EUR");
  const auto& missing = by_key.at("posted_not_settled pay_3");
  EXPECT_EQ(text(missing, "ledgerAmount"), "3000");
  EXPECT_EQ(text(missing, "reportAmount"), "null");
  EXPECT_EQ(text(missing, "transactionId"), p3);
  const auto& unnamed = by_key.at("posted_not_settled null");
  EXPECT_EQ(text(unnamed, "ledgerAmount"), "500");
  EXPECT_EQ(text(unnamed, "transactionId"), no_id);
  const auto& unknown = by_key.at("settled_not_posted pay_4");
  EXPECT_EQ(text(unknown, "reportAmount"), "4000");
  EXPECT_EQ(text(unknown, "ledgerAmount"), "null");
  EXPECT_EQ(text(unknown, "transactionId"), "null");
  EXPECT_EQ(text(unknown, "settledAt").substr(0, 19), after.substr(0, 19));
  for (const auto& [key, e] : by_key) {
    EXPECT_EQ(text(e, "status"), "open") << key;
    EXPECT_EQ(text(e, "owner").rfind("operator ", 0), 0u) << key;
    EXPECT_EQ(e.at("importId").as_int64(), summary.at("importId").as_int64()) << key;
  }
}

// Importing the same report again finds the same differences and adds no exception (they are
// open already); both imports are recorded, with the same file hash.
TEST_F(SettlementE2E, TheSameReportTwiceAddsNoException) {
  ts::http_client c(port());
  const auto w = make_world(c);
  deposit(c, w, 1'000, "a_1");
  deposit(c, w, 2'000, "a_2");
  const auto report = k_header + line(w.provider, "a_1", "payment", 999, w.before) +
                      line(w.provider, "a_9", "payment", 5, now("1 second"));
  auto first = import(c, report);
  ASSERT_EQ(first.status, 200) << first.body;
  auto second = import(c, report);
  ASSERT_EQ(second.status, 200) << second.body;
  const auto a = first.json().as_object();
  const auto b = second.json().as_object();
  EXPECT_EQ(a.at("newExceptions").as_int64(), 3);
  EXPECT_EQ(b.at("newExceptions").as_int64(), 0);
  EXPECT_EQ(b.at("exceptions"), a.at("exceptions"));
  EXPECT_EQ(b.at("fileSha256"), a.at("fileSha256"));
  EXPECT_NE(b.at("importId"), a.at("importId"));
  EXPECT_EQ(exceptions_of(c, w.provider).size(), 3u);
  EXPECT_EQ(count("SELECT count(*) FROM settlement_import WHERE provider = '" + w.provider + "'"), "2");
}

// A later report that finds an open amount mismatch again (the same payment and transaction) with
// other amounts brings that exception up to date instead of leaving the first report's amounts:
// its id and owner stay, its import becomes the later one. A settlement the ledger has not posted
// keeps its own exception as it is (a line of its amount resolves it later). A resolved exception
// never changes: a report that differs again after it was resolved opens a new one.
TEST_F(SettlementE2E, ALaterReportWithOtherAmountsUpdatesTheOpenException) {
  ts::http_client c(port());
  const auto w = make_world(c);
  const auto e1 = deposit(c, w, 1'000, "e_1");
  auto r = import(c, k_header + line(w.provider, "e_1", "payment", 990, w.before) +
                         line(w.provider, "e_9", "payment", 5, w.before));
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.json().as_object().at("newExceptions").as_int64(), 2);
  // The open exceptions of the provider, by kind.
  const auto open_by_kind = [&] {
    std::map<std::string, boost::json::object> out;
    for (const auto& e : exceptions_of(c, w.provider, "open")) out[text(e, "kind")] = e;
    return out;
  };
  auto open = open_by_kind();
  ASSERT_EQ(open.size(), 2u);
  const auto first = open.at("amount_mismatch");
  const auto unposted = open.at("settled_not_posted");
  EXPECT_EQ(text(first, "reportAmount"), "990");

  const auto later = now("1 second");
  r = import(c,
             k_header + line(w.provider, "e_1", "payment", 995, later) + line(w.provider, "e_9", "payment", 7, later));
  ASSERT_EQ(r.status, 200) << r.body;
  const auto second = r.json().as_object();
  EXPECT_EQ(second.at("newExceptions").as_int64(), 0);
  EXPECT_EQ(second.at("exceptions").as_object().at("amountMismatch").as_int64(), 1);
  open = open_by_kind();
  ASSERT_EQ(open.size(), 2u);
  EXPECT_EQ(open.at("settled_not_posted"), unposted);
  const auto updated = open.at("amount_mismatch");
  EXPECT_EQ(updated.at("id"), first.at("id"));
  EXPECT_EQ(text(updated, "kind"), "amount_mismatch");
  EXPECT_EQ(text(updated, "ledgerAmount"), "1000");
  EXPECT_EQ(text(updated, "reportAmount"), "995");
  EXPECT_EQ(text(updated, "transactionId"), e1);
  EXPECT_EQ(text(updated, "settledAt"), later);
  EXPECT_EQ(updated.at("importId"), second.at("importId"));
  EXPECT_EQ(text(updated, "owner"), text(first, "owner"));
  EXPECT_EQ(text(updated, "createdAt"), text(first, "createdAt"));

  // The same report again changes nothing.
  r = import(c,
             k_header + line(w.provider, "e_1", "payment", 995, later) + line(w.provider, "e_9", "payment", 7, later));
  ASSERT_EQ(r.status, 200) << r.body;
  open = open_by_kind();
  ASSERT_EQ(open.size(), 2u);
  EXPECT_EQ(open.at("amount_mismatch"), updated);
  EXPECT_EQ(open.at("settled_not_posted"), unposted);

  // Resolved as the first import left it, the exception is a conflict that changes nothing: the
  // note would speak of amounts it no longer has. As the later import left it, it resolves.
  const auto id = std::to_string(updated.at("id").as_int64());
  const auto resolve_as_of = [&](const boost::json::value& import_id) {
    return c.post("/v1/admin/reconciliation-exceptions/" + id + "/resolve", op(),
                  R"({"note":"the provider withheld 5","importId":)" + boost::json::serialize(import_id) + "}");
  };
  r = resolve_as_of(first.at("importId"));
  ASSERT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(r.json().as_object().at("code").as_string(), "conflict");
  EXPECT_NE(std::string(r.json().as_object().at("detail").as_string()).find("report amount 995"), std::string::npos)
      << r.body;
  EXPECT_EQ(open_by_kind().at("amount_mismatch"), updated);
  r = resolve_as_of(updated.at("importId"));
  ASSERT_EQ(r.status, 200) << r.body;
  r = import(c, k_header + line(w.provider, "e_1", "payment", 997, now("2 seconds")));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().as_object().at("newExceptions").as_int64(), 1);
  const auto resolved = exceptions_of(c, w.provider, "resolved");
  ASSERT_EQ(resolved.size(), 1u);
  EXPECT_EQ(text(resolved[0], "reportAmount"), "995");
  EXPECT_EQ(resolved[0].at("importId"), second.at("importId"));
  open = open_by_kind();
  ASSERT_EQ(open.size(), 2u);
  EXPECT_EQ(text(open.at("amount_mismatch"), "reportAmount"), "997");
  EXPECT_NE(open.at("amount_mismatch").at("id"), updated.at("id"));
}

// A report with a bad line is refused whole (400 naming the line and the field) and leaves no
// trace: no import, no exception. So are a report of an unknown provider (400), one that is not
// text/csv (415) and an empty one (400).
TEST_F(SettlementE2E, AMalformedLineImportsNothing) {
  ts::http_client c(port());
  const auto w = make_world(c);
  deposit(c, w, 1'000, "b_1");
  const auto at = now();
  const auto bad = k_header + line(w.provider, "b_1", "payment", 1'000, at) +
                   line(w.provider, "b_2", "payment", 5, at) + w.provider + ",b_3,payment,12.50,EUR," + at + "\n" +
                   line(w.provider, "b_4", "payment", 5, at);
  auto r = import(c, bad);
  ASSERT_EQ(r.status, 400) << r.body;
  auto problem = r.json().as_object();
  EXPECT_EQ(problem.at("code").as_string(), "invalid_request");
  const std::string detail(problem.at("detail").as_string());
  EXPECT_NE(detail.find("line 4"), std::string::npos) << detail;
  EXPECT_NE(detail.find("amount \"12.50\""), std::string::npos) << detail;
  EXPECT_EQ(count("SELECT count(*) FROM settlement_import WHERE provider = '" + w.provider + "'"), "0");
  EXPECT_EQ(count("SELECT count(*) FROM settlement_exception WHERE provider = '" + w.provider + "'"), "0");

  const auto unknown = ts::unique_key("nobody");
  r = import(c, k_header + line(unknown, "x_1", "payment", 5, at));
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_NE(std::string(r.json().as_object().at("detail").as_string()).find("line 2: provider"), std::string::npos)
      << r.body;
  r = c.request("POST", "/v1/admin/settlements", k_header + line(w.provider, "b_1", "payment", 1'000, at),
                {{"Authorization", "Bearer " + op()}, {"Content-Type", "application/json"}});
  EXPECT_EQ(r.status, 415) << r.body;
  // Media types are case-insensitive (RFC 9110): "Text/CSV" is text/csv, and its line 2 is read.
  r = c.request("POST", "/v1/admin/settlements", k_header + line(unknown, "x_1", "payment", 5, at),
                {{"Authorization", "Bearer " + op()}, {"Content-Type", "Text/CSV; charset=utf-8"}});
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_NE(std::string(r.json().as_object().at("detail").as_string()).find("line 2: provider"), std::string::npos)
      << r.body;
  r = import(c, "");
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_NE(std::string(r.json().as_object().at("detail").as_string()).find("line 1"), std::string::npos) << r.body;
  EXPECT_EQ(count("SELECT count(*) FROM settlement_import WHERE provider = '" + w.provider + "'"), "0");
}

// Resolving keeps the note, who and when on the exception and may hand it to a new owner; a second
// resolve is a conflict (409) that changes nothing, and the database refuses any change of a
// resolved exception, even the owner role's; an unknown id is 404; a resolve without a note is 400.
TEST_F(SettlementE2E, AnExceptionResolvesOnce) {
  ts::http_client c(port());
  const auto w = make_world(c);
  auto r = import(c, k_header + line(w.provider, "c_1", "payment", 42, now()));
  ASSERT_EQ(r.status, 200) << r.body;
  const auto exceptions = exceptions_of(c, w.provider, "open");
  ASSERT_EQ(exceptions.size(), 1u);
  const auto id = std::to_string(exceptions[0].at("id").as_int64());
  const auto import_id = std::to_string(exceptions[0].at("importId").as_int64());
  const auto target = "/v1/admin/reconciliation-exceptions/" + id + "/resolve";

  r = c.post(target, op(), R"({"owner":"finance","importId":)" + import_id + "}");
  EXPECT_EQ(r.status, 400) << r.body;
  r = c.post(target, op(), R"({"note":"the provider reported a test payment","owner":"finance"})");
  EXPECT_EQ(r.status, 400) << r.body;  // no importId: which amounts the note speaks of is not known
  r = c.post(target, op(),
             R"({"note":"the provider reported a test payment","owner":"finance","importId":)" + import_id + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  const auto resolved = r.json().as_object();
  EXPECT_EQ(text(resolved, "status"), "resolved");
  EXPECT_EQ(text(resolved, "note"), "the provider reported a test payment");
  EXPECT_EQ(text(resolved, "owner"), "finance");
  EXPECT_EQ(text(resolved, "resolvedBy").rfind("operator ", 0), 0u);
  EXPECT_NE(text(resolved, "resolvedAt"), "null");

  r = c.post(target, op(), R"({"note":"again","owner":"someone else","importId":)" + import_id + "}");
  ASSERT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(r.json().as_object().at("code").as_string(), "conflict");
  EXPECT_EQ(count("SELECT note || '/' || owner FROM settlement_exception WHERE id = " + id),
            "the provider reported a test payment/finance");
  EXPECT_ANY_THROW(ts::execute_sql("UPDATE settlement_exception SET note = 'rewritten' WHERE id = " + id));
  EXPECT_ANY_THROW(ts::execute_sql("UPDATE settlement_exception SET status = 'open' WHERE id = " + id));
  EXPECT_ANY_THROW(ts::execute_sql("DELETE FROM settlement_exception WHERE id = " + id, false));
  EXPECT_EQ(count("SELECT status || '/' || note FROM settlement_exception WHERE id = " + id),
            "resolved/the provider reported a test payment");
  EXPECT_EQ(exceptions_of(c, w.provider, "open").size(), 0u);
  EXPECT_EQ(exceptions_of(c, w.provider, "resolved").size(), 1u);

  r = c.post("/v1/admin/reconciliation-exceptions/999999999999/resolve", op(), R"({"note":"x","importId":1})");
  EXPECT_EQ(r.status, 404) << r.body;
}

// A later report that settles what an earlier one missed resolves the earlier exception, naming
// the import; it begins where the earlier report ended, so that a payment posted between the two
// reports' settlements is checked by the later one.
TEST_F(SettlementE2E, ALaterReportResolvesWhatItMatches) {
  ts::http_client c(port());
  const auto w = make_world(c);
  deposit(c, w, 1'000, "d_1");
  deposit(c, w, 2'000, "d_2");
  const auto first_end = now();
  auto r = import(c, k_header + line(w.provider, "d_1", "payment", 1'000, w.before) +
                         line(w.provider, "d_1", "refund", 1, first_end));
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.json().as_object().at("exceptions").as_object().at("postedNotSettled").as_int64(), 1);  // d_2
  // d_3 is posted after the first report's last settlement and before the second's first.
  const auto d3 = deposit(c, w, 3'000, "d_3");
  const auto second_start = now("1 second");
  r = import(c, k_header + line(w.provider, "d_2", "payment", 2'000, second_start));
  ASSERT_EQ(r.status, 200) << r.body;
  const auto second = r.json().as_object();
  EXPECT_EQ(second.at("resolvedExceptions").as_int64(), 1);
  EXPECT_EQ(text(second, "checkedFrom"), first_end);
  EXPECT_EQ(second.at("exceptions").as_object().at("postedNotSettled").as_int64(), 1);

  std::map<std::string, boost::json::object> by_key;
  for (const auto& e : exceptions_of(c, w.provider)) by_key[text(e, "kind") + " " + text(e, "paymentId")] = e;
  ASSERT_EQ(by_key.size(), 3u);
  const auto& d2 = by_key.at("posted_not_settled d_2");
  EXPECT_EQ(text(d2, "status"), "resolved");
  // Its owner is who imported the first report; the same operator imported the second.
  EXPECT_EQ(text(d2, "resolvedBy"),
            "settlement import " + std::to_string(second.at("importId").as_int64()) + " (" + text(d2, "owner") + ")");
  EXPECT_EQ(text(d2, "note"),
            "matched by settlement import " + std::to_string(second.at("importId").as_int64()) + " of " + w.provider);
  EXPECT_EQ(text(by_key.at("posted_not_settled d_3"), "transactionId"), d3);
  EXPECT_EQ(text(by_key.at("posted_not_settled d_3"), "status"), "open");
  EXPECT_EQ(text(by_key.at("settled_not_posted d_1"), "type"), "DEPOSIT_REFUND");
}

// A later report that settles a second refund of a payment leaves open the exception of the first
// refund, which it does not settle (that refund lies before its period): the key is clean in the
// later report, but what the exception is about was never paired.
TEST_F(SettlementE2E, AReportThatSettlesAnotherRefundLeavesTheMissingOneOpen) {
  ts::http_client c(port());
  const auto w = make_world(c);
  const auto refunds = refunds_around_a_first_report(c, w);
  ASSERT_FALSE(refunds.second.empty());
  const auto& first_refund = refunds.first;
  auto r = import(c, k_header + line(w.provider, "pay_r", "refund", 200, now("1 second")));
  ASSERT_EQ(r.status, 200) << r.body;
  const auto second = r.json().as_object();
  EXPECT_EQ(second.at("matched").as_int64(), 1);
  EXPECT_EQ(second.at("resolvedExceptions").as_int64(), 0);

  const auto exceptions = exceptions_of(c, w.provider);
  ASSERT_EQ(exceptions.size(), 1u);
  EXPECT_EQ(text(exceptions[0], "kind"), "posted_not_settled");
  EXPECT_EQ(text(exceptions[0], "transactionId"), first_refund);
  EXPECT_EQ(text(exceptions[0], "status"), "open");

  // A report that settles the first refund resolves it.
  r = import(c, k_header + line(w.provider, "pay_r", "refund", 100, now("2 seconds")));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().as_object().at("resolvedExceptions").as_int64(), 1);
  EXPECT_EQ(text(exceptions_of(c, w.provider).at(0), "status"), "resolved");
}

// A report that settles a refund late but leaves the payment's next refund unpaired resolves the
// late one's exception, and the next refund's difference gets an exception of its own (the open
// one of the key would otherwise have hidden it).
TEST_F(SettlementE2E, ALateSettlementResolvesItsExceptionAndTheNextDifferenceIsKept) {
  ts::http_client c(port());
  const auto w = make_world(c);
  const auto refunds = refunds_around_a_first_report(c, w);
  ASSERT_FALSE(refunds.second.empty());
  const auto& [first_refund, second_refund] = refunds;
  // The second report settles the first refund (late) and not the second, posted within its period.
  auto r = import(c, k_header + line(w.provider, "pay_r", "refund", 100, now("1 second")));
  ASSERT_EQ(r.status, 200) << r.body;
  const auto second = r.json().as_object();
  EXPECT_EQ(second.at("resolvedExceptions").as_int64(), 1);
  EXPECT_EQ(second.at("newExceptions").as_int64(), 1);

  std::map<std::string, boost::json::object> by_transaction;
  for (const auto& e : exceptions_of(c, w.provider)) by_transaction[text(e, "transactionId")] = e;
  ASSERT_EQ(by_transaction.size(), 2u);
  EXPECT_EQ(text(by_transaction.at(first_refund), "status"), "resolved");
  EXPECT_EQ(text(by_transaction.at(second_refund), "status"), "open");
  EXPECT_EQ(text(by_transaction.at(second_refund), "kind"), "posted_not_settled");
  EXPECT_EQ(text(by_transaction.at(second_refund), "ledgerAmount"), "200");
}

// A payment the provider settles twice, in two reports, is a difference: the second report's line
// finds its transaction settled by the first report's line (settlement_pairing) and is left over,
// settled_not_posted. The first report imported again still matches it.
TEST_F(SettlementE2E, APaymentSettledTwiceInTwoReportsIsADifference) {
  ts::http_client c(port());
  const auto w = make_world(c);
  deposit(c, w, 5'000, "twice_1");
  const auto first_report = k_header + line(w.provider, "twice_1", "payment", 5'000, now());
  auto r = import(c, first_report);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().as_object().at("matched").as_int64(), 1);
  EXPECT_EQ(r.json().as_object().at("newExceptions").as_int64(), 0);

  r = import(c, k_header + line(w.provider, "twice_1", "payment", 5'000, now("1 hour")));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().as_object().at("matched").as_int64(), 0);
  EXPECT_EQ(r.json().as_object().at("exceptions").as_object().at("settledNotPosted").as_int64(), 1);
  const auto exceptions = exceptions_of(c, w.provider);
  ASSERT_EQ(exceptions.size(), 1u);
  EXPECT_EQ(text(exceptions[0], "kind"), "settled_not_posted");
  EXPECT_EQ(text(exceptions[0], "paymentId"), "twice_1");

  r = import(c, first_report);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().as_object().at("matched").as_int64(), 1);
  EXPECT_EQ(r.json().as_object().at("newExceptions").as_int64(), 0);
}

// Two refunds of one payment of the same amount, each settled by its own day's report: the second
// report's line pairs with the second refund, not with the first (which the first report settled
// and the margin brings back), and no refund is left posted but not settled.
TEST_F(SettlementE2E, EqualRefundsSettledByTwoReportsEachFindTheirOwn) {
  ts::http_client c(port());
  const auto w = make_world(c);
  const auto paid = deposit(c, w, 10'000, "equal_1");
  const auto refund = [&] {
    auto r = c.post("/v1/deposits/" + paid + "/refunds", op(), R"({"amount":1200})", ts::unique_key("refund"));
    EXPECT_EQ(r.status, 201) << r.body;
  };
  refund();
  auto r = import(c, k_header + line(w.provider, "equal_1", "payment", 10'000, w.before) +
                         line(w.provider, "equal_1", "refund", 1'200, now()));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().as_object().at("matched").as_int64(), 2);
  refund();
  r = import(c, k_header + line(w.provider, "equal_1", "refund", 1'200, now("1 second")));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().as_object().at("matched").as_int64(), 1);
  EXPECT_EQ(r.json().as_object().at("newExceptions").as_int64(), 0);
  EXPECT_TRUE(exceptions_of(c, w.provider).empty());
}

// Pages of exceptions follow one another by id: every exception once, in id order, whatever the
// page size, and `next` is null on the last page.
TEST_F(SettlementE2E, ExceptionPagesFollowOneAnother) {
  ts::http_client c(port());
  const auto w = make_world(c);
  std::string report = k_header;
  const auto at = now();
  for (int i = 0; i < 7; ++i) report += line(w.provider, "e_" + std::to_string(i), "payment", 10 + i, at);
  ASSERT_EQ(import(c, report).status, 200);
  const auto whole = exceptions_of(c, w.provider, "open", 500);
  ASSERT_EQ(whole.size(), 7u);
  std::set<std::int64_t> ids;
  for (const auto& e : whole) ids.insert(e.at("id").as_int64());
  std::set<std::int64_t> paged;
  std::string after = std::to_string(*ids.begin() - 1);
  for (int page = 0; page < 10; ++page) {
    auto r = c.get("/v1/admin/reconciliation-exceptions?status=open&limit=3&after=" + after, op());
    ASSERT_EQ(r.status, 200) << r.body;
    const auto body = r.json().as_object();
    for (const auto& e : body.at("exceptions").as_array()) {
      if (e.as_object().at("provider").as_string() == w.provider) paged.insert(e.as_object().at("id").as_int64());
    }
    EXPECT_LE(body.at("exceptions").as_array().size(), 3u);
    if (body.at("next").is_null() || paged.size() == ids.size()) break;
    after = std::string(body.at("next").as_string());
  }
  EXPECT_EQ(paged, ids);
  for (const char* bad : {"status=closed", "limit=0", "limit=501", "after=-1"}) {
    EXPECT_EQ(c.get(std::string("/v1/admin/reconciliation-exceptions?") + bad, op()).status, 400) << bad;
  }
}

// Only operators import reports and see or resolve exceptions: a user's key is 403 on every route.
TEST_F(SettlementE2E, OnlyOperatorsReconcile) {
  ts::http_client c(port());
  const auto w = make_world(c);
  auto r = import(c, k_header + line(w.provider, "f_1", "payment", 5, now()), w.user.key);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(r.json().as_object().at("code").as_string(), "forbidden");
  EXPECT_EQ(c.get("/v1/admin/reconciliation-exceptions", w.user.key).status, 403);
  EXPECT_EQ(c.post("/v1/admin/reconciliation-exceptions/1/resolve", w.user.key, R"({"note":"x"})").status, 403);
  EXPECT_EQ(count("SELECT count(*) FROM settlement_import WHERE provider = '" + w.provider + "'"), "0");
}

// The report's body limit is its own: a report larger than http.body_bytes_max (64 KiB) imports,
// while a JSON body of that size on another route is 413.
TEST_F(SettlementE2E, AReportMayBeLargerThanOtherBodies) {
  ts::http_client c(port());
  const auto w = make_world(c);
  std::string report = k_header;
  const auto at = now();
  for (int i = 0; report.size() <= 200'000; ++i) report += line(w.provider, "g_" + std::to_string(i), "payment", 1, at);
  auto r = import(c, report);
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
  EXPECT_GT(r.json().as_object().at("lines").as_int64(), 3'000);
  r = c.post("/v1/principals", op(), R"({"name":")" + std::string(200'000, 'n') + R"(","role":"user"})");
  EXPECT_EQ(r.status, 413) << r.body.substr(0, 300);
}

// A server runs one import at a time: while one waits (here for the provider's import lock, held
// by the test), a second report is answered 503 server_busy with Retry-After and imports nothing;
// once the lock is released the first completes. The server's lock wait is long enough that only
// the test's release ends it.
TEST(SettlementLimits, OneImportAtATime) {
  ts::server_process::options o;
  o.env = ts::unlimited_rates();
  o.env["WALLET_DATABASE_LOCK_TIMEOUT_MS"] = "120000";
  ts::server_process server(o);
  ts::http_client c(server.port());
  const auto provider = ts::unique_key("s");
  ASSERT_EQ(c.post("/v1/providers", server.operator_key(), R"({"name":")" + provider + R"("})").status, 201);
  const auto report = k_header + line(provider, "i_1", "payment", 5, "2026-01-01T00:00:00Z");
  const std::map<std::string, std::string> headers{{"Authorization", "Bearer " + server.operator_key()},
                                                   {"Content-Type", "text/csv"}};

  pqxx::connection holder(ts::owner_database_url());
  pqxx::work lock(holder);
  lock.exec("SELECT pg_advisory_xact_lock(hashtext('settlement:" + provider + "'))");
  auto first = std::async(std::launch::async, [&] {
    ts::http_client own(server.port(), std::chrono::seconds(120));
    return own.request("POST", "/v1/admin/settlements", report, headers);
  });
  // The first import waits for the lock once it has read its report (a one-key advisory lock shows
  // its key's low 32 bits as objid).
  const auto waiting =
      "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1"
      " AND objid::bigint = (hashtext('settlement:" +
      provider + "')::bigint & 4294967295)";
  ASSERT_TRUE(ts::eventually([&] { return ts::query_value(waiting) == "1"; }, std::chrono::seconds(60),
                             std::chrono::milliseconds(20)));
  auto second = c.request("POST", "/v1/admin/settlements", report, headers);
  EXPECT_EQ(second.status, 503) << second.body;
  EXPECT_EQ(second.json().as_object().at("code").as_string(), "server_busy");
  EXPECT_FALSE(second.header("Retry-After").empty());
  lock.abort();
  const auto answer = first.get();
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(answer.json().as_object().at("newExceptions").as_int64(), 1);
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM settlement_import WHERE provider = '" + provider + "'"), "1");
}

// A client that asks before it sends a report (Expect: 100-continue, as curl does past 1 MiB) is
// told to go on as soon as its header passed, rather than left to wait; then its report imports.
TEST_F(SettlementE2E, AClientThatAsksFirstIsToldToGoOn) {
  ts::http_client c(port());
  const auto w = make_world(c);
  const auto body = k_header + line(w.provider, "j_1", "payment", 5, now());
  ts::raw_connection conn(port());
  ASSERT_TRUE(conn.send("POST /v1/admin/settlements HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + op() +
                        "\r\nContent-Type: text/csv\r\nContent-Length: " + std::to_string(body.size()) +
                        "\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"));
  ASSERT_TRUE(ts::eventually(
      [&] {
        conn.peer_closed();
        return conn.received().find("\r\n\r\n") != std::string::npos;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(5)));
  EXPECT_EQ(conn.received(), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(conn.send(body));
  const auto rest = conn.read_until_closed(std::chrono::seconds(30));
  EXPECT_TRUE(rest.closed);
  EXPECT_NE(conn.received().find("HTTP/1.1 200 OK\r\n"), std::string::npos) << conn.received();
  EXPECT_EQ(count("SELECT count(*) FROM settlement_import WHERE provider = '" + w.provider + "'"), "1");
}

// With a smaller settlement body limit, a report past it is 413 and imports nothing.
TEST(SettlementLimits, AReportPastItsLimitIs413) {
  ts::server_process::options o;
  o.env = ts::unlimited_rates();
  o.env["WALLET_HTTP_SETTLEMENT_BODY_BYTES_MAX"] = "1024";
  ts::server_process server(o);
  ts::http_client c(server.port());
  const auto provider = ts::unique_key("s");
  ASSERT_EQ(c.post("/v1/providers", server.operator_key(), R"({"name":")" + provider + R"("})").status, 201);
  std::string report = k_header;
  for (int i = 0; report.size() <= 1024; ++i) {
    report += line(provider, "h_" + std::to_string(i), "payment", 1, "2026-01-01T00:00:00Z");
  }
  auto r = c.request("POST", "/v1/admin/settlements", report,
                     {{"Authorization", "Bearer " + server.operator_key()}, {"Content-Type", "text/csv"}});
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_NE(r.body.find("1024 bytes"), std::string::npos) << r.body;
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM settlement_import WHERE provider = '" + provider + "'"), "0");
}

}  // namespace
