#include "tools/loadgen/http_client.hpp"

#include "base/assert.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <charconv>
#include <ctime>
#include <deque>
#include <future>
#include <optional>

namespace loadgen {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// Answers larger than this are a protocol error for our API, whose bodies are small JSON.
constexpr std::uint64_t k_response_body_bytes_max = 4 * 1024 * 1024;
constexpr std::uint32_t k_response_header_bytes_max = 64 * 1024;

struct pending {
  http_request request;
  http_callback callback;
};

double parse_retry_after(std::string_view value) {
  double seconds = -1;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (ec != std::errc() || end != value.data() + value.size() || seconds < 0) {
    // An HTTP-date, which our server never sends: wait one second, the shortest sensible pause.
    return 1;
  }
  return seconds;
}

class connection;

}  // namespace

std::string to_string(transport_error e) {
  switch (e) {
    case transport_error::none: return "none";
    case transport_error::connect: return "connect";
    case transport_error::timeout: return "timeout";
    case transport_error::io: return "io";
    case transport_error::queue_full: return "queue_full";
  }
  return "unknown";
}

struct http_pool::state {
  state(asio::io_context& c, pool_settings s) : context(c), settings(std::move(s)) {
    endpoint = tcp::endpoint(asio::ip::make_address(settings.host), settings.port);
  }
  void release(const std::shared_ptr<connection>& c);

  asio::io_context& context;
  pool_settings settings;
  tcp::endpoint endpoint;
  std::vector<std::shared_ptr<connection>> all;
  std::vector<std::shared_ptr<connection>> idle;
  std::deque<pending> queue;
  std::uint64_t reconnects = 0;
  bool closed = false;
};

namespace {

// One keep-alive connection carrying one exchange at a time:
// start → (connect →) write → read → finish → (next queued request | idle).
class connection : public std::enable_shared_from_this<connection> {
 public:
  explicit connection(http_pool::state& pool) : pool_(pool), stream_(pool.context) {}

  void start(pending p) {
    current_ = std::move(p);
    resent_ = false;
    reused_ = connected_;
    build_request();
    if (connected_) {
      do_write();
    } else {
      do_connect();
    }
  }

  void close() {
    connected_ = false;
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

 private:
  // The request as it goes on the wire, written into the connection's own buffer, whose capacity
  // stays with it: no allocation per request once the connection has sent its largest, and no
  // header fields or serializer in between (a load generator pays for its requests on the same
  // cores as the server it measures). Every value comes from the load generator itself.
  void build_request() {
    const auto& r = current_.request;
    const bool post = r.method == http_method::post;
    char length[24] = {};
    const auto length_end = std::to_chars(length, length + sizeof length, r.body.size()).ptr;
    wire_.clear();
    wire_.append(post ? "POST " : "GET ").append(r.target).append(" HTTP/1.1\r\nHost: ");
    wire_.append(pool_.settings.host).append("\r\nUser-Agent: wallet-loadgen\r\n");
    if (!r.api_key.empty()) wire_.append("Authorization: Bearer ").append(r.api_key).append("\r\n");
    if (!r.idempotency_key.empty()) wire_.append("Idempotency-Key: ").append(r.idempotency_key).append("\r\n");
    if (post) {
      wire_.append("Content-Type: application/json\r\nContent-Length: ");
      wire_.append(length, length_end).append("\r\n");
    }
    wire_.append("\r\n");
    if (post) wire_.append(r.body);
  }

  void do_connect() {
    stream_.expires_after(pool_.settings.timeout);
    stream_.async_connect(pool_.endpoint, beast::bind_front_handler(&connection::on_connect, shared_from_this()));
  }

  void on_connect(beast::error_code ec) {
    if (ec) return fail(ec == beast::error::timeout ? transport_error::timeout : transport_error::connect);
    beast::error_code ignored;
    stream_.socket().set_option(tcp::no_delay(true), ignored);
    connected_ = true;
    do_write();
  }

  void do_write() {
    // One deadline for the whole exchange: it covers the write and the read after it, and arming
    // the timer once per request instead of twice halves the timer work of the I/O thread.
    stream_.expires_after(pool_.settings.timeout);
    asio::async_write(stream_, asio::buffer(wire_),
                      beast::bind_front_handler(&connection::on_write, shared_from_this()));
  }

  void on_write(beast::error_code ec, std::size_t) {
    if (ec) return fail(ec == beast::error::timeout ? transport_error::timeout : transport_error::io);
    parser_.emplace();
    parser_->body_limit(k_response_body_bytes_max);
    parser_->header_limit(k_response_header_bytes_max);
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&connection::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec) return fail(ec == beast::error::timeout ? transport_error::timeout : transport_error::io);
    auto& message = parser_->get();
    http_response response;
    response.status = static_cast<int>(message.result_int());
    response.body = std::move(message.body());
    if (auto it = message.find(http::field::retry_after); it != message.end()) {
      response.retry_after_s = parse_retry_after(it->value());
    }
    if (auto it = message.find("Idempotent-Replayed"); it != message.end()) {
      response.idempotent_replayed = beast::iequals(it->value(), "true");
    }
    if (!message.keep_alive()) close();
    parser_.reset();
    finish(std::move(response));
  }

