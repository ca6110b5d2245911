#include "tools/loadgen/setup.hpp"

#include "tools/loadgen/api.hpp"

#include <boost/json/serialize.hpp>

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <mutex>
#include <ostream>
#include <sstream>
#include <stdexcept>

namespace loadgen {
namespace {

// Setup calls retry transient failures (429, 503, lost connections) this many times.
constexpr int k_setup_attempts_max = 20;
// The largest single deposit; the server bounds amounts (settings ledger.amount_minor_max).
constexpr std::int64_t k_deposit_minor_max = 1'000'000'000'000'000;

boost::json::object party_json(const party& p) {
  return {{"principalId", p.principal_id}, {"apiKey", p.api_key}, {"accountId", p.account_id}};
}

party party_from(const boost::json::object& o) {
  party p;
  p.principal_id = int_field(o, "principalId").value_or(0);
  p.api_key = string_field(o, "apiKey").value_or("");
  p.account_id = int_field(o, "accountId").value_or(0);
  if (p.account_id == 0 || p.api_key.empty()) throw std::runtime_error("setup file: a party lacks its account or key");
  return p;
}

workload_kind workload_from(const std::string& name) {
  if (name == "hot-merchant") return workload_kind::hot_merchant;
  if (name == "payday") return workload_kind::payday;
  if (name == "p2p") return workload_kind::p2p;
  if (name == "mix") return workload_kind::mix;
  throw std::runtime_error("setup file: unknown workload " + name);
}

// Creates one principal with one account, optionally funded, as a chain of three API calls.
class party_builder : public std::enable_shared_from_this<party_builder> {
 public:
  struct spec {
    std::string name;
    std::string role;
    bool hot = false;
    std::int64_t shards = 0;
    std::int64_t deposit_minor = 0;
    std::string deposit_key;
  };
  using done_fn = std::function<void(std::optional<party>, std::string error)>;

  party_builder(const options& o, http_client& client, std::size_t thread, spec s, done_fn done)
      : options_(o), client_(client), thread_(thread), spec_(std::move(s)), done_(std::move(done)) {}

  void start() {
    boost::json::object body{{"name", spec_.name}, {"role", spec_.role}};
    call("/v1/principals", boost::json::serialize(body), "", [self = shared_from_this()](boost::json::object&& o) {
      self->party_.principal_id = int_field(o, "id").value_or(0);
      self->party_.api_key = string_field(o, "apiKey").value_or("");
      if (self->party_.principal_id == 0 || self->party_.api_key.empty()) {
        return self->done_(std::nullopt, "POST /v1/principals: answer lacks id or apiKey");
      }
      self->create_account();
    });
  }

 private:
  void create_account() {
    boost::json::object body{{"ownerId", party_.principal_id}, {"currency", options_.currency}};
    if (spec_.hot) {
      body["hot"] = true;
      body["shards"] = spec_.shards;
    }
    call("/v1/accounts", boost::json::serialize(body), "", [self = shared_from_this()](boost::json::object&& o) {
      self->party_.account_id = int_field(o, "id").value_or(0);
      if (self->party_.account_id == 0) return self->done_(std::nullopt, "POST /v1/accounts: answer lacks id");
      if (self->spec_.deposit_minor > 0) return self->deposit();
      self->done_(self->party_, "");
    });
  }

  void deposit() {
    boost::json::object body{
        {"accountId", party_.account_id}, {"amount", spec_.deposit_minor}, {"externalRef", spec_.deposit_key}};
    call("/v1/deposits", boost::json::serialize(body), spec_.deposit_key,
         [self = shared_from_this()](boost::json::object&&) { self->done_(self->party_, ""); });
  }

