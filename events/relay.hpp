#pragma once

// The outbox relay (docs/events.md): on a thread of its own, with a PostgreSQL connection and a
// Redis connection of its own, it turns committed outbox rows into entries of the Redis Stream
// `wallet:events`, one per journal transaction, at least once and in feed order.
//
// One round, in two database transactions:
//
//   try the relay lock ──no──► another relay is active: stand by until the next poll
//        │yes
//   sequence: committed rows get their feed positions (the feed, GET /v1/events, sees them) ─► COMMIT
//        │     (before anything is sent: a stream entry's cursor is a position the feed keeps)
//   try the relay lock again ──no──► another relay publishes
//        │yes
//   claim rows (feed order, FOR UPDATE SKIP LOCKED) ─► XADD their events, pipelined
//        │                                                  │ all acknowledged
//        │                                             mark the rows published ─► COMMIT
//        └─ Redis down or an XADD fails: ROLLBACK (the positions stay)
//
// A relay that dies after its XADDs and before its COMMIT leaves the rows unpublished: the next
// round (here or on another server) publishes them again, and consumers deduplicate by eventId.
// Payments never wait for it: the writers only insert outbox rows, which the relay's locks never
// block, and the relay's failures only delay it (bounded backoff), on its own thread.
//
// Every `prune_interval_ms` the relay holding the lock also deletes the head of the feed past
// `feed_retention_days` (persistence::prune_outbox), one bounded statement after a round, so that
// publishing goes on between them.

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "config/settings.hpp"
#include "persistence/database.hpp"

namespace events {

struct relay_config {
  persistence::connection_options database;
  std::string redis_url;
  std::int64_t batch_rows_max = 50;
  std::int64_t stream_maxlen = 1'000'000;
  std::int64_t poll_interval_ms = 100;
  std::int64_t redis_timeout_ms = 2'000;
  std::int64_t backoff_ms_max = 5'000;
  std::int64_t feed_retention_days = 30;  // 0: every row is kept
  std::int64_t prune_interval_ms = 60'000;
};

// The relay's configuration from the server's settings (events.*, the database's timeouts).
relay_config relay_config_from(const config::settings& s);

// What a hook throws to end a round as a crash would at that point.
struct round_aborted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Points in a round where a test may step in. A hook that throws round_aborted ends the round as a
// crash would at that point: the database transaction rolls back, whatever Redis acknowledged
// stays there.
struct relay_hooks {
  // After Redis acknowledged every XADD of the round, before the rows are marked published.
  std::function<void(const std::vector<std::int64_t>& outbox_ids)> after_stream_write;
};

struct relay_stats {
  std::uint64_t rounds = 0;
  std::uint64_t events_published = 0;  // stream entries Redis acknowledged (a republished one counts again)
  std::uint64_t rows_published = 0;    // outbox rows marked published
  std::uint64_t rows_sequenced = 0;    // outbox rows given their feed position
  std::uint64_t rows_pruned = 0;       // outbox rows deleted past the feed's retention
  std::uint64_t redis_errors = 0;
  std::uint64_t database_errors = 0;
  bool holds_lock = false;  // this relay held the relay lock in its last round
  bool redis_connected = false;
  double lag_ms = 0;  // age of the oldest unpublished outbox row now; 0: none
};

class outbox_relay {
 public:
  // Throws std::invalid_argument for a Redis URL it cannot use. Nothing runs before start().
  explicit outbox_relay(relay_config config, relay_hooks hooks = {});
  // Stops the thread (a round in progress finishes first, within its timeouts).
  ~outbox_relay();
  outbox_relay(const outbox_relay&) = delete;
  outbox_relay& operator=(const outbox_relay&) = delete;

  void start();
  void stop();

  relay_stats stats() const;
  // The relay's series for GET /metrics (Prometheus text).
  std::string render_metrics() const;

 private:
  void run();

  struct state;
  class worker;
  std::unique_ptr<state> state_;
  std::thread thread_;
};

}  // namespace events
