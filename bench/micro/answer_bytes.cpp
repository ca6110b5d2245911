// What writing one answer costs the server in user space: Beast's response message, filled and
// serialized as http/server.cpp did before http/response.hpp, against the head written by hand and
// sent with the body in one write. Both write to a stream that copies every buffer it is given
// into one array, as the kernel's send does, so the buffer sequences' own cost is counted.
// `bench/micro.sh answer_bytes_bench`.

#include <benchmark/benchmark.h>
#include <boost/asio/buffer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <array>
#include <cstring>
#include <string>

#include "http/response.hpp"

namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

// A synchronous stream that takes everything it is given into a fixed array, buffer by buffer.
class copying_stream {
 public:
  template <class ConstBufferSequence>
  std::size_t write_some(const ConstBufferSequence& buffers, boost::system::error_code& ec) {
    ec = {};
    std::size_t n = 0;
    for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers); ++it) {
      const asio::const_buffer b = *it;
      const std::size_t take = std::min(b.size(), sink_.size() - n);
      std::memcpy(sink_.data() + n, b.data(), take);
      n += take;
    }
    benchmark::DoNotOptimize(sink_.data());
    return n;
  }
  template <class ConstBufferSequence>
  std::size_t write_some(const ConstBufferSequence& buffers) {
    boost::system::error_code ec;
    return write_some(buffers, ec);
  }

 private:
  std::array<char, 16384> sink_{};
};

// A transfer's answer as the server gives it: 201, JSON receipt, three fields of its own.
api::reply transfer_reply() {
  api::reply r;
  r.status = 201;
  r.body = R"({"transactionId":"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","status":"posted","type":"transfer",)"
           R"("currency":"USD","amount":"1250","fee":"0","fromAccountId":"1017","toAccountId":"42",)"
           R"("createdAt":"2026-12-07T15:04:05.123456Z","entries":[{"accountId":"1017","amount":"-1250"},)"
           R"({"accountId":"42","amount":"1250"}]})";
  r.headers = {{"Location", "/v1/transactions/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"},
               {"Idempotent-Replayed", "false"},
               {"X-RateLimit-Remaining", "41"}};
  return r;
}

const std::string k_request_id = "5b0c1e7a9f2d4c6e8a1b3d5f7e9c2a4b";

void beast_message_and_serializer(benchmark::State& state) {
  copying_stream stream;
  const auto reply = transfer_reply();
  for (auto _ : state) {
    auto r = reply;  // the server gets its reply by value and moves its body into the message
    bhttp::response<bhttp::string_body> res(static_cast<bhttp::status>(r.status), 11);
    res.set(bhttp::field::server, "wallet-server");
    res.set(bhttp::field::content_type, r.content_type);
    res.set("X-Request-Id", k_request_id);
    for (const auto& [name, value] : r.headers) res.set(name, value);
    res.body() = std::move(r.body);
    res.keep_alive(true);
    res.prepare_payload();
    bhttp::write(stream, res);
  }
}
BENCHMARK(beast_message_and_serializer);

void head_by_hand_and_body(benchmark::State& state) {
  copying_stream stream;
  const auto reply = transfer_reply();
  for (auto _ : state) {
    auto r = reply;
    const std::string head = api::serialize_head(r, k_request_id, 11, true);
    const std::string body = std::move(r.body);
    const std::array<asio::const_buffer, 2> buffers{asio::buffer(head), asio::buffer(body)};
    asio::write(stream, buffers);
  }
}
BENCHMARK(head_by_hand_and_body);

}  // namespace

BENCHMARK_MAIN();
