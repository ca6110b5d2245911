#include "events/webhook_sender.hpp"

#include <openssl/ssl.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <variant>
#include <vector>

#include <spdlog/spdlog.h>

#include "ledger/webhooks.hpp"

namespace events {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr const char* k_user_agent = "wallet-webhooks/1";

using plain_stream = beast::tcp_stream;
using tls_stream = beast::ssl_stream<beast::tcp_stream>;

// One attempt: resolve → check the addresses → connect → (TLS handshake) → write → read the
// answer's head. A timer ends it at the deadline: the attempt is answered "timed out" then and
// there and its socket closed, and every step that completes later finds it finished and does
// nothing. (Cancelling the pending operation alone was not enough: a name lookup already running
// cannot be cancelled and completes with success, and a connect over several addresses would go on
// to the next one; the steps after them then ran without a deadline.) The name is looked up on the
// sender's lookup pool (events/name_lookup.hpp), whose answer is posted back (a name still queued
// when its attempts have ended is not looked up at all); everything else runs on the sender's
// single I/O thread, so the steps and the timer never race.
template <typename Stream>
class attempt : public std::enable_shared_from_this<attempt<Stream>> {
 public:
  attempt(asio::io_context& io, asio::ssl::context* tls, lookup_pool& lookups, ledger::webhook_url url,
          webhook_request request, const sender_config& config, std::function<void(webhook_response)> done)
      : io_(io),
        lookups_(lookups),
        stream_(make_stream(io, tls)),
        timer_(io),
        url_(std::move(url)),
        request_(std::move(request)),
        config_(config),
        done_(std::move(done)),
        started_(std::chrono::steady_clock::now()) {}

  void start() {
    timer_.expires_after(std::chrono::milliseconds(config_.timeout_ms));
    timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (ec || self->finished_) return;
      self->timed_out_ = true;
      self->fail({});
    });
    // An IP literal is its own address: nothing to look up.
    if (ledger::classify_address(url_.host)) return on_resolve(host_addresses{{url_.host}, {}});
    lookups_.lookup(
        url_.host,
        [self = this->shared_from_this()](const host_addresses& found) mutable {
          auto& io = self->io_;
          asio::post(io, [self = std::move(self), found] {
            if (self->finished_) return;
            self->on_resolve(found);
          });
        },
        [ended = ended_] { return !ended->load(); });
  }

 private:
  static Stream make_stream(asio::io_context& io, asio::ssl::context* tls) {
    if constexpr (std::is_same_v<Stream, tls_stream>) {
      return Stream(io, *tls);
    } else {
      (void)tls;
      return Stream(io);
    }
  }

  void on_resolve(const host_addresses& found) {
    // An endpoint's owner reads its deliveries' errors: what a name resolves to on the server's
    // network goes to the log only (events::destination_judge says why).
    const bool literal = ledger::classify_address(url_.host).has_value();
    if (!found.error.empty()) {
      spdlog::info("webhook destination {} does not resolve: {}", url_.host, found.error);
      return fail("refused: " + url_.host + " does not resolve, or resolves to an address that is not public");
    }
    std::vector<tcp::endpoint> allowed;
    std::string refused;
    for (const auto& text : found.addresses) {
      const auto kind = ledger::classify_address(text);
      beast::error_code ec;
      const auto address = asio::ip::make_address(text, ec);
      if (kind && !ec && ledger::destination_allowed(*kind, config_.allow_loopback)) {
        allowed.emplace_back(address, url_.port);
      } else if (refused.empty()) {
        refused = text + " (" + std::string(kind ? ledger::to_string(*kind) : "unknown") + ")";
      }
    }
    if (allowed.empty()) {
      if (literal) return fail("refused: " + refused + " is not a public address");
      spdlog::info("webhook destination {} resolves to {}, not a public address", url_.host,
                   refused.empty() ? "no address" : refused);
      return fail("refused: " + url_.host + " does not resolve, or resolves to an address that is not public");
    }
    // The condition stops the walk over the addresses once the attempt has ended.
    beast::get_lowest_layer(stream_).async_connect(
        allowed,
        [self = this->shared_from_this()](const beast::error_code&, const tcp::endpoint&) { return !self->finished_; },
        [self = this->shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
          if (self->finished_) return;
          self->on_connect(ec);
        });
  }

  void on_connect(beast::error_code ec) {
    if (ec) return fail("connecting to " + url_.host + ": " + ec.message());
    if constexpr (std::is_same_v<Stream, tls_stream>) {
      // SNI for names only: an IP literal is not a server name (RFC 6066).
      if (!ledger::classify_address(url_.host)) {
        if (!SSL_set_tlsext_host_name(stream_.native_handle(), url_.host.c_str())) {
          return fail("TLS: cannot set the server name");
        }
      }
      stream_.set_verify_mode(asio::ssl::verify_peer);
      stream_.set_verify_callback(asio::ssl::host_name_verification(url_.host));
      stream_.async_handshake(asio::ssl::stream_base::client, [self = this->shared_from_this()](beast::error_code e) {
        if (self->finished_) return;
        if (e) return self->fail("TLS handshake with " + self->url_.host + ": " + e.message());
        self->write();
      });
    } else {
      write();
    }
  }

  void write() {
    request_message_.method(http::verb::post);
    request_message_.target(url_.target);
    request_message_.version(11);
    const bool default_port = url_.port == (url_.tls ? 443 : 80);
    const bool v6 = url_.host.find(':') != std::string::npos;
    std::string host = v6 ? "[" + url_.host + "]" : url_.host;
    if (!default_port) host += ":" + std::to_string(url_.port);
    request_message_.set(http::field::host, host);
    request_message_.set(http::field::user_agent, k_user_agent);
    request_message_.set(http::field::content_type, "application/json");
    request_message_.set(http::field::connection, "close");
    request_message_.set("Wallet-Signature", request_.signature);
    request_message_.set("Wallet-Event-Id", request_.event_id);
    request_message_.set("Wallet-Delivery-Id", std::to_string(request_.delivery_id));
    request_message_.body() = request_.body;
    request_message_.prepare_payload();
    http::async_write(stream_, request_message_, [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
      if (self->finished_) return;
      if (ec) return self->fail("sending to " + self->url_.host + ": " + ec.message());
      self->read();
    });
  }

  void read() {
    http::async_read_header(stream_, buffer_, parser_,
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                              if (self->finished_) return;
                              if (ec)
                                return self->fail("reading the answer of " + self->url_.host + ": " + ec.message());
                              const int status = static_cast<int>(self->parser_.get().result_int());
                              webhook_response r;
                              r.status_code = status;
                              r.delivered = status >= 200 && status < 300;
                              if (!r.delivered) r.error = "answered " + std::to_string(status);
                              self->finish(std::move(r));
                            });
  }

  void fail(std::string error) {
    webhook_response r;
    if (timed_out_) {
      r.timed_out = true;
      r.error = "timed out after " + std::to_string(config_.timeout_ms) + " ms";
    } else {
      r.error = std::move(error);
    }
    finish(std::move(r));
  }

  void finish(webhook_response r) {
    if (finished_) return;
    finished_ = true;
    ended_->store(true);
    timer_.cancel();
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().close(ignored);
    r.elapsed_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_).count();
    auto done = std::move(done_);
    done(std::move(r));
  }

  asio::io_context& io_;
  lookup_pool& lookups_;
  Stream stream_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_message_;
  http::response_parser<http::empty_body> parser_;
  ledger::webhook_url url_;
  webhook_request request_;
  sender_config config_;
  std::function<void(webhook_response)> done_;
  std::chrono::steady_clock::time_point started_;
  bool finished_ = false;
  // finished_, as the lookup pool's threads read it: a name still queued when its attempts have
  // all ended is not looked up.
  std::shared_ptr<std::atomic<bool>> ended_ = std::make_shared<std::atomic<bool>>(false);
  bool timed_out_ = false;
};

}  // namespace

