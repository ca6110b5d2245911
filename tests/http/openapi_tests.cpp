// The OpenAPI document (docs/openapi.json) and its checker (tests/support/openapi_check.hpp), with
// no server: the document is the one compiled into the server, names exactly the routes the server
// routes with their roles and rate-limit classes, lists every problem code the server and the
// README name, and is whole ($refs resolve, schemas use only keywords the checker checks); the
// checker accepts good answers and refuses each kind of bad one.

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "http/openapi.hpp"
#include "ledger/errors.hpp"
#include "tests/support/openapi_check.hpp"
#include "tests/support/support.hpp"

namespace {

namespace json = boost::json;
using test_support::header_map;
using test_support::openapi_spec;

const openapi_spec& spec() { return openapi_spec::get(); }

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::set<std::string> problem_codes() {
  std::set<std::string> codes;
  const auto& code = spec().document().at("components").at("schemas").at("Problem").at("properties").at("code");
  for (const auto& c : code.at("enum").as_array()) codes.emplace(c.as_string());
  return codes;
}

// Whether some error names `where` and says `what`: each rejection test looks for its own rule,
// so that it fails when the body is refused for another reason than the one it tests.
bool says(const std::vector<std::string>& errors, const std::string& where, const std::string& what) {
  return std::any_of(errors.begin(), errors.end(), [&](const std::string& e) {
    return e.find(where + ":") != std::string::npos && e.find(what) != std::string::npos;
  });
}

std::string joined(const std::vector<std::string>& errors) {
  std::string out;
  for (const auto& e : errors) out += "\n  " + e;
  return out;
}

struct route {
  std::string method;
  std::string path;
  std::string role;
  std::string rate_class;
};

// The routes of http/handlers/*.cpp: who may call each (an operator, any principal, or a payment
// provider by its signature) and which rate-limit class it counts against (the money-moving POSTs
// are writes; everything else authenticated by a key is a read; health, readiness, metrics, the
// document and providers' events spend no limit).
const std::vector<route> k_routes = {
    {"GET", "/healthz", "none", "none"},
    {"GET", "/readyz", "none", "none"},
    {"GET", "/metrics", "none", "none"},
    {"GET", "/v1/openapi.json", "none", "none"},
    {"POST", "/v1/principals", "operator", "read"},
    {"POST", "/v1/accounts", "any", "read"},
    {"GET", "/v1/accounts/{id}", "any", "read"},
    {"GET", "/v1/accounts/{id}/entries", "any", "read"},
    {"POST", "/v1/accounts/{id}/hot", "operator", "read"},
    {"POST", "/v1/accounts/{id}/freeze", "operator", "read"},
    {"POST", "/v1/accounts/{id}/unfreeze", "operator", "read"},
    {"POST", "/v1/accounts/{id}/close", "any", "write"},
    {"POST", "/v1/deposits", "operator", "write"},
    {"POST", "/v1/deposits/{id}/refunds", "operator", "write"},
    {"POST", "/v1/deposits/{id}/chargebacks", "operator", "write"},
    {"POST", "/v1/transfers", "any", "write"},
    {"POST", "/v1/transfers/batch", "any", "write"},
    {"POST", "/v1/withdrawals", "any", "write"},
    {"GET", "/v1/withdrawals/{id}", "any", "read"},
    {"POST", "/v1/withdrawals/{id}/confirm", "operator", "write"},
    {"POST", "/v1/withdrawals/{id}/fail", "operator", "write"},
    {"PUT", "/v1/accounts/{id}/fees", "operator", "read"},
    {"POST", "/v1/transfers/{id}/refunds", "any", "write"},
    {"POST", "/v1/providers", "operator", "read"},
    {"GET", "/v1/providers", "operator", "read"},
    {"POST", "/v1/providers/{name}/rotate-secret", "operator", "read"},
    {"POST", "/v1/provider-events", "provider", "none"},
    {"GET", "/v1/transactions/{id}", "any", "read"},
    {"POST", "/v1/transactions/lookup", "operator", "read"},
    {"GET", "/v1/events", "any", "read"},
    {"GET", "/v1/admin/reconciliation", "operator", "read"},
    {"POST", "/v1/admin/reconciliation", "operator", "read"},
    {"GET", "/v1/admin/reconciliation/runs/{id}", "operator", "read"},
    {"POST", "/v1/admin/sweeps", "operator", "read"},
    {"POST", "/v1/admin/settlements", "operator", "read"},
    {"GET", "/v1/admin/reconciliation-exceptions", "operator", "read"},
    {"POST", "/v1/admin/reconciliation-exceptions/{id}/resolve", "operator", "read"},
    {"GET", "/v1/accounts/{id}/balance", "any", "read"},
    {"POST", "/v1/principals/{id}/keys", "any", "write"},
    {"GET", "/v1/principals/{id}/keys", "any", "read"},
    {"DELETE", "/v1/principals/{id}/keys", "operator", "write"},
    {"DELETE", "/v1/principals/{id}/keys/{keyId}", "any", "write"},
    {"GET", "/v1/admin/audit", "operator", "read"},
    // Corrections and currencies (docs/corrections.md).
    {"POST", "/v1/transactions/{id}/reversal", "operator", "write"},
    {"POST", "/v1/adjustments", "operator", "read"},
    {"GET", "/v1/adjustments/{id}", "operator", "read"},
    {"POST", "/v1/adjustments/{id}/approve", "operator", "write"},
    {"POST", "/v1/adjustments/{id}/reject", "operator", "read"},
    {"PUT", "/v1/fx/rates/{base}/{quote}", "operator", "read"},
    {"POST", "/v1/fx/quotes", "any", "read"},
    {"POST", "/v1/exchanges", "any", "write"},
    {"POST", "/v1/holds", "any", "write"},
    {"GET", "/v1/holds/{id}", "any", "read"},
    {"POST", "/v1/holds/{id}/capture", "any", "write"},
    {"POST", "/v1/holds/{id}/void", "any", "write"},
    {"POST", "/v1/webhook-endpoints", "any", "read"},
    {"GET", "/v1/webhook-endpoints", "any", "read"},
    {"GET", "/v1/webhook-endpoints/{id}", "any", "read"},
    {"PATCH", "/v1/webhook-endpoints/{id}", "any", "read"},
    {"DELETE", "/v1/webhook-endpoints/{id}", "any", "read"},
    {"POST", "/v1/webhook-endpoints/{id}/rotate-secret", "any", "read"},
    {"POST", "/v1/webhook-endpoints/{id}/disable", "any", "read"},
    {"POST", "/v1/webhook-endpoints/{id}/enable", "any", "read"},
    {"GET", "/v1/webhook-endpoints/{id}/deliveries", "any", "read"},
    {"POST", "/v1/webhook-endpoints/{id}/deliveries/{deliveryId}/retry", "operator", "read"},
};

const std::string k_request_id = "0123456789abcdef";
const std::string k_transaction_id = "019c3a5e-7f10-7abc-8def-0123456789ab";

// --- The document -----------------------------------------------------------------------------

TEST(openapi_document, compiled_in_is_the_file_in_docs) {
  // What the server serves (api::openapi_document()) is byte for byte docs/openapi.json, so the
  // build embeds the current file.
  const auto on_disk = read_file(std::filesystem::path(test_support::source_dir()) / "docs" / "openapi.json");
  EXPECT_EQ(api::openapi_document(), on_disk);
}

TEST(openapi_document, parses_as_openapi_3_1) {
  // The document is a JSON object declaring OpenAPI 3.1.0, with paths and component schemas.
  const auto& doc = spec().document();
  ASSERT_TRUE(doc.contains("openapi"));
  EXPECT_EQ(doc.at("openapi"), "3.1.0");
  EXPECT_TRUE(doc.at("paths").is_object());
  EXPECT_TRUE(doc.at("components").at("schemas").is_object());
  EXPECT_THROW(openapi_spec("{\"openapi\": "), std::runtime_error);
  EXPECT_THROW(openapi_spec("[]"), std::runtime_error);
}

TEST(openapi_document, has_exactly_the_routes_the_server_routes) {
  // Every route of http/routes.cpp is an operation of the document, and there is no other.
  std::vector<std::pair<std::string, std::string>> expected;
  for (const auto& r : k_routes) expected.emplace_back(r.method, r.path);
  auto actual = spec().operations();
  std::sort(expected.begin(), expected.end());
  std::sort(actual.begin(), actual.end());
  EXPECT_EQ(actual, expected);
}

TEST(openapi_document, every_operation_names_its_role_and_rate_class) {
  // Each operation carries x-wallet-role and x-wallet-rate-class with the router's values; an
  // operation without an API key (open, or a provider's signed event) spends no rate limit and
  // says so to OpenAPI too (security: []).
  for (const auto& r : k_routes) {
    SCOPED_TRACE(r.method + " " + r.path);
    EXPECT_EQ(spec().role(r.method, r.path), r.role);
    EXPECT_EQ(spec().rate_class(r.method, r.path), r.rate_class);
  }
  const std::set<std::string> roles = {"none", "any", "operator", "provider"};
  const std::set<std::string> classes = {"none", "read", "write"};
  for (const auto& [method, path] : spec().operations()) {
    SCOPED_TRACE(method + " " + path);
    const auto role = spec().role(method, path);
    const auto rate = spec().rate_class(method, path);
    ASSERT_TRUE(role.has_value());
    ASSERT_TRUE(rate.has_value());
    EXPECT_TRUE(roles.contains(*role));
    EXPECT_TRUE(classes.contains(*rate));
    const bool keyless = *role == "none" || *role == "provider";
    EXPECT_EQ(keyless, *rate == "none");
    const auto& op = spec().document().at("paths").at(path).at(lower(method)).as_object();
    const auto* security = op.if_contains("security");
    EXPECT_EQ(keyless, security != nullptr && security->as_array().empty());
  }
}

TEST(openapi_document, every_ref_resolves) {
  // Every $ref in the document names something the document has.
  const auto unresolved = spec().unresolved_refs();
  EXPECT_TRUE(unresolved.empty()) << joined(unresolved);
}

TEST(openapi_document, every_schema_keyword_is_one_the_checker_knows) {
  // No schema uses a keyword the checker would skip: what the document says, the tests check.
  const auto unknown = spec().unknown_schema_keywords();
  EXPECT_TRUE(unknown.empty()) << joined(unknown);
}

TEST(openapi_document, every_error_answer_is_a_problem_and_every_answer_has_a_request_id) {
  // Each operation's 4xx and 5xx answers are application/problem+json with the Problem schema;
  // every answer documents X-Request-Id; operations with a key list 401 and 429, operator ones
  // 403, a provider's event 401 (its signature) but no 429 (it spends no limit), and every 429 and
  // 503 requires Retry-After.
  const auto& doc = spec().document();
  auto follow = [&](const json::value& v) -> const json::object& {
    const auto* ref = v.as_object().if_contains("$ref");
    if (ref == nullptr) return v.as_object();
    std::string name(ref->as_string());
    name = name.substr(name.rfind('/') + 1);
    return doc.at("components").at("responses").at(name).as_object();
  };
  auto follow_header = [&](const json::value& v) -> const json::object& {
    const auto* ref = v.as_object().if_contains("$ref");
    if (ref == nullptr) return v.as_object();
    std::string name(ref->as_string());
    name = name.substr(name.rfind('/') + 1);
    return doc.at("components").at("headers").at(name).as_object();
  };
  for (const auto& r : k_routes) {
    SCOPED_TRACE(r.method + " " + r.path);
    const auto& responses = doc.at("paths").at(r.path).at(lower(r.method)).at("responses").as_object();
    for (const auto& [status, value] : responses) {
      SCOPED_TRACE(std::string(status));
      const auto& response = follow(value);
      ASSERT_TRUE(response.contains("headers"));
      EXPECT_TRUE(response.at("headers").as_object().contains("X-Request-Id"));
      if (status.front() == '4' || status.front() == '5') {
        const auto& content = response.at("content").as_object();
        ASSERT_EQ(content.size(), 1u);
        EXPECT_EQ(content.at("application/problem+json").at("schema").at("$ref"), "#/components/schemas/Problem");
      }
      if (status == "429" || status == "503") {
        const auto& retry = follow_header(response.at("headers").at("Retry-After"));
        EXPECT_EQ(retry.at("required"), true);
      }
    }
    for (const char* status : {"400", "413", "431", "500", "503"}) EXPECT_TRUE(responses.contains(status)) << status;
    EXPECT_EQ(responses.contains("401"), r.role != "none");
    // Keyed routes have rate limits; a provider's event spends its address's allowance when the
    // provider must be read; open routes have neither.
    EXPECT_EQ(responses.contains("429"), r.role != "none");
    if (r.role == "operator") {
      EXPECT_TRUE(responses.contains("403"));
    }
  }
}

TEST(openapi_document, problem_codes_include_the_readme_error_table) {
  // Every code in the README's table of error codes is in the Problem code enum, and the enum has
  // no code the table does not name.
  const auto readme = read_file(std::filesystem::path(test_support::source_dir()) / "README.md");
  const auto start = readme.find("| status | codes |");
  ASSERT_NE(start, std::string::npos) << "the README has no error code table";
  std::set<std::string> readme_codes;
  std::istringstream lines(readme.substr(start));
  std::string line;
  std::getline(lines, line);  // the header row
  const std::regex code_in_backticks("`([a-z][a-z_]*)`");
  while (std::getline(lines, line) && line.rfind("|", 0) == 0) {
    for (std::sregex_iterator it(line.begin(), line.end(), code_in_backticks), end; it != end; ++it) {
      readme_codes.insert((*it)[1]);
    }
  }
  // The table names some two dozen codes: an empty set would mean it was not read.
  ASSERT_GE(readme_codes.size(), 20u);
  const auto codes = problem_codes();
  for (const auto& c : readme_codes) EXPECT_TRUE(codes.contains(c)) << c << " is in the README but not the document";
  for (const auto& c : codes) EXPECT_TRUE(readme_codes.contains(c)) << c << " is in the document but not the README";
}

TEST(openapi_document, problem_codes_include_every_ledger_error_code) {
  // Every outcome of ledger::error_code but ok becomes a problem code (http/problem.cpp), so each is
  // in the enum.
  const auto codes = problem_codes();
  const auto last = static_cast<int>(ledger::error_code::internal);
  for (int i = static_cast<int>(ledger::error_code::ok) + 1; i <= last; ++i) {
    const auto name = std::string(ledger::to_string(static_cast<ledger::error_code>(i)));
    EXPECT_TRUE(codes.contains(name)) << name;
  }
}

TEST(openapi_document, problem_codes_include_every_code_the_http_sources_name) {
  // The codes that http/*.cpp gives to http_problem(status, "code", ...) are in the enum, so a new
  // HTTP-level code cannot be added to the server alone.
  const std::regex call(R"re(http_problem\(\s*[0-9]{3}\s*,\s*"([a-z_]+)")re");
  std::set<std::string> named;
  for (const auto& file :
       std::filesystem::directory_iterator(std::filesystem::path(test_support::source_dir()) / "http")) {
    if (file.path().extension() != ".cpp") continue;
    const auto text = read_file(file.path());
    for (std::sregex_iterator it(text.begin(), text.end(), call), end; it != end; ++it) named.insert((*it)[1]);
  }
  // route_not_found, method_not_allowed, payload_too_large, ... at least.
  ASSERT_GE(named.size(), 6u);
  const auto codes = problem_codes();
  for (const auto& c : named) EXPECT_TRUE(codes.contains(c)) << c;
}

// --- The checker's view of the document -----------------------------------------------------

TEST(openapi_check, finds_a_ref_that_does_not_resolve) {
  // A $ref to a schema the document lacks is reported with where it is.
  const openapi_spec broken(R"({"openapi":"3.1.0","paths":{},"components":{"schemas":{
      "A":{"type":"object","properties":{"b":{"$ref":"#/components/schemas/Missing"}}}}}})");
  const auto unresolved = broken.unresolved_refs();
  ASSERT_EQ(unresolved.size(), 1u);
  EXPECT_NE(unresolved[0].find("#/components/schemas/A/properties/b"), std::string::npos) << unresolved[0];
}

