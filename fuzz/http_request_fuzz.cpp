// Fuzzes the HTTP request path up to the handler: the bytes a client sends on one connection go
// through Beast's request parser with the server's limits and read buffer (apply_limits and
// read_buffer_bytes_max, which http/server.cpp uses too), then through fill_exchange (the
// server's own code, http/request.hpp) into the exchange the routes see, then through the path,
// query and JSON parsers the routes call first.
//
// The input is what the client sends on the connection; several requests may follow each other
// (keep-alive, pipelining), and the server reads them one after the other, as here, until an
// error or a request that closes the connection. The bytes are read three times: at once (as
// many as the read buffer holds), as the server reads them (4096 bytes, then what Beast asks
// for), and in small pieces: where the
// network cuts the bytes must not change what the server sees or answers (with one exception of
// Beast's, for headers longer than the limit: see check_same_reading).
//
// Properties of every request read:
// - the body is within body_bytes_max, and is exactly Content-Length bytes when that was sent;
//   the header is at most header_bytes_max plus the read buffer (Beast's bound, see
//   check_same_reading), and a trailer at most the read buffer (read_buffer_bytes_max);
// - the exchange holds the request's method and target, the target split at its first '?',
//   and the first Authorization, Idempotency-Key and Content-Type headers;
// - the request id is 1 to 64 visible ASCII characters (it is echoed in a header, in every
//   problem+json body and in every log line): the client's X-Request-Id when that is one, else a
//   new one;
// - the path's segments, an account id in the path and the paging query parameters parse within
//   their bounds, and a JSON body gives at most 64 fields.

#include <boost/asio/buffer.hpp>
#include <boost/asio/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/settings.hpp"
#include "http/json_input.hpp"
#include "http/request.hpp"
#include "http/url.hpp"
#include "base/assert.hpp"
#include "ledger/money.hpp"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

// A connection's bytes as a synchronous stream that hands them out `chunk` bytes at a time,
// then reports end of file (the client closed its side).
class byte_stream {
 public:
  byte_stream(std::string_view bytes, std::size_t chunk) : rest_(bytes), chunk_(chunk) {}

  template <class MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers, boost::system::error_code& ec) {
    if (rest_.empty()) {
      ec = asio::error::eof;
      return 0;
    }
    ec = {};
    const auto n = asio::buffer_copy(buffers, asio::buffer(rest_.data(), std::min(chunk_, rest_.size())));
    rest_.remove_prefix(n);
    return n;
  }

  template <class MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers) {
    boost::system::error_code ec;
    const auto n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

 private:
  std::string_view rest_;
  std::size_t chunk_;
};

bool is_visible_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x21 && c <= 0x7e; });
}

std::string first_header(const bhttp::request<bhttp::string_body>& req, std::string_view name) {
  const auto it = req.find(name);
  return it == req.end() ? std::string{} : std::string(it->value());
}

