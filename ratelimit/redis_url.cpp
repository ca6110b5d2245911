#include "ratelimit/redis_url.hpp"

#include <charconv>
#include <stdexcept>
#include <string_view>

namespace ratelimit {
namespace {

std::int64_t parse_number(std::string_view text, std::int64_t max, const char* what) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size() || value < 0 || value > max) {
    throw std::invalid_argument(std::string("redis.url: bad ") + what + " '" + std::string(text) + "'");
  }
  return value;
}

}  // namespace

redis_endpoint parse_redis_url(const std::string& url) {
  constexpr std::string_view scheme = "redis://";
  std::string_view rest = url;
  if (rest.substr(0, scheme.size()) != scheme) {
    throw std::invalid_argument(
        "redis.url must start with redis:// (TLS and unix sockets are "
        "not supported), got a URL with another scheme");
  }
  rest.remove_prefix(scheme.size());

  redis_endpoint endpoint;
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = rest.substr(0, at);
    rest.remove_prefix(at + 1);
    const auto colon = userinfo.find(':');
    if (colon == std::string_view::npos) {
      // `redis://secret@host` is the common shorthand for a password without a user.
      endpoint.password = std::string(userinfo);
    } else {
      endpoint.username = std::string(userinfo.substr(0, colon));
      endpoint.password = std::string(userinfo.substr(colon + 1));
    }
  }

  std::string_view hostport = rest;
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    hostport = rest.substr(0, slash);
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) endpoint.database = parse_number(db, 1'000'000, "database number");
  }
  if (const auto colon = hostport.rfind(':'); colon != std::string_view::npos) {
    endpoint.port = static_cast<int>(parse_number(hostport.substr(colon + 1), 65'535, "port"));
    hostport = hostport.substr(0, colon);
  }
  if (hostport.empty()) throw std::invalid_argument("redis.url has no host");
  endpoint.host = std::string(hostport);
  return endpoint;
}

}  // namespace ratelimit
