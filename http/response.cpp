#include "http/response.hpp"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/status.hpp>

#include <array>
#include <charconv>
#include <cstddef>
#include <utility>
#include <vector>

namespace api {
namespace {

namespace bhttp = boost::beast::http;

bool framing_field(std::string_view name) {
  return boost::beast::iequals(name, "Content-Length") || boost::beast::iequals(name, "Connection") ||
         boost::beast::iequals(name, "Transfer-Encoding");
}

void append_clean(std::string& out, std::string_view text) {
  const std::size_t at = out.size();
  out += text;
  for (std::size_t i = at; i < out.size(); ++i) {
    if (out[i] == '\r' || out[i] == '\n' || out[i] == '\0') out[i] = ' ';
  }
}

void append_field(std::string& out, std::string_view name, std::string_view value) {
  append_clean(out, name);
  out += ": ";
  append_clean(out, value);
  out += "\r\n";
}

void append_number(std::string& out, std::uint64_t n) {
  std::array<char, 24> digits{};
  const auto end = std::to_chars(digits.data(), digits.data() + digits.size(), n).ptr;
  out.append(digits.data(), end);
}

}  // namespace

// 1xx, 204 and 304 answers carry neither a body nor a Content-Length (RFC 9110, 8.6 and 15).
bool carries_body(int status) { return !((status >= 100 && status < 200) || status == 204 || status == 304); }

std::string serialize_head(const reply& r, std::string_view request_id, unsigned version, bool keep_alive) {
  // The fields in the order they go out, a later field of the same name replacing an earlier one.
  std::vector<std::pair<std::string_view, std::string_view>> fields;
  fields.reserve(3 + r.headers.size());
  const auto set = [&fields](std::string_view name, std::string_view value) {
    std::erase_if(fields, [name](const auto& f) { return boost::beast::iequals(f.first, name); });
    fields.emplace_back(name, value);
  };
  set("Server", "wallet-server");
  set("Content-Type", r.content_type);
  set("X-Request-Id", request_id);
  for (const auto& [name, value] : r.headers) {
    if (!framing_field(name)) set(name, value);
  }

  const bool body = carries_body(r.status);
  std::size_t size = 64;
  for (const auto& [name, value] : fields) size += name.size() + value.size() + 4;
  std::string out;
  out.reserve(size);

  out += "HTTP/";
  append_number(out, version / 10);
  out += '.';
  append_number(out, version % 10);
  out += ' ';
  append_number(out, static_cast<std::uint64_t>(r.status));
  out += ' ';
  const auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(r.status));
  out.append(reason.data(), reason.size());
  out += "\r\n";
  for (const auto& [name, value] : fields) append_field(out, name, value);
  // HTTP/1.1 keeps a connection open unless told otherwise, HTTP/1.0 closes it unless told.
  if (version >= 11 && !keep_alive) out += "Connection: close\r\n";
  if (version < 11 && keep_alive) out += "Connection: keep-alive\r\n";
  if (body) {
    out += "Content-Length: ";
    append_number(out, r.body.size());
    out += "\r\n";
  }
  out += "\r\n";
  return out;
}

}  // namespace api