TEST(openapi_check, finds_a_schema_keyword_it_does_not_check) {
  // A keyword the validator would skip (here "if") is reported, wherever the schema is nested.
  const openapi_spec unknown(R"({"openapi":"3.1.0","paths":{},"components":{"schemas":{
      "A":{"type":"object","properties":{"b":{"type":"string","if":{}}}}}}})");
  const auto found = unknown.unknown_schema_keywords();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].find("/properties/b: if"), std::string::npos) << found[0];
}

TEST(openapi_check, match_template_routes_as_the_server_does) {
  // A concrete path maps to the template the server would route it to, with the server's way of
  // splitting it; a path or method the server does not route maps to nothing.
  EXPECT_EQ(spec().match_template("GET", "/v1/accounts/42"), "/v1/accounts/{id}");
  EXPECT_EQ(spec().match_template("GET", "/v1/accounts/42/entries?limit=5&after=9"), "/v1/accounts/{id}/entries");
  EXPECT_EQ(spec().match_template("GET", "/v1//accounts/42/"), "/v1/accounts/{id}");
  EXPECT_EQ(spec().match_template("POST", "/v1/accounts/42/freeze"), "/v1/accounts/{id}/freeze");
  EXPECT_EQ(spec().match_template("GET", "/v1/transactions/" + k_transaction_id), "/v1/transactions/{id}");
  EXPECT_EQ(spec().match_template("POST", "/v1/admin/reconciliation"), "/v1/admin/reconciliation");
  EXPECT_EQ(spec().match_template("GET", "/v1/admin/reconciliation/runs/3"), "/v1/admin/reconciliation/runs/{id}");
  EXPECT_EQ(spec().match_template("get", "/healthz"), "/healthz");
  EXPECT_EQ(spec().match_template("GET", "/v1/openapi.json"), "/v1/openapi.json");
  // A withdrawal's or a deposit's id is text: the handler, not the router, refuses a non-UUID.
  EXPECT_EQ(spec().match_template("GET", "/v1/withdrawals/" + k_transaction_id), "/v1/withdrawals/{id}");
  EXPECT_EQ(spec().match_template("GET", "/v1/withdrawals/not-a-uuid"), "/v1/withdrawals/{id}");
  EXPECT_EQ(spec().match_template("POST", "/v1/withdrawals/" + k_transaction_id + "/fail"),
            "/v1/withdrawals/{id}/fail");
  EXPECT_EQ(spec().match_template("POST", "/v1/deposits/" + k_transaction_id + "/chargebacks"),
            "/v1/deposits/{id}/chargebacks");
  EXPECT_EQ(spec().match_template("POST", "/v1/provider-events"), "/v1/provider-events");
  // The router takes only a positive id of digits that fits int64 for an account.
  EXPECT_EQ(spec().match_template("GET", "/v1/accounts/abc"), std::nullopt);
  EXPECT_EQ(spec().match_template("GET", "/v1/accounts/0"), std::nullopt);
  EXPECT_EQ(spec().match_template("GET", "/v1/accounts/99999999999999999999"), std::nullopt);
  EXPECT_EQ(spec().match_template("DELETE", "/v1/accounts/42"), std::nullopt);
  EXPECT_EQ(spec().match_template("GET", "/v1/transfers"), std::nullopt);
  EXPECT_EQ(spec().match_template("GET", "/v1/nothing"), std::nullopt);
  EXPECT_EQ(spec().match_template("GET", "/v1/accounts/42/entries/7"), std::nullopt);
}

