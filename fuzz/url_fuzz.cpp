// Fuzzes the path and query parser of the routes (http/url.hpp).
//
// The input is "PATH\nQUERY\nNAME": the three are cut at the first two newlines (a missing one
// is empty), and each function also runs on the whole input. Each function is compared with a
// model written straight from its contract in url.hpp, and:
// - split_path's segments are non-empty, hold no '/', point into the path, and are in order;
// - parse_id accepts exactly the ids of 1 to 19 digits that are positive and fit in int64;
// - parse_id returns a positive id that prints back as the digits sent;
// - query_param's value holds no '&' and is what follows "NAME=" in the query.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/url.hpp"
#include "base/assert.hpp"

namespace {

std::string_view cut(std::string_view& rest) {
  const auto nl = rest.find('\n');
  const auto head = rest.substr(0, nl);
  rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
  return head;
}

void check_split_path(std::string_view path) {
  const auto parts = api::split_path(path);
  std::vector<std::string> model;
  std::string segment;
  for (std::size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!segment.empty()) model.push_back(segment);
      segment.clear();
    } else {
      segment += path[i];
    }
  }
  WALLET_ASSERT(parts.size() == model.size(), "split_path finds every non-empty segment after the first character");
  const char* previous_end = path.empty() ? path.data() : path.data() + 1;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto part = parts[i];
    WALLET_ASSERT(part == model[i], "each segment is the text between two slashes");
    WALLET_ASSERT(!part.empty() && part.find('/') == std::string_view::npos, "a segment is non-empty and holds no '/'");
    WALLET_ASSERT(part.data() >= previous_end && part.data() + part.size() <= path.data() + path.size(),
                  "segments point into the path, in order");
    previous_end = part.data() + part.size();
  }
}

void check_parse_id(std::string_view text) {
  const auto id = api::parse_id(text);
  bool digits = !text.empty() && text.size() <= 19;
  for (char c : text) digits = digits && c >= '0' && c <= '9';
  std::string_view significant = text;
  while (significant.size() > 1 && significant.front() == '0') significant.remove_prefix(1);
  // Compared as text, so that the model shares no arithmetic with the code under test.
  constexpr std::string_view int64_max = "9223372036854775807";
  const bool fits =
      significant.size() < int64_max.size() || (significant.size() == int64_max.size() && significant <= int64_max);
  const bool positive = significant != "0";
  WALLET_ASSERT(id.has_value() == (digits && fits && positive), "an id is 1 to 19 digits of a positive int64");
  if (id) WALLET_ASSERT(*id >= 1 && std::to_string(*id) == significant, "an id prints back as the digits sent");
}

void check_query_param(std::string_view query, std::string_view name) {
  const auto value = api::query_param(query, name);
  std::optional<std::string> model;
  std::size_t start = 0;
  for (;;) {
    const auto amp = query.find('&', start);
    const auto pair = query.substr(start, amp == std::string_view::npos ? std::string_view::npos : amp - start);
    const auto eq = pair.find('=');
    if (pair.substr(0, eq) == name) {
      model = eq == std::string_view::npos ? std::string{} : std::string(pair.substr(eq + 1));
      break;
    }
    if (amp == std::string_view::npos) break;
    start = amp + 1;
  }
  WALLET_ASSERT(value == model, "query_param returns the value of the first pair with that name");
  if (value) WALLET_ASSERT(value->find('&') == std::string::npos, "a query value holds no '&'");
}

void check_uuid(std::string_view s) {
  bool model = s.size() == 36;
  for (std::size_t i = 0; model && i < s.size(); ++i) {
    const char c = s[i];
    const bool dash_place = i == 8 || i == 13 || i == 18 || i == 23;
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    model = dash_place ? c == '-' : hex;
  }
  WALLET_ASSERT(api::is_valid_uuid(s) == model, "a transaction id is 8-4-4-4-12 hex digits");
}

void check_idempotency_key(std::string_view key) {
  bool model = !key.empty() && key.size() <= 255;
  for (unsigned char c : key) model = model && c >= 0x21 && c <= 0x7e;
  WALLET_ASSERT(api::is_valid_idempotency_key(key) == model, "a key is 1 to 255 visible ASCII characters");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view rest = input;
  const auto path = cut(rest);
  const auto query = cut(rest);
  const auto name = rest;

  check_split_path(path);
  check_split_path(input);
  for (const auto part : api::split_path(path)) check_parse_id(part);
  check_parse_id(input);
  check_query_param(query, name);
  check_query_param(input, name);
  check_query_param(query, "limit");
  check_uuid(path);
  check_uuid(input);
  check_idempotency_key(path);
  check_idempotency_key(input);
  return 0;
}
