#include "http/server.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

#include <pthread.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <iterator>
#include <memory>
#include <thread>

#include "base/networks.hpp"
#include "http/crypto.hpp"
#include "http/log_throttle.hpp"
#include "http/request.hpp"
#include "http/response.hpp"

namespace api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

reply problem_reply(const problem& p, std::string_view request_id) {
  reply r;
  r.status = p.status;
  r.content_type = "application/problem+json";
  r.body = problem_json(p, request_id);
  if (p.retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(p.retry_after_s));
  return r;
}

namespace {
class session;
}  // namespace

// One io_context per I/O thread: a connection lives on one thread for its whole life, so its
// handlers need no strand, and no thread hands work to another through the scheduler's lock and
// condition variable (on a small machine those hand-offs cost more than the HTTP work itself).
// Answers computed elsewhere reach a connection by asio::post to its context.
struct server::impl {
  using work_guard = asio::executor_work_guard<asio::io_context::executor_type>;

  config::http_settings settings;
  metrics& stats;
  server::handler handle;
  server::limits_of limits_of;
  // Members that sessions' destructors use come before the contexts, so that they outlive them:
  // destroying a context destroys the handlers it still holds, and with them their sessions.
  // Bodies over http.body_bytes_max (a settlement report, a large batch) are held whole, and read
  // before the request is authenticated. Together they may take at most four of the largest the
  // routes allow (256 MiB by default); a request that would go past that is answered 503 before
  // its body is read.
  const std::int64_t large_bodies_max = 4 * std::max(settings.settlement_body_bytes_max, settings.body_bytes_max);
  // Peers whose X-Forwarded-For names the client (validated with the settings).
  const std::vector<base::ip_network> trusted_proxies =
      base::parse_networks(settings.trusted_proxies).value_or(std::vector<base::ip_network>{});
  // Per context, touched only on its thread: its sessions (an intrusive list, so joining and
  // leaving it allocate nothing), for a shutdown to close the idle ones and answer the rest.
  std::vector<session*> session_heads;
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<work_guard> guards;  // keep an idle context's thread running until shutdown
  std::size_t next_context = 0;
  asio::io_context& ioc;  // the first context: acceptor, signals, shutdown
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  // Set once a shutdown stops serving (after its drain): the listener is closed, idle
  // connections are closed, and a request that still arrives is refused (503, then closed).
  std::atomic<bool> stopping{false};
  log_throttle shed_log{1'000'000};
  log_throttle accept_log{1'000'000};
  asio::steady_timer accept_retry{ioc};
  asio::signal_set signals{ioc, SIGINT, SIGTERM};
  asio::steady_timer drain_timer{ioc};
  std::uint16_t bound_port = 0;

  static std::vector<std::unique_ptr<asio::io_context>> make_contexts(std::int64_t n) {
    std::vector<std::unique_ptr<asio::io_context>> out;
    for (std::int64_t i = 0; i < std::max<std::int64_t>(1, n); ++i)
      out.push_back(std::make_unique<asio::io_context>(1));
    return out;
  }

  impl(const config::http_settings& s, metrics& m, server::handler h, server::limits_of limits)
      : settings(s),
        stats(m),
        handle(std::move(h)),
        limits_of(std::move(limits)),
        contexts(make_contexts(s.io_threads)),
        ioc(*contexts.front()) {
    for (auto& c : contexts) guards.push_back(asio::make_work_guard(*c));
    session_heads.assign(contexts.size(), nullptr);
  }

  void stop_all() {
    for (auto& g : guards) g.reset();
    for (auto& c : contexts) c->stop();
  }

  void do_accept();
  void wait_for_signal();
  void begin_shutdown();
  void stop_serving();
  // Runs `f` on each session of every context, each on its own thread.
  template <typename F>
  void for_each_session(F f);
  void close_connections_and_stop();
};