  void call(const std::string& target, std::string body, std::string idempotency_key,
            std::function<void(boost::json::object&&)> next) {
    http_request request;
    request.method = http_method::post;
    request.target = target;
    request.body = std::move(body);
    request.api_key = options_.operator_key;
    request.idempotency_key = std::move(idempotency_key);
    call_with_retries(client_, thread_, std::move(request), k_setup_attempts_max,
                      [self = shared_from_this(), target, next = std::move(next)](http_response&& r) {
                        if (r.status != 201 && r.status != 200) {
                          return self->done_(std::nullopt, "POST " + target + ": " + describe(r));
                        }
                        auto o = parse_object(r.body);
                        if (!o) return self->done_(std::nullopt, "POST " + target + ": answer is not a JSON object");
                        next(std::move(*o));
                      });
  }

  const options& options_;
  http_client& client_;
  std::size_t thread_;
  spec spec_;
  done_fn done_;
  party party_;
};

}  // namespace

std::vector<std::int64_t> setup_data::account_ids() const {
  std::vector<std::int64_t> ids;
  ids.reserve(parties.size() + 1);
  for (const auto& p : parties) ids.push_back(p.account_id);
  if (hub) ids.push_back(hub->account_id);
  if (employer) ids.push_back(employer->account_id);
  return ids;
}

std::string to_json(const setup_data& setup) {
  boost::json::array parties;
  for (const auto& p : setup.parties) parties.push_back(party_json(p));
  boost::json::object o{{"version", 1},
                        {"workload", to_string(setup.workload)},
                        {"currency", setup.currency},
                        {"seed", setup.seed},
                        {"parties", std::move(parties)}};
  if (setup.hub) o["hub"] = party_json(*setup.hub);
  if (setup.employer) o["employer"] = party_json(*setup.employer);
  return boost::json::serialize(o);
}

setup_data setup_from_json(const std::string& text) {
  auto o = parse_object(text);
  if (!o || int_field(*o, "version").value_or(0) != 1) throw std::runtime_error("setup file: not a version 1 setup");
  setup_data s;
  s.workload = workload_from(string_field(*o, "workload").value_or(""));
  s.currency = string_field(*o, "currency").value_or("");
  if (const auto* seed = o->if_contains("seed"); seed && seed->is_number()) s.seed = seed->to_number<std::uint64_t>();
  const auto* parties = o->if_contains("parties");
  if (!parties || !parties->is_array()) throw std::runtime_error("setup file: no parties");
  for (const auto& p : parties->as_array()) {
    if (!p.is_object()) throw std::runtime_error("setup file: a party is not an object");
    s.parties.push_back(party_from(p.as_object()));
  }
  if (const auto* hub = o->if_contains("hub"); hub && hub->is_object()) s.hub = party_from(hub->as_object());
  if (const auto* e = o->if_contains("employer"); e && e->is_object()) s.employer = party_from(e->as_object());
  return s;
}

setup_data create_setup(const options& o, http_client& client, std::ostream& log) {
  setup_data setup;
  setup.workload = o.workload;
  setup.currency = o.currency;
  setup.seed = o.seed;
  const auto started = std::chrono::steady_clock::now();
  // Names and deposit keys carry the seed and a nonce of this setup: principals are new on every
  // setup, and a deposit retried after a lost answer is applied once.
  const auto nonce = std::to_string(std::chrono::system_clock::now().time_since_epoch().count() % 1'000'000'007);
  const std::string prefix = "lg" + std::to_string(o.seed) + "-" + nonce;

  const auto n = static_cast<std::size_t>(o.accounts);
  const bool parties_funded = o.workload != workload_kind::payday;
  const bool has_hub = o.workload != workload_kind::p2p;
  const bool has_employer = o.workload == workload_kind::mix;
  std::vector<party_builder::spec> specs;
  specs.reserve(n + 1);
  for (std::size_t i = 0; i < n; ++i) {
    party_builder::spec s;
    s.name = prefix + "-party-" + std::to_string(i);
    s.role = "user";
    if (parties_funded) {
      s.deposit_minor = o.fund_amount_minor;
      s.deposit_key = prefix + "-deposit-" + std::to_string(i);
    }
    specs.push_back(std::move(s));
  }
  // The employer pays salaries: it can pay every salary account fund_amount in all, like a payer
  // in the other workloads.
  const std::int64_t employer_deposit =
      o.fund_amount_minor > k_deposit_minor_max / o.accounts ? k_deposit_minor_max : o.fund_amount_minor * o.accounts;
  if (has_hub) {
    party_builder::spec s;
    s.name = prefix + (o.workload == workload_kind::payday ? "-employer" : "-merchant");
    s.role = "merchant";
    s.hot = o.hot_shards > 0;
    s.shards = o.hot_shards;
    if (o.workload == workload_kind::payday) {
      s.deposit_minor = employer_deposit;
      s.deposit_key = prefix + "-deposit-employer";
    }
    specs.push_back(std::move(s));
  }
  if (has_employer) {
    party_builder::spec s;
    s.name = prefix + "-employer";
    s.role = "merchant";
    s.hot = o.hot_shards > 0;
    s.shards = o.hot_shards;
    s.deposit_minor = employer_deposit;
    s.deposit_key = prefix + "-deposit-employer";
    specs.push_back(std::move(s));
  }

  std::vector<std::optional<party>> built(specs.size());
  std::mutex errors_mutex;
  std::vector<std::string> errors;
  std::atomic<std::size_t> finished{0};
  run_bulk(client, specs.size(), static_cast<std::size_t>(o.setup_concurrency),
           [&](std::size_t i, std::size_t thread, std::function<void()> done) {
             auto builder = std::make_shared<party_builder>(o, client, thread, specs[i],
                                                            [&, i, done](std::optional<party> p, std::string error) {
                                                              if (p) {
                                                                built[i] = std::move(p);
                                                              } else {
                                                                std::lock_guard lock(errors_mutex);
                                                                if (errors.size() < 10)
                                                                  errors.push_back(std::move(error));
                                                              }
                                                              ++finished;
                                                              done();
                                                            });
             builder->start();
           });
  if (!errors.empty()) {
    std::string text = "setup failed:";
    for (const auto& e : errors) text += "\n  " + e;
    throw std::runtime_error(text);
  }
  for (std::size_t i = 0; i < n; ++i) setup.parties.push_back(std::move(*built[i]));
  if (has_hub) setup.hub = std::move(*built[n]);
  if (has_employer) setup.employer = std::move(*built[n + 1]);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  log << "setup: " << specs.size() << " principals and accounts created in " << std::fixed << std::setprecision(2)
      << seconds << " s\n";
  return setup;
}

setup_data load_or_create_setup(const options& o, http_client& client, std::ostream& log) {
  if (!o.setup_file.empty() && std::filesystem::exists(o.setup_file)) {
    std::ifstream in(o.setup_file);
    std::ostringstream text;
    text << in.rdbuf();
    auto setup = setup_from_json(text.str());
    if (setup.workload != o.workload || setup.currency != o.currency ||
        setup.parties.size() != static_cast<std::size_t>(o.accounts)) {
      throw std::runtime_error("setup file " + o.setup_file +
                               " was made for another workload, currency or number of accounts");
    }
    log << "setup: reusing " << o.setup_file << " (" << setup.parties.size() << " accounts)\n";
    return setup;
  }
  auto setup = create_setup(o, client, log);
  if (!o.setup_file.empty()) {
    // The file holds API keys: readable by its owner only.
    {
      std::ofstream out(o.setup_file, std::ios::trunc);
      if (!out) throw std::runtime_error("cannot write setup file " + o.setup_file);
    }
    ::chmod(o.setup_file.c_str(), 0600);
    std::ofstream out(o.setup_file, std::ios::trunc);
    out << to_json(setup) << "\n";
    if (!out) throw std::runtime_error("cannot write setup file " + o.setup_file);
    log << "setup: saved to " << o.setup_file << "\n";
  }
  return setup;
}

}  // namespace loadgen
