#include "events/stream_writer.hpp"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <cerrno>
#include <utility>

#include "base/assert.hpp"
#include "events/stream_entry.hpp"
#include "ratelimit/redis_handles.hpp"

namespace events {
namespace {

using std::chrono::milliseconds;

// XADDs sent before their replies are read: bounds the memory of one round trip on both sides.
constexpr std::size_t k_pipeline_commands_max = 1'024;

using ratelimit::redis::context_error;
using ratelimit::redis::context_ptr;
using ratelimit::redis::reply_ptr;
using ratelimit::redis::to_timeval;

milliseconds left(stream_writer::clock::time_point deadline) {
  return std::chrono::duration_cast<milliseconds>(deadline - stream_writer::clock::now());
}

}  // namespace

struct stream_writer::impl {
  ratelimit::redis_endpoint endpoint;
  std::string key;
  std::string maxlen;
  context_ptr context;

  // Reads the next reply. `arm`: first set the socket's timeout to what is left of the deadline
  // (two system calls, so a pipeline arms it once and checks the clock between replies).
  std::string read_reply(clock::time_point deadline, reply_ptr& out, bool arm = true) {
    const auto budget = left(deadline);
    if (budget < milliseconds(1)) return "timed out";
    if (arm && redisSetTimeout(context.get(), to_timeval(budget)) != REDIS_OK) return context_error(*context);
    void* raw = nullptr;
    if (redisGetReply(context.get(), &raw) != REDIS_OK || raw == nullptr) return context_error(*context);
    out.reset(static_cast<redisReply*>(raw));
    return {};
  }

  std::string fail(std::string why) {
    context.reset();
    return why;
  }
};

stream_writer::stream_writer(ratelimit::redis_endpoint endpoint, std::string key, std::int64_t maxlen)
    : impl_(std::make_unique<impl>()) {
  WALLET_ASSERT(maxlen > 0, "events.stream_maxlen is validated positive");
  impl_->endpoint = std::move(endpoint);
  impl_->key = std::move(key);
  impl_->maxlen = std::to_string(maxlen);
}

stream_writer::~stream_writer() = default;

bool stream_writer::is_open() const { return impl_->context != nullptr; }

void stream_writer::close() { impl_->context.reset(); }

std::string stream_writer::open(clock::time_point deadline) {
  auto& d = *impl_;
  d.context.reset();
  const auto budget = left(deadline);
  if (budget < milliseconds(1)) return "timed out before connecting";
  context_ptr context(redisConnectWithTimeout(d.endpoint.host.c_str(), d.endpoint.port, to_timeval(budget)));
  if (!context) return "cannot allocate a hiredis context";
  if (context->err != 0) return "connect: " + context_error(*context);
  redisEnableKeepAlive(context.get());
  d.context = std::move(context);
  std::size_t expected = 0;
  if (!d.endpoint.password.empty()) {
    if (d.endpoint.username.empty()) {
      redisAppendCommand(d.context.get(), "AUTH %s", d.endpoint.password.c_str());
    } else {
      redisAppendCommand(d.context.get(), "AUTH %s %s", d.endpoint.username.c_str(), d.endpoint.password.c_str());
    }
    ++expected;
  }
  if (d.endpoint.database != 0) {
    redisAppendCommand(d.context.get(), "SELECT %lld", static_cast<long long>(d.endpoint.database));
    ++expected;
  }
  // A PING proves the server answers commands (a paused Redis still completes the handshake).
  redisAppendCommand(d.context.get(), "PING");
  ++expected;
  for (std::size_t i = 0; i < expected; ++i) {
    reply_ptr reply;
    if (auto failure = d.read_reply(deadline, reply); !failure.empty()) return d.fail(failure);
    if (reply->type == REDIS_REPLY_ERROR) {
      return d.fail("setup refused: " + std::string(reply->str, static_cast<std::size_t>(reply->len)));
    }
  }
  return {};
}

std::string stream_writer::append(const std::vector<persistence::event_record>& events, clock::time_point deadline) {
  auto& d = *impl_;
  WALLET_ASSERT(is_open(), "append on a closed stream writer");
  std::string commands;
  for (std::size_t first = 0; first < events.size(); first += k_pipeline_commands_max) {
    const std::size_t last = std::min(events.size(), first + k_pipeline_commands_max);
    commands.clear();
    for (std::size_t i = first; i < last; ++i) append_xadd(commands, d.key, d.maxlen, to_stream_fields(events[i]));
    // hiredis copies the commands into its output buffer here, as they are.
    if (redisAppendFormattedCommand(d.context.get(), commands.data(), commands.size()) != REDIS_OK) {
      return d.fail("XADD: " + context_error(*d.context));
    }
    for (std::size_t i = first; i < last; ++i) {
      reply_ptr reply;
      if (auto failure = d.read_reply(deadline, reply, i == first); !failure.empty()) return d.fail("XADD: " + failure);
      if (reply->type == REDIS_REPLY_ERROR) {
        return d.fail("XADD refused: " + std::string(reply->str, static_cast<std::size_t>(reply->len)));
      }
      if (reply->type != REDIS_REPLY_STRING) return d.fail("XADD gave no entry id");
    }
  }
  return {};
}

}  // namespace events
