// The HTTP server skeleton (issue 2) against a real wallet-server, PostgreSQL and Redis:
// health, readiness, metrics, the error statuses of the transport, read deadlines, graceful
// shutdown, JSON logs and configuration errors.

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <functional>
#include <future>
#include <sstream>
#include <thread>

#include "tests/support/net.hpp"
#include "tests/support/process.hpp"
#include "tests/support/services.hpp"
#include "tests/support/support.hpp"

namespace ts = test_support;
using test_support::transfer_body;
using namespace std::chrono_literals;

namespace {

constexpr int body_bytes_max = 1024;
// Seconds, not fractions of one: the tests below must outlast a busy machine's stalls on their own
// side (a request sent every 250 ms, a second client served meanwhile) within them.
constexpr int read_timeout_ms = 3'000;
constexpr int keep_alive_timeout_ms = 4'000;

// The problem+json members every error answer carries; returns the `code`.
std::string problem_code(const ts::response& r) {
  EXPECT_EQ(r.header("Content-Type"), "application/problem+json") << r.body;
  const auto j = r.json().as_object();
  EXPECT_EQ(j.at("status").as_int64(), r.status) << r.body;
  EXPECT_FALSE(j.at("title").as_string().empty()) << r.body;
  EXPECT_FALSE(j.at("detail").as_string().empty()) << r.body;
  return std::string(j.at("code").as_string());
}

// Splits a raw HTTP response into its status code and body (the part after the blank line).
std::pair<int, std::string> parse_raw_response(const std::string& bytes) {
  if (bytes.rfind("HTTP/1.1 ", 0) != 0 || bytes.size() < 12) return {0, bytes};
  const int status = std::stoi(bytes.substr(9, 3));
  const auto blank = bytes.find("\r\n\r\n");
  return {status, blank == std::string::npos ? std::string() : bytes.substr(blank + 4)};
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// One server for the tests that only look at the transport: a small body limit and a short
// read deadline, so that 413 and the slow-client disconnect are cheap to reach.
class HttpServer : public ts::shared_server_test<HttpServer> {
 public:
  static ts::server_process::options options() {
    ts::server_process::options o;
    o.env["WALLET_HTTP_BODY_BYTES_MAX"] = std::to_string(body_bytes_max);
    o.env["WALLET_HTTP_READ_TIMEOUT_MS"] = std::to_string(read_timeout_ms);
    o.env["WALLET_HTTP_KEEP_ALIVE_TIMEOUT_MS"] = std::to_string(keep_alive_timeout_ms);
    return o;
  }
};

// /healthz answers 200 with a JSON status while the process runs, without any credentials.
TEST_F(HttpServer, HealthzAnswers200) {
  ts::http_client c(port());
  auto r = c.request("GET", "/healthz");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("Content-Type"), "application/json");
  EXPECT_EQ(r.json().as_object().at("status").as_string(), "ok");
  EXPECT_FALSE(r.header("X-Request-Id").empty());
  EXPECT_EQ(r.header("Content-Length"), std::to_string(r.body.size()));
}

// /readyz answers 200 naming both dependencies when PostgreSQL and the shared Redis answer.
TEST_F(HttpServer, ReadyzAnswers200WhenDependenciesAnswer) {
  ts::http_client c(port());
  auto r = c.request("GET", "/readyz");
  ASSERT_EQ(r.status, 200) << r.body;
  const auto j = r.json().as_object();
  EXPECT_EQ(j.at("status").as_string(), "ready");
  EXPECT_EQ(j.at("database").as_string(), "ok");
  EXPECT_EQ(j.at("redis").as_string(), "ok");
}

// /metrics counts exactly the requests just made: the series for /healthz 200 and for an
// unmatched 404 grow by the number of requests sent between two scrapes, and the page is
// Prometheus text with the latency histogram and connection gauge.
TEST_F(HttpServer, MetricsCountTheRequestsJustMade) {
  ts::http_client c(port());
  const std::string healthz = "wallet_http_requests_total{route=\"/healthz\",status=\"200\"}";
  const std::string unmatched = "wallet_http_requests_total{route=\"unmatched\",status=\"404\"}";
  auto before = c.request("GET", "/metrics");
  ASSERT_EQ(before.status, 200);
  EXPECT_EQ(before.header("Content-Type").rfind("text/plain", 0), 0u) << before.header("Content-Type");
  const double healthz_before = ts::metric(before.body, healthz).value_or(0);
  const double unmatched_before = ts::metric(before.body, unmatched).value_or(0);

  for (int i = 0; i < 7; ++i) ASSERT_EQ(c.request("GET", "/healthz").status, 200);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(c.request("GET", "/no/such/route/" + std::to_string(i)).status, 404);

  auto after = c.request("GET", "/metrics");
  ASSERT_EQ(after.status, 200);
  EXPECT_EQ(ts::metric(after.body, healthz).value_or(-1), healthz_before + 7) << after.body;
  EXPECT_EQ(ts::metric(after.body, unmatched).value_or(-1), unmatched_before + 3) << after.body;
  // The first scrape itself was counted before the second one was rendered.
  EXPECT_GE(ts::metric(after.body, "wallet_http_requests_total{route=\"/metrics\",status=\"200\"}").value_or(0), 1);
  EXPECT_GE(ts::metric(after.body, "wallet_http_request_duration_seconds_count{route=\"/healthz\"}").value_or(0),
            healthz_before + 7);
  EXPECT_TRUE(ts::metric(after.body, "wallet_http_request_duration_seconds_bucket{route=\"/healthz\",le=\"+Inf\"}"));
  EXPECT_GE(ts::metric(after.body, "wallet_http_open_connections").value_or(0), 1);
  EXPECT_NE(after.body.find("# TYPE wallet_http_requests_total counter"), std::string::npos);
  EXPECT_NE(after.body.find("# TYPE wallet_http_request_duration_seconds histogram"), std::string::npos);
}

// An unknown route answers 404 problem+json with code route_not_found, with or without a key.
TEST_F(HttpServer, UnknownRouteIs404Problem) {
  ts::http_client c(port());
  for (const auto& target : {"/nope", "/v1/nothing-here", "/v1/accounts/12/unknown", "/v2/transfers"}) {
    auto r = c.request("GET", target);
    ASSERT_EQ(r.status, 404) << target << " " << r.body;
    EXPECT_EQ(problem_code(r), "route_not_found") << target;
  }
  auto r = c.get("/v1/no-such-collection", op());
  ASSERT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(problem_code(r), "route_not_found");
}

// A known path with the wrong method answers 405 problem+json with an Allow header naming the
// method that path takes.
TEST_F(HttpServer, WrongMethodIs405WithAllow) {
  ts::http_client c(port());
  struct probe {
    const char* method;
    const char* target;
    const char* allow;
  };
  for (const auto& p :
       {probe{"GET", "/v1/transfers", "POST"}, probe{"DELETE", "/healthz", "GET"}, probe{"POST", "/metrics", "GET"},
        probe{"PUT", "/v1/accounts/1", "GET"}, probe{"GET", "/v1/deposits", "POST"}}) {
    auto r = c.request(p.method, p.target, {}, {{"Authorization", "Bearer " + op()}});
    ASSERT_EQ(r.status, 405) << p.method << " " << p.target << " " << r.body;
    EXPECT_EQ(r.header("Allow"), p.allow) << p.method << " " << p.target;
    EXPECT_EQ(problem_code(r), "method_not_allowed");
  }
}

// A body over http.body_bytes_max answers 413 problem+json (payload_too_large), whether the
// size is declared by Content-Length or only discovered while reading a chunked body; a body
// of exactly the limit still reaches the route (which then judges its JSON).
TEST_F(HttpServer, OversizedBodyIs413) {
  {
    ts::http_client c(port());
    auto r = c.post("/v1/transfers", op(), std::string(body_bytes_max + 1, 'x'), ts::unique_key("big"));
    ASSERT_EQ(r.status, 413) << r.body;
    EXPECT_EQ(problem_code(r), "payload_too_large");
  }
  {
    // Chunked: no length up front, the limit trips in the middle of the body.
    ts::raw_connection raw(port());
    std::string request =
        "POST /v1/transfers HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\nAuthorization: Bearer " +
        op() + "\r\n\r\n";
    for (int i = 0; i < 4; ++i) request += "200\r\n" + std::string(512, 'y') + "\r\n";
    request += "0\r\n\r\n";
    raw.send(request);
    auto got = raw.read_until_closed(10s);
    auto [status, body] = parse_raw_response(got.bytes);
    ASSERT_EQ(status, 413) << got.bytes;
    EXPECT_NE(body.find("\"code\":\"payload_too_large\""), std::string::npos) << body;
  }
  {
    ts::http_client c(port());
    std::string exact(body_bytes_max, ' ');
    exact.front() = '{';
    exact.back() = '}';
    auto r = c.post("/v1/transfers", op(), exact, ts::unique_key("exact"));
    ASSERT_EQ(r.status, 400) << r.body;  // within the limit: the route refuses the empty object
    EXPECT_EQ(problem_code(r), "invalid_request");
  }
}

// A client that sends its whole body before it reads anything (Python's http.client and
// requests do) still receives the 413: the server answers, then reads and discards the rest of
// the body before it closes. Closing at once resets the connection under the sender, which then
// sees a broken pipe instead of the answer.
TEST_F(HttpServer, OversizedBodyIs413EvenForClientsThatSendAllOfItFirst) {
  ts::raw_connection raw(port());
  const std::size_t body_size = 8 * 1024 * 1024;
  const std::string head =
      "POST /v1/transfers HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body_size) + "\r\nAuthorization: Bearer " + op() + "\r\n\r\n";
  ASSERT_TRUE(raw.send(head));
  ASSERT_TRUE(raw.send(std::string(body_size, 'x'))) << "the server reset the connection before the body was sent";
  auto got = raw.read_until_closed(30s);
  auto [status, body] = parse_raw_response(got.bytes);
  EXPECT_EQ(status, 413) << got.bytes.substr(0, 200);
  EXPECT_NE(body.find("\"code\":\"payload_too_large\""), std::string::npos) << body;
  EXPECT_TRUE(got.closed);
}

// Garbage bytes that are not HTTP answer 400 problem+json (malformed_request) and the server
// then closes the connection.
TEST_F(HttpServer, MalformedRequestIs400AndConnectionClosed) {
  for (const std::string& garbage :
       {std::string("\x01\x02\x03 garbage \xff\xfe\r\n\r\n"), std::string("GET /healthz HTTP/9.9.9\r\n\r\n"),
        std::string("GET /healthz HTTP/1.1\r\nBad Header Line\r\n\r\n")}) {
    ts::raw_connection raw(port());
    ASSERT_TRUE(raw.send(garbage));
    const auto started = std::chrono::steady_clock::now();
    auto got = raw.read_until_closed(10s);
    EXPECT_TRUE(got.closed) << "the server kept the connection open after: " << garbage;
    EXPECT_LT(ts::elapsed_ms(started), 5000);
    auto [status, body] = parse_raw_response(got.bytes);
    ASSERT_EQ(status, 400) << got.bytes;
    EXPECT_NE(lower(got.bytes).find("connection: close"), std::string::npos) << got.bytes;
    EXPECT_NE(lower(got.bytes).find("content-type: application/problem+json"), std::string::npos) << got.bytes;
    auto j = boost::json::parse(body).as_object();
    EXPECT_EQ(j.at("code").as_string(), "malformed_request");
    EXPECT_EQ(j.at("status").as_int64(), 400);
  }
}

// A header the server reads once (Authorization, Idempotency-Key, Content-Type, Wallet-Signature)
// sent twice is 400 malformed_request naming it: a proxy or a signer that read the other copy
// would see another request than the server. Headers that may repeat (Accept) are left alone.
TEST_F(HttpServer, AHeaderReadOnceThatIsSentTwiceIs400) {
  for (const std::string header : {"Authorization: Bearer a", "Idempotency-Key: k", "Content-Type: application/json",
                                   "Wallet-Signature: t=1,v1=00"}) {
    const auto name = header.substr(0, header.find(':'));
    ts::raw_connection raw(port());
    ASSERT_TRUE(raw.send("POST /v1/transfers HTTP/1.1\r\nHost: t\r\n" + header + "\r\n" + header +
                         "2\r\nContent-Length: 2\r\n\r\n{}"));
    auto got = raw.read_until_closed(10s);
    EXPECT_TRUE(got.closed) << name;
    auto [status, body] = parse_raw_response(got.bytes);
    ASSERT_EQ(status, 400) << got.bytes;
    auto j = boost::json::parse(body).as_object();
    EXPECT_EQ(j.at("code").as_string(), "malformed_request") << name;
    EXPECT_NE(std::string(j.at("detail").as_string()).find("the " + name + " header appears more than once"),
              std::string::npos)
        << body;
  }
  ts::raw_connection raw(port());
  ASSERT_TRUE(raw.send("GET /healthz HTTP/1.1\r\nHost: t\r\nAccept: a/b\r\nAccept: */*\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(parse_raw_response(raw.read_until_closed(10s).bytes).first, 200);
}

// A header block over http.header_bytes_max (8 KiB by default) answers 431 problem+json
// (headers_too_large) and the connection is closed.
TEST_F(HttpServer, OversizedHeadersAre431) {
  ts::raw_connection raw(port());
  ASSERT_TRUE(raw.send("GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: " + std::string(10 * 1024, 'h') + "\r\n\r\n"));
  auto got = raw.read_until_closed(10s);
  EXPECT_TRUE(got.closed);
  auto [status, body] = parse_raw_response(got.bytes);
  ASSERT_EQ(status, 431) << got.bytes;
  EXPECT_NE(body.find("\"code\":\"headers_too_large\""), std::string::npos) << body;
}

// A chunked request's trailer is a header block that Beast does not bound (it only waits for
// its end), and neither are chunk extensions: the connection's read buffer is bounded instead
// (header_bytes_max + 4 KiB), so a long trailer, a long chunk extension and a trailer that never
// ends are each refused with 400 problem+json once it is full, not buffered until the read
// deadline (on a fast link, gigabytes per connection).
TEST_F(HttpServer, TrailersAndChunkExtensionsAreBoundedByTheReadBuffer) {
  const std::string head = "GET /healthz HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string long_trailer = head + "0\r\nX-Trailer: " + std::string(20 * 1024, 't') + "\r\n\r\n";
  const std::string long_extension = head + "1;ext=" + std::string(20 * 1024, 'e') + "\r\nx\r\n0\r\n\r\n";
  for (const std::string& request : {long_trailer, long_extension}) {
    ts::raw_connection raw(port());
    // The server may close before it has read everything: what counts is its answer.
    raw.send(request);
    auto got = raw.read_until_closed(10s);
    EXPECT_TRUE(got.closed);
    auto [status, body] = parse_raw_response(got.bytes);
    ASSERT_EQ(status, 400) << request.substr(0, 120) << " -> " << got.bytes;
    EXPECT_NE(body.find("\"code\":\"malformed_request\""), std::string::npos) << body;
  }
  // A trailer that never ends: the client keeps sending (up to 1 MiB) until the server answers.
  ts::raw_connection endless(port());
  ASSERT_TRUE(endless.send(head + "0\r\nX-Trailer: "));
  const std::string piece(4096, 't');
  for (int sent = 0; sent < 256 && !endless.peer_closed() && endless.send(piece); ++sent) {}
  auto got = endless.read_until_closed(10s);
  EXPECT_TRUE(got.closed);
  auto [status, body] = parse_raw_response(got.bytes);
  ASSERT_EQ(status, 400) << got.bytes;
  EXPECT_NE(body.find("\"code\":\"malformed_request\""), std::string::npos) << body;
}

// An idle keep-alive connection is closed once http.keep_alive_timeout_ms (4 s here) passes
// without a new request, while one that keeps sending requests stays open.
TEST_F(HttpServer, IdleKeepAliveConnectionIsClosedAfterItsTimeout) {
  ts::raw_connection busy(port());
  ts::raw_connection idle(port());
  const auto started = std::chrono::steady_clock::now();
  const std::string healthz = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
  long long idle_closed_ms = -1;
  // Until the idle one is closed and the busy one has outlived the timeout by 500 ms.
  while (ts::elapsed_ms(started) < keep_alive_timeout_ms + 30'000 &&
         (idle_closed_ms < 0 || ts::elapsed_ms(started) < keep_alive_timeout_ms + 500)) {
    ASSERT_TRUE(busy.send(healthz)) << "the busy connection was closed";
    if (idle_closed_ms < 0 && idle.peer_closed()) idle_closed_ms = ts::elapsed_ms(started);
    std::this_thread::sleep_for(250ms);
  }
  EXPECT_FALSE(busy.peer_closed()) << "a connection in use was closed";
  ASSERT_GE(idle_closed_ms, 0) << "the idle connection was never closed";
  EXPECT_GE(idle_closed_ms, keep_alive_timeout_ms - 100);
  EXPECT_TRUE(idle.received().empty()) << idle.received();
}

// A client that dribbles a request one byte per 100 ms is disconnected once
// http.read_timeout_ms (3 s) has passed since its first byte, while another client is
// served normally in the meantime.
TEST_F(HttpServer, SlowClientIsDisconnectedWhileOthersAreServed) {
  ts::raw_connection slow(port());
  const std::string request =
      "POST /v1/transfers HTTP/1.1\r\nHost: t\r\nX-Padding: " + std::string(200, 'a') + "\r\n\r\n";
  const auto started = std::chrono::steady_clock::now();
  long long closed_after_ms = -1;
  bool other_served = false;
  for (std::size_t i = 0; i < request.size(); ++i) {
    if (!slow.send(request.substr(i, 1)) || slow.peer_closed()) {
      closed_after_ms = ts::elapsed_ms(started);
      break;
    }
    if (i == 2) {
      // The slow client holds its connection; a normal one is answered at once meanwhile.
      ts::http_client other(port(), 5s);
      auto r = other.request("GET", "/healthz");
      EXPECT_EQ(r.status, 200);
      other_served = !slow.peer_closed();
    }
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(other_served) << "the other client was not served while the slow one was connected";
  ASSERT_GE(closed_after_ms, 0) << "the slow client sent its whole request (" << ts::elapsed_ms(started)
                                << " ms) without being disconnected";
  // The deadline starts with the first byte, so the server cannot close earlier than 3 s (and it
  // closed before the whole request, 23 s of dribbling, was sent).
  EXPECT_GE(closed_after_ms, read_timeout_ms - 50);
  // No answer was owed: the request never completed.
  EXPECT_EQ(slow.received().find("HTTP/1.1 201"), std::string::npos) << slow.received();
}

// Over http.connections_max (4) open connections, a new connection is closed at accept
// without an answer and counted in /metrics; once connections close, new ones are served.
TEST(HttpConnections, ConnectionsOverTheBoundAreClosedAtAccept) {
  ts::server_process::options o;
  o.env["WALLET_HTTP_CONNECTIONS_MAX"] = "4";
  ts::server_process server(o);
  // Four connections held open, each known to be accepted because it was answered. The
  // server notices closed connections (e.g. the start-up probe's) asynchronously, so a slot
  // may be refused for a moment: retry it, bounded.
  std::vector<std::unique_ptr<ts::raw_connection>> held;
  for (int i = 0; i < 4; ++i) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      auto h = std::make_unique<ts::raw_connection>(server.port());
      ASSERT_TRUE(h->send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n") || attempt < 99);
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      while (h->received().find("\r\n\r\n") == std::string::npos && !h->peer_closed() &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
      }
      if (h->received().rfind("HTTP/1.1 200", 0) == 0) {
        held.push_back(std::move(h));
        break;
      }
      std::this_thread::sleep_for(50ms);
    }
  }
  ASSERT_EQ(held.size(), 4u) << "could not hold four connections under a bound of four";
  {
    ts::raw_connection extra(server.port());
    extra.send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
    auto got = extra.read_until_closed(10s);
    EXPECT_TRUE(got.closed) << "a fifth connection was kept open";
    EXPECT_TRUE(got.bytes.empty()) << got.bytes;
  }
  held.clear();
  // The server notices the closed connections asynchronously: a bounded retry.
  ts::response page;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      ts::http_client c(server.port(), 2s);
      page = c.request("GET", "/metrics");
      if (page.status == 200) break;
    } catch (const std::exception&) {
      // still at the bound
    }
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(page.status, 200);
  EXPECT_GE(ts::metric(page.body, "wallet_http_connections_refused_total").value_or(0), 1) << page.body;
}

// Out of file descriptors, accept fails and the connection stays in the listen backlog, so an
// immediate retry fails again at once. The server waits 100 ms between attempts instead of
// spinning (and logs a line a second, not one per attempt); once descriptors are freed, the
// connections that waited in the backlog are served.
TEST(HttpConnections, AcceptWaitsWhileFileDescriptorsRunOut) {
  ts::server_process::options o;
  o.open_files_max = 160;  // the server starts with well under this; the connections below exceed it
  const auto started = std::chrono::steady_clock::now();
  ts::server_process server(o);
  std::vector<std::unique_ptr<ts::raw_connection>> connections;
  for (int i = 0; i < 200; ++i) {
    connections.push_back(std::make_unique<ts::raw_connection>(server.port()));
    ASSERT_TRUE(connections.back()->send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  }
  // Two throttled lines are at least a second of failing accepts.
  const auto count_lines = [&] {
    const std::string log = server.log();
    std::size_t n = 0;
    for (auto at = log.find("accept failed"); at != std::string::npos; at = log.find("accept failed", at + 1)) ++n;
    return n;
  };
  for (auto deadline = std::chrono::steady_clock::now() + 60s;
       count_lines() < 2 && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_GE(count_lines(), 2u) << server.log();

  // The connections answered so far were accepted; closing them frees their descriptors. The
  // rest waited in the backlog (or were accepted just before the descriptors ran out), and each
  // is served and then closed, which frees a descriptor for the next.
  std::vector<std::unique_ptr<ts::raw_connection>> waiting;
  for (auto& c : connections) {
    c->peer_closed();  // reads what has arrived
    if (c->received().empty()) waiting.push_back(std::move(c));
  }
  connections.clear();
  ASSERT_FALSE(waiting.empty()) << "every connection was served: the descriptors never ran out";
  for (auto& c : waiting) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (c->received().find("\r\n\r\n") == std::string::npos && !c->peer_closed() &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
    EXPECT_EQ(c->received().rfind("HTTP/1.1 200", 0), 0u) << "a connection from the backlog was not served";
    c.reset();
  }
  connections.clear();

  ts::response page;
  for (auto deadline = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < deadline;) {
    try {
      page = ts::http_client(server.port(), 2s).request("GET", "/metrics");
      if (page.status == 200) break;
    } catch (const std::exception&) {
      // descriptors not all released yet
    }
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(page.status, 200);
  // One attempt per 100 ms at most, from the server's start until now: an upper bound that
  // holds however slow the machine is. Retrying at once would fail thousands of times a second.
  const auto elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
  const auto failures = ts::metric(page.body, "wallet_http_accept_failures_total").value_or(-1);
  EXPECT_GE(failures, 2) << page.body;
  EXPECT_LE(failures, elapsed_ms / 100 + 1) << "over " << elapsed_ms << " ms";
}

// Bodies over http.body_bytes_max are read whole before the request is authenticated, so together
// they are bounded: four of the largest a route allows. With settlement reports of at most 256 KiB,
// four such requests waiting for their bodies fill the budget, a fifth is answered 503 before its
// body is read, and once the four are answered a large body is read again.
TEST(HttpConnections, LargeBodiesInFlightAreBounded) {
  ts::server_process::options o;
  o.env["WALLET_HTTP_SETTLEMENT_BODY_BYTES_MAX"] = "262144";
  o.env["WALLET_HTTP_READ_TIMEOUT_MS"] = "120000";  // the held requests wait for their bodies
  ts::server_process server(o);
  const std::string body(262144, ' ');
  const std::string head =
      "POST /v1/admin/settlements HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
      "Content-Length: 262144\r\n\r\n";
  const auto answer_of = [](ts::raw_connection& c) {
    for (auto deadline = std::chrono::steady_clock::now() + 30s; c.received().find("\r\n\r\n") == std::string::npos &&
                                                                 !c.peer_closed() &&
                                                                 std::chrono::steady_clock::now() < deadline;) {
      std::this_thread::sleep_for(10ms);
    }
    return c.received().substr(0, c.received().find("\r\n"));
  };

  std::vector<std::unique_ptr<ts::raw_connection>> requests;
  for (int i = 0; i < 5; ++i) {
    requests.push_back(std::make_unique<ts::raw_connection>(server.port()));
    ASSERT_TRUE(requests.back()->send(head));
  }
  // Exactly one of the five is refused, whichever header the server read last.
  std::size_t refused = requests.size();
  for (auto deadline = std::chrono::steady_clock::now() + 30s;
       refused == requests.size() && std::chrono::steady_clock::now() < deadline;) {
    for (std::size_t i = 0; i < requests.size(); ++i) {
      requests[i]->peer_closed();  // reads what has arrived
      if (requests[i]->received().rfind("HTTP/1.1 503", 0) == 0) refused = i;
    }
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_LT(refused, requests.size()) << "no request was refused with four large bodies in flight";
  EXPECT_NE(requests[refused]->received().find("server_busy"), std::string::npos) << requests[refused]->received();
  requests.erase(requests.begin() + static_cast<std::ptrdiff_t>(refused));
  // The other four were waiting for their bodies: sent now, each is read and then refused for
  // want of a key (401), not for want of room.
  for (auto& c : requests) {
    ASSERT_TRUE(c->send(body));
    EXPECT_EQ(answer_of(*c), "HTTP/1.1 401 Unauthorized");
  }
  requests.clear();

  std::string status;
  for (auto deadline = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < deadline;) {
    ts::raw_connection again(server.port());
    ASSERT_TRUE(again.send(head + body));
    status = answer_of(again);
    if (status.rfind("HTTP/1.1 503", 0) != 0) break;
    std::this_thread::sleep_for(50ms);  // a reservation given back only just after its answer was sent
  }
  EXPECT_EQ(status, "HTTP/1.1 401 Unauthorized");
}

// /readyz follows Redis: 200 while a private redis-server answers, 503 problem+json naming
// Redis (code redis_unavailable, with Retry-After) once it is killed, and 200 again after it
// is started on the same port, without restarting the wallet server.
TEST(HttpReadiness, ReadyzFollowsRedis) {
  ts::redis_process redis(ts::free_port());
  redis.start();
  ts::server_process::options o;
  o.env["WALLET_REDIS_URL"] = redis.url();
  o.env["WALLET_REDIS_RETRY_INTERVAL_MS"] = "200";
  ts::server_process server(o);
  ts::http_client c(server.port(), 10s);

  auto up = c.request("GET", "/readyz");
  ASSERT_EQ(up.status, 200) << up.body;

  redis.kill();
  ts::response down;
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  do {
    down = c.request("GET", "/readyz");
    if (down.status == 503) break;
    std::this_thread::sleep_for(100ms);
  } while (std::chrono::steady_clock::now() < deadline);
  ASSERT_EQ(down.status, 503) << down.body;
  EXPECT_EQ(problem_code(down), "redis_unavailable");
  const std::string detail(down.json().as_object().at("detail").as_string());
  EXPECT_NE(lower(detail).find("redis"), std::string::npos) << detail;
  EXPECT_EQ(lower(detail).find("database"), std::string::npos) << "only Redis failed: " << detail;
  EXPECT_FALSE(down.header("Retry-After").empty());
  // Liveness is not readiness: the process still answers /healthz.
  EXPECT_EQ(c.request("GET", "/healthz").status, 200);

  redis.start();
  ts::response again;
  const auto back_deadline = std::chrono::steady_clock::now() + 20s;
  do {
    again = c.request("GET", "/readyz");
    if (again.status == 200) break;
    std::this_thread::sleep_for(100ms);
  } while (std::chrono::steady_clock::now() < back_deadline);
  EXPECT_EQ(again.status, 200) << again.body;
}

// A server whose database statements and requests may wait 30 s (so that a test's row lock, not a
// timeout, decides when a transfer finishes), with `grace_ms` of shutdown grace, and two
// principals' accounts: a (5,000) and b.
struct shutdown_setup {
  std::unique_ptr<ts::server_process> server;
  ts::principal alice;
  std::int64_t a = 0, b = 0;

  // A transfer of 1,200 from a to b with `key`, on a connection of its own, as it runs.
  std::future<ts::response> transfer(const std::string& key) const {
    return std::async(std::launch::async, [port = server->port(), key = alice.key, a = a, b = b, idempotency = key] {
      ts::http_client client(port, 60s);
      return client.post("/v1/transfers", key, transfer_body(a, b, 1200), idempotency);
    });
  }
};
// Whether connections to `port` are refused (the listener closed) within 30 s.
bool refuses_connections(int port) {
  return ts::eventually(
      [port] {
        try {
          ts::raw_connection probe(port);
          return false;
        } catch (const std::runtime_error&) {
          return true;
        }
      },
      30s, 20ms);
}

shutdown_setup shutdown_scene(const std::string& grace_ms) {
  ts::server_process::options o;
  o.env["WALLET_DATABASE_LOCK_TIMEOUT_MS"] = "30000";
  o.env["WALLET_DATABASE_STATEMENT_TIMEOUT_MS"] = "30000";
  o.env["WALLET_HTTP_REQUEST_DEADLINE_MS"] = "30000";
  o.env["WALLET_HTTP_READ_TIMEOUT_MS"] = "60000";
  o.env["WALLET_HTTP_SHUTDOWN_GRACE_MS"] = grace_ms;
  shutdown_setup out;
  out.server = std::make_unique<ts::server_process>(o);
  ts::http_client c(out.server->port());
  const auto& op = out.server->operator_key();
  out.alice = ts::create_principal(c, op);
  const auto bob = ts::create_principal(c, op);
  out.a = ts::create_account(c, op, out.alice.id);
  out.b = ts::create_account(c, op, bob.id);
  ts::deposit(c, op, out.a, 5000);
  return out;
}

// A transfer in flight when SIGTERM arrives still completes: an owner transaction holds the
// payer's row lock so the ledger writer waits; SIGTERM is sent; the server stops accepting
// connections and closes its idle ones (in order, before the transfer is answered) but keeps
// running; the lock is released; the transfer answers 201 and commits; then the process exits 0.
TEST(HttpShutdown, RequestInFlightAtSigtermCompletes) {
  auto scene = shutdown_scene("30000");
  auto& [server, alice, a, b] = scene;

  ts::account_lock lock({a});

  const std::string key = ts::unique_key("shutdown");
  // A connection kept alive from before SIGTERM, idle.
  ts::raw_connection kept(server->port());
  ASSERT_TRUE(kept.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  ASSERT_TRUE(ts::eventually([&] {
    return !kept.peer_closed() && kept.received().find("\"ok\"") != std::string::npos;
  })) << kept.received();
  auto transfer = scene.transfer(key);
  // The transfer is in flight once the ledger writer waits on our lock.
  ASSERT_TRUE(ts::eventually([&] { return lock.waiters() >= 1; }, 15s, 20ms))
      << "the transfer never reached the database";

  auto exit_code = std::async(std::launch::async, [&] { return server->terminate(60s); });
  // Stopping: new connections are refused while the transfer is still waiting.
  EXPECT_TRUE(refuses_connections(server->port())) << "the server still accepts connections after SIGTERM";
  // The idle connection is closed, in order (not reset), with nothing more said on it.
  const std::string kept_before = kept.received();
  const auto kept_end = kept.read_until_closed(30s);
  EXPECT_TRUE(kept_end.closed) << "the idle kept-alive connection was left open";
  EXPECT_FALSE(kept_end.reset);
  EXPECT_EQ(kept_end.bytes, kept_before);
  ASSERT_EQ(transfer.wait_for(0ms), std::future_status::timeout) << "the transfer ended before the lock was released";
  ASSERT_EQ(exit_code.wait_for(0ms), std::future_status::timeout) << "the server exited with a request in flight";

  lock.release();
  auto r = transfer.get();
  EXPECT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(lower(r.header("Connection")), "close");
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM journal_transaction WHERE principal_id = " +
                            std::to_string(alice.id) + " AND idempotency_key = '" + key + "'"),
            "1");
  EXPECT_EQ(ts::query_value("SELECT balance FROM account WHERE id = " + std::to_string(a)), "3800");

  // With nothing left in flight the process must exit promptly. (It once hung here for good:
  // ~actor_system waited for account actors nobody stopped.) If it hangs, end it so that the
  // failure is reported in 10 s rather than after the 60 s terminate() wait.
  if (exit_code.wait_for(10s) != std::future_status::ready) {
    server->send_signal(SIGKILL);
    exit_code.get();
    FAIL() << "the server did not exit within 10 s of finishing its last request:\n" << server->log();
  }
  EXPECT_EQ(exit_code.get(), 0) << server->log();
}

// An answer that comes after the request's deadline answered it (503 deadline_exceeded) is
// dropped, and the server goes on. The payer's row is locked past the deadline, so the writer
// commits the transfer, and its answer arrives, after the client was told the outcome is unknown
// (on a connection still open: a server once crashed on exactly that). A retry with the same key
// then finds the committed transfer. The accounts are made by a server with the usual deadline.
TEST(HttpDeadline, ALateAnswerIsDroppedAndTheServerGoesOn) {
  auto scene = shutdown_scene("5000");
  auto& [setup_server, alice, a, b] = scene;
  setup_server.reset();
  ts::server_process::options o;
  o.env["WALLET_DATABASE_LOCK_TIMEOUT_MS"] = "30000";
  o.env["WALLET_DATABASE_STATEMENT_TIMEOUT_MS"] = "30000";
  o.env["WALLET_HTTP_REQUEST_DEADLINE_MS"] = "300";
  ts::server_process server(o);
  ts::http_client c(server.port(), 60s);
  const std::string key = ts::unique_key("late-answer");
  // The key and both accounts known to this server first, so that the transfer below goes
  // straight to the writer (retried while a cold lookup takes longer than the deadline).
  const std::string warm_key = ts::unique_key("warm");
  ASSERT_TRUE(ts::eventually(
      [&] { return c.post("/v1/transfers", alice.key, transfer_body(a, b, 1), warm_key).status == 201; }, 60s, 50ms));

  ts::account_lock lock({a});
  const auto first = c.post("/v1/transfers", alice.key, transfer_body(a, b, 1200), key);
  EXPECT_EQ(first.status, 503) << first.body;
  EXPECT_EQ(problem_code(first), "deadline_exceeded") << first.body;
  ASSERT_TRUE(ts::eventually([&] { return lock.waiters() >= 1; }, 30s, 20ms))
      << "the transfer never reached the database";
  lock.release();
  ASSERT_TRUE(ts::eventually(
      [&] {
        return ts::query_value("SELECT count(*) FROM journal_transaction WHERE principal_id = " +
                               std::to_string(alice.id) + " AND idempotency_key = '" + key + "'") == "1";
      },
      30s, 20ms))
      << "the transfer did not commit once its row was free";
  // The late answer has been dropped by now or is being dropped: the connection that got the
  // deadline's answer still works, and a retry with the key is answered from the stored result.
  ts::response retry;
  ASSERT_TRUE(ts::eventually(
      [&] {
        retry = c.post("/v1/transfers", alice.key, transfer_body(a, b, 1200), key);
        return retry.status != 503;
      },
      60s, 50ms))
      << retry.body;
  EXPECT_EQ(retry.status, 201) << retry.body;
  EXPECT_EQ(c.request("GET", "/healthz").status, 200);
  EXPECT_EQ(server.terminate(60s), 0) << server.log();
}

// A request begun before SIGTERM (its header read: the server asked for the body with 100
// Continue) whose body arrives after it, with nothing else in flight: the server waits for it
// rather than closing its connection, refuses it (503 server_busy, Retry-After, Connection:
// close), writes nothing of it, and exits 0.
TEST(HttpShutdown, ARequestBegunBeforeSigtermIsRefusedNotDropped) {
  auto scene = shutdown_scene("60000");
  auto& [server, alice, a, b] = scene;
  const std::string key = ts::unique_key("late");
  const std::string body = transfer_body(a, b, 100);
  ts::raw_connection late(server->port());
  ASSERT_TRUE(late.send("POST /v1/transfers HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + alice.key +
                        "\r\nContent-Type: application/json\r\nIdempotency-Key: " + key +
                        "\r\nExpect: 100-continue\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n"));
  ASSERT_TRUE(ts::eventually([&] {
    late.peer_closed();
    return late.received().find("100 Continue") != std::string::npos;
  })) << late.received();

  auto exit_code = std::async(std::launch::async, [&] { return server->terminate(60s); });
  EXPECT_TRUE(refuses_connections(server->port())) << "the server still accepts connections after SIGTERM";
  ASSERT_EQ(exit_code.wait_for(0ms), std::future_status::timeout) << "the server exited with a request arriving";

  ASSERT_TRUE(late.send(body));
  const auto answer = late.read_until_closed(30s);
  EXPECT_TRUE(answer.closed);
  EXPECT_NE(answer.bytes.find("HTTP/1.1 503"), std::string::npos) << answer.bytes;
  EXPECT_NE(answer.bytes.find("\"code\":\"server_busy\""), std::string::npos) << answer.bytes;
  EXPECT_NE(answer.bytes.find("Retry-After: "), std::string::npos) << answer.bytes;
  EXPECT_NE(answer.bytes.find("Connection: close"), std::string::npos) << answer.bytes;
  EXPECT_EQ(exit_code.get(), 0) << server->log();
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM journal_transaction WHERE idempotency_key = '" + key + "'"), "0");
}

// A transfer still in flight when the shutdown's grace period ends is answered before the server
// stops: 503 outcome_unknown with Retry-After, not a closed connection. Whatever became of it, a
// retry with the same Idempotency-Key on the next server finds the one true outcome.
TEST(HttpShutdown, RequestStillInFlightWhenTheGraceEndsIsAnswered) {
  auto scene = shutdown_scene("300");
  auto& [server, alice, a, b] = scene;

  ts::account_lock lock({a});
  const std::string key = ts::unique_key("grace");
  auto transfer = scene.transfer(key);
  ASSERT_TRUE(ts::eventually([&] { return lock.waiters() >= 1; }, 15s, 20ms))
      << "the transfer never reached the database";

  auto exit_code = std::async(std::launch::async, [&] { return server->terminate(60s); });
  // The lock is held until the answer is in: the transfer cannot have finished by itself.
  auto r = transfer.get();
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(problem_code(r), "outcome_unknown") << r.body;
  EXPECT_FALSE(r.header("Retry-After").empty());
  EXPECT_EQ(lower(r.header("Connection")), "close");

  lock.release();
  if (exit_code.wait_for(30s) != std::future_status::ready) {
    server->send_signal(SIGKILL);
    exit_code.get();
    FAIL() << "the server did not exit once its last request was answered:\n" << server->log();
  }
  EXPECT_EQ(exit_code.get(), 0) << server->log();
  EXPECT_NE(server->log().find("answering the requests still in flight (1)"), std::string::npos) << server->log();

  // The next server: the retry answers 201 (the posting committed after the answer, or commits
  // now), and the payment exists once.
  server = std::make_unique<ts::server_process>();
  ts::http_client again(server->port());
  auto retried = again.post("/v1/transfers", alice.key, transfer_body(a, b, 1200), key);
  EXPECT_EQ(retried.status, 201) << retried.body;
  EXPECT_EQ(ts::query_value("SELECT count(*) FROM journal_transaction WHERE principal_id = " +
                            std::to_string(alice.id) + " AND idempotency_key = '" + key + "'"),
            "1");
  EXPECT_EQ(ts::query_value("SELECT balance FROM account WHERE id = " + std::to_string(a)), "3800");
}

// SIGTERM on an idle server exits 0 promptly.
TEST(HttpShutdown, IdleServerExitsZero) {
  ts::server_process server;
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(server.terminate(30s), 0) << server.log();
  EXPECT_LT(ts::elapsed_ms(started), 10000);
}

// The start line names the allocator the server runs on: jemalloc, which the build links into
// wallet-server unless a sanitizer brings its own (WALLET_EXPECTED_ALLOCATOR, from CMake).
TEST(HttpLogging, TheStartLineNamesTheAllocator) {
  ts::server_process server;
  ASSERT_EQ(server.terminate(), 0);
  const std::string log = server.log();
  const auto line_at = log.find("wallet-server listening on");
  ASSERT_NE(line_at, std::string::npos) << log;
  const std::string line = log.substr(line_at, log.find('\n', line_at) - line_at);
  EXPECT_NE(line.find(std::string(", ") + WALLET_EXPECTED_ALLOCATOR), std::string::npos) << line;
}

// With --log-format json every line the server writes is one JSON object with ts, level and
// msg, and a request's lines carry its request id.
TEST(HttpLogging, JsonLogFormatIsOneObjectPerLine) {
  ts::server_process::options o;
  o.args = {"--log-format", "json"};
  o.env["WALLET_LOG_LEVEL"] = "debug";
  ts::server_process server(o);
  {
    ts::http_client c(server.port());
    EXPECT_EQ(c.request("GET", "/healthz", {}, {{"X-Request-Id", "json-log-probe-1"}}).status, 200);
    EXPECT_EQ(c.request("GET", "/missing", {}, {{"X-Request-Id", "json-log-probe-2"}}).status, 404);
    EXPECT_EQ(c.request("GET", "/v1/accounts/1", {}, {{"X-Request-Id", "json-log-probe-3"}}).status, 401);
  }
  ASSERT_EQ(server.terminate(), 0);
  std::istringstream log(server.log());
  std::string line;
  int lines = 0;
  int probes = 0;
  while (std::getline(log, line)) {
    if (line.empty()) continue;
    ++lines;
    boost::system::error_code ec;
    auto v = boost::json::parse(line, ec);
    ASSERT_FALSE(ec) << "not JSON: " << line;
    ASSERT_TRUE(v.is_object()) << line;
    const auto& o = v.as_object();
    ASSERT_TRUE(o.contains("ts") && o.at("ts").is_string()) << line;
    ASSERT_TRUE(o.contains("level") && o.at("level").is_string()) << line;
    ASSERT_TRUE(o.contains("msg") && o.at("msg").is_string()) << line;
    if (std::string_view(o.at("msg").as_string()).find("json-log-probe-") != std::string_view::npos) ++probes;
  }
  EXPECT_GE(lines, 3) << server.log();
  EXPECT_EQ(probes, 3) << server.log();
}

// An invalid setting stops the start with exit code 2 and a message naming the key, the value
// and what is allowed; no server is left running.
TEST(HttpConfig, BadPortStopsStartWithExitCode2) {
  auto env = ts::current_environment();
  env["WALLET_HTTP_PORT"] = "70000";
  const auto binary = ts::server_binary();
  auto r = ts::run_program(binary, {}, env, 30s);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("http.port"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("70000"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("65535"), std::string::npos) << r.output;

  // The same through a flag, which takes precedence over the environment.
  env["WALLET_HTTP_PORT"] = "8080";
  r = ts::run_program(binary, {"--http-port", "0"}, env, 30s);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("http.port"), std::string::npos) << r.output;
}

// Requests that cost the server a database read without a valid key are bounded: an unknown key
// is remembered (repeating it costs no read), requests whose key needs a read are limited per
// client address (429 before the read), a principal that names accounts that do not exist is
// limited (429), /readyz is answered from a health state refreshed at most every
// http.readyz_refresh_ms, and a client whose key is known is never held back by any of this.
class HttpFloods : public ts::shared_server_test<HttpFloods> {
 public:
  static ts::server_process::options options() {
    ts::server_process::options o;
    o.env = ts::unlimited_rates();
    o.env["WALLET_AUTH_UNKNOWN_KEY_CACHE_MS"] = "600000";
    o.env["WALLET_AUTH_UNAUTHENTICATED_PER_SECOND"] = "1";
    o.env["WALLET_AUTH_UNAUTHENTICATED_BURST"] = "5";
    o.env["WALLET_AUTH_UNKNOWN_ACCOUNTS_PER_SECOND"] = "1";
    o.env["WALLET_AUTH_UNKNOWN_ACCOUNTS_BURST"] = "5";
    o.env["WALLET_HTTP_READYZ_REFRESH_MS"] = "60000";
    // The suite counts the reads its requests cause: the background work that reads through the
    // same pool (sweeps, hold expiry, the check for revoked keys) waits while it runs.
    o.env["WALLET_LEDGER_SWEEP_INTERVAL_MS"] = "600000";
    o.env["WALLET_LEDGER_HOLD_EXPIRY_INTERVAL_MS"] = "600000";
    o.env["WALLET_AUTH_KEY_CACHE_TTL_MS"] = "600000";
    return o;
  }

 protected:
  std::int64_t reads(ts::http_client& c) const {
    return static_cast<std::int64_t>(ts::metric_value(c, "wallet_reader_jobs_total"));
  }
};

TEST_F(HttpFloods, AnUnknownKeyCostsOneReadHoweverOftenItIsSent) {
  ts::http_client c(port());
  const auto before = reads(c);
  int unauthorized = 0;
  for (int i = 0; i < 50; ++i) {
    auto r = c.get("/v1/accounts/1", "not-a-key-anybody-has");
    ASSERT_TRUE(r.status == 401 || r.status == 429) << r.body;  // 429 once the address's allowance is spent
    if (r.status == 401) ++unauthorized;
  }
  EXPECT_GE(unauthorized, 5);
  EXPECT_EQ(reads(c) - before, 1);
  EXPECT_GE(ts::metric_value(c, "wallet_unknown_keys_cached"), 1);
}

TEST_F(HttpFloods, NewKeysFromOneAddressAreLimitedBeforeTheirRead) {
  ts::http_client c(port());
  const auto started = std::chrono::steady_clock::now();
  const auto before = reads(c);
  int unauthorized = 0, limited = 0;
  for (int i = 0; i < 40; ++i) {
    auto r = c.get("/v1/accounts/1", ts::unique_key("forged"));
    if (r.status == 401) {
      ++unauthorized;
    } else {
      ASSERT_EQ(r.status, 429) << r.body;
      EXPECT_EQ(problem_code(r), "rate_limited");
      EXPECT_FALSE(r.header("Retry-After").empty());
      ++limited;
    }
  }
  const auto elapsed_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started).count();
  // At most the burst plus what refilled meanwhile (1/s) got through to a read.
  EXPECT_LE(unauthorized, 5 + elapsed_s + 1);
  EXPECT_EQ(unauthorized + limited, 40);
  EXPECT_LE(reads(c) - before, unauthorized);
  // The operator's key is known: the exhausted allowance of the address does not touch it.
  EXPECT_EQ(c.get("/v1/transactions/00000000-0000-0000-0000-000000000000", op()).status, 404);
}

TEST_F(HttpFloods, NamingAccountsThatDoNotExistIsLimitedPerPrincipal) {
  ts::http_client c(port());
  auto mallory = ts::create_principal(c, op());
  const auto started = std::chrono::steady_clock::now();
  const auto before = reads(c);
  int not_found = 0, limited = 0;
  for (int i = 0; i < 40; ++i) {
    auto r = c.get("/v1/accounts/" + std::to_string(900'000'000 + i), mallory.key);
    if (r.status == 404) {
      ++not_found;
    } else {
      ASSERT_EQ(r.status, 429) << r.body;
      EXPECT_EQ(problem_code(r), "rate_limited");
      ++limited;
    }
  }
  const auto elapsed_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LE(not_found, 5 + elapsed_s + 1);
  EXPECT_EQ(not_found + limited, 40);
  EXPECT_LE(reads(c) - before, not_found);
  // Another principal is not held back by mallory's allowance.
  auto alice = ts::create_principal(c, op());
  const auto mine = ts::create_account(c, op(), alice.id);
  EXPECT_EQ(c.get("/v1/accounts/" + std::to_string(mine), alice.key).status, 200);
}

TEST_F(HttpFloods, ReadyzIsAnsweredFromAHealthStateNotAProbePerCall) {
  ts::http_client c(port());
  ASSERT_EQ(c.request("GET", "/readyz").status, 200);
  const auto before = reads(c);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(c.request("GET", "/readyz").status, 200);
  EXPECT_EQ(reads(c) - before, 0);
}

// Behind a proxy named in http.trusted_proxies, the allowance for requests whose key needs a read
// is per forwarded client (the last X-Forwarded-For address, which the proxy adds), not shared by
// everybody behind the proxy; from any other peer the header is ignored.
ts::server_process::options proxy_options(const std::string& trusted) {
  ts::server_process::options o;
  o.env = ts::unlimited_rates();
  o.env["WALLET_AUTH_UNKNOWN_KEY_CACHE_MS"] = "600000";
  o.env["WALLET_AUTH_UNAUTHENTICATED_PER_SECOND"] = "1";
  o.env["WALLET_AUTH_UNAUTHENTICATED_BURST"] = "3";
  o.env["WALLET_HTTP_TRUSTED_PROXIES"] = trusted;
  return o;
}

// Sends `count` requests with new keys, each with `forwarded_for(i)` as its X-Forwarded-For, and
// counts the 401s (a read was allowed); anything but 401 or 429 fails.
int allowed_reads(ts::http_client& c, int count, const std::function<std::string(int)>& forwarded_for) {
  int unauthorized = 0;
  for (int i = 0; i < count; ++i) {
    auto r =
        c.request("GET", "/v1/accounts/1", {},
                  {{"Authorization", "Bearer " + ts::unique_key("forged")}, {"X-Forwarded-For", forwarded_for(i)}});
    EXPECT_TRUE(r.status == 401 || r.status == 429) << r.body;
    unauthorized += r.status == 401;
  }
  return unauthorized;
}

TEST(HttpProxies, BehindATrustedProxyEachClientHasItsOwnAllowance) {
  ts::server_process server(proxy_options("10.0.0.0/8, 127.0.0.0/8"));
  ts::http_client c(server.port());
  const auto started = std::chrono::steady_clock::now();
  // One client, whatever it wrote before the address the proxy added.
  const int first = allowed_reads(
      c, 20, [](int i) { return i % 2 == 0 ? std::string("198.51.100.1") : std::string("203.0.113.9, 198.51.100.1"); });
  const auto elapsed_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started).count();
  EXPECT_GE(first, 3);
  EXPECT_LE(first, 3 + elapsed_s + 1);
  // Another client behind the same proxy has an allowance of its own, and so has the proxy.
  EXPECT_EQ(allowed_reads(c, 3, [](int) { return std::string("198.51.100.2"); }), 3);
  auto own = c.request("GET", "/v1/accounts/1", {}, {{"Authorization", "Bearer " + ts::unique_key("forged")}});
  EXPECT_EQ(own.status, 401) << own.body;
}

TEST(HttpProxies, FromAnUntrustedPeerTheHeaderIsIgnored) {
  ts::server_process server(proxy_options("10.0.0.0/8"));
  ts::http_client c(server.port());
  const auto started = std::chrono::steady_clock::now();
  // Thirty "clients" that are all this one peer: one allowance.
  const int allowed = allowed_reads(c, 30, [](int i) { return "198.51.100." + std::to_string(i + 1); });
  const auto elapsed_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started).count();
  EXPECT_GE(allowed, 3);
  EXPECT_LE(allowed, 3 + elapsed_s + 1);
}

}  // namespace
