#pragma once

// Requests forwarded between nodes (docs/scaling.md), through CAF's distributed actors
// (caf::io::middleman). Each node publishes an ingress actor on its cluster address; a node that
// receives a debit for a partition it does not hold sends the HTTP-level request to the holder's
// ingress and answers its reply. The message carries only CAF's built-in types (strings, a vector
// of strings, an int), so nothing needs announcing:
//
//   ingress:   (forward_atom, method, target, headers, body, request_id)
//                -> (int32 status, headers, content_type, body)
//              The request's bound travels as one more header (k_bound_header, milliseconds), so
//              that nodes of the previous and the next version still understand each other; the
//              ingress gives up on a request after its bound (a node that sent none: the link's).
//   forwarder: one local actor; it keeps a handle to each peer's ingress, connecting on first use
//              on a detached actor (the middleman's connect blocks), and fails what waits for a
//              peer that cannot be reached within the bound.
//
// The cluster port must be reachable only by the nodes (a private network, or loopback in tests):
// the middleman authenticates nobody, and a forwarded request still carries the client's API key,
// which the holder checks again.

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "actors/ledger_service.hpp"
#include "cluster/ownership.hpp"

namespace actors {

class cluster_link {
 public:
  // The header that carries a forwarded request's bound.
  static constexpr const char* k_bound_header = "Wallet-Forward-Bound-Ms";

  // `serve` answers what other nodes forward here; `bound` limits a forward (connect included)
  // that names no bound of its own, and what this node serves of a peer's that names none.
  cluster_link(caf::actor_system& system, std::shared_ptr<const cluster::ownership> owned, forward_handler serve,
               std::chrono::milliseconds bound);
  ~cluster_link();
  cluster_link(const cluster_link&) = delete;
  cluster_link& operator=(const cluster_link&) = delete;

  // Publishes the ingress at `address` ("host:port"); throws std::runtime_error when it cannot.
  void listen(const std::string& address);
  void forward(int partition, forwarded_request request, std::function<void(forwarded_reply)> done);
  void stop();

 private:
  caf::actor_system& system_;
  std::shared_ptr<const cluster::ownership> owned_;
  caf::actor ingress_;
  caf::actor forwarder_;
};

}  // namespace actors