// Checks one parsed request and its exchange; returns what the routes would see, for comparing
// two readings of the same bytes.
std::string check_request(api::request_parser& parser, std::size_t header_bytes_read,
                          const config::http_settings& limits) {
  auto& req = parser.get();
  const std::string body_sent = req.body();
  WALLET_ASSERT(body_sent.size() <= static_cast<std::size_t>(limits.body_bytes_max), "a body is within the limit");
  if (const auto length = parser.content_length()) {
    WALLET_ASSERT(*length == body_sent.size(), "a body is exactly Content-Length bytes");
  }
  // Beast's header_limit bounds each step of its header parsing, not the header (see
  // check_same_reading): a header may reach the limit plus what the first step had at hand,
  // which the read buffer bounds. A chunked request's trailer adds header fields too, bounded by
  // the read buffer alone.
  const auto header_max = static_cast<std::size_t>(limits.header_bytes_max) + api::read_buffer_bytes_max(limits);
  WALLET_ASSERT(header_bytes_read <= header_max, "a header read is at most the header limit plus the read buffer");
  std::size_t field_bytes = 0;
  for (const auto& field : req) field_bytes += field.name_string().size() + field.value().size();
  WALLET_ASSERT(field_bytes <= header_max + api::read_buffer_bytes_max(limits),
                "header fields and trailer fields are bounded by the header limit and the read buffer");

  const std::string client_id = req.count("X-Request-Id") > 0 ? std::string(req["X-Request-Id"]) : std::string{};
  const std::string method(req.method_string());
  const std::string target(req.target());
  const std::string authorization = first_header(req, "Authorization");
  const std::string content_type = first_header(req, "Content-Type");
  const bool has_key = req.count("Idempotency-Key") > 0;
  const std::string key = first_header(req, "Idempotency-Key");

  api::exchange ex;
  api::fill_exchange(ex, req);
  WALLET_ASSERT(ex.method == method && !ex.method.empty(), "the exchange has the request's method");
  WALLET_ASSERT(ex.target == target, "the exchange has the request's target");
  const auto q = target.find('?');
  if (q == std::string::npos) {
    WALLET_ASSERT(ex.path == target && ex.query.empty(), "a target without '?' is all path");
  } else {
    WALLET_ASSERT(ex.path + "?" + ex.query == target && ex.path.find('?') == std::string::npos,
                  "the target splits at its first '?'");
  }
  WALLET_ASSERT(ex.body == body_sent, "the exchange has the body");
  WALLET_ASSERT(ex.authorization == authorization, "the exchange has the first Authorization header");
  WALLET_ASSERT(ex.content_type == content_type, "the exchange has the first Content-Type header");
  WALLET_ASSERT(ex.has_idempotency_key == has_key && ex.idempotency_key == key,
                "the exchange has the first Idempotency-Key header, and knows whether one was sent");
  WALLET_ASSERT(!ex.request_id.empty() && ex.request_id.size() <= 64 && is_visible_ascii(ex.request_id),
                "a request id is 1 to 64 visible ASCII characters");
  if (!client_id.empty() && client_id.size() <= 64 && is_visible_ascii(client_id)) {
    WALLET_ASSERT(ex.request_id == client_id, "a usable X-Request-Id is kept");
  }

  // What the routes read first: the path, an account id in it, the paging parameters, the body.
  const auto parts = api::split_path(ex.path);
  for (const auto part : parts) WALLET_ASSERT(!part.empty(), "a path segment is never empty");
  if (parts.size() >= 3 && parts[0] == "v1" && parts[1] == "accounts") {
    const auto id = api::parse_id(parts[2]);
    WALLET_ASSERT(!id || *id >= 1, "an account id in the path is positive");
  }
  for (const std::string_view name : {"limit", "after"}) {
    if (const auto text = api::query_param(ex.query, name)) {
      WALLET_ASSERT(text->find('&') == std::string::npos, "a query value holds no '&'");
      const auto v = ledger::parse_digits(*text);
      WALLET_ASSERT(!v || *v >= 0, "a paging parameter is never negative");
    }
  }
  const auto parsed = api::parse_json_object(ex.body);
  WALLET_ASSERT(!parsed.ok || parsed.object.fields.size() <= 64, "a JSON body gives at most 64 fields");

  return method + ' ' + target + '\n' + authorization + '\n' + content_type + '\n' + (has_key ? "key " + key : "") +
         '\n' + std::to_string(req.keep_alive()) + '\n' + body_sent;
}

// How the server ends a connection whose read failed, as session::on_read in http/server.cpp
// decides it: it closes quietly (the client went away), or refuses the request with 400, 413 or
// 431 and then closes. Which of the three a request that is wrong in several ways gets may
// depend on where the bytes were cut, and that is Beast's choice, not a fault: its parser checks
// a header line by line as it arrives, but once it has had to wait for more bytes it waits for
// the end of the header first. So a malformed header longer than header_bytes_max is a 400 when
// read at once (the bad line is seen first) and a 431 when read piece by piece; a request with
// bare LF line ends is a "bad version" at once and a "partial message" in pieces. What must not
// depend on the cut is whether the server refuses, and every request it accepts.
std::string server_answer(const beast::error_code& ec) {
  if (ec == bhttp::error::end_of_stream) return "close";
  if (ec == bhttp::error::body_limit || ec == bhttp::error::header_limit) return "refused";
  if (ec.category() == beast::error_code(bhttp::error::end_of_stream).category()) return "refused";
  return "close";
}

