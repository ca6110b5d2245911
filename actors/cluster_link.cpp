#include "actors/cluster_link.hpp"

#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <spdlog/spdlog.h>

#include <charconv>
#include <stdexcept>
#include <unordered_map>
#include <vector>

namespace actors {
namespace {

using forward_atom = caf::atom_constant<caf::atom("forward")>;
using answered_atom = caf::atom_constant<caf::atom("answered")>;
using connected_atom = caf::atom_constant<caf::atom("connected")>;
using expire_atom = caf::atom_constant<caf::atom("expire")>;

using header_list = std::vector<std::pair<std::string, std::string>>;

// Headers travel as one flat list of strings (name, value, name, value, ...): a built-in type.
std::vector<std::string> flatten(const header_list& headers) {
  std::vector<std::string> out;
  out.reserve(headers.size() * 2);
  for (const auto& [name, value] : headers) {
    out.push_back(name);
    out.push_back(value);
  }
  return out;
}

header_list unflatten(const std::vector<std::string>& flat) {
  header_list out;
  for (std::size_t i = 0; i + 1 < flat.size(); i += 2) out.emplace_back(flat[i], flat[i + 1]);
  return out;
}

// ---- the ingress: what other nodes forward here ------------------------------------------------

using reply_promise = caf::typed_response_promise<std::int32_t, std::vector<std::string>, std::string, std::string>;

// The bound a forwarding node sent with a request (taken out of its headers), or `fallback`.
std::chrono::milliseconds take_bound(header_list& headers, std::chrono::milliseconds fallback) {
  for (auto it = headers.begin(); it != headers.end(); ++it) {
    if (it->first != cluster_link::k_bound_header) continue;
    std::int64_t ms = 0;
    const auto& text = it->second;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
    headers.erase(it);
    if (ec == std::errc() && end == text.data() + text.size() && ms > 0) return std::chrono::milliseconds(ms);
    return fallback;
  }
  return fallback;
}

struct ingress_state {
  std::uint64_t next_id = 0;
  std::unordered_map<std::uint64_t, reply_promise> waiting;
  static inline const char* name = "cluster_ingress";
};

caf::behavior ingress(caf::stateful_actor<ingress_state>* self, forward_handler serve,
                      std::chrono::milliseconds fallback) {
  return {
      [self, serve, fallback](
          forward_atom, std::string method, std::string target, std::vector<std::string> headers, std::string body,
          std::string request_id) -> caf::result<std::int32_t, std::vector<std::string>, std::string, std::string> {
        auto promise = self->make_response_promise<std::int32_t, std::vector<std::string>, std::string, std::string>();
        const auto id = ++self->state.next_id;
        self->state.waiting.emplace(id, promise);
        forwarded_request request{std::move(method), std::move(target), std::move(request_id), std::move(body),
                                  unflatten(headers)};
        request.bound = take_bound(request.headers, fallback);
        // The forwarding node stops waiting then: an answer that never comes holds nothing here.
        self->delayed_send(self, request.bound, expire_atom::value, id);
        // The routes answer on any thread: the answer comes back here as a message, and the
        // promise is delivered from the actor's own context.
        serve(std::move(request), [me = caf::actor_cast<caf::actor>(self), id](forwarded_reply reply) {
          caf::anon_send(me, answered_atom::value, id, static_cast<std::int32_t>(reply.status), flatten(reply.headers),
                         std::move(reply.content_type), std::move(reply.body));
        });
        return promise;
      },
      [self](answered_atom, std::uint64_t id, std::int32_t status, std::vector<std::string> headers,
             std::string content_type, std::string body) {
        auto it = self->state.waiting.find(id);
        if (it == self->state.waiting.end()) return;
        it->second.deliver(status, std::move(headers), std::move(content_type), std::move(body));
        self->state.waiting.erase(it);
      },
      [self](expire_atom, std::uint64_t id) {
        auto it = self->state.waiting.find(id);
        if (it == self->state.waiting.end()) return;
        it->second.deliver(caf::make_error(caf::sec::request_timeout));
        self->state.waiting.erase(it);
      },
  };
}

// ---- the forwarder: this node's requests for other nodes ---------------------------------------

struct forward_job {
  forwarded_request request;
  std::function<void(forwarded_reply)> done;
};

void fail(forward_job& job, std::string detail) {
  forwarded_reply r;
  r.delivered = false;
  r.detail = std::move(detail);
  job.done(std::move(r));
}

}  // namespace
}  // namespace actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actors::forward_job)

