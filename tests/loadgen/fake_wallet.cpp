#include "tests/loadgen/fake_wallet.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <atomic>
#include <charconv>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>

namespace loadgen_test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;

namespace {

// Ids in one POST /v1/transactions/lookup at most, as the real server's default.
constexpr std::size_t k_lookup_ids_max = 1'000;

struct principal {
  std::int64_t id = 0;
  std::string role;
};

struct account {
  std::int64_t id = 0;
  std::int64_t owner_id = 0;
  std::string currency;
  std::int64_t balance = 0;
  bool hot = false;
  std::int64_t shards = 0;
};

struct entry {
  std::int64_t account_id = 0;
  std::int64_t amount = 0;
};

// A reconciliation run: its verdict is fixed when it starts; it has ended once it was polled.
struct reconciliation_run {
  bool ok = false;
  bool ended = false;
};

struct answer {
  http::status status = http::status::ok;
  std::string body;
  std::optional<int> retry_after_s;
  bool replayed = false;         // the stored answer of an earlier attempt
  bool drop_connection = false;  // close the connection instead of answering
};

// The number after the last '-' of an Idempotency-Key ("lg-<run>-<thread>-<sequence>"); -1 if none.
std::int64_t key_sequence(const std::string& key) {
  const auto dash = key.rfind('-');
  if (dash == std::string::npos) return -1;
  std::int64_t n = -1;
  const auto [end, ec] = std::from_chars(key.data() + dash + 1, key.data() + key.size(), n);
  return ec == std::errc() && end == key.data() + key.size() ? n : -1;
}

answer problem(http::status status, const std::string& code) {
  return {status,
          json::serialize(json::object{{"type", "about:blank"}, {"code", code}, {"status", static_cast<int>(status)}}),
          {}};
}

std::optional<std::int64_t> amount_of(const json::value* v) {
  if (!v) return std::nullopt;
  if (v->is_int64()) return v->as_int64();
  if (v->is_string()) {
    const auto& s = v->as_string();
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec == std::errc() && end == s.data() + s.size()) return n;
  }
  return std::nullopt;
}

}  // namespace

