#include "events/stream_entry.hpp"

#include <array>
#include <charconv>

namespace events {
namespace {

// "<prefix><n>\r\n": an array's or a bulk string's header.
void append_header(std::string& out, char prefix, std::size_t n) {
  std::array<char, 24> digits{};
  const auto end = std::to_chars(digits.data(), digits.data() + digits.size(), n).ptr;
  out += prefix;
  out.append(digits.data(), end);
  out += "\r\n";
}

void append_bulk(std::string& out, std::string_view s) {
  append_header(out, '$', s.size());
  out += s;
  out += "\r\n";
}

}  // namespace

std::string accounts_json(const std::vector<persistence::event_leg>& legs) {
  std::string out = "[";
  for (std::size_t i = 0; i < legs.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(legs[i].account);
  }
  return out + "]";
}

std::string amounts_json(const std::vector<persistence::event_leg>& legs) {
  std::string out = "[";
  for (std::size_t i = 0; i < legs.size(); ++i) {
    if (i > 0) out += ',';
    out += '"' + std::to_string(legs[i].amount) + '"';
  }
  return out + "]";
}

std::string currencies_json(const std::vector<persistence::event_leg>& legs) {
  std::string out = "[";
  for (std::size_t i = 0; i < legs.size(); ++i) {
    if (i > 0) out += ',';
    // A currency is three capital letters (migration 001's CHECK): nothing to escape.
    out += '"' + legs[i].currency + '"';
  }
  return out + "]";
}

stream_fields to_stream_fields(const persistence::event_record& e) {
  return {
      {"eventId", e.transaction_id},           {"type", e.type},
      {"transactionId", e.transaction_id},     {"currency", e.currency},
      {"accounts", accounts_json(e.legs)},     {"amounts", amounts_json(e.legs)},
      {"currencies", currencies_json(e.legs)}, {"createdAt", e.created_at},
      {"cursor", std::to_string(e.cursor)},
  };
}

void append_xadd(std::string& out, std::string_view key, std::string_view maxlen, const stream_fields& fields) {
  append_header(out, '*', 6 + 2 * fields.size());
  append_bulk(out, "XADD");
  append_bulk(out, key);
  append_bulk(out, "MAXLEN");
  append_bulk(out, "~");
  append_bulk(out, maxlen);
  append_bulk(out, "*");
  for (const auto& [name, value] : fields) {
    append_bulk(out, name);
    append_bulk(out, value);
  }
}

}  // namespace events
