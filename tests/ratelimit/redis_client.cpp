#include "tests/ratelimit/redis_client.hpp"

#include <hiredis/hiredis.h>

#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ratelimit/redis_url.hpp"

namespace ratelimit_test {
namespace {

struct context_deleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct reply_deleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};

std::string reply_text(const redisReply& reply) {
  switch (reply.type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS: return std::string(reply.str, static_cast<std::size_t>(reply.len));
    case REDIS_REPLY_INTEGER: return std::to_string(reply.integer);
    case REDIS_REPLY_NIL: return "";
    case REDIS_REPLY_ARRAY: {
      std::string joined;
      for (std::size_t i = 0; i < reply.elements; ++i) {
        if (i > 0) joined += ' ';
        joined += reply_text(*reply.element[i]);
      }
      return joined;
    }
    default:
      throw std::runtime_error("redis error reply: " + std::string(reply.str, static_cast<std::size_t>(reply.len)));
  }
}

}  // namespace

std::string redis_command(const std::string& url, const std::string& command) {
  const ratelimit::redis_endpoint endpoint = ratelimit::parse_redis_url(url);
  const timeval timeout{1, 0};
  std::unique_ptr<redisContext, context_deleter> context(
      redisConnectWithTimeout(endpoint.host.c_str(), endpoint.port, timeout));
  if (!context || context->err != 0) {
    throw std::runtime_error("cannot connect to " + url + ": " + (context ? context->errstr : "out of memory"));
  }
  redisSetTimeout(context.get(), timeout);
  if (!endpoint.password.empty()) {
    std::unique_ptr<redisReply, reply_deleter> auth(
        static_cast<redisReply*>(redisCommand(context.get(), "AUTH %s", endpoint.password.c_str())));
    if (!auth) throw std::runtime_error("AUTH failed");
  }
  // Split on spaces: test commands have no quoted arguments.
  std::vector<std::string> words;
  std::size_t start = 0;
  while (start < command.size()) {
    const std::size_t end = command.find(' ', start);
    words.push_back(command.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const auto& word : words) {
    argv.push_back(word.c_str());
    lengths.push_back(word.size());
  }
  std::unique_ptr<redisReply, reply_deleter> reply(static_cast<redisReply*>(
      redisCommandArgv(context.get(), static_cast<int>(argv.size()), argv.data(), lengths.data())));
  if (!reply) throw std::runtime_error("no reply from " + url + ": " + context->errstr);
  return reply_text(*reply);
}

std::int64_t redis_time_ms(const std::string& url) {
  const std::string time = redis_command(url, "TIME");
  const auto space = time.find(' ');
  return std::stoll(time.substr(0, space)) * 1000 + std::stoll(time.substr(space + 1)) / 1000;
}

void wait_for_window_room(const std::string& url, std::int64_t window_ms, std::chrono::milliseconds margin) {
  const std::int64_t now = redis_time_ms(url);
  const std::int64_t left = window_ms - now % window_ms;
  if (left >= margin.count()) return;
  // Step just past the boundary: the next window then has almost all of its length left.
  std::this_thread::sleep_for(std::chrono::milliseconds(left + 20));
}

std::int64_t unique_principal() {
  static std::mt19937_64 generator{std::random_device{}()};
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  // Positive and far from small ids a developer might use by hand.
  return static_cast<std::int64_t>(generator() >> 2) + 1'000'000'000;
}

}  // namespace ratelimit_test