// --- The schema validator, one rule at a time ------------------------------------------------

const std::string k_account =
    R"({"id":7,"ownerId":3,"currency":"EUR","kind":"user","status":"active","balance":"49000",)"
    R"("available":"49000","hot":false,"createdAt":"2026-11-30T01:59:00.123456Z"})";
const std::string k_receipt = R"({"transactionId":")" + k_transaction_id +
                              R"(","status":"COMPLETED","fromBalanceAfter":"49000","fee":"0","netAmount":"1000"})";

TEST(openapi_validator, accepts_good_bodies) {
  // Bodies shaped as the server makes them fit their schemas, optional and nullable parts included.
  EXPECT_EQ(spec().validate_schema("Account", k_account), std::vector<std::string>{});
  EXPECT_EQ(spec().validate_schema("Account", R"({"id":1,"ownerId":null,"currency":"EUR","kind":"system",)"
                                              R"("status":"active","balance":"-50000","available":"0","hot":true,)"
                                              R"("mainBalance":"-50000","shards":[{"id":2,"shardNo":0,"balance":"0"}],)"
                                              R"("createdAt":"2026-11-30T01:59:00.000000Z"})"),
            std::vector<std::string>{});
  EXPECT_EQ(spec().validate_schema("TransferReceipt", k_receipt), std::vector<std::string>{});
  EXPECT_EQ(spec().validate_schema("EntriesPage", R"({"entries":[],"next":null})"), std::vector<std::string>{});
  EXPECT_EQ(spec().validate_schema("TransferRequest", R"({"fromAccountId":"7","toAccountId":8,"amount":"1000"})"),
            std::vector<std::string>{});
  EXPECT_EQ(spec().validate_schema("Problem", R"({"type":"about:blank","title":"Not found","status":404,)"
                                              R"("code":"not_found","detail":"account 9 was not found",)"
                                              R"("requestId":")" +
                                                  k_request_id + R"("})"),
            std::vector<std::string>{});
}