namespace {

class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket&& socket, server::impl& srv, std::size_t context)
      : stream_(std::move(socket)),
        deadline_(stream_.get_executor()),
        buffer_(read_buffer_bytes_max(srv.settings)),
        srv_(srv),
        context_(context) {
    ++srv_.stats.open_connections;
  }
  ~session() {
    unlist();
    release_body();
    --srv_.stats.open_connections;
  }

  // The grace period of a shutdown is over and this session's request is still in flight: it is
  // answered now, before the I/O threads stop, rather than left to a closed connection. What
  // the work behind it does is unknown here (a posting may still commit), so a request that may
  // move money is told to retry with the same Idempotency-Key, which returns the true outcome.
  // On the session's own thread.
  void answer_before_stopping() {
    const exchange_ptr ex = current_;
    if (!ex || ex->answered.exchange(true)) return;
    const bool reads = ex->method == "GET" || ex->method == "HEAD";
    const auto p = reads ? problem_for(ledger::error_code::server_busy,
                                       "the server is shutting down before this request finished; retry later",
                                       ledger::k_retry_after_default_s)
                         : problem_for(ledger::error_code::outcome_unknown,
                                       "the server is shutting down before this request finished; its outcome is "
                                       "unknown: retry with the same Idempotency-Key to learn it",
                                       ledger::k_retry_after_default_s);
    write(problem_reply(p, ex->request_id), ex);
  }

  void start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      self->list();
      self->wait_for_request();
    });
  }

  // Shutting down: a connection that waits for its next request is closed now (a request in
  // progress is answered first, and its answer closes the connection).
  void close_if_idle() {
    if (idle_) close();
  }
  void close_now() { close(); }
  session* next_session() const { return next_; }

 private:
  // Phase 1: an idle keep-alive connection may wait keep_alive_timeout_ms for its next request.
  void wait_for_request() {
    if (buffer_.size() > 0) return read_request();
    if (srv_.stopping.load()) return close();
    idle_ = true;
    stream_.expires_after(std::chrono::milliseconds(srv_.settings.keep_alive_timeout_ms));
    stream_.async_read_some(buffer_.prepare(4096),
                            beast::bind_front_handler(&session::on_first_bytes, shared_from_this()));
  }

  void on_first_bytes(beast::error_code ec, std::size_t n) {
    idle_ = false;
    if (ec) return close();
    buffer_.commit(n);
    read_request();
  }

  // Phase 2: once a request has started, all of it must arrive within read_timeout_ms: its header,
  // then its body under the body limit of the route the header names.
  void read_request() {
    parser_.emplace();
    apply_header_limit(*parser_, srv_.settings);
    limits_ = {srv_.settings.body_bytes_max, srv_.settings.request_deadline_ms};
    stream_.expires_after(std::chrono::milliseconds(srv_.settings.read_timeout_ms));
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             beast::bind_front_handler(&session::on_header, shared_from_this()));
  }

  void on_header(beast::error_code ec, std::size_t n) {
    if (ec) return on_read(ec, n);
    const auto& req = parser_->get();
    if (srv_.limits_of) {
      const std::string_view target = req.target();
      limits_ = srv_.limits_of(req.method_string(), target.substr(0, target.find('?')));
    }
    if (!apply_body_limit(*parser_, limits_.body_bytes_max)) return on_read(bhttp::error::body_limit, 0);
    if (!parser_->is_done() && !reserve_body()) {
      return refuse(problem_for(ledger::error_code::server_busy,
                                "too many large request bodies are being received at once; retry later",
                                ledger::k_retry_after_default_s));
    }
    // A client that asks before it sends its body (Expect: 100-continue; curl does for bodies over
    // 1 MiB, and waits a second for the answer) is told to go on, now that its header passed.
    if (!parser_->is_done() && req.version() == 11 && beast::iequals(req[bhttp::field::expect], "100-continue")) {
      auto go_on = std::make_shared<bhttp::response<bhttp::empty_body>>(bhttp::status::continue_, 11);
      return bhttp::async_write(stream_, *go_on, [self = shared_from_this(), go_on](beast::error_code ec, std::size_t) {
        if (ec) return self->close();
        self->read_body();
      });
    }
    read_body();
  }

  void read_body() {
    bhttp::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout) return close();
    if (ec == bhttp::error::body_limit) {
      return refuse(http_problem(413, "payload_too_large", "Payload too large",
                                 "the request body exceeds " + std::to_string(limits_.body_bytes_max) + " bytes"));
    }
    if (ec == bhttp::error::header_limit) {
      return refuse(
          http_problem(431, "headers_too_large", "Request header fields too large",
                       "the request headers exceed " + std::to_string(srv_.settings.header_bytes_max) + " bytes"));
    }
    if (ec && ec.category() == beast::error_code(bhttp::error::end_of_stream).category()) {
      return refuse(http_problem(400, "malformed_request", "Malformed request",
                                 "the request is not valid HTTP/1.1: " + ec.message()));
    }
    if (ec) return close();
    if (srv_.stopping.load()) {
      // Shut down: a request on a kept-alive connection is not started; the client is told
      // to go elsewhere (or come back) and the connection closes after the answer.
      return refuse(problem_for(ledger::error_code::server_busy,
                                "the server is shutting down; retry (with the same Idempotency-Key) later",
                                ledger::k_retry_after_default_s),
                    false);
    }

    auto& req = parser_->get();
    auto ex = std::make_shared<exchange>();
    if (const char* repeated = fill_exchange(*ex, req)) {
      return refuse(http_problem(400, "malformed_request", "Malformed request",
                                 std::string("the ") + repeated + " header appears more than once; send it once"),
                    false);
    }
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    ex->client_address = peer_is_proxy_ ? forwarded_client(req, client_address_) : client_address_;

    // The answer holds the session weakly: the session holds the exchange (`current_`) until the
    // answer is written, so a strong reference here would make a cycle that nothing breaks when
    // the I/O threads stop before the answer (LeakSanitizer found it at shutdown). While a
    // request is in flight its deadline's wait keeps the session alive.
    std::weak_ptr<session> weak_self = shared_from_this();
    std::weak_ptr<exchange> weak_ex = ex;
    ex->respond = [weak_self, weak_ex](reply r) {
      // This may hold the last reference to the session (answered already, by its deadline or at
      // the end of a shutdown's grace, and closed since): see close() for why that is safe here.
      auto self = weak_self.lock();
      auto ex = weak_ex.lock();
      if (!self || !ex || ex->answered.exchange(true)) return;
      // On the answering thread, which is the one that added them (see exchange.hpp).
      r.headers.insert(r.headers.begin(), std::make_move_iterator(ex->extra_headers.begin()),
                       std::make_move_iterator(ex->extra_headers.end()));
      auto executor = self->stream_.get_executor();  // before `self` is moved from
      asio::post(executor, [self = std::move(self), r = std::move(r), ex = std::move(ex)]() mutable {
        self->write(std::move(r), ex);
      });
    };
    ++srv_.stats.inflight_requests;
    // The request's admission, with its large body's reservation, now lives as long as its work.
    ex->slot = admission_slot(srv_.stats.admission, std::exchange(reserved_body_bytes_, 0));
    current_ = ex;
    ex->deadline = std::chrono::milliseconds(limits_.deadline_ms);
    arm_deadline(ex);
    srv_.handle(ex);
  }

  // Every request is answered within request_deadline_ms: if the work behind it has not
  // answered by then, the client is told the outcome is unknown and to retry with the same
  // Idempotency-Key (a retry returns the true outcome). The late answer is then dropped.
  void arm_deadline(const exchange_ptr& ex) {
    deadline_.expires_after(std::chrono::milliseconds(limits_.deadline_ms));
    std::weak_ptr<exchange> weak_ex = ex;
    deadline_.async_wait([self = shared_from_this(), weak_ex](beast::error_code ec) {
      if (ec) return;
      auto ex = weak_ex.lock();
      // The work behind the request may still be adding headers on another thread: this answer
      // takes none of them.
      if (!ex || ex->answered.exchange(true)) return;
      auto p = problem_for(ledger::error_code::deadline_exceeded,
                           "the server did not finish this request in time; its outcome is unknown: retry with the "
                           "same Idempotency-Key to learn it",
                           ledger::k_retry_after_default_s);
      self->write(problem_reply(p, ex->request_id), ex);
    });
  }

  // Answers an error and closes. `body_unread`: the answer comes before the request's body was
  // read, so the client may still be sending it; many clients (Python's http.client, requests)
  // send the whole body before they read anything, and a close now would reset the connection
  // under them (a broken pipe instead of the answer). The rest is then read and discarded, within
  // http.linger_bytes_max and http.linger_timeout_ms, before the close (a lingering close).
  void refuse(const problem& p, bool body_unread = true) {
    keep_alive_ = false;
    linger_ = body_unread && srv_.settings.linger_bytes_max > 0 && srv_.settings.linger_timeout_ms > 0;
    version_ = 11;
    auto ex = std::make_shared<exchange>();
    ex->request_id = new_request_id();
    ex->route = "malformed";
    ex->answered = true;  // by this answer: the end of a shutdown's grace must not answer it again
    ++srv_.stats.inflight_requests;
    current_ = ex;
    write(problem_reply(p, ex->request_id), ex);
  }

  void write(reply r, const exchange_ptr& ex) {
    if (r.status == 503) {
      spread_return(r);
    } else {
      srv_.stats.retry_returns.answered();
    }
    // Once a shutdown has begun, every answer closes its connection: a load balancer opens its
    // next one elsewhere, and no idle connection is left for the end to close under a request.
    const bool keep_alive = keep_alive_ && !srv_.stats.shutting_down.load();
    // The head and the body go out in one write; they live in the handler until it has run.
    struct answer {
      std::string head;
      std::string body;
    };
    auto bytes = std::make_shared<answer>();
    bytes->head = serialize_head(r, ex ? ex->request_id : "", version_, keep_alive);
    if (carries_body(r.status)) bytes->body = std::move(r.body);

    if (ex) {
      const auto now = std::chrono::steady_clock::now();
      const double seconds = std::chrono::duration<double>(now - ex->started).count();
      srv_.stats.observe(ex->route, r.status, seconds);
      std::int64_t held_back = 0;
      if (r.status == 503) {
        // Shed load: at most one line a second, which says how many it stands for.
        const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
        if (srv_.shed_log.admit(now_us, held_back)) {
          spdlog::warn("req={} principal={} {} {} -> 503 in {:.1f} ms ({} more 503 answers since the last line)",
                       ex->request_id, ex->principal_id.load(), ex->method, ex->path, seconds * 1000, held_back);
        }
      } else if (r.status >= 500) {
        spdlog::warn("req={} principal={} {} {} -> {} in {:.1f} ms", ex->request_id, ex->principal_id.load(),
                     ex->method, ex->path, r.status, seconds * 1000);
      } else if (r.status >= 400) {
        spdlog::info("req={} principal={} {} {} -> {} in {:.1f} ms", ex->request_id, ex->principal_id.load(),
                     ex->method, ex->path, r.status, seconds * 1000);
      } else {
        spdlog::debug("req={} principal={} {} {} -> {} in {:.1f} ms", ex->request_id, ex->principal_id.load(),
                      ex->method, ex->path, r.status, seconds * 1000);
      }
    }
    stream_.expires_after(std::chrono::milliseconds(srv_.settings.read_timeout_ms));
    const std::array<asio::const_buffer, 2> buffers{asio::buffer(bytes->head), asio::buffer(bytes->body)};
    asio::async_write(stream_, buffers,
                      [self = shared_from_this(), bytes, keep_alive](beast::error_code ec, std::size_t) {
                        self->on_write(ec, keep_alive);
                      });
  }

  // A 503's Retry-After, the least wait its cause asked for, becomes the second the calendar booked
  // for its return. Every 503 of this server carries one; an answer forwarded from another node
  // is booked here, where its client will come back.
  void spread_return(reply& r) {
    for (auto& [name, value] : r.headers) {
      if (!beast::iequals(name, "Retry-After")) continue;
      std::int64_t asked = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), asked);
      if (ec != std::errc{} || end != value.data() + value.size()) return;
      value = std::to_string(srv_.stats.retry_returns.book(asked));
      return;
    }
  }

  // A body over http.body_bytes_max takes its declared length (or, chunked, the route's limit)
  // from the server's budget for large bodies: until the work of its request ends (the request's
  // slot takes the reservation over), or, refused before that, until its answer is written.
  bool reserve_body() {
    const auto declared = parser_->content_length();
    const std::int64_t need = declared ? static_cast<std::int64_t>(*declared) : limits_.body_bytes_max;
    if (need <= srv_.settings.body_bytes_max) return true;
    auto& taken = srv_.stats.admission->large_body_bytes;
    if (taken.fetch_add(need) + need > srv_.large_bodies_max) {
      taken.fetch_sub(need);
      return false;
    }
    reserved_body_bytes_ = need;
    return true;
  }

  void release_body() {
    if (reserved_body_bytes_ == 0) return;
    srv_.stats.admission->large_body_bytes.fetch_sub(reserved_body_bytes_);
    reserved_body_bytes_ = 0;
  }

  void on_write(beast::error_code ec, bool keep_alive) {
    --srv_.stats.inflight_requests;
    deadline_.cancel();
    current_.reset();
    parser_.reset();
    release_body();
    if (!ec && linger_) return linger();
    if (ec || !keep_alive) return close();
    wait_for_request();
  }

  // The answer is out: end our side, then read and drop what the client still sends until it
  // closes, the byte bound or the deadline, whichever comes first.
  void linger() {
    ++srv_.stats.bodies_lingered;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::milliseconds(srv_.settings.linger_timeout_ms));
    lingered_bytes_ = 0;
    read_and_discard();
  }

  // Into a scratch chunk of its own: the request buffer is bounded by the header limit.
  void read_and_discard() {
    if (!discard_chunk_) discard_chunk_ = std::make_unique<char[]>(k_linger_chunk_bytes);
    stream_.async_read_some(asio::buffer(discard_chunk_.get(), k_linger_chunk_bytes),
                            beast::bind_front_handler(&session::on_discarded, shared_from_this()));
  }

  void on_discarded(beast::error_code ec, std::size_t n) {
    lingered_bytes_ += static_cast<std::int64_t>(n);
    if (ec || lingered_bytes_ >= srv_.settings.linger_bytes_max) return close();
    read_and_discard();
  }

  // On the session's thread. It leaves its context's list here, not only when destroyed: the last
  // reference to a closed session may be dropped on another thread (a late answer's), where the
  // list must not be touched. A listed session always has an operation pending on its context,
  // so its last reference is dropped there, or once the context has stopped.
  void close() {
    idle_ = false;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
    unlist();
  }

  // Joins or leaves the list of this context's sessions (on its thread, or once it has stopped).
  void list() {
    if (listed_) return;
    session*& head = srv_.session_heads[context_];
    prev_ = nullptr;
    next_ = head;
    if (head != nullptr) head->prev_ = this;
    head = this;
    listed_ = true;
  }
  void unlist() {
    if (!listed_) return;
    if (prev_ != nullptr) {
      prev_->next_ = next_;
    } else {
      srv_.session_heads[context_] = next_;
    }
    if (next_ != nullptr) next_->prev_ = prev_;
    prev_ = next_ = nullptr;
    listed_ = false;
  }

  beast::tcp_stream stream_;
  asio::steady_timer deadline_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  request_limits limits_;  // the current request's, once its header is read
  server::impl& srv_;
  const std::size_t context_;  // the index of the io_context this session lives on
  session* prev_ = nullptr;    // the context's list (list(), unlist())
  session* next_ = nullptr;
  bool listed_ = false;
  bool idle_ = false;  // waiting for the first bytes of its next request
  bool keep_alive_ = true;
  bool linger_ = false;
  std::int64_t lingered_bytes_ = 0;
  std::int64_t reserved_body_bytes_ = 0;
  std::unique_ptr<char[]> discard_chunk_;  // only while lingering
  unsigned version_ = 11;
  exchange_ptr current_;
  std::string client_address_ = peer_address(stream_.socket());
  const bool peer_is_proxy_ = base::contains(srv_.trusted_proxies, client_address_);

  static constexpr std::size_t k_linger_chunk_bytes = 64 * 1024;

  static std::string peer_address(const tcp::socket& socket) {
    beast::error_code ec;
    const auto endpoint = socket.remote_endpoint(ec);
    return ec ? std::string("unknown") : endpoint.address().to_string();
  }
};

