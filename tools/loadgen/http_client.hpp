#pragma once

// The load generator's HTTP/1.1 client: a few I/O threads, each running its own io_context with
// its own pool of keep-alive connections. A request is handled entirely on the thread it was
// submitted to, so a pool needs no locks; callers spread their requests over the threads.

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace loadgen {

enum class http_method { get, post };

struct http_request {
  http_method method = http_method::get;
  std::string target;
  std::string body;  // JSON, for POST
  std::string api_key;
  std::string idempotency_key;  // sent as Idempotency-Key when not empty
};

// Why an exchange produced no HTTP answer.
enum class transport_error { none, connect, timeout, io, queue_full };
std::string to_string(transport_error e);

struct http_response {
  int status = 0;  // 0 when `error` is set
  transport_error error = transport_error::none;
  std::string body;
  double retry_after_s = -1;         // the Retry-After header in seconds; -1 when absent
  bool idempotent_replayed = false;  // `Idempotent-Replayed: true`: the stored answer of an earlier attempt
};

using http_callback = std::function<void(http_response&&)>;

struct pool_settings {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  std::size_t connections_max = 64;
  std::size_t queue_max = 100'000;
  std::chrono::milliseconds timeout{10'000};
};

// Keep-alive connections to one server, used from one io_context thread only.
class http_pool {
 public:
  http_pool(boost::asio::io_context& context, pool_settings settings);
  ~http_pool();
  http_pool(const http_pool&) = delete;
  http_pool& operator=(const http_pool&) = delete;

  // Sends `request` on an idle connection, a new one (up to the maximum), or queues it until one
  // is free. The callback runs on this pool's thread, exactly once.
  void submit(http_request request, http_callback callback);
  void close_all();

  std::size_t open_connections() const;
  std::size_t queued() const;
  std::uint64_t reconnects() const;

  struct state;

 private:
  std::shared_ptr<state> state_;
};

// The I/O threads and their pools.
class http_client {
 public:
  http_client(pool_settings settings, std::size_t threads);
  ~http_client();
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  std::size_t threads() const { return contexts_.size(); }
  boost::asio::io_context& context(std::size_t i) { return *contexts_[i]; }
  // Only from thread i (e.g. inside a handler running on context(i)).
  http_pool& pool(std::size_t i) { return *pools_[i]; }
  // From any thread.
  void submit(std::size_t i, http_request request, http_callback callback);
  std::uint64_t reconnects() const;
  // CPU seconds spent so far by the I/O threads alone (not by the rest of the process); blocks
  // until each thread has answered.
  double io_cpu_seconds();
  // Closes every connection and joins the threads; pending callbacks are dropped.
  void stop();

 private:
  std::vector<std::unique_ptr<boost::asio::io_context>> contexts_;
  std::vector<std::unique_ptr<http_pool>> pools_;
  std::vector<std::thread> threads_;
  bool stopped_ = false;
};

}  // namespace loadgen
