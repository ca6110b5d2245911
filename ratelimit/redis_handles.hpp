#pragma once

// The hiredis handles of the server's Redis clients (the rate limiter, the event relay): owning
// pointers for contexts and replies, and the two conversions both need. Include only where
// hiredis is used.

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <string>

namespace ratelimit::redis {

struct reply_deleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

struct context_deleter {
  void operator()(redisContext* context) const { redisFree(context); }
};
using context_ptr = std::unique_ptr<redisContext, context_deleter>;

// A timeval of zero means "no timeout" to hiredis, so callers never pass less than 1 ms.
inline timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(ms.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((ms.count() % 1000) * 1000);
  return tv;
}

// What went wrong on a context. A receive timeout surfaces as an I/O error with EAGAIN; say so
// plainly in the log.
inline std::string context_error(const redisContext& context) {
  if (context.err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) return "timed out";
  return context.errstr[0] != '\0' ? std::string(context.errstr) : "unknown hiredis error";
}

}  // namespace ratelimit::redis
