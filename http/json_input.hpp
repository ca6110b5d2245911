#pragma once

// Strict JSON input for request bodies: one top-level object of scalar fields, duplicate keys
// refused, numbers kept as the parser saw them (integer, too large, or fractional/exponent),
// so that money never passes through a double.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace api {

struct json_scalar {
  // big_integer: an integer outside int64 (either sign); fraction: a number with '.' or an exponent.
  enum class kind { string, integer, big_integer, fraction, boolean, null };
  kind type = kind::null;
  std::string text;  // string contents, or the number as written
  std::int64_t integer = 0;
  bool boolean = false;
};

struct json_fields {
  std::vector<std::pair<std::string, json_scalar>> fields;
  const json_scalar* find(std::string_view name) const;
};

struct json_parse_result {
  bool ok = false;
  std::string error;  // a sentence saying what to fix
  json_fields object;
};

json_parse_result parse_json_object(std::string_view body);

// The first key that appears twice in one object anywhere in `body`, for bodies read with
// boost::json::parse (arrays of objects: batches, lookups, webhook endpoints), which keeps the
// last of duplicates silently: a gateway or a signer that reads the first would see another
// request than the ledger. nullopt when there is none, or when `body` is not valid JSON (the
// parse that follows says so).
std::optional<std::string> duplicate_key(std::string_view body);

// Reads typed fields out of a parsed object; the first problem wins and is kept as a sentence.
class field_reader {
 public:
  explicit field_reader(const json_fields& object) : object_(object) {}

  // Fails on any field not in `allowed`.
  void allow_only(std::initializer_list<std::string_view> allowed);
  // A positive amount in minor units: a JSON integer up to 2^53-1, or a string of digits;
  // never zero, negative, fractional, in exponent form, or above `max_minor`.
  std::int64_t amount(std::string_view name, std::int64_t max_minor);
  // The same, or nullopt when the field is absent or null.
  std::optional<std::int64_t> optional_amount(std::string_view name, std::int64_t max_minor);
  // A positive integer id (JSON integer, or a string of digits).
  std::int64_t id(std::string_view name);
  // An integer from `min` to `max`; required (absent or null fails).
  std::int64_t integer(std::string_view name, std::int64_t min, std::int64_t max);
  // The same, or nullopt when the field is absent or null.
  std::optional<std::int64_t> optional_int(std::string_view name, std::int64_t min, std::int64_t max);
  std::string string(std::string_view name, std::size_t max_length);
  std::optional<std::string> optional_string(std::string_view name, std::size_t max_length);
  std::optional<bool> optional_bool(std::string_view name);

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

 private:
  void fail(std::string message);
  const json_fields& object_;
  std::string error_;
};

}  // namespace api
