#include "tools/loadgen/api.hpp"

#include "base/assert.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/parse.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace loadgen {

namespace asio = boost::asio;

std::optional<boost::json::object> parse_object(const std::string& body) {
  boost::system::error_code ec;
  auto value = boost::json::parse(body, ec);
  if (ec || !value.is_object()) return std::nullopt;
  return std::move(value.as_object());
}

std::optional<std::int64_t> int_field(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (!v) return std::nullopt;
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64() && v->as_uint64() <= static_cast<std::uint64_t>(INT64_MAX)) {
    return static_cast<std::int64_t>(v->as_uint64());
  }
  if (v->is_string()) {
    const auto& s = v->as_string();
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec == std::errc() && end == s.data() + s.size() && !s.empty()) return n;
  }
  return std::nullopt;
}

std::optional<std::string> string_field(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (!v || !v->is_string()) return std::nullopt;
  return std::string(v->as_string());
}

std::string describe(const http_response& response) {
  if (response.error != transport_error::none) return "transport error: " + to_string(response.error);
  // Appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict on `" " + std::string`.
  std::string text = "HTTP ";
  text.append(std::to_string(response.status));
  if (!response.body.empty()) {
    text.push_back(' ');
    text.append(response.body, 0, 200);
  }
  return text;
}

namespace {

bool transient(const http_response& r) {
  return r.error == transport_error::connect || r.error == transport_error::timeout || r.error == transport_error::io ||
         r.error == transport_error::queue_full || r.status == 429 || r.status == 503;
}

struct retrying_call : std::enable_shared_from_this<retrying_call> {
  retrying_call(http_client& c, std::size_t t, http_request r, int max, http_callback cb)
      : client(c), thread(t), request(std::move(r)), attempts_max(max), callback(std::move(cb)), timer(c.context(t)) {}

  void send() {
    ++attempts;
    client.pool(thread).submit(request,
                               [self = shared_from_this()](http_response&& r) { self->on_answer(std::move(r)); });
  }

  void on_answer(http_response&& r) {
    if (!transient(r) || attempts >= attempts_max) {
      callback(std::move(r));
      return;
    }
    // Follow the server's advice when it gives one; otherwise back off 50 ms, 100 ms, ... 2 s.
    double wait_s = r.retry_after_s >= 0 ? std::min(r.retry_after_s, 30.0)
                                         : std::min(2.0, 0.05 * static_cast<double>(1 << std::min(attempts, 6)));
    timer.expires_after(std::chrono::microseconds(static_cast<std::int64_t>(wait_s * 1e6)));
    timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return;  // the client is stopping
      self->send();
    });
  }

  http_client& client;
  std::size_t thread;
  http_request request;
  int attempts_max;
  http_callback callback;
  asio::steady_timer timer;
  int attempts = 0;
};

}  // namespace

void call_with_retries(http_client& client, std::size_t thread, http_request request, int attempts_max,
                       http_callback callback) {
  WALLET_ASSERT(attempts_max >= 1, "a call makes at least one attempt");
  auto call = std::make_shared<retrying_call>(client, thread, std::move(request), attempts_max, std::move(callback));
  asio::post(client.context(thread), [call] { call->send(); });
}

void run_bulk(http_client& client, std::size_t count, std::size_t concurrency, const bulk_task& task) {
  if (count == 0) return;
  struct shared_state {
    std::atomic<std::size_t> next{0};
    std::mutex mutex;
    std::condition_variable all_done;
    std::size_t finished = 0;
  };
  auto state = std::make_shared<shared_state>();
  // A chain runs one task after another until none is left; `concurrency` chains run at once.
  auto chain = std::make_shared<std::function<void(std::size_t)>>();
  *chain = [&client, count, &task, state,
            chain_weak = std::weak_ptr<std::function<void(std::size_t)>>(chain)](std::size_t thread) {
    const std::size_t i = state->next.fetch_add(1);
    if (i >= count) return;
    task(i, thread, [&client, state, thread, chain_weak, count] {
      {
        std::lock_guard lock(state->mutex);
        ++state->finished;
        if (state->finished == count) state->all_done.notify_all();
      }
      // Posted rather than called, so a task that finishes at once cannot grow the stack.
      if (auto next = chain_weak.lock()) asio::post(client.context(thread), [next, thread] { (*next)(thread); });
    });
  };
  const std::size_t chains = std::min(concurrency, count);
  for (std::size_t c = 0; c < chains; ++c) {
    const std::size_t thread = c % client.threads();
    asio::post(client.context(thread), [chain, thread] { (*chain)(thread); });
  }
  std::unique_lock lock(state->mutex);
  state->all_done.wait(lock, [&] { return state->finished == count; });
}

}  // namespace loadgen
