// Fuzzes the strict JSON reader of request bodies (http/json_input.hpp): parse_json_object and
// the field_reader calls the routes make on its result.
//
// The input is a request body. Boost.JSON's own DOM parser is the reference for what is JSON.
// Properties:
// - what the reader accepts is valid JSON: one object of scalar values, with no key twice,
//   within the stated bounds (64 fields, keys of 64 bytes, strings of 4096 bytes), and every
//   field holds what the DOM parser reads (same string, same integer, same kind of number), and
//   a number is a fraction exactly when it is written with '.' or an exponent;
// - what it refuses is not such an object, or passes a bound, or repeats a key, and the error
//   says which (valid JSON is never called invalid);
// - the field_reader calls of every route keep their promises: a required string is 1 to max
//   bytes, an id is positive, an optional int lies within its bounds, allow_only lets no other
//   field through, and a reader that failed says why.

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "config/settings.hpp"
#include "http/json_input.hpp"
#include "base/assert.hpp"

namespace {

namespace json = boost::json;

constexpr std::size_t fields_max = 64;
constexpr std::size_t key_bytes_max = 64;
constexpr std::size_t string_bytes_max = 4096;

bool is_scalar(const json::value& v) { return !v.is_object() && !v.is_array(); }

// The field as the DOM parser read it must be the field as the strict reader read it.
void check_same_field(const api::json_scalar& mine, const json::value& theirs) {
  using kind = api::json_scalar::kind;
  switch (mine.type) {
    case kind::string:
      WALLET_ASSERT(theirs.is_string() && std::string_view(theirs.get_string()) == mine.text,
                    "a string field holds the string the DOM parser reads");
      WALLET_ASSERT(mine.text.size() <= string_bytes_max, "a string field is at most 4096 bytes");
      break;
    case kind::integer: {
      WALLET_ASSERT(theirs.is_int64() && theirs.get_int64() == mine.integer, "an integer field holds the DOM's int64");
      std::int64_t reread = 0;
      const auto end = mine.text.data() + mine.text.size();
      const auto [ptr, ec] = std::from_chars(mine.text.data(), end, reread);
      WALLET_ASSERT(ec == std::errc() && ptr == end && reread == mine.integer,
                    "an integer field's text is the integer, as written");
      break;
    }
    case kind::big_integer:
      // Beyond uint64 (or below int64) the DOM parser keeps the integer as a double.
      WALLET_ASSERT(theirs.is_uint64() || theirs.is_double(), "a big integer field is a number beyond int64");
      WALLET_ASSERT(mine.text.find_first_of(".eE") == std::string::npos, "a big integer has no fraction or exponent");
      break;
    case kind::fraction:
      WALLET_ASSERT(theirs.is_double(), "a fraction field is a double to the DOM parser");
      WALLET_ASSERT(mine.text.find_first_of(".eE") != std::string::npos, "a fraction has a '.' or an exponent");
      break;
    case kind::boolean:
      WALLET_ASSERT(theirs.is_bool() && theirs.get_bool() == mine.boolean, "a boolean field holds the DOM's boolean");
      break;
    case kind::null: WALLET_ASSERT(theirs.is_null(), "a null field is null to the DOM parser"); break;
  }
}

void check_accepted(const api::json_fields& object, const json::value& dom, bool dom_ok) {
  WALLET_ASSERT(dom_ok && dom.is_object(), "an accepted body is a JSON object");
  const auto& dom_object = dom.get_object();
  WALLET_ASSERT(object.fields.size() <= fields_max, "an accepted body has at most 64 fields");
  WALLET_ASSERT(object.fields.size() == dom_object.size(), "an accepted body has the DOM's fields, each once");
  for (std::size_t i = 0; i < object.fields.size(); ++i) {
    const auto& [name, value] = object.fields[i];
    WALLET_ASSERT(name.size() <= key_bytes_max, "an accepted key is at most 64 bytes");
    for (std::size_t j = 0; j < i; ++j) WALLET_ASSERT(object.fields[j].first != name, "no key is accepted twice");
    const auto* theirs = dom_object.if_contains(name);
    WALLET_ASSERT(theirs != nullptr, "every accepted key is a key of the DOM object");
    WALLET_ASSERT(object.find(name) == &value, "find() returns the field of that name");
    check_same_field(value, *theirs);
  }
}

// The key named by an error of the form `field "KEY"SUFFIX`, if the error has that form.
std::optional<std::string_view> named_key(std::string_view error, std::string_view suffix) {
  constexpr std::string_view prefix = "field \"";
  if (error.size() < prefix.size() + suffix.size() || !error.starts_with(prefix) || !error.ends_with(suffix)) {
    return std::nullopt;
  }
  return error.substr(prefix.size(), error.size() - prefix.size() - suffix.size());
}

void check_refused(const api::json_parse_result& result, const json::value& dom, bool dom_ok) {
  WALLET_ASSERT(!result.error.empty(), "a refused body says why");
  WALLET_ASSERT(result.object.fields.empty(), "a refused body yields no fields");
  if (!dom_ok || !dom.is_object()) return;
  const auto& dom_object = dom.get_object();
  for (const auto& [key, value] : dom_object) {
    if (!is_scalar(value)) return;
  }
  // A flat object is valid JSON: it is refused only for a bound or a repeated key, and the
  // message says which. (The DOM parser keeps one of two equal keys, so it cannot count fields
  // when a key repeats; the field count is not checked here.)
  const std::string_view error = result.error;
  if (error == "the request body has more than 64 fields") return;
  if (error == "a field name is longer than 64 bytes") {
    bool long_key = false;
    for (const auto& [key, value] : dom_object) long_key = long_key || key.size() > key_bytes_max;
    WALLET_ASSERT(long_key, "a body refused for a long field name has one");
    return;
  }
  if (const auto key = named_key(error, "\" is longer than 4096 bytes")) {
    WALLET_ASSERT(dom_object.contains(*key), "a body refused for a long string has that field");
    return;
  }
  if (const auto key = named_key(error, "\" appears more than once")) {
    WALLET_ASSERT(dom_object.contains(*key), "a body refused for a repeated key has that key");
    return;
  }
  if (error.find("must not contain the NUL character") != std::string_view::npos) {
    // PostgreSQL stores no NUL in text or jsonb: such a key or string is refused up front.
    bool has_nul = false;
    for (const auto& [key, value] : dom_object) {
      has_nul = has_nul || std::string_view(key).find('\0') != std::string_view::npos ||
                (value.is_string() && std::string_view(value.get_string()).find('\0') != std::string_view::npos);
    }
    WALLET_ASSERT(has_nul, "a body refused for a NUL character has one");
    return;
  }
  WALLET_ASSERT(false, "a flat JSON object is refused only for a bound, a repeated key or a NUL, and says which");
}

void check_reader(const api::json_fields& object) {
  const config::ledger_settings ledger{};
  {  // POST /v1/principals
    api::field_reader f(object);
    f.allow_only({"name", "role"});
    const auto name = f.string("name", 200);
    const auto role = f.string("role", 16);
    if (f.ok()) {
      WALLET_ASSERT(!name.empty() && name.size() <= 200 && !role.empty() && role.size() <= 16,
                    "accepted strings are 1 to max bytes");
      for (const auto& [key, value] : object.fields) WALLET_ASSERT(key == "name" || key == "role", "allow_only holds");
    } else {
      WALLET_ASSERT(!f.error().empty(), "a failed reader says why");
    }
  }
  {  // POST /v1/accounts
    api::field_reader f(object);
    f.allow_only({"ownerId", "currency", "hot", "shards"});
    const auto owner = f.id("ownerId");
    const auto currency = f.string("currency", 3);
    const auto hot = f.optional_bool("hot");
    const auto shards = f.optional_int("shards", 1, ledger.hot_shards_max);
    if (f.ok()) {
      WALLET_ASSERT(owner > 0, "an accepted id is positive");
      WALLET_ASSERT(!currency.empty() && currency.size() <= 3, "an accepted currency is 1 to 3 bytes");
      WALLET_ASSERT(!shards || (*shards >= 1 && *shards <= ledger.hot_shards_max), "shards lie within bounds");
      WALLET_ASSERT(hot.has_value() ==
                        (object.find("hot") != nullptr && object.find("hot")->type != api::json_scalar::kind::null),
                    "an optional bool is present exactly when sent");
    } else {
      WALLET_ASSERT(!f.error().empty(), "a failed reader says why");
    }
  }
  {  // POST /v1/deposits and /v1/transfers
    api::field_reader f(object);
    f.allow_only({"accountId", "fromAccountId", "toAccountId", "amount", "externalRef"});
    const auto from = f.id("fromAccountId");
    const auto to = f.id("toAccountId");
    const auto amount = f.amount("amount", ledger.amount_minor_max);
    const auto external_ref = f.optional_string("externalRef", 255);
    if (f.ok()) {
      WALLET_ASSERT(from > 0 && to > 0, "accepted ids are positive");
      WALLET_ASSERT(amount >= 1 && amount <= ledger.amount_minor_max, "an accepted amount lies in [1, max]");
      WALLET_ASSERT(!external_ref || (!external_ref->empty() && external_ref->size() <= 255),
                    "an accepted optional string is 1 to max bytes");
    } else {
      WALLET_ASSERT(!f.error().empty(), "a failed reader says why");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const auto result = api::parse_json_object(body);

  json::error_code ec;
  json::parse_options options;
  options.max_depth = 64;
  const json::value dom = json::parse(body, ec, {}, options);
  const bool dom_ok = !ec;

  if (result.ok) {
    check_accepted(result.object, dom, dom_ok);
    check_reader(result.object);
  } else {
    check_refused(result, dom, dom_ok);
  }
  return 0;
}
