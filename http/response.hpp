#pragma once

// An answer's bytes on the wire: status line, header fields and framing, written into one buffer
// that one socket write sends with the body. Beast's serializer walks a list of separately allocated
// fields and hands the socket a sequence of a dozen buffers; an answer of this server is a
// handful of short fields and a body of a few hundred bytes, so it is written out directly
// (bench/PROFILE.md, twenty-seventh part). The bytes are those Beast's serializer writes for
// the same message, which tests/http/response_tests.cpp checks.

#include <string>
#include <string_view>

#include "http/exchange.hpp"

namespace api {

// The head of the response to `r` for a request of HTTP version `version` (10 or 11), through
// the blank line that ends it:
//   - the status line, with the status's standard reason phrase;
//   - Server, Content-Type and X-Request-Id, then `r.headers` in order; a field named again
//     (case-insensitively) replaces the earlier one and takes the later place, as Beast's set()
//     does;
//   - the framing, which is the server's alone: Content-Length (none for 1xx, 204 and 304) and
//     the Connection field that `keep_alive` needs for the version; fields of those names in
//     `r.headers` are left out, as is Transfer-Encoding.
// A CR, LF or NUL in a field's name or value is written as a space, so no value can end its field
// early and start another.
std::string serialize_head(const reply& r, std::string_view request_id, unsigned version, bool keep_alive);

// Whether an answer of this status carries its body after the head: all but 1xx, 204 and 304.
bool carries_body(int status);

}  // namespace api