// An accept that fails for want of a file descriptor or of kernel memory leaves the connection
// in the listen backlog, so accepting again at once fails again at once: the acceptor's thread
// would spin and log without end. It waits this long instead, and the backlog waits with it.
constexpr std::chrono::milliseconds k_accept_retry{100};

// After the grace period, how long the answers to the requests still in flight may take to be
// written before the I/O threads stop.
constexpr std::chrono::milliseconds k_last_answers_wait{1'000};

bool out_of_resources(const beast::error_code& ec) {
  return ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space || ec == asio::error::no_memory ||
         ec == beast::error_code(ENFILE, boost::system::system_category());
}

}  // namespace

void server::impl::do_accept() {
  const std::size_t index = next_context++ % contexts.size();
  auto& target = *contexts[index];
  acceptor.async_accept(target, [this, index](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      ++stats.accept_failures;
      std::int64_t held_back = 0;
      const auto now_us =
          std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
              .count();
      if (accept_log.admit(now_us, held_back)) {
        spdlog::warn("accept failed: {} ({} more since the last line)", ec.message(), held_back);
      }
      if (out_of_resources(ec)) {
        accept_retry.expires_after(k_accept_retry);
        accept_retry.async_wait([this](beast::error_code wait_ec) {
          if (!wait_ec && acceptor.is_open()) do_accept();
        });
        return;
      }
    } else if (stats.open_connections.load() >= settings.connections_max) {
      // Over the connection bound: close at once rather than queue work we cannot carry.
      ++stats.connections_refused;
      beast::error_code ignored;
      socket.close(ignored);
    } else {
      std::make_shared<session>(std::move(socket), *this, index)->start();
    }
    if (acceptor.is_open()) do_accept();
  });
}

