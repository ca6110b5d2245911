#pragma once

// Array parameters in PostgreSQL's binary format, for the writer's batch statement.

#include <cstdint>
#include <string>
#include <string_view>

namespace persistence {

// A one-dimensional array in PostgreSQL's binary format, for a parameter sent as binary
// (pqxx::binarystring): PostgreSQL reads each element with its type's receive function instead of
// parsing a text literal, and the writer formats no numbers and escapes no text. The element type
// must be the one the statement casts its parameter to ($1::uuid[] takes uuid), or PostgreSQL
// refuses the parameter. Elements go in as the server holds them: integers as integers, uuids in
// their text form (checked), text as its bytes, jsonb as its JSON text.
class pg_binary_array {
 public:
  enum class element : std::uint32_t {  // the element type's OID
    int4 = 23,
    int8 = 20,
    xid = 28,
    text = 25,
    bpchar = 1042,
    uuid = 2950,
    jsonb = 3802,
  };
  explicit pg_binary_array(element type) : type_(type) {}
  // int4 (must fit), int8, xid (0 to 2^32 - 1); throws std::invalid_argument otherwise.
  void add(std::int64_t value);
  // text, bpchar, jsonb; uuid as 8-4-4-4-12 hex digits (throws std::invalid_argument otherwise).
  void add(std::string_view value);
  void add_null();
  std::size_t size() const { return count_; }
  // The array's bytes; the builder is left empty.
  std::string take();

 private:
  element type_;
  std::string body_;
  std::size_t count_ = 0;
  bool has_null_ = false;
};

}  // namespace persistence
