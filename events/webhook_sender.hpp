#pragma once

// The HTTP client of webhook delivery (docs/events.md, "Webhooks"): one POST per attempt, over
// Boost.Beast on an io_context of its own thread (never the HTTP server's threads nor the actors'),
// http or https (OpenSSL, certificates verified against the system store or a configured CA file,
// the host name checked). Every attempt resolves the host again (on the lookup pool's threads, so
// that a slow name delays only its own deliveries) and connects only to addresses
// that ledger::destination_allowed accepts, so a name that later points inside the network is
// refused at connect time too. Redirects are not followed: a 3xx is a failed attempt like any other
// non-2xx. One deadline covers the whole attempt (resolve, connect, handshake, write, the answer's
// head); the answer's body is not read.
//
// Beast stays out of this header: it is included by the dispatcher and the server's main.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "events/name_lookup.hpp"

namespace events {

struct sender_config {
  std::int64_t timeout_ms = 10'000;
  bool allow_loopback = false;
  std::string ca_file;  // empty: the system's default CA store
  // Threads that look host names up: as many names as this may be slow at once before the next
  // name waits (attempts for one name share its lookup).
  std::size_t lookup_threads = 4;
  lookup_fn lookup;  // empty: the system's resolver (lookup_host)
};

struct webhook_request {
  std::string url;
  std::string body;
  std::string signature;  // the Wallet-Signature header's value
  std::string event_id;   // sent as Wallet-Event-Id
  std::int64_t delivery_id = 0;
};

struct webhook_response {
  bool delivered = false;          // a 2xx answer
  std::optional<int> status_code;  // when an answer's head arrived
  std::string error;               // why it was not delivered; empty when delivered
  bool timed_out = false;
  std::int64_t elapsed_ms = 0;
};

class webhook_sender {
 public:
  // Throws std::runtime_error when the CA file cannot be loaded.
  explicit webhook_sender(sender_config config);
  // Stops the thread. Attempts in flight are abandoned without their callbacks: their leases
  // expire and they are tried again (here after a restart, or by another server).
  ~webhook_sender();
  webhook_sender(const webhook_sender&) = delete;
  webhook_sender& operator=(const webhook_sender&) = delete;

  void start();
  void stop();

  // Starts one attempt; `done` runs once, on the sender's thread, and must only hand the result
  // over. A URL that does not parse is answered at once with an error.
  void send(webhook_request request, std::function<void(webhook_response)> done);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace events
