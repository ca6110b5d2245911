#pragma once

// The relay's Redis connection: it appends events to the stream with pipelined XADDs. Owned by
// one thread (a hiredis context is not thread-safe). hiredis stays out of this header.
//
// Every call is bounded by the deadline it is given. After any failure the connection's state is
// unknown (a reply may be half read), so it is closed and the owner opens a new one later.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "persistence/outbox.hpp"
#include "ratelimit/redis_url.hpp"

namespace events {

class stream_writer {
 public:
  using clock = std::chrono::steady_clock;

  // `maxlen`: the stream is trimmed to about this many entries (XADD MAXLEN ~).
  stream_writer(ratelimit::redis_endpoint endpoint, std::string key, std::int64_t maxlen);
  ~stream_writer();
  stream_writer(const stream_writer&) = delete;
  stream_writer& operator=(const stream_writer&) = delete;

  bool is_open() const;
  void close();
  // Connects (AUTH and SELECT as the URL says). Empty on success, else why it failed.
  std::string open(clock::time_point deadline);
  // One XADD per event, in order, pipelined; every reply read. Empty when Redis acknowledged every
  // entry, else why not (some entries may have been added: the caller publishes them again).
  std::string append(const std::vector<persistence::event_record>& events, clock::time_point deadline);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace events
