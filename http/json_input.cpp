#include "http/json_input.hpp"

#include <algorithm>

#include <boost/json/basic_parser_impl.hpp>

#include "ledger/money.hpp"

namespace api {
namespace {

// Handler for boost::json::basic_parser: builds a flat object, refusing nesting and duplicates.
struct flat_object_handler {
  static constexpr std::size_t max_array_size = 0;
  static constexpr std::size_t max_object_size = 64;
  static constexpr std::size_t max_string_size = 4096;
  static constexpr std::size_t max_key_size = 64;

  json_fields object;
  std::string error;
  std::string key;
  std::string part;
  int depth = 0;

  bool refuse(boost::json::error_code& ec, std::string message) {
    error = std::move(message);
    ec = boost::json::error::syntax;
    return false;
  }

  bool add(boost::json::error_code& ec, json_scalar value) {
    if (depth != 1) return refuse(ec, "the request body must be a JSON object");
    for (const auto& [name, existing] : object.fields) {
      if (name == key) return refuse(ec, "field \"" + key + "\" appears more than once");
    }
    object.fields.emplace_back(key, std::move(value));
    return true;
  }

  bool on_document_begin(boost::json::error_code&) { return true; }
  bool on_document_end(boost::json::error_code&) { return true; }
  bool on_array_begin(boost::json::error_code& ec) {
    return refuse(ec, depth == 0 ? "the request body must be a JSON object"
                                 : "field \"" + key + "\" must be a scalar, not an array");
  }
  bool on_array_end(std::size_t, boost::json::error_code&) { return true; }
  bool on_object_begin(boost::json::error_code& ec) {
    if (depth > 0) return refuse(ec, "field \"" + key + "\" must be a scalar, not an object");
    ++depth;
    return true;
  }
  bool on_object_end(std::size_t, boost::json::error_code&) {
    --depth;
    return true;
  }
  bool on_string_part(boost::json::string_view s, std::size_t, boost::json::error_code&) {
    part.append(s.data(), s.size());
    return true;
  }
  bool on_string(boost::json::string_view s, std::size_t, boost::json::error_code& ec) {
    part.append(s.data(), s.size());
    // PostgreSQL stores no NUL character in text or jsonb: refused here, with a reason, rather
    // than by the database in the middle of a batch.
    if (part.find('\0') != std::string::npos) {
      return refuse(ec, "a string must not contain the NUL character (\\u0000)");
    }
    json_scalar v;
    v.type = json_scalar::kind::string;
    v.text = std::move(part);
    part.clear();
    return add(ec, std::move(v));
  }
  bool on_key_part(boost::json::string_view s, std::size_t, boost::json::error_code&) {
    part.append(s.data(), s.size());
    return true;
  }
  bool on_key(boost::json::string_view s, std::size_t, boost::json::error_code& ec) {
    part.append(s.data(), s.size());
    if (part.find('\0') != std::string::npos) {
      return refuse(ec, "a field name must not contain the NUL character (\\u0000)");
    }
    key = std::move(part);
    part.clear();
    return true;
  }
  bool on_number_part(boost::json::string_view s, boost::json::error_code&) {
    part.append(s.data(), s.size());
    return true;
  }
  bool on_int64(std::int64_t i, boost::json::string_view s, boost::json::error_code& ec) {
    json_scalar v;
    v.type = json_scalar::kind::integer;
    v.integer = i;
    v.text = part + std::string(s);
    part.clear();
    return add(ec, std::move(v));
  }
  bool on_uint64(std::uint64_t, boost::json::string_view s, boost::json::error_code& ec) {
    json_scalar v;
    v.type = json_scalar::kind::big_integer;
    v.text = part + std::string(s);
    part.clear();
    return add(ec, std::move(v));
  }
  bool on_double(double, boost::json::string_view s, boost::json::error_code& ec) {
    json_scalar v;
    v.text = part + std::string(s);
    part.clear();
    // "1e3" and "10.0" are doubles to the parser; an integer written with an exponent or a
    // fraction is refused later, by the field that reads it, with a precise message. So is an
    // integer beyond the uint64 range or below the int64 one: the parser gives it as a double too,
    // but it is an integer too large, not a fraction.
    v.type =
        v.text.find_first_of(".eE") == std::string::npos ? json_scalar::kind::big_integer : json_scalar::kind::fraction;
    return add(ec, std::move(v));
  }
  bool on_bool(bool b, boost::json::error_code& ec) {
    json_scalar v;
    v.type = json_scalar::kind::boolean;
    v.boolean = b;
    return add(ec, std::move(v));
  }
  bool on_null(boost::json::error_code& ec) { return add(ec, json_scalar{}); }
  bool on_comment_part(boost::json::string_view, boost::json::error_code&) { return true; }
  bool on_comment(boost::json::string_view, boost::json::error_code&) { return true; }
};

std::string quoted(std::string_view name) { return "\"" + std::string(name) + "\""; }

}  // namespace

const json_scalar* json_fields::find(std::string_view name) const {
  for (const auto& [key, value] : fields) {
    if (key == name) return &value;
  }
  return nullptr;
}

namespace {

// Walks a document keeping, for each object open, the keys seen in it; stops at the first repeat.
struct duplicate_key_handler {
  static constexpr std::size_t max_array_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_object_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_string_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_key_size = static_cast<std::size_t>(-1);

