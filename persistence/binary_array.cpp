#include "persistence/binary_array.hpp"

#include <limits>
#include <stdexcept>

#include "base/hex.hpp"

namespace persistence {
namespace {

// Network byte order, as every field of PostgreSQL's binary formats.
void append_be32(std::string& out, std::uint32_t v) {
  const char bytes[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                         static_cast<char>(v)};
  out.append(bytes, 4);
}

void append_be64(std::string& out, std::uint64_t v) {
  append_be32(out, static_cast<std::uint32_t>(v >> 32));
  append_be32(out, static_cast<std::uint32_t>(v));
}

}  // namespace

void pg_binary_array::add(std::int64_t value) {
  switch (type_) {
    case element::int8:
      append_be32(body_, 8);
      append_be64(body_, static_cast<std::uint64_t>(value));
      break;
    case element::int4:
      if (value < std::numeric_limits<std::int32_t>::min() || value > std::numeric_limits<std::int32_t>::max()) {
        throw std::invalid_argument("int4 array element out of range: " + std::to_string(value));
      }
      append_be32(body_, 4);
      append_be32(body_, static_cast<std::uint32_t>(static_cast<std::int32_t>(value)));
      break;
    case element::xid:
      if (value < 0 || value > std::numeric_limits<std::uint32_t>::max()) {
        throw std::invalid_argument("xid array element out of range: " + std::to_string(value));
      }
      append_be32(body_, 4);
      append_be32(body_, static_cast<std::uint32_t>(value));
      break;
    default: throw std::invalid_argument("an integer added to an array of another element type");
  }
  ++count_;
}

void pg_binary_array::add(std::string_view value) {
  switch (type_) {
    case element::text:
    case element::bpchar:
      append_be32(body_, static_cast<std::uint32_t>(value.size()));
      body_.append(value);
      break;
    case element::jsonb:
      // jsonb's binary form is a version byte (1) and the JSON text.
      append_be32(body_, static_cast<std::uint32_t>(value.size() + 1));
      body_ += '\x01';
      body_.append(value);
      break;
    case element::uuid: {
      std::string bytes;
      bytes.reserve(16);
      int high = -1;
      for (std::size_t i = 0; i < value.size(); ++i) {
        if (value[i] == '-' && (i == 8 || i == 13 || i == 18 || i == 23)) continue;
        const int v = base::hex_digit_value(value[i]);
        if (v < 0) throw std::invalid_argument("not a uuid: " + std::string(value));
        if (high < 0) {
          high = v;
        } else {
          bytes += static_cast<char>(high << 4 | v);
          high = -1;
        }
      }
      if (value.size() != 36 || bytes.size() != 16 || high >= 0)
        throw std::invalid_argument("not a uuid: " + std::string(value));
      append_be32(body_, 16);
      body_ += bytes;
      break;
    }
    default: throw std::invalid_argument("a text added to an array of another element type");
  }
  ++count_;
}

void pg_binary_array::add_null() {
  append_be32(body_, 0xFFFFFFFFu);  // length -1
  has_null_ = true;
  ++count_;
}

std::string pg_binary_array::take() {
  // Header: dimensions, whether any element is NULL, the element type; then each dimension's
  // size and lower bound (1). An empty array has no dimensions.
  std::string out;
  out.reserve(20 + body_.size());
  append_be32(out, count_ > 0 ? 1 : 0);
  append_be32(out, has_null_ ? 1 : 0);
  append_be32(out, static_cast<std::uint32_t>(type_));
  if (count_ > 0) {
    append_be32(out, static_cast<std::uint32_t>(count_));
    append_be32(out, 1);
  }
  out += body_;
  body_.clear();
  count_ = 0;
  has_null_ = false;
  return out;
}

}  // namespace persistence
