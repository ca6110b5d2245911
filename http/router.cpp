#include "http/router.hpp"

#include "base/assert.hpp"
#include "http/url.hpp"

namespace api {
namespace {

bool is_param(std::string_view segment) {
  return segment.size() >= 2 && segment.front() == '{' && segment.back() == '}';
}

// Whether `parts` match the template's segments; fills `params` from the `{...}` segment.
bool matches(const route& r, const std::vector<std::string>& wanted, const std::vector<std::string_view>& parts,
             path_params& params) {
  if (wanted.size() != parts.size()) return false;
  path_params found;
  int seen = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (!is_param(wanted[i])) {
      if (wanted[i] != parts[i]) return false;
      continue;
    }
    std::int64_t id = 0;
    if (r.param == param_kind::integer) {
      const auto parsed = parse_id(parts[i]);
      if (!parsed) return false;
      id = *parsed;
    } else {
      id = parse_id(parts[i]).value_or(0);
    }
    (seen == 0 ? found.text : found.second_text) = std::string(parts[i]);
    (seen == 0 ? found.id : found.second_id) = id;
    ++seen;
  }
  params = std::move(found);
  return true;
}

}  // namespace

std::string_view to_string(access a) {
  switch (a) {
    case access::open: return "none";
    case access::principal: return "any";
    case access::operator_: return "operator";
    case access::provider: return "provider";
  }
  return "unknown";
}

std::string_view to_string(rate_class c) {
  switch (c) {
    case rate_class::none: return "none";
    case rate_class::read: return "read";
    case rate_class::write: return "write";
  }
  return "unknown";
}

void router::add(route r) {
  WALLET_ASSERT(r.run, "a route needs a handler");
  WALLET_ASSERT((r.who != access::open && r.who != access::provider) || r.rate == rate_class::none,
                "a route without an API key has no principal to rate-limit");
  for (const auto& existing : routes_) {
    WALLET_ASSERT(existing.method != r.method || existing.pattern != r.pattern, "a route is added once");
  }
  std::vector<std::string> segments;
  int params = 0;
  for (auto segment : split_path(r.pattern)) {
    segments.emplace_back(segment);
    if (is_param(segment)) ++params;
  }
  WALLET_ASSERT(params <= 2, "a route has two path parameters at most");
  segments_.push_back(std::move(segments));
  routes_.push_back(std::move(r));
}

router::found router::find(std::string_view method, std::string_view path) const {
  const auto parts = split_path(path);
  found out;
  for (std::size_t i = 0; i < routes_.size(); ++i) {
    const auto& r = routes_[i];
    path_params params;
    if (!matches(r, segments_[i], parts, params)) continue;
    if (r.method == method) {
      out.matched = &r;
      out.params = std::move(params);
      out.allowed.clear();
      return out;
    }
    if (!out.allowed.empty()) out.allowed += ", ";
    out.allowed += r.method;
  }
  return out;
}

}  // namespace api