  std::vector<std::vector<std::string>> open;  // the keys of each open object, innermost last
  std::string part;
  std::optional<std::string> repeated;

  bool on_document_begin(boost::json::error_code&) { return true; }
  bool on_document_end(boost::json::error_code&) { return true; }
  bool on_array_begin(boost::json::error_code&) { return true; }
  bool on_array_end(std::size_t, boost::json::error_code&) { return true; }
  bool on_object_begin(boost::json::error_code&) {
    open.emplace_back();
    return true;
  }
  bool on_object_end(std::size_t, boost::json::error_code&) {
    open.pop_back();
    return true;
  }
  bool on_key_part(std::string_view s, std::size_t, boost::json::error_code&) {
    part.append(s);
    return true;
  }
  bool on_key(std::string_view s, std::size_t, boost::json::error_code& ec) {
    part.append(s);
    auto& keys = open.back();
    if (std::find(keys.begin(), keys.end(), part) != keys.end()) {
      repeated = std::move(part);
      ec = boost::json::error::syntax;
      return false;
    }
    keys.push_back(std::move(part));
    part.clear();
    return true;
  }
  bool on_string_part(std::string_view, std::size_t, boost::json::error_code&) { return true; }
  bool on_string(std::string_view, std::size_t, boost::json::error_code&) { return true; }
  bool on_number_part(std::string_view, boost::json::error_code&) { return true; }
  bool on_int64(std::int64_t, std::string_view, boost::json::error_code&) { return true; }
  bool on_uint64(std::uint64_t, std::string_view, boost::json::error_code&) { return true; }
  bool on_double(double, std::string_view, boost::json::error_code&) { return true; }
  bool on_bool(bool, boost::json::error_code&) { return true; }
  bool on_null(boost::json::error_code&) { return true; }
  bool on_comment_part(std::string_view, boost::json::error_code&) { return true; }
  bool on_comment(std::string_view, boost::json::error_code&) { return true; }
};

}  // namespace

std::optional<std::string> duplicate_key(std::string_view body) {
  boost::json::basic_parser<duplicate_key_handler> parser(boost::json::parse_options{});
  boost::json::error_code ec;
  parser.write_some(false, body.data(), body.size(), ec);
  return std::move(parser.handler().repeated);
}

json_parse_result parse_json_object(std::string_view body) {
  json_parse_result result;
  boost::json::parse_options options;
  options.max_depth = 2;
  boost::json::basic_parser<flat_object_handler> parser(options);
  boost::json::error_code ec;
  const auto consumed = parser.write_some(false, body.data(), body.size(), ec);
  if (ec || consumed != body.size()) {
    const auto& handler = parser.handler();
    // The parser stops at a bound of the handler with an error of its own: the body is valid
    // JSON then, and the client is told which bound it passed.
    if (!handler.error.empty()) {
      result.error = handler.error;
    } else if (ec == boost::json::error::object_too_large) {
      result.error =
          "the request body has more than " + std::to_string(flat_object_handler::max_object_size) + " fields";
    } else if (ec == boost::json::error::key_too_large) {
      result.error = "a field name is longer than " + std::to_string(flat_object_handler::max_key_size) + " bytes";
    } else if (ec == boost::json::error::string_too_large) {
      result.error = "field " + quoted(handler.key) + " is longer than " +
                     std::to_string(flat_object_handler::max_string_size) + " bytes";
    } else {
      result.error = "the request body is not valid JSON";
    }
    return result;
  }
  if (parser.handler().depth != 0) {
    result.error = "the request body must be a JSON object";
    return result;
  }
  result.ok = true;
  result.object = std::move(parser.handler().object);
  return result;
}

void field_reader::fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
}

void field_reader::allow_only(std::initializer_list<std::string_view> allowed) {
  for (const auto& [name, value] : object_.fields) {
    bool known = false;
    for (auto a : allowed) known = known || a == name;
    if (!known) {
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      fail("unknown field " + quoted(name) + "; allowed fields: " + list);
      return;
    }
  }
}