template <typename F>
void server::impl::for_each_session(F f) {
  for (std::size_t i = 0; i < contexts.size(); ++i) {
    asio::post(*contexts[i], [this, i, f] {
      // `f` may close a session, which unlists it: take the next link first.
      for (session* s = session_heads[i]; s != nullptr;) {
        session* next = s->next_session();
        f(*s);
        s = next;
      }
    });
  }
}

void server::impl::wait_for_signal() {
  signals.async_wait([this](beast::error_code ec, int signal) {
    if (ec) return;
    spdlog::info("received signal {}", signal);
    begin_shutdown();
    wait_for_signal();
  });
}

// Phase 1, the drain (http.shutdown_drain_ms): requests are served as usual, but /readyz answers
// 503 and every answer closes its connection, so that a load balancer takes the node out and
// opens no connection to it that the end would close under a request. A second signal ends it.
void server::impl::begin_shutdown() {
  if (stats.shutting_down.exchange(true)) {
    drain_timer.cancel();
    return;
  }
  if (settings.shutdown_drain_ms <= 0) return stop_serving();
  spdlog::info("shutting down: draining for {} ms (/readyz answers 503, answers close their connections)",
               settings.shutdown_drain_ms);
  drain_timer.expires_after(std::chrono::milliseconds(settings.shutdown_drain_ms));
  drain_timer.async_wait([this](beast::error_code) { stop_serving(); });
}

