#pragma once

// Checks the server's answers against the OpenAPI document it serves (docs/openapi.json, compiled
// in as api::openapi_document()): which operations there are, which template a concrete path
// routes to, the role and rate-limit class of an operation, and whether an answer's status, media
// type, headers and body are what the document says.
//
// The JSON Schema validator covers the subset of JSON Schema 2020-12 that the document uses:
// type (also a list of types, for null), const, enum, properties, required, additionalProperties
// (false or a schema), items, minItems/maxItems, minLength/maxLength, pattern (ECMAScript, not
// anchored unless the pattern says so), minimum/maximum, $ref into this document, oneOf, anyOf and
// allOf. Annotations (description, format, examples, ...) are not checked. A keyword it does not
// know is listed by unknown_schema_keywords(), so that it can never be ignored unnoticed.

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace test_support {

// An answer's headers; names are compared without regard to case.
using header_map = std::map<std::string, std::string>;

class openapi_spec {
 public:
  // The document compiled into the server, parsed once.
  static const openapi_spec& get();
  // Any document (the tests of the checker itself use small broken ones). Throws
  // std::runtime_error when the text is not a JSON object.
  explicit openapi_spec(std::string_view document_json);

  const boost::json::object& document() const { return document_; }

  // Every (METHOD, path template) pair, the method in upper case, in document order.
  std::vector<std::pair<std::string, std::string>> operations() const;

  // The template that a concrete path ("/v1/accounts/42?limit=5") routes to ("/v1/accounts/{id}"),
  // when that template has an operation for `method`. The path is split as the server splits it
  // (the query dropped, empty segments skipped); a literal segment must be equal, a parameter
  // segment must fit the parameter's schema (an integer parameter takes only digits). When several
  // templates match, the one with the most literal segments wins.
  std::optional<std::string> match_template(std::string_view method, std::string_view concrete_path) const;

  // The operation's x-wallet-role (none, any, operator) and x-wallet-rate-class (none, read, write).
  std::optional<std::string> role(std::string_view method, std::string_view path_template) const;
  std::optional<std::string> rate_class(std::string_view method, std::string_view path_template) const;

  // Checks one answer of an operation: its status is one the operation lists, its media type
  // (parameters such as charset ignored) is one that response has, and its body parses and fits
  // the schema. Empty when valid; otherwise one sentence per problem, naming where it is
  // ("$.entries[0].amount").
  std::vector<std::string> validate(std::string_view method, std::string_view path_template, int status,
                                    std::string_view content_type, std::string_view body) const;
  // The same, and the answer's headers: every header the response marks required is present, and
  // every documented header that is present fits its schema.
  std::vector<std::string> validate(std::string_view method, std::string_view path_template, int status,
                                    std::string_view content_type, std::string_view body,
                                    const header_map& headers) const;
  // An answer to a request that matched no operation (no route, another method, or refused before
  // routing), against the document's x-wallet-unrouted-responses.
  std::vector<std::string> validate_unrouted(int status, std::string_view content_type, std::string_view body,
                                             const header_map& headers) const;

  // A JSON text against components/schemas/<schema_name>.
  std::vector<std::string> validate_schema(std::string_view schema_name, std::string_view json_text) const;
  // A value against a schema, which may $ref into this document.
  std::vector<std::string> validate_value(const boost::json::value& schema, const boost::json::value& instance) const;

  // Checks of the document itself: every $ref that does not resolve (as "<where>: <ref>"), and
  // every keyword of a schema that the validator neither checks nor knows as an annotation.
  std::vector<std::string> unresolved_refs() const;
  std::vector<std::string> unknown_schema_keywords() const;

 private:
  const boost::json::object* operation(std::string_view method, std::string_view path_template) const;
  std::optional<std::string> extension(std::string_view method, std::string_view path_template,
                                       std::string_view name) const;
  // The value a JSON pointer ("#/components/schemas/Account") names, or nullptr.
  const boost::json::value* resolve(std::string_view ref) const;
  // An object with its $ref followed (for responses, parameters and headers, which have no siblings).
  const boost::json::object* follow(const boost::json::value& v) const;
  std::vector<std::string> check_response(const std::string& label, const boost::json::value& response,
                                          std::string_view content_type, std::string_view body,
                                          const header_map* headers) const;
  std::vector<std::string> check_answer(std::string_view method, std::string_view path_template, int status,
                                        std::string_view content_type, std::string_view body,
                                        const header_map* headers) const;
  void check(const boost::json::value& schema, const boost::json::value& instance, const std::string& where,
             std::vector<std::string>& errors, int depth) const;
  bool matches(const std::string& pattern, const std::string& text) const;

  boost::json::object document_;
  // Compiled patterns, by their source: compiling a std::regex costs more than matching it.
  mutable std::mutex regex_mutex_;
  mutable std::map<std::string, std::regex> regex_cache_;
};

}  // namespace test_support