TEST(openapi_validator, rejects_a_missing_required_property) {
  // A receipt without its transactionId is refused for that property.
  const auto errors = spec().validate_schema("TransferReceipt", R"({"status":"COMPLETED","fromBalanceAfter":"1"})");
  EXPECT_TRUE(says(errors, "$", "required property \"transactionId\" is missing")) << joined(errors);
}

TEST(openapi_validator, rejects_a_wrong_type) {
  // An account id given as a string where the answer has an integer is refused.
  auto account = json::parse(k_account).as_object();
  account["id"] = "7";
  const auto errors = spec().validate_value(json::parse(R"({"$ref":"#/components/schemas/Account"})"), account);
  EXPECT_TRUE(says(errors, "$.id", "is not of type \"integer\"")) << joined(errors);
}

TEST(openapi_validator, rejects_an_extra_property) {
  // additionalProperties: false refuses a property the schema does not name.
  const auto errors = spec().validate_schema(
      "TransferReceipt", R"({"transactionId":")" + k_transaction_id +
                             R"(","status":"COMPLETED","fromBalanceAfter":"1","fee":"0","netAmount":"1","tip":"0"})");
  EXPECT_TRUE(says(errors, "$.tip", "is not allowed")) << joined(errors);
}

TEST(openapi_validator, rejects_a_value_outside_the_enum) {
  // An account kind the server never makes is refused.
  auto account = json::parse(k_account).as_object();
  account["kind"] = "bank";
  const auto errors = spec().validate_value(json::parse(R"({"$ref":"#/components/schemas/Account"})"), account);
  EXPECT_TRUE(says(errors, "$.kind", "is not one of the enum")) << joined(errors);
}

TEST(openapi_validator, rejects_a_string_that_does_not_match_the_pattern) {
  // Money in answers is a string of digits: "12.50" is refused.
  const auto errors =
      spec().validate_schema("TransferReceipt", R"({"transactionId":")" + k_transaction_id +
                                                    R"(","status":"COMPLETED","fromBalanceAfter":"12.50"})");
  EXPECT_TRUE(says(errors, "$.fromBalanceAfter", "does not match the pattern")) << joined(errors);
}