// Phase 2: no new connections, idle ones closed, and shutdown_grace_ms for the others to end (a
// request in flight finishes, one still arriving is refused); what is in flight then is answered
// 503. Phase 3: every connection left is closed and the I/O threads stop, so that no connection
// outlives them unread (a request sent on it would meet a reset when the process exits, where a
// closed connection tells the client to retry elsewhere).
void server::impl::stop_serving() {
  if (stopping.exchange(true)) return;
  spdlog::info("shutting down: no new connections; waiting up to {} ms for {} connections ({} requests in flight)",
               settings.shutdown_grace_ms, stats.open_connections.load(), stats.inflight_requests.load());
  beast::error_code ignored;
  acceptor.close(ignored);
  accept_retry.cancel();
  for_each_session([](session& s) { s.close_if_idle(); });
  // Every connection left ends by itself: a request still arriving is refused, one in flight
  // answered, each with Connection: close. The grace bounds the wait for them.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(settings.shutdown_grace_ms);
  auto answered = std::make_shared<bool>(false);
  auto timer = std::make_shared<asio::steady_timer>(ioc);
  auto poll = std::make_shared<std::function<void()>>();
  *poll = [this, timer, deadline, answered, poll]() mutable {
    const auto open = stats.open_connections.load();
    const auto left = stats.inflight_requests.load();
    const bool over = std::chrono::steady_clock::now() >= deadline;
    if (open > 0 && !*answered && over) {
      // The grace is over: what is still in flight is answered now (503, outcome unknown), and
      // the answers get a little longer to reach their clients.
      if (left > 0) spdlog::warn("shutting down: answering the requests still in flight ({})", left);
      *answered = true;
      for_each_session([](session& s) { s.answer_before_stopping(); });
      deadline = std::chrono::steady_clock::now() + k_last_answers_wait;
    } else if (open <= 0 || over) {
      if (left > 0) spdlog::warn("shutting down with {} answers not yet written", left);
      close_connections_and_stop();
      *poll = nullptr;  // break the self-reference
      return;
    }
    timer->expires_after(std::chrono::milliseconds(10));
    timer->async_wait([poll](beast::error_code) {
      if (*poll) (*poll)();
    });
  };
  (*poll)();
}