std::int64_t field_reader::amount(std::string_view name, std::int64_t max_minor) {
  const json_scalar* v = object_.find(name);
  if (v == nullptr) {
    fail("field " + quoted(name) + " is required: a positive integer number of minor units");
    return 0;
  }
  std::int64_t value = 0;
  switch (v->type) {
    case json_scalar::kind::integer:
      if (v->integer > ledger::json_safe_integer_max) {
        fail("field " + quoted(name) + " is larger than 2^53-1 as a JSON number; send it as a string of digits");
        return 0;
      }
      value = v->integer;
      break;
    case json_scalar::kind::big_integer:
      if (v->text.front() == '-') {
        fail("field " + quoted(name) + ": amount must be a positive integer number of minor units");
        return 0;
      }
      fail("field " + quoted(name) + " is larger than 2^53-1 as a JSON number; send it as a string of digits");
      return 0;
    case json_scalar::kind::fraction:
      fail("field " + quoted(name) + " must be an integer number of minor units, without fraction or exponent (got " +
           v->text + ")");
      return 0;
    case json_scalar::kind::string: {
      auto parsed = ledger::parse_digits(v->text);
      if (!parsed) {
        fail("field " + quoted(name) + " must be a string of digits (0-9) when given as a string");
        return 0;
      }
      value = *parsed;
      break;
    }
    default: fail("field " + quoted(name) + " must be an integer or a string of digits"); return 0;
  }
  auto check = ledger::check_request_amount(value, max_minor);
  if (!check.ok) {
    fail("field " + quoted(name) + ": " + check.message);
    return 0;
  }
  return value;
}

std::int64_t field_reader::id(std::string_view name) {
  const json_scalar* v = object_.find(name);
  if (v == nullptr) {
    fail("field " + quoted(name) + " is required: a positive integer id");
    return 0;
  }
  std::optional<std::int64_t> value;
  if (v->type == json_scalar::kind::integer) value = v->integer;
  if (v->type == json_scalar::kind::string) value = ledger::parse_digits(v->text);
  if (!value || *value <= 0) {
    fail("field " + quoted(name) + " must be a positive integer id");
    return 0;
  }
  return *value;
}

std::int64_t field_reader::integer(std::string_view name, std::int64_t min, std::int64_t max) {
  const json_scalar* v = object_.find(name);
  if (v == nullptr || v->type == json_scalar::kind::null) {
    fail("field " + quoted(name) + " is required: an integer from " + std::to_string(min) + " to " +
         std::to_string(max));
    return 0;
  }
  return optional_int(name, min, max).value_or(0);
}

std::optional<std::int64_t> field_reader::optional_int(std::string_view name, std::int64_t min, std::int64_t max) {
  const json_scalar* v = object_.find(name);
  if (v == nullptr || v->type == json_scalar::kind::null) return std::nullopt;
  if (v->type != json_scalar::kind::integer || v->integer < min || v->integer > max) {
    fail("field " + quoted(name) + " must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
    return std::nullopt;
  }
  return v->integer;
}

std::string field_reader::string(std::string_view name, std::size_t max_length) {
  const json_scalar* v = object_.find(name);
  if (v == nullptr) {
    fail("field " + quoted(name) + " is required");
    return {};
  }
  if (v->type != json_scalar::kind::string) {
    fail("field " + quoted(name) + " must be a string");
    return {};
  }
  if (v->text.empty() || v->text.size() > max_length) {
    fail("field " + quoted(name) + " must be 1 to " + std::to_string(max_length) + " characters long");
    return {};
  }
  return v->text;
}

std::optional<std::int64_t> field_reader::optional_amount(std::string_view name, std::int64_t max_minor) {
  const json_scalar* v = object_.find(name);
  if (v == nullptr || v->type == json_scalar::kind::null) return std::nullopt;
  return amount(name, max_minor);
}

std::optional<std::string> field_reader::optional_string(std::string_view name, std::size_t max_length) {
  const json_scalar* v = object_.find(name);
  if (v == nullptr || v->type == json_scalar::kind::null) return std::nullopt;
  return string(name, max_length);
}

std::optional<bool> field_reader::optional_bool(std::string_view name) {
  const json_scalar* v = object_.find(name);
  if (v == nullptr || v->type == json_scalar::kind::null) return std::nullopt;
  if (v->type != json_scalar::kind::boolean) {
    fail("field " + quoted(name) + " must be true or false");
    return std::nullopt;
  }
  return v->boolean;
}

}  // namespace api