TEST(openapi_validator, rejects_a_different_constant) {
  // A receipt's status is always COMPLETED.
  const auto errors = spec().validate_schema("TransferReceipt", R"({"transactionId":")" + k_transaction_id +
                                                                    R"(","status":"PENDING","fromBalanceAfter":"1"})");
  EXPECT_TRUE(says(errors, "$.status", "is not the constant \"COMPLETED\"")) << joined(errors);
}

TEST(openapi_validator, takes_null_only_where_the_type_list_allows_it) {
  // "next" may be null (a type list with null); "entries" may not.
  EXPECT_EQ(spec().validate_schema("EntriesPage", R"({"entries":[],"next":null})"), std::vector<std::string>{});
  const auto errors = spec().validate_schema("EntriesPage", R"({"entries":null,"next":null})");
  EXPECT_TRUE(says(errors, "$.entries", "is not of type \"array\"")) << joined(errors);
}

TEST(openapi_validator, checks_each_item_of_an_array) {
  // An entry inside a page is checked against Entry: a fractional amount is refused where it is.
  const auto errors =
      spec().validate_schema("EntriesPage", R"({"entries":[{"id":1,"transactionId":")" + k_transaction_id +
                                                R"(","accountId":7,"currency":"EUR","amount":"1.5","balanceAfter":"2",)"
                                                R"("createdAt":"2026-11-30T01:59:00.123456Z"}],"next":null})");
  EXPECT_TRUE(says(errors, "$.entries[0].amount", "does not match the pattern")) << joined(errors);
}