// The size of the header that starts at `start`: up to its blank line, or to the end of the bytes.
std::size_t header_size_at(std::string_view bytes, std::size_t start) {
  const auto end = bytes.find("\r\n\r\n", start);
  return end == std::string_view::npos ? bytes.size() - start : end + 4 - start;
}

// What the server reads of one connection's bytes: the outcome of each request, and where in the
// bytes each request starts.
struct reading {
  std::vector<std::string> outcomes;
  std::vector<std::size_t> starts;
};

// `first` bytes are in the buffer before the first read (the server reads up to 4096 bytes of a
// new request itself, before Beast reads the rest); the stream gives the others `chunk` at a time.
reading serve(std::string_view bytes, std::size_t first, std::size_t chunk, const config::http_settings& limits) {
  beast::flat_buffer buffer(api::read_buffer_bytes_max(limits));
  first = std::min({first, bytes.size(), buffer.max_size()});
  buffer.commit(asio::buffer_copy(buffer.prepare(first), asio::buffer(bytes.data(), first)));
  byte_stream stream(bytes.substr(first), chunk);
  reading r;
  std::size_t consumed = 0;
  // A bound on requests per input keeps each run short; real connections have no such bound.
  for (int i = 0; i < 16; ++i) {
    api::request_parser parser;
    api::apply_limits(parser, limits);
    beast::error_code ec;
    const auto start = consumed;
    r.starts.push_back(start);
    consumed += bhttp::read(stream, buffer, parser, ec);
    if (ec) {
      r.outcomes.push_back(server_answer(ec));
      break;
    }
    WALLET_ASSERT(parser.is_done(), "a request read without error is complete");
    const bool keep_alive = parser.get().keep_alive();
    r.outcomes.push_back(check_request(parser, header_size_at(bytes, start), limits));
    if (!keep_alive) break;
  }
  return r;
}

// Two readings of the same bytes must agree, with one exception, Beast's (1.81): header_limit
// bounds each step of the header parsing, not the header. The first step parses the request
// line and every complete header line of the bytes at hand (up to the limit each) and consumes
// them; if the header is not complete, each later step waits for its end within the limit from
// where the first stopped. So a header longer than header_bytes_max is read when enough of it
// arrives in the first read, and refused (431) when the first read holds less; none longer than
// the limit plus the read buffer is ever read. Where two readings differ, one of them must
// refuse the request, that request's header must be past the limit, and the requests before it
// must agree.
void check_same_reading(std::string_view bytes, const reading& one, const reading& other, std::size_t header_limit) {
  const auto& a = one.outcomes;
  const auto& b = other.outcomes;
  const auto [first_a, first_b] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  if (first_a == a.end() && first_b == b.end()) return;
  WALLET_ASSERT(first_a != a.end() && first_b != b.end(), "both readings end at the same request");
  WALLET_ASSERT(*first_a == "refused" || *first_b == "refused",
                "where the bytes are cut does not change what the server reads");
  const auto start = one.starts[static_cast<std::size_t>(first_a - a.begin())];
  WALLET_ASSERT(header_size_at(bytes, start) > header_limit,
                "where the bytes are cut changes what the server reads only for a header past the limit");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const config::http_settings limits{};
  const auto header_limit = static_cast<std::size_t>(limits.header_bytes_max);
  const auto at_once = serve(bytes, size, 1, limits);
  const auto as_the_server_reads = serve(bytes, 4096, size + 1, limits);
  const auto in_pieces = serve(bytes, 0, 1 + size % 13, limits);
  check_same_reading(bytes, at_once, as_the_server_reads, header_limit);
  check_same_reading(bytes, at_once, in_pieces, header_limit);
  return 0;
}
