#include "http/url.hpp"

#include <cctype>

#include "ledger/money.hpp"

namespace api {

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> parts;
  parts.reserve(6);  // one allocation for every path the API has (it is split on every request)
  std::size_t start = 1;
  while (start <= path.size()) {
    auto end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end > start) parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

std::optional<std::int64_t> parse_id(std::string_view text) {
  auto v = ledger::parse_digits(text);
  if (!v || *v <= 0) return std::nullopt;
  return v;
}

std::optional<std::string> query_param(std::string_view query, std::string_view name) {
  std::size_t start = 0;
  while (start <= query.size()) {
    auto end = query.find('&', start);
    if (end == std::string_view::npos) end = query.size();
    auto pair = query.substr(start, end - start);
    auto eq = pair.find('=');
    if (pair.substr(0, eq) == name) return std::string(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    start = end + 1;
  }
  return std::nullopt;
}

bool is_valid_uuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

bool is_valid_idempotency_key(std::string_view key) {
  if (key.empty() || key.size() > 255) return false;
  for (char c : key) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

std::string canonical_uuid(std::string_view s) {
  std::string out(s);
  for (auto& c : out) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

namespace {

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

bool has_media_type(std::string_view content_type, std::string_view type) {
  return equal_ignoring_case(trim(content_type.substr(0, content_type.find(';'))), type);
}

std::optional<std::string_view> bearer_token(std::string_view authorization) {
  constexpr std::string_view scheme = "bearer";
  if (authorization.size() <= scheme.size() || !equal_ignoring_case(authorization.substr(0, scheme.size()), scheme) ||
      authorization[scheme.size()] != ' ') {
    return std::nullopt;
  }
  auto token = authorization.substr(scheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  if (token.empty()) return std::nullopt;
  return token;
}

}  // namespace api
