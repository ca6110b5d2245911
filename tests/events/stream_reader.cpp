#include "tests/events/stream_reader.hpp"

#include <hiredis/hiredis.h>
#include <pqxx/pqxx>

#include <memory>
#include <stdexcept>

#include "ratelimit/redis_url.hpp"

namespace events_test {
namespace {

// XRANGE pages of this many entries: the stream may hold many thousands.
constexpr int k_page_entries = 5'000;

struct reply_deleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;
struct context_deleter {
  void operator()(redisContext* c) const { redisFree(c); }
};

std::string text(const redisReply& r) { return std::string(r.str, static_cast<std::size_t>(r.len)); }

}  // namespace

const std::string& stream_entry::field(const std::string& name) const {
  static const std::string none;
  auto it = fields.find(name);
  return it == fields.end() ? none : it->second;
}

std::vector<stream_entry> read_stream(const std::string& url, const std::string& key) {
  const auto endpoint = ratelimit::parse_redis_url(url);
  timeval timeout{5, 0};
  std::unique_ptr<redisContext, context_deleter> c(
      redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port, timeout));
  if (!c || c->err != 0) throw std::runtime_error("cannot connect to Redis at " + url);
  redisSetTimeout(c.get(), timeout);
  if (endpoint.database != 0) {
    reply_ptr r(
        static_cast<redisReply*>(redisCommand(c.get(), "SELECT %lld", static_cast<long long>(endpoint.database))));
    if (!r || r->type == REDIS_REPLY_ERROR) throw std::runtime_error("SELECT failed");
  }
  std::vector<stream_entry> out;
  std::string start = "-";
  for (;;) {
    reply_ptr r(static_cast<redisReply*>(
        redisCommand(c.get(), "XRANGE %s %s + COUNT %d", key.c_str(), start.c_str(), k_page_entries)));
    if (!r) throw std::runtime_error("XRANGE: no reply from Redis at " + url);
    if (r->type == REDIS_REPLY_ERROR) throw std::runtime_error("XRANGE: " + text(*r));
    if (r->type != REDIS_REPLY_ARRAY) throw std::runtime_error("XRANGE: not an array");
    for (std::size_t i = 0; i < r->elements; ++i) {
      const redisReply& item = *r->element[i];
      if (item.type != REDIS_REPLY_ARRAY || item.elements != 2) throw std::runtime_error("XRANGE: bad entry");
      stream_entry e;
      e.id = text(*item.element[0]);
      const redisReply& fields = *item.element[1];
      for (std::size_t f = 0; f + 1 < fields.elements; f += 2) {
        e.fields[text(*fields.element[f])] = text(*fields.element[f + 1]);
      }
      out.push_back(std::move(e));
    }
    if (r->elements < static_cast<std::size_t>(k_page_entries)) return out;
    start = "(" + out.back().id;  // exclusive: the next page starts after the last entry read
  }
}

std::string sql_value(const std::string& url, const std::string& sql) {
  pqxx::connection c(url);
  pqxx::nontransaction txn(c);
  const auto rows = txn.exec(sql);
  if (rows.empty() || rows[0][0].is_null()) return "";
  return rows[0][0].as<std::string>();
}

std::vector<std::string> sql_column(const std::string& url, const std::string& sql) {
  pqxx::connection c(url);
  pqxx::nontransaction txn(c);
  std::vector<std::string> out;
  for (const auto& row : txn.exec(sql)) out.push_back(row[0].is_null() ? "" : row[0].as<std::string>());
  return out;
}

}  // namespace events_test