TEST(openapi_validator, checks_minimum_and_maximum) {
  // A problem's status lies between 400 and 599.
  const std::string before = R"({"type":"about:blank","title":"T","status":)";
  const std::string after = R"(,"code":"internal","detail":"d","requestId":"r"})";
  EXPECT_TRUE(says(spec().validate_schema("Problem", before + "200" + after), "$.status", "below the minimum"));
  EXPECT_TRUE(says(spec().validate_schema("Problem", before + "600" + after), "$.status", "above the maximum"));
}

TEST(openapi_validator, checks_lengths_and_item_counts) {
  // minLength, maxLength and minItems are checked (a principal's name, a hot account's shards).
  EXPECT_TRUE(says(spec().validate_schema("CreatePrincipalRequest", R"({"name":"","role":"user"})"), "$.name",
                   "shorter than minLength"));
  EXPECT_TRUE(says(
      spec().validate_schema("CreatePrincipalRequest", R"({"name":")" + std::string(201, 'a') + R"(","role":"user"})"),
      "$.name", "longer than maxLength"));
  auto account = json::parse(k_account).as_object();
  account["hot"] = true;
  account["mainBalance"] = "0";
  account["shards"] = json::array();
  EXPECT_TRUE(says(spec().validate_value(json::parse(R"({"$ref":"#/components/schemas/Account"})"), account),
                   "$.shards", "fewer than minItems"));
}

TEST(openapi_validator, one_of_takes_exactly_one_branch) {
  // A request amount is a positive JSON integer or a string of digits, never zero, a fraction or
  // letters.
  const auto amount = json::parse(R"({"$ref":"#/components/schemas/AmountInput"})");
  EXPECT_EQ(spec().validate_value(amount, json::value(1000)), std::vector<std::string>{});
  EXPECT_EQ(spec().validate_value(amount, json::value("1000")), std::vector<std::string>{});
  EXPECT_TRUE(says(spec().validate_value(amount, json::value(0)), "$", "fits 0 of the 2 schemas of oneOf"));
  EXPECT_TRUE(says(spec().validate_value(amount, json::value(1.5)), "$", "fits 0 of the 2 schemas of oneOf"));
  EXPECT_TRUE(says(spec().validate_value(amount, json::value("10a")), "$", "fits 0 of the 2 schemas of oneOf"));
  // Both branches fitting is as wrong as none.
  const auto both = json::parse(R"({"oneOf":[{"type":"integer"},{"minimum":0}]})");
  EXPECT_TRUE(says(spec().validate_value(both, json::value(3)), "$", "fits 2 of the 2 schemas of oneOf"));
}

TEST(openapi_validator, a_provider_event_needs_the_fields_of_its_type) {
  // The document says per type which fields an event needs, as the handler does: each type's
  // smallest event fits, and one that lacks a field its type needs (or has it null) does not.
  const std::string head = R"({"provider":"acme","eventId":"e-1",)";
  for (const std::string& fields :
       {std::string(R"("type":"payment.succeeded","paymentId":"p-1","accountId":7,"amount":"500","currency":"EUR"})"),
        std::string(R"("type":"payment.refunded","paymentId":"p-1"})"),
        std::string(R"("type":"chargeback.created","paymentId":"p-1","amount":100})"),
        std::string(R"("type":"payout.paid","withdrawalId":")" + k_transaction_id + R"("})"),
        std::string(R"("type":"payout.failed","withdrawalId":")" + k_transaction_id + R"(","paymentId":null})")}) {
    EXPECT_EQ(spec().validate_schema("ProviderEvent", head + fields), std::vector<std::string>{}) << fields;
  }
  for (const std::string& fields :
       {std::string(R"("type":"payment.succeeded","paymentId":"p-1","amount":"500","currency":"EUR"})"),
        std::string(
            R"("type":"payment.succeeded","paymentId":"p-1","accountId":null,"amount":"500","currency":"EUR"})"),
        std::string(R"("type":"payment.refunded","withdrawalId":")" + k_transaction_id + R"("})"),
        std::string(R"("type":"payout.paid","paymentId":"p-1"})")}) {
    EXPECT_TRUE(says(spec().validate_schema("ProviderEvent", head + fields), "$", "fits 0 of the 3 schemas of oneOf"))
        << fields;
  }
  EXPECT_TRUE(says(spec().validate_schema("ProviderEvent", head + R"("type":"payment.failed","paymentId":"p-1"})"),
                   "$.type", "is not one of the enum"));
}

TEST(openapi_validator, reports_a_ref_that_does_not_resolve) {
  // A schema naming a missing component fails the instance instead of passing it.
  const auto errors = spec().validate_value(json::parse(R"({"$ref":"#/components/schemas/Nope"})"), json::value(1));
  EXPECT_TRUE(says(errors, "$", "does not resolve")) << joined(errors);
}

// --- Whole answers ---------------------------------------------------------------------------

header_map answer_headers(header_map extra = {}) {
  extra.emplace("x-request-id", k_request_id);
  return extra;
}

const std::string k_busy = R"({"type":"about:blank","title":"Server busy","status":503,"code":"server_busy",)"
                           R"("detail":"retry later","requestId":")" +
                           k_request_id + R"("})";

TEST(openapi_answers, accepts_a_good_answer_with_its_headers) {
  // A transfer's 201, replayed, with its rate-limit headers, is what the document says.
  const auto errors = spec().validate("POST", "/v1/transfers", 201, "application/json", k_receipt,
                                      answer_headers({{"Idempotent-Replayed", "true"},
                                                      {"RateLimit", "limit=200, remaining=17, reset=1"},
                                                      {"RateLimit-Policy", "200;w=2"}}));
  EXPECT_EQ(errors, std::vector<std::string>{});
  // Media type parameters do not matter: the metrics page is text/plain; version=0.0.4.
  EXPECT_EQ(spec().validate("GET", "/metrics", 200, "text/plain; version=0.0.4", "# HELP x\n", answer_headers()),
            std::vector<std::string>{});
}

TEST(openapi_answers, rejects_a_status_the_operation_does_not_list) {
  // A 422 from GET /healthz is not in the document.
  const auto errors = spec().validate("GET", "/healthz", 422, "application/problem+json", k_busy);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("does not answer 422"), std::string::npos) << errors[0];
}

TEST(openapi_answers, rejects_an_undocumented_content_type) {
  // An error answered as application/json instead of application/problem+json is refused.
  const auto errors = spec().validate("GET", "/v1/accounts/{id}", 503, "application/json", k_busy);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("is not one of application/problem+json"), std::string::npos) << errors[0];
}