void server::impl::close_connections_and_stop() {
  for (std::size_t i = 0; i < contexts.size(); ++i) {
    asio::post(*contexts[i], [this, i] {
      for (session* s = session_heads[i]; s != nullptr;) {
        session* next = s->next_session();  // closing unlists it
        s->close_now();
        s = next;
      }
      contexts[i]->stop();
    });
  }
}

server::server(const config::http_settings& settings, metrics& m, handler handle, limits_of limits)
    : impl_(std::make_unique<impl>(settings, m, std::move(handle), std::move(limits))) {}

server::~server() {
  impl_->stop_all();
  for (auto& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
}

void server::start() {
  auto& d = *impl_;
  const auto address = asio::ip::make_address(d.settings.host);
  tcp::endpoint endpoint{address, static_cast<unsigned short>(d.settings.port)};
  d.acceptor.open(endpoint.protocol());
  d.acceptor.set_option(asio::socket_base::reuse_address(true));
  d.acceptor.bind(endpoint);
  d.acceptor.listen(asio::socket_base::max_listen_connections);
  d.bound_port = d.acceptor.local_endpoint().port();
  d.wait_for_signal();
  d.do_accept();
  for (auto& context : d.contexts) {
    d.threads.emplace_back([&context] {
      pthread_setname_np(pthread_self(), "wallet-http");
      context->run();
    });
  }
}

void server::run_until_stopped() {
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
}

void server::request_stop() {
  asio::post(impl_->ioc, [this] { impl_->begin_shutdown(); });
}

std::uint16_t server::port() const { return impl_->bound_port; }

}  // namespace api
