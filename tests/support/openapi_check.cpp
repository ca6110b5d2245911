#include "tests/support/openapi_check.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <functional>
#include <set>
#include <stdexcept>

#include "http/openapi.hpp"

namespace test_support {

namespace json = boost::json;

namespace {

constexpr std::array<std::string_view, 8> k_methods = {"get",     "put",  "post",  "delete",
                                                       "options", "head", "patch", "trace"};

// Schemas nest deeper than this only through a $ref cycle.
constexpr int k_schema_depth_max = 64;

// The keywords check() validates, and those it reads past as annotations.
const std::set<std::string, std::less<>> k_checked_keywords = {
    "$ref",    "type",     "const",    "enum",      "properties", "required", "additionalProperties",
    "items",   "minItems", "maxItems", "minLength", "maxLength",  "pattern",  "minimum",
    "maximum", "oneOf",    "anyOf",    "allOf"};
const std::set<std::string, std::less<>> k_annotation_keywords = {
    "description", "title", "examples", "default", "format", "deprecated", "readOnly", "writeOnly", "$comment"};

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// The segments of a path as the server's router sees them (http/url.cpp split_path): the first
// character is taken for the leading '/', and empty segments are skipped.
std::vector<std::string_view> segments(std::string_view path) {
  std::vector<std::string_view> parts;
  std::size_t start = 1;
  while (start <= path.size()) {
    auto end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end > start) parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// "application/problem+json; charset=utf-8" -> "application/problem+json".
std::string media_type(std::string_view content_type) {
  auto type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && type.back() == ' ') type.remove_suffix(1);
  while (!type.empty() && type.front() == ' ') type.remove_prefix(1);
  return lower(type);
}

bool is_json_media(std::string_view media) {
  return media == "application/json" || (media.size() > 5 && media.substr(media.size() - 5) == "+json");
}

std::string shown(const json::value& v) {
  auto text = json::serialize(v);
  return text.size() > 80 ? text.substr(0, 77) + "..." : text;
}

bool is_number(const json::value& v) { return v.is_int64() || v.is_uint64() || v.is_double(); }

// Every int64 and uint64 is exact in a long double on this platform (64-bit mantissa), so one
// conversion compares integers of either kind and doubles alike.
long double as_long_double(const json::value& v) {
  if (v.is_int64()) return static_cast<long double>(v.get_int64());
  if (v.is_uint64()) return static_cast<long double>(v.get_uint64());
  return static_cast<long double>(v.get_double());
}

bool has_type(const json::value& v, std::string_view type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_bool();
  if (type == "string") return v.is_string();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "number") return is_number(v);
  // JSON Schema counts 1.0 as an integer too.
  if (type == "integer") {
    return v.is_int64() || v.is_uint64() ||
           (v.is_double() && std::isfinite(v.get_double()) && std::trunc(v.get_double()) == v.get_double());
  }
  return false;
}

// Code points, not bytes: maxLength counts characters.
std::size_t utf8_length(std::string_view s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::optional<std::string> header_value(const header_map& headers, std::string_view name) {
  const auto wanted = lower(name);
  for (const auto& [key, value] : headers) {
    if (lower(key) == wanted) return value;
  }
  return std::nullopt;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

}  // namespace

const openapi_spec& openapi_spec::get() {
  static const openapi_spec spec(api::openapi_document());
  return spec;
}

openapi_spec::openapi_spec(std::string_view document_json) {
  json::error_code ec;
  auto parsed = json::parse(document_json, ec);
  if (ec) throw std::runtime_error("the OpenAPI document is not JSON: " + ec.message());
  if (!parsed.is_object()) throw std::runtime_error("the OpenAPI document is not a JSON object");
  document_ = std::move(parsed.as_object());
}

std::vector<std::pair<std::string, std::string>> openapi_spec::operations() const {
  std::vector<std::pair<std::string, std::string>> out;
  const auto* paths = document_.if_contains("paths");
  if (paths == nullptr || !paths->is_object()) return out;
  for (const auto& [path, item] : paths->get_object()) {
    if (!item.is_object()) continue;
    for (auto method : k_methods) {
      if (item.get_object().contains(method)) out.emplace_back(upper(method), std::string(path));
    }
  }
  return out;
}

const json::object* openapi_spec::operation(std::string_view method, std::string_view path_template) const {
  const auto* paths = document_.if_contains("paths");
  if (paths == nullptr || !paths->is_object()) return nullptr;
  const auto* item = paths->get_object().if_contains(path_template);
  if (item == nullptr || !item->is_object()) return nullptr;
  const auto* op = item->get_object().if_contains(lower(method));
  return op != nullptr && op->is_object() ? &op->get_object() : nullptr;
}

std::optional<std::string> openapi_spec::match_template(std::string_view method, std::string_view concrete_path) const {
  const auto path = concrete_path.substr(0, concrete_path.find('?'));
  const auto concrete = segments(path);
  std::optional<std::string> best;
  std::size_t best_literals = 0;
  for (const auto& [op_method, path_template] : operations()) {
    if (op_method != upper(method)) continue;
    const auto pattern = segments(path_template);
    if (pattern.size() != concrete.size()) continue;
    const auto* op = operation(op_method, path_template);
    bool fits = true;
    std::size_t literals = 0;
    for (std::size_t i = 0; fits && i < pattern.size(); ++i) {
      const auto part = pattern[i];
      if (part.size() < 2 || part.front() != '{' || part.back() != '}') {
        fits = part == concrete[i];
        ++literals;
        continue;
      }
      // A parameter: its schema decides what the segment may be.
      const auto name = part.substr(1, part.size() - 2);
      const json::object* schema = nullptr;
      if (const auto* params = op->if_contains("parameters"); params != nullptr && params->is_array()) {
        for (const auto& p : params->get_array()) {
          const auto* param = follow(p);
          if (param == nullptr) continue;
          const auto* in = param->if_contains("in");
          const auto* pname = param->if_contains("name");
          if (in && pname && *in == "path" && pname->is_string() && pname->get_string() == name) {
            const auto* s = param->if_contains("schema");
            schema = s != nullptr ? follow(*s) : nullptr;
          }
        }
      }
      if (schema == nullptr) {
        fits = false;
        continue;
      }
      json::value segment = json::string(concrete[i]);
      if (const auto* type = schema->if_contains("type"); type != nullptr && *type == "integer") {
        const std::string digits(concrete[i]);
        const bool all_digits = !digits.empty() && digits.size() <= 19 &&
                                std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (!all_digits) {
          fits = false;
          continue;
        }
        // 19 digits may still overflow int64: the server refuses those ids, and so does this.
        try {
          segment = static_cast<std::int64_t>(std::stoll(digits));
        } catch (const std::out_of_range&) {
          fits = false;
          continue;
        }
      }
      fits = validate_value(json::value(*schema), segment).empty();
    }
    if (fits && (!best || literals > best_literals)) {
      best = path_template;
      best_literals = literals;
    }
  }
  return best;
}

std::optional<std::string> openapi_spec::extension(std::string_view method, std::string_view path_template,
                                                   std::string_view name) const {
  const auto* op = operation(method, path_template);
  if (op == nullptr) return std::nullopt;
  const auto* v = op->if_contains(name);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return std::string(v->get_string());
}

std::optional<std::string> openapi_spec::role(std::string_view method, std::string_view path_template) const {
  return extension(method, path_template, "x-wallet-role");
}

std::optional<std::string> openapi_spec::rate_class(std::string_view method, std::string_view path_template) const {
  return extension(method, path_template, "x-wallet-rate-class");
}

const json::value* openapi_spec::resolve(std::string_view ref) const {
  if (ref.empty() || ref.front() != '#') return nullptr;
  const json::value* at = nullptr;
  const json::object* object = &document_;
  std::string_view rest = ref.substr(1);
  if (rest.empty()) return nullptr;  // the whole document is never a schema, response or parameter
  while (!rest.empty()) {
    if (rest.front() != '/') return nullptr;
    rest.remove_prefix(1);
    const auto end = std::min(rest.find('/'), rest.size());
    std::string token(rest.substr(0, end));
    rest.remove_prefix(end);
    // JSON Pointer escapes: ~1 is '/', ~0 is '~' (in that order).
    for (std::size_t p = 0; (p = token.find("~1", p)) != std::string::npos;) token.replace(p, 2, "/");
    for (std::size_t p = 0; (p = token.find("~0", p)) != std::string::npos;) token.replace(p, 2, "~");
    if (at != nullptr && at->is_array()) {
      std::size_t index = 0;
      try {
        index = std::stoul(token);
      } catch (const std::exception&) {
        return nullptr;
      }
      if (index >= at->get_array().size()) return nullptr;
      at = &at->get_array()[index];
    } else {
      if (object == nullptr) return nullptr;
      at = object->if_contains(token);
      if (at == nullptr) return nullptr;
    }
    object = at->is_object() ? &at->get_object() : nullptr;
  }
  return at;
}

const json::object* openapi_spec::follow(const json::value& v) const {
  const json::value* at = &v;
  // A $ref to a $ref is allowed, within a bound.
  for (int hops = 0; hops < k_schema_depth_max && at != nullptr && at->is_object(); ++hops) {
    const auto* ref = at->get_object().if_contains("$ref");
    if (ref == nullptr || !ref->is_string()) return &at->get_object();
    at = resolve(ref->get_string());
  }
  return nullptr;
}

std::vector<std::string> openapi_spec::validate(std::string_view method, std::string_view path_template, int status,
                                                std::string_view content_type, std::string_view body) const {
  return check_answer(method, path_template, status, content_type, body, nullptr);
}

std::vector<std::string> openapi_spec::validate(std::string_view method, std::string_view path_template, int status,
                                                std::string_view content_type, std::string_view body,
                                                const header_map& headers) const {
  return check_answer(method, path_template, status, content_type, body, &headers);
}

std::vector<std::string> openapi_spec::check_answer(std::string_view method, std::string_view path_template, int status,
                                                    std::string_view content_type, std::string_view body,
                                                    const header_map* headers) const {
  const std::string label = upper(method) + " " + std::string(path_template) + " " + std::to_string(status);
  const auto* op = operation(method, path_template);
  if (op == nullptr) return {"the document has no operation " + upper(method) + " " + std::string(path_template)};
  const auto* responses = op->if_contains("responses");
  if (responses == nullptr || !responses->is_object()) return {label + ": the operation lists no responses"};
  const auto& listed = responses->get_object();
  // An exact status first, then its class ("4XX"), then "default".
  const std::string exact = std::to_string(status);
  const std::string range = exact.substr(0, 1) + "XX";
  const json::value* response = listed.if_contains(exact);
  if (response == nullptr) response = listed.if_contains(range);
  if (response == nullptr) response = listed.if_contains("default");
  if (response == nullptr) {
    std::vector<std::string> statuses;
    for (const auto& [key, value] : listed) statuses.emplace_back(key);
    return {label + ": the operation does not answer " + exact + " (it lists " + join(statuses) + ")"};
  }
  return check_response(label, *response, content_type, body, headers);
}

std::vector<std::string> openapi_spec::validate_unrouted(int status, std::string_view content_type,
                                                         std::string_view body, const header_map& headers) const {
  const std::string label = "unrouted " + std::to_string(status);
  const auto* unrouted = document_.if_contains("x-wallet-unrouted-responses");
  if (unrouted == nullptr || !unrouted->is_object()) return {"the document has no x-wallet-unrouted-responses"};
  const auto* response = unrouted->get_object().if_contains(std::to_string(status));
  if (response == nullptr) return {label + ": not a status that a request matching no operation gets"};
  return check_response(label, *response, content_type, body, &headers);
}

std::vector<std::string> openapi_spec::check_response(const std::string& label, const json::value& response_value,
                                                      std::string_view content_type, std::string_view body,
                                                      const header_map* headers) const {
  const auto* response = follow(response_value);
  if (response == nullptr) return {label + ": the response's $ref does not resolve"};
  std::vector<std::string> errors;
  const auto* content = response->if_contains("content");
  if (content == nullptr || !content->is_object()) {
    if (!body.empty()) errors.push_back(label + ": the document gives this answer no body, but it has one");
  } else {
    const auto media = media_type(content_type);
    const json::value* entry = nullptr;
    std::vector<std::string> documented;
    for (const auto& [key, value] : content->get_object()) {
      documented.emplace_back(key);
      if (lower(key) == media) entry = &value;
    }
    if (entry == nullptr) {
      errors.push_back(label + ": content type \"" + std::string(content_type) + "\" is not one of " +
                       join(documented));
    } else if (const auto* schema = entry->is_object() ? entry->get_object().if_contains("schema") : nullptr) {
      json::value instance;
      bool parsed = true;
      if (is_json_media(media)) {
        json::error_code ec;
        instance = json::parse(body, ec);
        if (ec) {
          errors.push_back(label + ": the body is not JSON (" + ec.message() + ")");
          parsed = false;
        }
      } else {
        instance = json::string(body);
      }
      if (parsed) {
        for (auto& e : validate_value(*schema, instance)) errors.push_back(label + ": " + e);
      }
    }
  }
  if (headers == nullptr) return errors;
  const auto* documented_headers = response->if_contains("headers");
  if (documented_headers == nullptr || !documented_headers->is_object()) return errors;
  for (const auto& [name, header_value_or_ref] : documented_headers->get_object()) {
    const auto* header = follow(header_value_or_ref);
    if (header == nullptr) {
      errors.push_back(label + ": header " + std::string(name) + ": its $ref does not resolve");
      continue;
    }
    const auto value = header_value(*headers, name);
    const auto* required = header->if_contains("required");
    if (!value) {
      if (required != nullptr && required->is_bool() && required->get_bool()) {
        errors.push_back(label + ": header " + std::string(name) + " is required but absent");
      }
      continue;
    }
    if (const auto* schema = header->if_contains("schema")) {
      for (auto& e : validate_value(*schema, json::string(*value))) {
        errors.push_back(label + ": header " + std::string(name) + ": " + e);
      }
    }
  }
  return errors;
}

std::vector<std::string> openapi_spec::validate_schema(std::string_view schema_name, std::string_view json_text) const {
  const std::string ref = "#/components/schemas/" + std::string(schema_name);
  if (resolve(ref) == nullptr) return {"the document has no schema " + std::string(schema_name)};
  json::error_code ec;
  auto instance = json::parse(json_text, ec);
  if (ec) return {"the text is not JSON (" + ec.message() + ")"};
  json::object schema;
  schema["$ref"] = ref;
  return validate_value(schema, instance);
}

std::vector<std::string> openapi_spec::validate_value(const json::value& schema, const json::value& instance) const {
  std::vector<std::string> errors;
  check(schema, instance, "$", errors, 0);
  return errors;
}

bool openapi_spec::matches(const std::string& pattern, const std::string& text) const {
  std::lock_guard lock(regex_mutex_);
  auto it = regex_cache_.find(pattern);
  if (it == regex_cache_.end()) it = regex_cache_.emplace(pattern, std::regex(pattern, std::regex::ECMAScript)).first;
  // JSON Schema patterns are not anchored: a match anywhere counts.
  return std::regex_search(text, it->second);
}

void openapi_spec::check(const json::value& schema_value, const json::value& instance, const std::string& where,
                         std::vector<std::string>& errors, int depth) const {
  if (depth > k_schema_depth_max) {
    errors.push_back(where + ": schemas nest too deeply (a $ref cycle?)");
    return;
  }
  if (schema_value.is_bool()) {
    if (!schema_value.get_bool()) errors.push_back(where + ": no value is allowed here");
    return;
  }
  if (!schema_value.is_object()) {
    errors.push_back(where + ": the schema is not an object");
    return;
  }
  const auto& schema = schema_value.get_object();

  if (const auto* ref = schema.if_contains("$ref")) {
    const auto* target = ref->is_string() ? resolve(ref->get_string()) : nullptr;
    if (target == nullptr) {
      errors.push_back(where + ": $ref " + shown(*ref) + " does not resolve");
      return;
    }
    check(*target, instance, where, errors, depth + 1);
  }

  if (const auto* type = schema.if_contains("type")) {
    bool fits = false;
    if (type->is_string()) fits = has_type(instance, type->get_string());
    if (type->is_array()) {
      for (const auto& t : type->get_array()) fits = fits || (t.is_string() && has_type(instance, t.get_string()));
    }
    if (!fits) {
      errors.push_back(where + ": " + shown(instance) + " is not of type " + shown(*type));
      // The other keywords would only repeat the same mistake in other words.
      return;
    }
  }

  if (const auto* c = schema.if_contains("const"); c != nullptr && *c != instance) {
    errors.push_back(where + ": " + shown(instance) + " is not the constant " + shown(*c));
  }
  if (const auto* e = schema.if_contains("enum"); e != nullptr && e->is_array()) {
    const auto& options = e->get_array();
    if (std::find(options.begin(), options.end(), instance) == options.end()) {
      errors.push_back(where + ": " + shown(instance) + " is not one of the enum " + shown(*e));
    }
  }

  if (instance.is_string()) {
    const std::string text(instance.get_string());
    const auto length = utf8_length(text);
    if (const auto* m = schema.if_contains("minLength");
        m != nullptr && is_number(*m) && static_cast<long double>(length) < as_long_double(*m)) {
      errors.push_back(where + ": " + shown(instance) + " is shorter than minLength " + shown(*m));
    }
    if (const auto* m = schema.if_contains("maxLength");
        m != nullptr && is_number(*m) && static_cast<long double>(length) > as_long_double(*m)) {
      errors.push_back(where + ": " + shown(instance) + " is longer than maxLength " + shown(*m));
    }
    if (const auto* p = schema.if_contains("pattern"); p != nullptr && p->is_string()) {
      if (!matches(std::string(p->get_string()), text)) {
        errors.push_back(where + ": " + shown(instance) + " does not match the pattern " + shown(*p));
      }
    }
  }

  if (is_number(instance)) {
    if (const auto* m = schema.if_contains("minimum");
        m != nullptr && is_number(*m) && as_long_double(instance) < as_long_double(*m)) {
      errors.push_back(where + ": " + shown(instance) + " is below the minimum " + shown(*m));
    }
    if (const auto* m = schema.if_contains("maximum");
        m != nullptr && is_number(*m) && as_long_double(instance) > as_long_double(*m)) {
      errors.push_back(where + ": " + shown(instance) + " is above the maximum " + shown(*m));
    }
  }

  if (instance.is_object()) {
    const auto& object = instance.get_object();
    if (const auto* required = schema.if_contains("required"); required != nullptr && required->is_array()) {
      for (const auto& name : required->get_array()) {
        if (name.is_string() && !object.contains(name.get_string())) {
          errors.push_back(where + ": the required property \"" + std::string(name.get_string()) + "\" is missing");
        }
      }
    }
    const auto* properties = schema.if_contains("properties");
    const auto* additional = schema.if_contains("additionalProperties");
    for (const auto& [key, value] : object) {
      const std::string at = where + "." + std::string(key);
      const json::value* property =
          properties != nullptr && properties->is_object() ? properties->get_object().if_contains(key) : nullptr;
      if (property != nullptr) {
        check(*property, value, at, errors, depth + 1);
      } else if (additional != nullptr) {
        if (additional->is_bool() && !additional->get_bool()) {
          errors.push_back(at + ": the property \"" + std::string(key) +
                           "\" is not allowed (additionalProperties: false)");
        } else {
          check(*additional, value, at, errors, depth + 1);
        }
      }
    }
  }

  if (instance.is_array()) {
    const auto& array = instance.get_array();
    if (const auto* m = schema.if_contains("minItems");
        m != nullptr && is_number(*m) && static_cast<long double>(array.size()) < as_long_double(*m)) {
      errors.push_back(where + ": " + std::to_string(array.size()) + " items are fewer than minItems " + shown(*m));
    }
    if (const auto* m = schema.if_contains("maxItems");
        m != nullptr && is_number(*m) && static_cast<long double>(array.size()) > as_long_double(*m)) {
      errors.push_back(where + ": " + std::to_string(array.size()) + " items are more than maxItems " + shown(*m));
    }
    if (const auto* items = schema.if_contains("items")) {
      for (std::size_t i = 0; i < array.size(); ++i) {
        check(*items, array[i], where + "[" + std::to_string(i) + "]", errors, depth + 1);
      }
    }
  }

  if (const auto* all = schema.if_contains("allOf"); all != nullptr && all->is_array()) {
    for (const auto& sub : all->get_array()) check(sub, instance, where, errors, depth + 1);
  }
  // oneOf: exactly one branch fits; anyOf: at least one. A failure reports the first branch's
  // errors, which are usually the telling ones.
  for (std::string_view keyword : {"oneOf", "anyOf"}) {
    const auto* branches = schema.if_contains(keyword);
    if (branches == nullptr || !branches->is_array()) continue;
    std::size_t fitting = 0;
    std::vector<std::string> first_errors;
    for (const auto& sub : branches->get_array()) {
      std::vector<std::string> branch_errors;
      check(sub, instance, where, branch_errors, depth + 1);
      if (branch_errors.empty()) ++fitting;
      if (first_errors.empty()) first_errors = std::move(branch_errors);
    }
    const bool ok = keyword == "oneOf" ? fitting == 1 : fitting >= 1;
    if (!ok) {
      errors.push_back(where + ": " + shown(instance) + " fits " + std::to_string(fitting) + " of the " +
                       std::to_string(branches->get_array().size()) + " schemas of " + std::string(keyword) +
                       (first_errors.empty() ? "" : " (the first says: " + first_errors.front() + ")"));
    }
  }
}

namespace {

// Walks the document for $refs (any object's "$ref") and for schemas (components/schemas and any
// "schema" member of a parameter, header or media type), calling back on each.
struct document_walker {
  std::function<void(const std::string& where, const json::object& schema)> on_schema;
  std::function<void(const std::string& where, const json::value& ref)> on_ref;

  void walk(const json::value& v, const std::string& where) {
    if (v.is_array()) {
      for (std::size_t i = 0; i < v.get_array().size(); ++i) walk(v.get_array()[i], where + "/" + std::to_string(i));
      return;
    }
    if (!v.is_object()) return;
    for (const auto& [key, value] : v.get_object()) {
      const std::string at = where + "/" + std::string(key);
      if (key == "$ref") {
        on_ref(where, value);
      } else if (key == "schema") {
        walk_schema(value, at);
      } else if (key == "schemas" && where == "#/components" && value.is_object()) {
        for (const auto& [name, schema] : value.get_object()) walk_schema(schema, at + "/" + std::string(name));
      } else {
        walk(value, at);
      }
    }
  }

  void walk_schema(const json::value& v, const std::string& where) {
    if (!v.is_object()) return;
    const auto& schema = v.get_object();
    on_schema(where, schema);
    for (const auto& [key, value] : schema) {
      const std::string at = where + "/" + std::string(key);
      if (key == "$ref") {
        on_ref(where, value);
      } else if (key == "properties" && value.is_object()) {
        for (const auto& [name, sub] : value.get_object()) walk_schema(sub, at + "/" + std::string(name));
      } else if (key == "items" || key == "additionalProperties") {
        walk_schema(value, at);
      } else if ((key == "oneOf" || key == "anyOf" || key == "allOf") && value.is_array()) {
        for (std::size_t i = 0; i < value.get_array().size(); ++i)
          walk_schema(value.get_array()[i], at + "/" + std::to_string(i));
      }
    }
  }
};

}  // namespace

std::vector<std::string> openapi_spec::unresolved_refs() const {
  std::vector<std::string> out;
  document_walker walker;
  walker.on_schema = [](const std::string&, const json::object&) {};
  walker.on_ref = [&](const std::string& where, const json::value& ref) {
    if (!ref.is_string() || resolve(ref.get_string()) == nullptr) out.push_back(where + ": " + shown(ref));
  };
  walker.walk(document_, "#");
  return out;
}

std::vector<std::string> openapi_spec::unknown_schema_keywords() const {
  std::vector<std::string> out;
  document_walker walker;
  walker.on_ref = [](const std::string&, const json::value&) {};
  walker.on_schema = [&](const std::string& where, const json::object& schema) {
    for (const auto& [key, value] : schema) {
      const std::string_view name(key);
      if (!k_checked_keywords.contains(name) && !k_annotation_keywords.contains(name)) {
        out.push_back(where + ": " + std::string(key));
      }
    }
  };
  walker.walk(document_, "#");
  return out;
}

}  // namespace test_support
