#pragma once

// Webhook delivery (docs/events.md, "Webhooks"): on two threads of its own (fan-out, and
// claim/record), each with a PostgreSQL connection of its own, the dispatcher
//
//   fan out:  for each live, enabled endpoint, the feed events after its cursor that it wants become
//             webhook_delivery rows, and the cursor moves past them, in one transaction. The feed
//             holds committed transactions only, so nothing is sent before its COMMIT.
//   claim:    each endpoint's oldest pending delivery, when due, FOR UPDATE SKIP LOCKED plus a
//             lease: one attempt at a time per endpoint (order), across every server;
//   send:     signed (Wallet-Signature, as provider events), on the sender's own I/O thread;
//   record:   DELIVERED on a 2xx; otherwise the next attempt after an exponential, jittered
//             pause (events/webhook_backoff.hpp), or FAILED once the retry span is spent, which
//             disables the endpoint until its owner or an operator enables it again;
//   prune:    every `prune_interval_ms`, on the fan-out thread, finished deliveries that ended
//             more than `delivery_retention_days` ago are deleted, a bounded number a round.
//
// Bounds: `concurrency` attempts in flight at most in this server, one per endpoint. A slow or
// dead endpoint holds one of them for at most `timeout_ms` an attempt and delays only its own
// queue; payments never wait for any of it (the dispatcher only reads the feed).

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "config/settings.hpp"
#include "events/webhook_backoff.hpp"
#include "events/webhook_sender.hpp"
#include "persistence/database.hpp"

namespace events {

struct webhook_config {
  persistence::connection_options database;
  sender_config sender;
  backoff_policy backoff;
  std::int64_t concurrency = 64;
  std::int64_t poll_interval_ms = 200;
  std::int64_t feed_scan_max = 10'000;
  std::int64_t error_backoff_ms_max = 5'000;  // longest pause while the database fails
  std::int64_t delivery_retention_days = 30;  // finished deliveries older than this are deleted (0: kept)
  std::int64_t prune_interval_ms = 60'000;
};

webhook_config webhook_config_from(const config::settings& s);

struct webhook_stats {
  std::uint64_t deliveries_created = 0;
  std::uint64_t attempts = 0;
  std::uint64_t delivered = 0;
  std::uint64_t retries = 0;             // failed attempts followed by another
  std::uint64_t failed = 0;              // deliveries given up (FAILED)
  std::uint64_t endpoints_disabled = 0;  // by a delivery given up
  std::uint64_t timeouts = 0;
  std::uint64_t database_errors = 0;
  std::uint64_t pruned = 0;      // finished deliveries deleted past their retention
  std::uint64_t feed_reads = 0;  // pages of the feed the fan-out read
  std::uint64_t feed_gaps = 0;   // fan-outs that found events deleted before they were made deliveries
  std::int64_t in_flight = 0;
};

class webhook_dispatcher {
 public:
  // Throws std::runtime_error when the sender's CA file cannot be loaded. Nothing runs before start().
  explicit webhook_dispatcher(webhook_config config);
  ~webhook_dispatcher();
  webhook_dispatcher(const webhook_dispatcher&) = delete;
  webhook_dispatcher& operator=(const webhook_dispatcher&) = delete;

  void start();
  // Stops the dispatcher, then the sender; attempts in flight keep their leases until they expire.
  void stop();

  webhook_stats stats() const;
  // The dispatcher's series for GET /metrics (Prometheus text).
  std::string render_metrics() const;

 private:
  enum class worker_part : std::uint8_t { fan_out, deliver };
  void run(worker_part part);

  struct state;
  class worker;
  std::unique_ptr<state> state_;
  std::thread fan_out_thread_;
  std::thread thread_;  // claims, sends (through the sender's thread) and records
};

}  // namespace events