TEST(openapi_answers, rejects_a_body_that_is_not_json) {
  // A JSON media type with a body that does not parse is refused.
  const auto errors = spec().validate("GET", "/healthz", 200, "application/json", "{\"status\":");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("is not JSON"), std::string::npos) << errors[0];
}

TEST(openapi_answers, rejects_a_body_that_does_not_fit) {
  // A readiness answer that says something else than "ready" is refused, with where.
  const auto errors =
      spec().validate("GET", "/readyz", 200, "application/json", R"({"status":"ok","database":"ok","redis":"ok"})");
  EXPECT_TRUE(says(errors, "$.status", "is not the constant \"ready\"")) << joined(errors);
}

TEST(openapi_answers, requires_the_required_headers) {
  // A 503 without Retry-After, a 401 without WWW-Authenticate and any answer without X-Request-Id
  // are refused; with them, accepted.
  EXPECT_EQ(spec().validate("POST", "/v1/deposits", 503, "application/problem+json", k_busy,
                            answer_headers({{"retry-after", "1"}})),
            std::vector<std::string>{});
  EXPECT_TRUE(says(spec().validate("POST", "/v1/deposits", 503, "application/problem+json", k_busy, answer_headers()),
                   "POST /v1/deposits 503", "header Retry-After is required but absent"));
  const std::string unauthorized = R"({"type":"about:blank","title":"Unauthorized","status":401,"code":"unauthorized",)"
                                   R"("detail":"the API key is not known","requestId":")" +
                                   k_request_id + R"("})";
  EXPECT_TRUE(
      says(spec().validate("GET", "/v1/accounts/{id}", 401, "application/problem+json", unauthorized, answer_headers()),
           "GET /v1/accounts/{id} 401", "header WWW-Authenticate is required but absent"));
  EXPECT_EQ(spec().validate("GET", "/v1/accounts/{id}", 401, "application/problem+json", unauthorized,
                            answer_headers({{"WWW-Authenticate", "Bearer error=\"invalid_token\""}})),
            std::vector<std::string>{});
  EXPECT_TRUE(says(spec().validate("GET", "/healthz", 200, "application/json", R"({"status":"ok"})", {}),
                   "GET /healthz 200", "header X-Request-Id is required but absent"));
}