  void fail(transport_error kind) {
    close();
    buffer_.clear();
    parser_.reset();
    // A kept-alive connection that the server closed while it was idle fails on its first write or
    // read. The request is sent once more on a fresh connection: every POST the load generator
    // makes during a run carries an Idempotency-Key, so a resend can never apply twice.
    if (reused_ && !resent_ && kind == transport_error::io) {
      resent_ = true;
      reused_ = false;
      ++pool_.reconnects;
      do_connect();
      return;
    }
    http_response response;
    response.error = kind;
    finish(std::move(response));
  }

  void finish(http_response&& response) {
    auto callback = std::move(current_.callback);
    current_ = {};
    pool_.release(shared_from_this());
    callback(std::move(response));
  }

  http_pool::state& pool_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::string wire_;  // the request being sent (build_request)
  std::optional<http::response_parser<http::string_body>> parser_;
  pending current_;
  bool connected_ = false;
  bool reused_ = false;
  bool resent_ = false;
};

}  // namespace

void http_pool::state::release(const std::shared_ptr<connection>& c) {
  if (closed) return;
  if (!queue.empty()) {
    pending next = std::move(queue.front());
    queue.pop_front();
    c->start(std::move(next));
    return;
  }
  idle.push_back(c);
}

http_pool::http_pool(asio::io_context& context, pool_settings settings)
    : state_(std::make_shared<state>(context, std::move(settings))) {
  WALLET_ASSERT(state_->settings.connections_max >= 1, "a pool has at least one connection");
}

http_pool::~http_pool() { close_all(); }

void http_pool::submit(http_request request, http_callback callback) {
  auto& s = *state_;
  if (s.closed) return;
  pending p{std::move(request), std::move(callback)};
  if (!s.idle.empty()) {
    // The most recently used connection first: it is the one most likely still open.
    auto c = std::move(s.idle.back());
    s.idle.pop_back();
    c->start(std::move(p));
    return;
  }
  if (s.all.size() < s.settings.connections_max) {
    auto c = std::make_shared<connection>(s);
    s.all.push_back(c);
    c->start(std::move(p));
    return;
  }
  if (s.queue.size() < s.settings.queue_max) {
    s.queue.push_back(std::move(p));
    return;
  }
  // Answered later, never from inside submit(), so a caller that retries on failure cannot recurse.
  asio::post(s.context, [callback = std::move(p.callback)]() mutable {
    http_response response;
    response.error = transport_error::queue_full;
    callback(std::move(response));
  });
}

void http_pool::close_all() {
  auto& s = *state_;
  s.closed = true;
  for (auto& c : s.all) c->close();
  // Dropping these breaks the ownership cycle between the pool and its connections; operations
  // still pending keep their connection alive until they complete with an error.
  s.idle.clear();
  s.all.clear();
  s.queue.clear();
}

std::size_t http_pool::open_connections() const { return state_->all.size(); }
std::size_t http_pool::queued() const { return state_->queue.size(); }
std::uint64_t http_pool::reconnects() const { return state_->reconnects; }

http_client::http_client(pool_settings settings, std::size_t threads) {
  WALLET_ASSERT(threads >= 1, "the client runs at least one I/O thread");
  const std::size_t per_thread = std::max<std::size_t>(1, (settings.connections_max + threads - 1) / threads);
  for (std::size_t i = 0; i < threads; ++i) {
    contexts_.push_back(std::make_unique<asio::io_context>(1));
    auto s = settings;
    s.connections_max = per_thread;
    pools_.push_back(std::make_unique<http_pool>(*contexts_.back(), std::move(s)));
  }
  for (std::size_t i = 0; i < threads; ++i) {
    threads_.emplace_back([context = contexts_[i].get()] {
      auto guard = asio::make_work_guard(*context);
      context->run();
    });
  }
}

http_client::~http_client() { stop(); }

void http_client::submit(std::size_t i, http_request request, http_callback callback) {
  WALLET_ASSERT(i < pools_.size(), "submit to an existing I/O thread");
  asio::post(*contexts_[i],
             [pool = pools_[i].get(), request = std::move(request), callback = std::move(callback)]() mutable {
               pool->submit(std::move(request), std::move(callback));
             });
}

std::uint64_t http_client::reconnects() const {
  std::uint64_t total = 0;
  for (const auto& p : pools_) total += p->reconnects();
  return total;
}

double http_client::io_cpu_seconds() {
  if (stopped_) return 0;
  double total = 0;
  for (auto& c : contexts_) {
    std::promise<double> answer;
    auto result = answer.get_future();
    asio::post(*c, [&answer] {
      timespec t{};
      ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
      answer.set_value(static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9);
    });
    total += result.get();
  }
  return total;
}

void http_client::stop() {
  if (stopped_) return;
  stopped_ = true;
  // Once the threads are joined no handler runs any more, so the pools can be closed from here.
  for (auto& c : contexts_) c->stop();
  for (auto& t : threads_) t.join();
  threads_.clear();
  for (auto& p : pools_) p->close_all();
}

}  // namespace loadgen