namespace actors {
namespace {

struct forwarder_state {
  std::unordered_map<std::string, caf::actor> peers;                     // address -> its ingress
  std::unordered_map<std::string, std::vector<forward_job>> connecting;  // address -> jobs waiting
  static inline const char* name = "cluster_forwarder";
};

using forwarder_actor = caf::stateful_actor<forwarder_state>;

void send_to(forwarder_actor* self, const std::string& address, const caf::actor& peer, forward_job job,
             std::chrono::milliseconds fallback) {
  auto done = std::move(job.done);
  auto& r = job.request;
  const auto bound = r.bound.count() > 0 ? r.bound : fallback;
  auto headers = flatten(r.headers);
  headers.emplace_back(cluster_link::k_bound_header);
  headers.push_back(std::to_string(bound.count()));
  self->request(peer, bound, forward_atom::value, std::move(r.method), std::move(r.target), std::move(headers),
                std::move(r.body), std::move(r.request_id))
      .then(
          [done](std::int32_t status, std::vector<std::string> headers, std::string content_type, std::string body) {
            forwarded_reply reply;
            reply.delivered = true;
            reply.status = status;
            reply.headers = unflatten(headers);
            reply.content_type = std::move(content_type);
            reply.body = std::move(body);
            done(std::move(reply));
          },
          [self, address, done](caf::error& err) {
            // The peer may be gone: connect again next time.
            self->state.peers.erase(address);
            forwarded_reply reply;
            reply.sent = true;
            reply.detail = "the node at " + address + " did not answer: " + self->system().render(err);
            done(std::move(reply));
          });
}

caf::behavior forwarder(forwarder_actor* self, std::chrono::milliseconds bound) {
  return {
      [self, bound](forward_atom, std::string address, forward_job& job) {
        auto& st = self->state;
        if (auto it = st.peers.find(address); it != st.peers.end()) {
          return send_to(self, address, it->second, std::move(job), bound);
        }
        auto& waiting = st.connecting[address];
        waiting.push_back(std::move(job));
        if (waiting.size() > 1) return;  // a connect is under way
        const auto colon = address.rfind(':');
        const std::string host = address.substr(0, colon);
        const auto port = static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1)));
        auto me = caf::actor_cast<caf::actor>(self);
        // The middleman's connect blocks: on a detached actor of its own.
        self->spawn<caf::detached>([me, address, host, port](caf::blocking_actor* connector) {
          auto peer = connector->system().middleman().remote_actor(host, port);
          connector->send(me, connected_atom::value, address, peer ? *peer : caf::actor{});
        });
        self->delayed_send(self, bound, expire_atom::value, address);
      },
      [self, bound](connected_atom, const std::string& address, const caf::actor& peer) {
        auto& st = self->state;
        auto it = st.connecting.find(address);
        std::vector<forward_job> jobs;
        if (it != st.connecting.end()) {
          jobs = std::move(it->second);
          st.connecting.erase(it);
        }
        if (!peer) {
          spdlog::warn("cluster: the node at {} cannot be reached", address);
          for (auto& job : jobs) fail(job, "the node at " + address + " cannot be reached");
          return;
        }
        st.peers[address] = peer;
        for (auto& job : jobs) send_to(self, address, peer, std::move(job), bound);
      },
      [self](expire_atom, const std::string& address) {
        auto& st = self->state;
        auto it = st.connecting.find(address);
        if (it == st.connecting.end()) return;
        auto jobs = std::move(it->second);
        st.connecting.erase(it);
        for (auto& job : jobs) fail(job, "the node at " + address + " did not accept a connection in time");
      },
  };
}

}  // namespace

cluster_link::cluster_link(caf::actor_system& system, std::shared_ptr<const cluster::ownership> owned,
                           forward_handler serve, std::chrono::milliseconds bound)
    : system_(system), owned_(std::move(owned)) {
  ingress_ = system_.spawn(ingress, std::move(serve), bound);
  forwarder_ = system_.spawn(forwarder, bound);
}

cluster_link::~cluster_link() { stop(); }

void cluster_link::listen(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("cluster address \"" + address + "\" is not host:port");
  const std::string host = address.substr(0, colon);
  const int port = std::stoi(address.substr(colon + 1));
  auto bound = system_.middleman().publish(ingress_, static_cast<std::uint16_t>(port), host.c_str(), true);
  if (!bound) {
    throw std::runtime_error("cannot listen for other nodes at " + address + ": " + system_.render(bound.error()));
  }
  spdlog::info("cluster: listening for other nodes at {}", address);
}

void cluster_link::forward(int partition, forwarded_request request, std::function<void(forwarded_reply)> done) {
  const auto address = owned_->holder_address(partition);
  forward_job job{std::move(request), std::move(done)};
  if (address.empty()) return fail(job, "no node holds partition " + std::to_string(partition) + " now");
  caf::anon_send(forwarder_, forward_atom::value, address, std::move(job));
}

void cluster_link::stop() {
  if (ingress_) {
    caf::anon_send_exit(ingress_, caf::exit_reason::user_shutdown);
    ingress_ = nullptr;
  }
  if (forwarder_) {
    caf::anon_send_exit(forwarder_, caf::exit_reason::user_shutdown);
    forwarder_ = nullptr;
  }
}

}  // namespace actors
