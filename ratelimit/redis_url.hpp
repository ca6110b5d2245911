#pragma once

// Parses the `redis.url` setting. Only what hiredis 0.14 can do is accepted: plain TCP (it has no
// TLS), an optional password (and ACL user name), and an optional database number.

#include <cstdint>
#include <string>

namespace ratelimit {

struct redis_endpoint {
  std::string host;
  int port = 6379;
  std::string username;  // empty: `AUTH password` (or no AUTH if the password is empty too)
  std::string password;
  std::int64_t database = 0;
};

// Accepts `redis://[[user]:password@]host[:port][/db]`. Throws std::invalid_argument naming what
// is wrong; the message never contains the password.
redis_endpoint parse_redis_url(const std::string& url);

}  // namespace ratelimit