TEST(openapi_answers, checks_a_present_header_against_its_schema) {
  // Idempotent-Replayed is "true" or absent; Retry-After is a positive number of seconds.
  EXPECT_TRUE(says(spec().validate("POST", "/v1/transfers", 201, "application/json", k_receipt,
                                   answer_headers({{"Idempotent-Replayed", "yes"}})),
                   "POST /v1/transfers 201", "header Idempotent-Replayed"));
  EXPECT_TRUE(says(spec().validate("POST", "/v1/deposits", 503, "application/problem+json", k_busy,
                                   answer_headers({{"Retry-After", "0"}})),
                   "POST /v1/deposits 503", "header Retry-After"));
}

TEST(openapi_answers, checks_answers_to_requests_no_operation_matches) {
  // A 405 needs Allow; a 404 route_not_found and a 413 are problems; a 200 is not an unrouted answer.
  const std::string not_allowed = R"({"type":"about:blank","title":"Method not allowed","status":405,)"
                                  R"("code":"method_not_allowed","detail":"use GET","requestId":")" +
                                  k_request_id + R"("})";
  EXPECT_EQ(
      spec().validate_unrouted(405, "application/problem+json", not_allowed, answer_headers({{"Allow", "GET, POST"}})),
      std::vector<std::string>{});
  EXPECT_TRUE(says(spec().validate_unrouted(405, "application/problem+json", not_allowed, answer_headers()),
                   "unrouted 405", "header Allow is required but absent"));
  EXPECT_FALSE(spec().validate_unrouted(200, "application/json", "{}", answer_headers()).empty());
}

TEST(openapi_answers, unknown_operations_are_reported) {
  // Validating against an operation the document lacks says so instead of passing.
  const auto errors = spec().validate("DELETE", "/v1/accounts/{id}", 200, "application/json", "{}");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("no operation DELETE /v1/accounts/{id}"), std::string::npos) << errors[0];
}

}  // namespace
