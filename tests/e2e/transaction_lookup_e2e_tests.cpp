// End-to-end tests of POST /v1/transactions/lookup over HTTP against a real wallet-server,
// PostgreSQL and Redis: the transactions found are shown exactly as GET /v1/transactions/{id}
// shows each (payments with refunds, refunds, reversals included), in the order asked, the ids not
// found are listed as missing, bad input is 400 with a stable code naming the limit or the index,
// and only an operator may look up.

#include <gtest/gtest.h>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <cctype>
#include <string>
#include <vector>

#include "tests/support/support.hpp"

namespace ts = test_support;

namespace {

std::string str(const boost::json::value& v) { return std::string(v.as_string()); }

std::string lookup_body(const std::vector<std::string>& ids) {
  boost::json::array list;
  for (const auto& id : ids) list.emplace_back(id);
  return boost::json::serialize(boost::json::object{{"ids", std::move(list)}});
}

// A UUID no transaction has: version 4 style, never made by the server (which makes version 7).
std::string absent_id(int n) {
  auto tail = std::to_string(100'000'000'000 + n);
  return "00000000-0000-4000-8000-" + tail.substr(tail.size() - 12);
}

class TransactionLookupE2E : public ts::shared_server_test<TransactionLookupE2E> {
 protected:
  ts::response lookup(ts::http_client& c, const std::string& key, const std::string& body) const {
    return c.post("/v1/transactions/lookup", key, body);
  }

  std::string paid(ts::http_client& c, const std::string& key, std::int64_t from, std::int64_t to,
                   std::int64_t amount) const {
    auto r = c.post("/v1/transfers", key, ts::transfer_body(from, to, amount), ts::unique_key("pay"));
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? str(r.json().as_object().at("transactionId")) : std::string();
  }
};

// Several committed transactions (plain payments, a refunded payment and its refund, a reversed
// payment and its reversal) asked together with unknown ids in between: each found one is the very
// object GET /v1/transactions/{id} answers, in the order asked, and the unknown ones are missing.
TEST_F(TransactionLookupE2E, ShowsEachTransactionAsTheSingleReadDoesInTheOrderAsked) {
  ts::http_client c(port());
  const auto alice = ts::create_principal(c, op());
  const auto a = ts::create_account(c, op(), alice.id);
  const auto shop = ts::create_principal(c, op(), "merchant");
  const auto m = ts::create_account(c, op(), shop.id);
  ts::deposit(c, op(), a, 10'000);

  std::vector<std::string> payments;
  for (int i = 0; i < 5; ++i) payments.push_back(paid(c, alice.key, a, m, 100 + i));
  auto r = c.post("/v1/transfers/" + payments[1] + "/refunds", shop.key, R"({"amount":40})", ts::unique_key("refund"));
  ASSERT_EQ(r.status, 201) << r.body;
  const auto refund = str(r.json().as_object().at("transactionId"));
  r = c.post("/v1/transactions/" + payments[3] + "/reversal", op(), R"({"reason":"booked in error"})",
             ts::unique_key("reversal"));
  ASSERT_EQ(r.status, 201) << r.body;
  const auto reversal = str(r.json().as_object().at("transactionId"));

  const std::vector<std::string> asked = {payments[4], absent_id(1), refund,       payments[0], reversal,
                                          payments[1], payments[3],  absent_id(2), payments[2]};
  r = lookup(c, op(), lookup_body(asked));
  ASSERT_EQ(r.status, 200) << r.body;
  const auto answer = r.json().as_object();
  const auto& shown = answer.at("transactions").as_array();
  std::vector<std::string> expected_found;
  for (const auto& id : asked) {
    if (id != absent_id(1) && id != absent_id(2)) expected_found.push_back(id);
  }
  ASSERT_EQ(shown.size(), expected_found.size()) << r.body;
  for (std::size_t i = 0; i < expected_found.size(); ++i) {
    auto single = c.get("/v1/transactions/" + expected_found[i], op());
    ASSERT_EQ(single.status, 200) << single.body;
    EXPECT_EQ(shown[i], single.json()) << "transaction " << i << " of the answer";
  }
  // The links the single read gathers one query each came along.
  EXPECT_EQ(str(shown[1].as_object().at("transferId")), payments[1]);
  EXPECT_EQ(str(shown[3].as_object().at("reverses")), payments[3]);
  EXPECT_EQ(shown[4].as_object().at("refunds").as_array().size(), 1U);
  EXPECT_EQ(str(shown[5].as_object().at("reversedBy")), reversal);
  const auto& missing = answer.at("missing").as_array();
  ASSERT_EQ(missing.size(), 2U) << r.body;
  EXPECT_EQ(str(missing[0]), absent_id(1));
  EXPECT_EQ(str(missing[1]), absent_id(2));

  // Only unknown ids: nothing found, every id missing, still 200.
  r = lookup(c, op(), lookup_body({absent_id(3)}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.json().as_object().at("transactions").as_array().empty());
  EXPECT_EQ(str(r.json().as_object().at("missing").as_array().at(0)), absent_id(3));
}

// 1,000 ids (ledger.lookup_ids_max by default) are answered; 1,001 are 400 lookup_too_large
// naming the limit.
TEST_F(TransactionLookupE2E, MoreIdsThanTheLimitAreRefused) {
  ts::http_client c(port());
  std::vector<std::string> ids;
  for (int i = 0; i < 1'000; ++i) ids.push_back(absent_id(1'000 + i));
  auto r = lookup(c, op(), lookup_body(ids));
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
  EXPECT_EQ(r.json().as_object().at("missing").as_array().size(), 1'000U);
  ids.push_back(absent_id(5'000));
  r = lookup(c, op(), lookup_body(ids));
  ASSERT_EQ(r.status, 400) << r.body;
  const auto problem = r.json().as_object();
  EXPECT_EQ(str(problem.at("code")), "lookup_too_large");
  EXPECT_NE(str(problem.at("detail")).find("ledger.lookup_ids_max"), std::string::npos) << r.body;
  EXPECT_NE(str(problem.at("detail")).find("1000"), std::string::npos) << r.body;
}

// Bad bodies are 400 invalid_request: an id that is not a UUID or an id named twice names its
// index; a body that is not {"ids": [...]} with one id at least says what is expected.
TEST_F(TransactionLookupE2E, BadInputIsRefusedNamingWhatIsWrong) {
  ts::http_client c(port());
  auto r = lookup(c, op(), lookup_body({absent_id(1), absent_id(2), "not-a-uuid", absent_id(3)}));
  ASSERT_EQ(r.status, 400) << r.body;
  auto problem = r.json().as_object();
  EXPECT_EQ(str(problem.at("code")), "invalid_request");
  EXPECT_EQ(problem.at("index").as_int64(), 2);
  EXPECT_NE(str(problem.at("detail")).find("ids[2]"), std::string::npos) << r.body;

  r = lookup(c, op(), R"({"ids":["00000000-0000-4000-8000-000000000001", 7]})");
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json().as_object().at("index").as_int64(), 1);

  // The same id twice, even in another case, is refused: an answer shows each transaction once.
  auto upper = absent_id(4);
  for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  r = lookup(c, op(), lookup_body({absent_id(4), absent_id(5), upper}));
  ASSERT_EQ(r.status, 400) << r.body;
  problem = r.json().as_object();
  EXPECT_EQ(str(problem.at("code")), "invalid_request");
  EXPECT_EQ(problem.at("index").as_int64(), 2);
  EXPECT_NE(str(problem.at("detail")).find("ids[0]"), std::string::npos) << r.body;

  for (const std::string body : {R"({"ids":[]})", R"({"ids":"x"})", R"({})", R"([])", R"({"ids":[],"more":1})"}) {
    r = lookup(c, op(), body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    EXPECT_EQ(str(r.json().as_object().at("code")), "invalid_request") << body;
  }
}

// A principal that is not an operator is 403 forbidden, even for a transaction it made.
TEST_F(TransactionLookupE2E, OnlyAnOperatorMayLookUp) {
  ts::http_client c(port());
  const auto alice = ts::create_principal(c, op());
  const auto a = ts::create_account(c, op(), alice.id);
  const auto bob = ts::create_principal(c, op());
  const auto b = ts::create_account(c, op(), bob.id);
  ts::deposit(c, op(), a, 100);
  const auto id = paid(c, alice.key, a, b, 10);
  auto r = lookup(c, alice.key, lookup_body({id}));
  ASSERT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(str(r.json().as_object().at("code")), "forbidden");
  r = lookup(c, op(), lookup_body({id}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().as_object().at("transactions").as_array().size(), 1U);
}

}  // namespace