struct fake_wallet::impl {
  impl(std::string key, fake_behaviour b, std::uint16_t port)
      : operator_key(std::move(key)), behaviour(b), acceptor(context) {
    tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), port);
    acceptor.open(endpoint.protocol());
    acceptor.set_option(asio::socket_base::reuse_address(true));
    acceptor.bind(endpoint);
    acceptor.listen();
    principals[operator_key] = {next_principal++, "operator"};
    // The clearing account that deposits come from; it may go negative.
    accounts[0] = {0, 0, "EUR", 0, false, 0};
    do_accept();
    thread = std::thread([this] { context.run(); });
  }

  ~impl() {
    asio::post(context, [this] {
      beast::error_code ignored;
      acceptor.close(ignored);
      context.stop();
    });
    thread.join();
  }

  void do_accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) return;
      std::make_shared<session>(*this, std::move(socket))->start();
      do_accept();
    });
  }

  // One keep-alive connection: read → handle → write → read ...
  struct session : std::enable_shared_from_this<session> {
    session(impl& o, tcp::socket s) : owner(o), stream(std::move(s)) {}
    void start() { do_read(); }
    void do_read() {
      request = {};
      http::async_read(stream, buffer, request, [self = shared_from_this()](beast::error_code ec, std::size_t) {
        if (ec) return;
        self->respond();
      });
    }
    void respond() {
      const auto a = owner.handle(request);
      if (a.drop_connection) {
        beast::error_code ignored;
        stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
        stream.socket().close(ignored);
        return;
      }
      response = {};
      response.version(11);
      response.result(a.status);
      response.set(http::field::content_type,
                   static_cast<int>(a.status) >= 400 ? "application/problem+json" : "application/json");
      if (a.retry_after_s) response.set(http::field::retry_after, std::to_string(*a.retry_after_s));
      if (a.replayed) response.set("Idempotent-Replayed", "true");
      response.keep_alive(request.keep_alive());
      response.body() = a.body;
      response.prepare_payload();
      http::async_write(stream, response, [self = shared_from_this()](beast::error_code ec, std::size_t) {
        if (ec || !self->response.keep_alive()) return;
        self->do_read();
      });
    }
    impl& owner;
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    http::request<http::string_body> request;
    http::response<http::string_body> response;
  };

  std::string new_uuid() {
    std::uniform_int_distribution<int> hex(0, 15);
    std::string id;
    for (int i = 0; i < 32; ++i) {
      if (i == 8 || i == 12 || i == 16 || i == 20) id += '-';
      id += "0123456789abcdef"[hex(rng)];
    }
    return id;
  }

  std::string record(std::vector<entry> entries) {
    auto id = new_uuid();
    for (const auto& e : entries) accounts[e.account_id].balance += e.amount;
    transactions[id] = std::move(entries);
    return id;
  }

  json::object account_json(const account& a) {
    return {{"id", a.id},
            {"ownerId", a.owner_id},
            {"currency", a.currency},
            {"status", "ACTIVE"},
            {"balance", std::to_string(a.balance)},
            {"available", std::to_string(a.balance)},
            {"hot", a.hot}};
  }

  // A transfer attempt, once past throttling: the stored answer for a known key, else applied.
  answer transfer(const principal& who, const std::string& scope, json::object& body) {
    if (auto it = stored.find(scope); it != stored.end()) {
      auto again = it->second;
      again.replayed = true;
      return again;
    }
    const auto from = body["fromAccountId"].as_int64();
    const auto to = body["toAccountId"].as_int64();
    const auto amount = amount_of(body.if_contains("amount"));
    const auto payer = accounts.find(from);
    if (payer == accounts.end() || payer->second.owner_id != who.id)
      return problem(http::status::not_found, "not_found");
    if (!accounts.contains(to) || !amount || *amount <= 0) return problem(http::status::bad_request, "invalid_request");
    if (payer->second.balance < *amount) return problem(http::status::unprocessable_entity, "insufficient_funds");
    ++transfers_answered;
    std::string id;
    if (behaviour.lose_transfer_number > 0 && transfers_answered == behaviour.lose_transfer_number) {
      // The defect under test: acknowledged, never written.
      id = new_uuid();
    } else {
      id = record({{from, -*amount}, {to, *amount}});
      ++transfers_recorded;
    }
    answer a{http::status::created,
             json::serialize(json::object{{"transactionId", id},
                                          {"status", "COMPLETED"},
                                          {"fromBalanceAfter", std::to_string(accounts[from].balance)}}),
             {}};
    stored[scope] = a;
    return a;
  }

  static json::object transaction_json(const std::string& id, const std::vector<entry>& recorded) {
    json::array entries;
    for (const auto& e : recorded)
      entries.push_back({{"accountId", e.account_id}, {"amount", std::to_string(e.amount)}});
    return json::object{{"id", id}, {"entries", entries}};
  }

  static std::string run_json(std::int64_t id, const reconciliation_run& run) {
    json::object o{{"runId", id}, {"status", run.ended ? "finished" : "running"}};
    o["ok"] = run.ended ? json::value(run.ok) : json::value(nullptr);
    return json::serialize(o);
  }

  answer handle(const http::request<http::string_body>& request) {
    std::lock_guard lock(mutex);
    const std::string target(request.target());
    if (target == "/readyz" || target == "/healthz") return {http::status::ok, "{}", {}};
    const auto auth = request[http::field::authorization];
    const std::string key = auth.starts_with("Bearer ") ? std::string(auth.substr(7)) : std::string();
    const auto who = principals.find(key);
    if (who == principals.end()) return problem(http::status::unauthorized, "unauthorized");
    const bool is_operator = who->second.role == "operator";
    json::object body;
    if (request.method() == http::verb::post) {
      boost::system::error_code ec;
      auto parsed = json::parse(request.body(), ec);
      if (ec || !parsed.is_object()) return problem(http::status::bad_request, "invalid_request");
      body = std::move(parsed.as_object());
    }
    const std::string idempotency_key(request["Idempotency-Key"]);

    if (request.method() == http::verb::post && target == "/v1/principals") {
      if (!is_operator) return problem(http::status::not_found, "not_found");
      const auto new_key = "key-" + new_uuid();
      const auto id = next_principal++;
      principals[new_key] = {id, std::string(body["role"].as_string())};
      return {http::status::created,
              json::serialize(
                  json::object{{"id", id}, {"name", body["name"]}, {"role", body["role"]}, {"apiKey", new_key}}),
              {}};
    }
    if (request.method() == http::verb::post && target == "/v1/accounts") {
      if (!is_operator) return problem(http::status::not_found, "not_found");
      account a;
      a.id = next_account++;
      a.owner_id = body["ownerId"].as_int64();
      a.currency = std::string(body["currency"].as_string());
      if (const auto* hot = body.if_contains("hot"); hot && hot->is_bool()) a.hot = hot->as_bool();
      accounts[a.id] = a;
      return {http::status::created, json::serialize(account_json(a)), {}};
    }
    if (request.method() == http::verb::post && target == "/v1/deposits") {
      if (!is_operator) return problem(http::status::not_found, "not_found");
      const auto scope = std::to_string(who->second.id) + "/" + idempotency_key;
      if (auto it = stored.find(scope); it != stored.end()) return it->second;
      const auto account_id = body["accountId"].as_int64();
      const auto amount = amount_of(body.if_contains("amount"));
      if (!accounts.contains(account_id) || !amount || *amount <= 0)
        return problem(http::status::bad_request, "invalid_request");
      const auto id = record({{0, -*amount}, {account_id, *amount}});
      answer a{
          http::status::created, json::serialize(json::object{{"transactionId", id}, {"status", "COMPLETED"}}), {}};
      stored[scope] = a;
      return a;
    }
    if (request.method() == http::verb::post && target == "/v1/transfers") {
      const auto scope = std::to_string(who->second.id) + "/" + idempotency_key;
      // The first attempt of every n-th new key is throttled, and only that attempt: whatever
      // the clients' timing, each request meets at most one 429 and its retry goes through.
      if (behaviour.throttle_every > 0 && throttled_keys.insert(scope).second &&
          throttled_keys.size() % static_cast<std::size_t>(behaviour.throttle_every) == 0) {
        auto a = problem(http::status::too_many_requests, "rate_limited");
        a.retry_after_s = behaviour.throttle_retry_after_s;
        return a;
      }
      const auto sequence = key_sequence(idempotency_key);
      const bool lose = behaviour.lost_answer_every > 0 && sequence >= 0 &&
                        sequence % behaviour.lost_answer_every == 0 &&
                        ++attempts_by_key[scope] <= behaviour.lost_answer_attempts;
      if (!lose) return transfer(who->second, scope, body);
      if (behaviour.lost_answer_after_apply) transfer(who->second, scope, body);
      if (behaviour.lost_answer_as_503) {
        auto unknown = problem(http::status::service_unavailable, "outcome_unknown");
        unknown.retry_after_s = 0;
        return unknown;
      }
      answer dropped;
      dropped.drop_connection = true;
      return dropped;
    }
    if (request.method() == http::verb::get && target.starts_with("/v1/accounts/")) {
      std::int64_t id = 0;
      std::from_chars(target.data() + 13, target.data() + target.size(), id);
      const auto it = accounts.find(id);
      if (it == accounts.end() || (!is_operator && it->second.owner_id != who->second.id)) {
        return problem(http::status::not_found, "not_found");
      }
      return {http::status::ok, json::serialize(account_json(it->second)), {}};
    }
    // The bulk lookup as the real server answers it: 1 to 1,000 ids, each once, operator only;
    // the transactions found in the order asked, and the ids that were not.
    if (request.method() == http::verb::post && target == "/v1/transactions/lookup") {
      if (!is_operator) return problem(http::status::forbidden, "forbidden");
      const auto* ids = body.if_contains("ids");
      if (ids == nullptr || !ids->is_array() || ids->as_array().empty()) {
        return problem(http::status::bad_request, "invalid_request");
      }
      if (ids->as_array().size() > k_lookup_ids_max) return problem(http::status::bad_request, "lookup_too_large");
      ++transaction_lookups;
      json::array found, missing;
      std::set<std::string> seen;
      for (const auto& v : ids->as_array()) {
        if (!v.is_string() || !seen.insert(std::string(v.as_string())).second) {
          return problem(http::status::bad_request, "invalid_request");
        }
        const auto it = transactions.find(std::string(v.as_string()));
        if (it == transactions.end()) {
          missing.push_back(v);
        } else {
          found.push_back(transaction_json(it->first, it->second));
        }
      }
      return {http::status::ok, json::serialize(json::object{{"transactions", found}, {"missing", missing}}), {}};
    }
    if (request.method() == http::verb::get && target.starts_with("/v1/transactions/")) {
      ++transaction_reads;
      const auto it = transactions.find(target.substr(17));
      if (it == transactions.end()) return problem(http::status::not_found, "not_found");
      return {http::status::ok, json::serialize(transaction_json(it->first, it->second)), {}};
    }
    // Reconciliation as the real server does it: POST starts a run (202 with its id), the run's
    // own resource answers "running" to its first poll and its verdict after that, and GET
    // /v1/admin/reconciliation answers from the latest run that has ended.
    if (request.method() == http::verb::post && target == "/v1/admin/reconciliation") {
      if (!is_operator) return problem(http::status::forbidden, "forbidden");
      std::int64_t sum = 0;
      for (const auto& [id, a] : accounts) sum += a.balance;
      runs.push_back({sum == 0 && !behaviour.reconciliation_broken, false});
      const auto id = static_cast<std::int64_t>(runs.size());
      return {http::status::accepted,
              json::serialize(json::object{{"runId", id}, {"status", "running"}, {"started", true}}),
              {}};
    }
    if (request.method() == http::verb::get && target.starts_with("/v1/admin/reconciliation/runs/")) {
      if (!is_operator) return problem(http::status::forbidden, "forbidden");
      std::int64_t id = 0;
      const auto digits = target.substr(30);
      std::from_chars(digits.data(), digits.data() + digits.size(), id);
      if (id < 1 || id > static_cast<std::int64_t>(runs.size())) return problem(http::status::not_found, "not_found");
      auto& run = runs[static_cast<std::size_t>(id - 1)];
      const std::string body = run_json(id, run);
      run.ended = true;
      return {http::status::ok, body, {}};
    }
    if (request.method() == http::verb::get && target == "/v1/admin/reconciliation") {
      if (!is_operator) return problem(http::status::forbidden, "forbidden");
      for (std::size_t i = runs.size(); i > 0; --i) {
        if (runs[i - 1].ended) return {http::status::ok, run_json(static_cast<std::int64_t>(i), runs[i - 1]), {}};
      }
      return problem(http::status::not_found, "not_found");
    }
    return problem(http::status::not_found, "not_found");
  }

  std::string operator_key;
  fake_behaviour behaviour;
  asio::io_context context;
  tcp::acceptor acceptor;
  std::thread thread;
  std::mutex mutex;
  std::mt19937_64 rng{42};
  std::map<std::string, principal> principals;
  std::map<std::int64_t, account> accounts;
  std::map<std::string, std::vector<entry>> transactions;
  std::map<std::string, answer> stored;
  std::vector<reconciliation_run> runs;
  std::int64_t next_principal = 1;
  std::int64_t next_account = 1;
  std::set<std::string> throttled_keys;  // every transfer key seen, to throttle by count
  std::map<std::string, std::int64_t> attempts_by_key;
  std::atomic<std::int64_t> transfers_answered{0};
  std::atomic<std::int64_t> transfers_recorded{0};
  std::atomic<std::int64_t> transaction_lookups{0};
  std::atomic<std::int64_t> transaction_reads{0};
};

fake_wallet::fake_wallet(std::string operator_key, fake_behaviour behaviour, std::uint16_t port)
    : impl_(std::make_unique<impl>(std::move(operator_key), behaviour, port)) {}

fake_wallet::~fake_wallet() = default;

std::uint16_t fake_wallet::port() const { return impl_->acceptor.local_endpoint().port(); }
std::int64_t fake_wallet::transfers_recorded() const { return impl_->transfers_recorded.load(); }
std::int64_t fake_wallet::transfers_answered() const { return impl_->transfers_answered.load(); }
std::int64_t fake_wallet::transaction_lookups() const { return impl_->transaction_lookups.load(); }
std::int64_t fake_wallet::transaction_reads() const { return impl_->transaction_reads.load(); }

}  // namespace loadgen_test