struct webhook_sender::impl {
  sender_config config;
  asio::io_context io{1};
  asio::ssl::context tls{asio::ssl::context::tls_client};
  // After io: destroyed first, so that no lookup posts to a destroyed io_context.
  lookup_pool lookups;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::thread thread;

  explicit impl(sender_config c)
      : config(std::move(c)), lookups(config.lookup ? config.lookup : lookup_host, config.lookup_threads) {
    tls.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                    asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
    beast::error_code ec;
    if (config.ca_file.empty()) {
      tls.set_default_verify_paths(ec);
    } else {
      tls.load_verify_file(config.ca_file, ec);
    }
    if (ec) throw std::runtime_error("webhooks: cannot load the CA certificates: " + ec.message());
    tls.set_verify_mode(asio::ssl::verify_peer);
  }
};

webhook_sender::webhook_sender(sender_config config) : impl_(std::make_unique<impl>(std::move(config))) {}

webhook_sender::~webhook_sender() { stop(); }

void webhook_sender::start() {
  if (impl_->thread.joinable()) return;
  impl_->work.emplace(impl_->io.get_executor());
  impl_->thread = std::thread([this] { impl_->io.run(); });
}

void webhook_sender::stop() {
  if (!impl_->thread.joinable()) return;
  impl_->work.reset();
  impl_->io.stop();
  impl_->thread.join();
}

void webhook_sender::send(webhook_request request, std::function<void(webhook_response)> done) {
  auto parsed = ledger::parse_webhook_url(request.url);
  if (auto* why = std::get_if<std::string>(&parsed)) {
    webhook_response r;
    r.error = "bad url: " + *why;
    return done(std::move(r));
  }
  auto url = std::get<ledger::webhook_url>(std::move(parsed));
  const bool tls = url.tls;
  asio::post(impl_->io,
             [this, tls, url = std::move(url), request = std::move(request), done = std::move(done)]() mutable {
               if (tls) {
                 std::make_shared<attempt<tls_stream>>(impl_->io, &impl_->tls, impl_->lookups, std::move(url),
                                                       std::move(request), impl_->config, std::move(done))
                     ->start();
               } else {
                 std::make_shared<attempt<plain_stream>>(impl_->io, nullptr, impl_->lookups, std::move(url),
                                                         std::move(request), impl_->config, std::move(done))
                     ->start();
               }
             });
}

}  // namespace events
