// The route table (http/router.hpp): which route a method and path reach, what they get from the
// path, and when a request is answered 404 or 405; and the server's own table, built as the
// server builds it, keeps the rules the pipeline relies on.

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "actors/ledger_service.hpp"
#include "http/routes.hpp"
#include "tests/support/openapi_check.hpp"

namespace api {
namespace {

handler noop() {
  return [](const exchange_ptr&, const actors::principal_view&, const path_params&) {};
}

router sample() {
  router r;
  r.add({"GET", "/v1/accounts/{id}", access::principal, rate_class::read, param_kind::integer, true, noop()});
  r.add({"GET", "/v1/things", access::principal, rate_class::read, param_kind::integer, false, noop()});
  r.add({"POST", "/v1/things", access::principal, rate_class::write, param_kind::integer, false, noop()});
  r.add({"GET", "/v1/notes/{id}", access::principal, rate_class::read, param_kind::text, false, noop()});
  r.add({"GET", "/healthz", access::open, rate_class::none, param_kind::integer, false, noop()});
  r.add({"DELETE", "/v1/owners/{id}/keys/{keyId}", access::principal, rate_class::read, param_kind::integer, false,
         noop()});
  return r;
}

TEST(router, an_integer_parameter_matches_a_positive_id_only) {
  // A path whose id is not 1 to 19 digits matches no route: 404, not a handler with a bad id.
  const auto r = sample();
  const auto found = r.find("GET", "/v1/accounts/42");
  ASSERT_NE(found.matched, nullptr);
  EXPECT_EQ(found.matched->pattern, "/v1/accounts/{id}");
  EXPECT_EQ(found.params.id, 42);
  for (const char* path :
       {"/v1/accounts/abc", "/v1/accounts/0", "/v1/accounts/-1", "/v1/accounts/99999999999999999999"}) {
    const auto missing = r.find("GET", path);
    EXPECT_EQ(missing.matched, nullptr) << path;
    EXPECT_EQ(missing.allowed, "") << path;
  }
}

TEST(router, a_text_parameter_reaches_the_handler_as_sent) {
  // The handler decides about a text segment (e.g. a transaction id that is not a UUID is a 404 of its own).
  const auto r = sample();
  const auto found = r.find("GET", "/v1/notes/not-a-number");
  ASSERT_NE(found.matched, nullptr);
  EXPECT_EQ(found.params.text, "not-a-number");
  EXPECT_EQ(found.params.id, 0);
  EXPECT_EQ(r.find("GET", "/v1/notes/7").params.id, 7);
}

TEST(router, a_second_parameter_reaches_the_handler_too) {
  // /v1/owners/{id}/keys/{keyId}: both ids, each of the route's kind (an integer route matches
  // only when both are ids).
  const auto r = sample();
  const auto found = r.find("DELETE", "/v1/owners/12/keys/34");
  ASSERT_NE(found.matched, nullptr);
  EXPECT_EQ(found.params.id, 12);
  EXPECT_EQ(found.params.second_id, 34);
  EXPECT_EQ(found.params.second_text, "34");
  EXPECT_EQ(r.find("DELETE", "/v1/owners/12/keys/x").matched, nullptr);
  EXPECT_EQ(r.find("DELETE", "/v1/owners/x/keys/34").matched, nullptr);
}

TEST(router, a_known_path_with_another_method_lists_the_allowed_ones) {
  // 405 with Allow in the order the routes were added; an unknown path has nothing to allow (404).
  const auto r = sample();
  EXPECT_EQ(r.find("DELETE", "/v1/things").allowed, "GET, POST");
  EXPECT_EQ(r.find("POST", "/v1/accounts/7").allowed, "GET");
  EXPECT_EQ(r.find("POST", "/v1/nothing").allowed, "");
  EXPECT_EQ(r.find("POST", "/v1/things").matched->rate, rate_class::write);
}

TEST(router, segments_and_length_must_match_exactly) {
  // No prefix matches: a longer or shorter path is another path.
  const auto r = sample();
  EXPECT_EQ(r.find("GET", "/v1/accounts/7/more").matched, nullptr);
  EXPECT_EQ(r.find("GET", "/v1/accounts").matched, nullptr);
  EXPECT_NE(r.find("GET", "/v1//things/").matched, nullptr);
}

TEST(router, the_server_table_keeps_the_pipeline_rules) {
  // Built as the server builds it: each method and path once, open routes spend no rate limit and
  // name no accounts, and exactly the money-moving routes and the key changes spend the write
  // limit (each revocation is read by every server's check for revoked keys).
  config::settings settings;
  actors::ledger_service service(settings);
  metrics stats;
  routes server_routes(settings, service, nullptr, stats);
  const std::set<std::string> write_limited{"POST /v1/principals/{id}/keys",
                                            "DELETE /v1/principals/{id}/keys",
                                            "DELETE /v1/principals/{id}/keys/{keyId}",
                                            "POST /v1/transfers",
                                            "POST /v1/deposits",
                                            "POST /v1/deposits/{id}/refunds",
                                            "POST /v1/deposits/{id}/chargebacks",
                                            "POST /v1/withdrawals",
                                            "POST /v1/withdrawals/{id}/confirm",
                                            "POST /v1/withdrawals/{id}/fail",
                                            "POST /v1/transfers/{id}/refunds",
                                            "POST /v1/transactions/{id}/reversal",
                                            "POST /v1/adjustments/{id}/approve",
                                            "POST /v1/exchanges",
                                            "POST /v1/holds",
                                            "POST /v1/holds/{id}/capture",
                                            "POST /v1/holds/{id}/void",
                                            "POST /v1/transfers/batch",
                                            "POST /v1/accounts/{id}/close"};
  std::set<std::string> seen;
  for (const auto& r : server_routes.table().table()) {
    EXPECT_TRUE(seen.insert(r.method + " " + r.pattern).second) << r.pattern;
    if (r.who == access::open || r.who == access::provider) {
      EXPECT_EQ(r.rate, rate_class::none) << r.pattern;
      EXPECT_FALSE(r.names_accounts) << r.pattern;
    }
    EXPECT_EQ(r.rate == rate_class::write, write_limited.count(r.method + " " + r.pattern) == 1) << r.pattern;
  }
  EXPECT_TRUE(seen.count("GET /v1/accounts/{id}"));
  EXPECT_TRUE(seen.count("POST /v1/transfers"));
}

TEST(router, the_table_and_the_openapi_document_name_the_same_routes) {
  // Both ways: every route is documented with its role and rate-limit class, and every documented
  // operation is routed.
  config::settings settings;
  actors::ledger_service service(settings);
  metrics stats;
  routes server_routes(settings, service, nullptr, stats);
  const auto& spec = test_support::openapi_spec::get();
  std::set<std::pair<std::string, std::string>> routed;
  for (const auto& r : server_routes.table().table()) {
    routed.emplace(r.method, r.pattern);
    EXPECT_EQ(spec.role(r.method, r.pattern), std::string(to_string(r.who))) << r.method << ' ' << r.pattern;
    EXPECT_EQ(spec.rate_class(r.method, r.pattern), std::string(to_string(r.rate))) << r.method << ' ' << r.pattern;
  }
  for (const auto& [method, path] : spec.operations()) {
    EXPECT_TRUE(routed.count({method, path})) << method << ' ' << path << " is documented but not routed";
  }
  EXPECT_EQ(routed.size(), spec.operations().size());
}

}  // namespace
}  // namespace api
