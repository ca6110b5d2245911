#include "actors/ledger_service.hpp"

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <caf/all.hpp>
#include <caf/io/middleman.hpp>
#include <unistd.h>

#include <cctype>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "actors/account_cache.hpp"
#include "actors/cluster_link.hpp"
#include "actors/key_cache.hpp"
#include "actors/key_revocations.hpp"
#include "actors/keys_audit.hpp"
#include "actors/replays.hpp"
#include "actors/ledger_writer.hpp"
#include "actors/money_flows.hpp"
#include "actors/reconciler.hpp"
#include "actors/scheduler.hpp"
#include "actors/service_core.hpp"
#include "actors/settlements.hpp"
#include "actors/sweeper.hpp"
#include "actors/hold_expirer.hpp"
#include "actors/replay_pruner.hpp"
#include "actors/view_conversions.hpp"
#include "cluster/lease_keeper.hpp"
#include "persistence/leases.hpp"
#include "actors/webhook_endpoints.hpp"
#include "persistence/accounts.hpp"
#include "persistence/database.hpp"
#include "persistence/corrections.hpp"
#include "persistence/flows.hpp"
#include "persistence/history.hpp"
#include "persistence/outbox.hpp"
#include "persistence/payments.hpp"
#include "persistence/preload.hpp"
#include "persistence/principals.hpp"
#include "persistence/reconcile.hpp"

namespace actors {
namespace {

// How long a display read waits for an account actor's reserved amount (0 when it is late).
constexpr std::chrono::milliseconds k_reserved_wait{200};

persistence::connection_options database_options(const config::settings& s, std::string name) {
  persistence::connection_options o;
  o.url = s.database.url;
  o.connect_timeout_ms = s.database.connect_timeout_ms;
  o.statement_timeout_ms = s.database.statement_timeout_ms;
  o.lock_timeout_ms = s.database.lock_timeout_ms;
  o.application_name = std::move(name);
  return o;
}

// A read whose value is shown to the client: the record, seen through its view.
template <typename Record>
void read_view(reader_pool& readers, std::function<Record(pqxx::connection&)> run,
               query_callback<decltype(to_view(std::declval<Record>()))> done) {
  using view = decltype(to_view(std::declval<Record>()));
  readers.read<Record>(std::move(run), [done = std::move(done)](query_result<Record> r) {
    done(query_result<view>{r.outcome, std::move(r.detail), to_view(r.value)});
  });
}

}  // namespace

// The facade: it owns the parts and wires them together; each call is handed to the part that
// does the work (the money flows, the caches, the sweeper, the reconciler, the reader pool).
struct ledger_service::impl {
  config::settings settings;
  service_core core;
  std::unique_ptr<account_cache> accounts;
  std::unique_ptr<money_flows> flows;
  std::unique_ptr<sweeper> sweeps;
  std::unique_ptr<hold_expirer> expiries;
  std::unique_ptr<replay_pruner> replays;  // null: kept answers are kept (ledger.replay_retention_hours = 0)
  std::unique_ptr<reconciler> reconciliations;
  std::unique_ptr<settlement_reports> settlements;
  key_cache keys;
  std::unique_ptr<keys_audit> keys_and_audit;
  std::unique_ptr<key_revocations> revocations;
  // Cluster mode (docs/scaling.md): the partitions this node leases, and their keeper.
  std::shared_ptr<cluster::ownership> ownership;
  std::unique_ptr<cluster::lease_keeper> leases;
  forward_handler serve_forwarded;
  std::string cluster_address;  // where the other nodes reach this one
  std::unique_ptr<cluster_link> link;
  std::unique_ptr<webhook_endpoints> webhooks;
  std::uint64_t preloaded_keys = 0;  // written once in start(), before any reader of stats()
  std::uint64_t preloaded_accounts = 0;
  bool started = false;

  explicit impl(const config::settings& s)
      : settings(s),
        keys(s.auth.key_cache_max, std::chrono::milliseconds(s.auth.key_cache_ttl_ms),
             std::chrono::milliseconds(s.auth.unknown_key_cache_ms), s.auth.unknown_key_cache_max) {}

  void start_actors();
  void start_reconciler();
  void join_cluster();
  void warm_caches();
};

void ledger_service::impl::start_actors() {
  const auto& s = settings;
  core.caf_config = std::make_unique<caf::actor_system_config>();
  core.caf_config->set("scheduler.max-threads", static_cast<std::size_t>(s.actors.scheduler_threads));
  // The work-stealing scheduler's idle workers poll (spin, then sleep in short steps); on two
  // cores shared with PostgreSQL that polling takes CPU the database needs. The sharing policy
  // parks idle workers on a condition variable instead (measured: see bench/PROFILE.md), and is
  // the server's own (actors/scheduler.hpp), which wakes a parked worker once instead of twice.
  if (s.actors.scheduler_policy == "sharing") {
    core.caf_config->load<caf::scheduler::coordinator<sharing_policy>>();
  } else {
    core.caf_config->set("scheduler.policy", caf::atom("stealing"));
  }
  core.caf_config->set("logger.console", caf::atom("none"));
  // Cluster mode: other nodes' forwarded requests arrive through the middleman.
  if (ownership) core.caf_config->load<caf::io::middleman>();
  core.system = std::make_unique<caf::actor_system>(*core.caf_config);

  core.readers = std::make_shared<reader_pool>(database_options(s, "wallet-reader"),
                                               static_cast<int>(s.database.readers), s.database.reader_queue_max,
                                               s.database.connection_wait_ms, s.database.reconnect_backoff_ms);
  core.runtime = std::make_shared<account_runtime>();
  core.runtime->load = load_from_database(core.readers);
  core.runtime->ownership = ownership;
  core.runtime->writer_queue_max = s.writer.queue_postings_max;
  core.runtime->writer_run_queue_max = s.writer.queue_run_postings_max;
  core.runtime->inflight_max = s.actors.account_inflight_max;
  core.runtime->idle_ms = s.actors.account_idle_ms;
  core.runtime->live_max_per_shard =
      static_cast<std::size_t>(std::max<std::int64_t>(1, s.actors.accounts_live_max / s.actors.registry_shards));
  for (std::int64_t i = 0; i < s.writer.count; ++i) {
    writer_config wc;
    wc.database = database_options(s, "wallet-writer-" + std::to_string(i));
    wc.index = static_cast<std::size_t>(i);
    wc.batch_postings_max = static_cast<std::size_t>(s.writer.batch_postings_max);
    wc.batch_wait_us = s.writer.batch_wait_us;
    wc.reconnect_backoff_ms = s.database.reconnect_backoff_ms;
    auto gauges = std::make_shared<writer_gauges>();
    core.runtime->writer_gauges.push_back(gauges);
    core.runtime->writers.push_back(spawn_ledger_writer(*core.system, std::move(wc), gauges));
  }
  for (std::int64_t i = 0; i < s.actors.registry_shards; ++i) {
    core.registry.push_back(spawn_account_registry(*core.system, core.runtime));
  }
  for (const auto& w : core.runtime->writers) caf::anon_send(w, registry_handles{core.registry});
  core.spawn_bridges(static_cast<std::size_t>(std::max<std::int64_t>(2, s.actors.scheduler_threads)), k_reserved_wait);
}

void ledger_service::impl::start_reconciler() {
  const auto& s = settings;
  reconciler_config rc;
  rc.database = database_options(s, "wallet-reconciler");
  rc.database.statement_timeout_ms = s.ledger.reconcile_statement_timeout_ms;
  rc.incremental_interval_s = s.ledger.reconcile_interval_s;
  rc.full_interval_s = s.ledger.reconcile_full_interval_s;
  rc.reconnect_backoff_ms = s.database.reconnect_backoff_ms;
  rc.work_mem_mb = s.ledger.reconcile_work_mem_mb;
  reconciliations = std::make_unique<reconciler>(std::move(rc));
  reconciliations->start();
}

// Fills the key cache and the account cache from the database, newest first and within their
// bounds, so that after a restart under load the first request of each client needs no read
// (measured: without it, 10,000 returning payers at 3,200/s met a p99 of 2.5 s for the first
// seconds while every key and account was read one by one). Best effort: with the database down
// the caches simply fill as requests come.
void ledger_service::impl::warm_caches() {
  const auto started_at = std::chrono::steady_clock::now();
  try {
    auto conn = persistence::connect(database_options(settings, "wallet-preload"));
    const auto recent_keys = persistence::recent_keys(*conn, settings.auth.key_cache_max);
    for (const auto& k : recent_keys) keys.remember(k.key_hash_hex, to_view(k.principal), started_at);
    const auto recent = persistence::recent_accounts(*conn, settings.actors.accounts_live_max);
    for (const auto& a : recent) {
      accounts->remember(account_facts{a.id, a.owner_id, a.currency, a.kind, a.shards, a.fees});
    }
    preloaded_keys = recent_keys.size();
    preloaded_accounts = recent.size();
    spdlog::info("preloaded {} API keys and {} accounts in {:.0f} ms", recent_keys.size(), recent.size(),
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started_at).count());
  } catch (const std::exception& e) {
    spdlog::warn("could not preload keys and accounts ({}); they will be read on first use", e.what());
  }
}

// Cluster mode: checks the deployment's partition count and makes this node's ownership; the
// keeper's first round (after the actors are up) takes the node's share of the partitions.
void ledger_service::impl::join_cluster() {
  const auto& c = settings.cluster;
  if (!c.enabled) return;
  auto conn = persistence::connect(database_options(settings, "wallet-lease-keeper"));
  const int stored = persistence::ensure_partitions(*conn, static_cast<int>(c.partitions));
  if (stored != c.partitions) {
    throw std::runtime_error("cluster.partitions = " + std::to_string(c.partitions) + ", but this deployment has " +
                             std::to_string(stored) + " partitions: every node must use " + std::to_string(stored));
  }
  std::string node = c.node_id;
  if (node.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    node = std::string(host) + "-" + std::to_string(settings.http.port);
    // A host name may carry characters a node id may not (config::validate): replaced.
    for (char& ch : node) {
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != '-') ch = '-';
    }
    if (node.size() > 64) node.resize(64);
  }
  ownership = std::make_shared<cluster::ownership>(node, stored);
}

ledger_service::ledger_service(const config::settings& settings) : impl_(std::make_unique<impl>(settings)) {}

ledger_service::~ledger_service() { stop(); }

void ledger_service::start() {
  auto& d = *impl_;
  // Every key the cache will hold is read from here on: the first check for revoked keys covers
  // the revocations since.
  const auto keys_from = key_cache::clock::now();
  d.join_cluster();
  d.start_actors();
  d.keys_and_audit = std::make_unique<keys_audit>(d.settings, d.core.readers, d.keys);
  d.webhooks = std::make_unique<webhook_endpoints>(d.settings, d.core.readers);
  d.accounts =
      std::make_unique<account_cache>(static_cast<std::size_t>(d.settings.actors.accounts_live_max), d.core.readers);
  d.flows = std::make_unique<money_flows>(d.settings, d.core, *d.accounts);
  d.settlements = std::make_unique<settlement_reports>(d.settings, d.core.readers);
  d.warm_caches();
  d.revocations = std::make_unique<key_revocations>(
      d.keys, d.core.readers, std::chrono::milliseconds(d.settings.auth.key_cache_ttl_ms), keys_from);
  d.revocations->start();
  d.sweeps = std::make_unique<sweeper>(d.core, static_cast<int>(d.settings.ledger.sweep_accounts_per_page));
  d.sweeps->start(std::chrono::milliseconds(d.settings.ledger.sweep_interval_ms));
  d.expiries = std::make_unique<hold_expirer>(d.core);
  d.expiries->start(std::chrono::milliseconds(d.settings.ledger.hold_expiry_interval_ms));
  if (d.settings.ledger.replay_retention_hours > 0) {
    d.replays = std::make_unique<replay_pruner>(d.core, d.settings.ledger.replay_retention_hours);
    d.replays->start(std::chrono::milliseconds(d.settings.ledger.replay_prune_interval_ms));
  }
  d.start_reconciler();
  if (d.ownership) {
    const auto& c = d.settings.cluster;
    cluster::keeper_config kc;
    kc.database = database_options(d.settings, "wallet-lease-keeper");
    kc.address = !c.advertise_address.empty()
                     ? c.advertise_address
                     : d.settings.http.host + ":" + std::to_string(d.settings.http.port + 1000);
    // Listening before the first lease round publishes the address: a peer that reads it can connect.
    auto serve =
        d.serve_forwarded ? d.serve_forwarded : [](forwarded_request, std::function<void(forwarded_reply)> done) {
          forwarded_reply r;
          r.detail = "this node serves no forwarded requests";
          done(std::move(r));
        };
    // A forward names its own bound (what is left of its request's deadline, less a quarter for the
    // answer to travel back); this one is for those that name none.
    const auto bound =
        std::chrono::milliseconds(std::max<std::int64_t>(1, d.settings.http.request_deadline_ms * 3 / 4));
    d.link = std::make_unique<cluster_link>(*d.core.system, d.ownership, std::move(serve), bound);
    d.link->listen(kc.address);
    d.cluster_address = kc.address;
    kc.ttl = std::chrono::milliseconds(c.lease_ttl_ms);
    kc.renew_interval = std::chrono::milliseconds(c.lease_renew_ms);
    d.leases = std::make_unique<cluster::lease_keeper>(std::move(kc), d.ownership);
    try {
      d.leases->start();
    } catch (...) {
      // Another process speaks for this node id: what started above stops again, in order, so
      // that the error reaches the caller and the process ends.
      d.started = true;
      stop();
      throw;
    }
  }
  d.started = true;
}

void ledger_service::stop() {
  auto& d = *impl_;
  if (!d.started) return;
  d.started = false;
  d.core.stopped = true;
  // Leases first: the partitions are taken over at once rather than after their TTL.
  if (d.leases) d.leases->stop();
  if (d.link) d.link->stop();
  d.sweeps->stop();
  d.expiries->stop();
  if (d.replays) d.replays->stop();
  d.revocations->stop();
  d.reconciliations->stop();
  d.core.readers->stop();
  for (auto& a : d.core.bridges) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  for (auto& a : d.core.registry) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  for (auto& a : d.core.runtime->writers) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  d.core.bridges.clear();
  d.core.registry.clear();
  d.core.runtime->writers.clear();
  // Account actors hold a handle to their registry shard only; shutting the system down ends them.
  d.core.system.reset();
  d.core.caf_config.reset();
}

void ledger_service::transfer(transfer_command command, std::function<void(money_result)> done) {
  impl_->flows->transfer(std::move(command), std::move(done));
}

void ledger_service::transfer_batch(transfer_batch_command command, std::function<void(money_result)> done) {
  impl_->flows->transfer_batch(std::move(command), std::move(done));
}

void ledger_service::deposit(deposit_command command, std::function<void(money_result)> done) {
  impl_->flows->deposit(std::move(command), std::move(done));
}

void ledger_service::withdraw(withdrawal_command command, std::function<void(money_result)> done) {
  impl_->flows->withdraw(std::move(command), std::move(done));
}

void ledger_service::settle_withdrawal(settle_command command, std::function<void(money_result)> done) {
  impl_->flows->settle_withdrawal(std::move(command), std::move(done));
}

void ledger_service::claim_deposit(deposit_claim_command command, std::function<void(money_result)> done) {
  impl_->flows->claim_deposit(std::move(command), std::move(done));
}

// Corrections and currencies (docs/corrections.md).
void ledger_service::reverse(reversal_command command, std::function<void(money_result)> done) {
  impl_->flows->reverse(std::move(command), std::move(done));
}
void ledger_service::request_adjustment(adjustment_request_command command,
                                        query_callback<adjustment_created_view> done) {
  impl_->flows->request_adjustment(std::move(command), std::move(done));
}
void ledger_service::approve_adjustment(adjustment_decision_command command, std::function<void(money_result)> done) {
  impl_->flows->approve_adjustment(std::move(command), std::move(done));
}
void ledger_service::reject_adjustment(adjustment_decision_command command,
                                       query_callback<std::optional<adjustment_view>> done) {
  impl_->flows->reject_adjustment(std::move(command), std::move(done));
}
void ledger_service::find_adjustment(std::string id, query_callback<std::optional<adjustment_view>> done) {
  impl_->flows->find_adjustment(std::move(id), std::move(done));
}
void ledger_service::set_fx_rate(fx_rate_command command, query_callback<fx_rate_view> done) {
  impl_->flows->set_fx_rate(std::move(command), std::move(done));
}
void ledger_service::quote_fx(fx_quote_command command, query_callback<fx_quote_view> done) {
  impl_->flows->quote_fx(std::move(command), std::move(done));
}
void ledger_service::exchange(exchange_command command, std::function<void(money_result)> done) {
  impl_->flows->exchange(std::move(command), std::move(done));
}

void ledger_service::refund_payment(payment_refund_command command, std::function<void(money_result)> done) {
  impl_->flows->refund_payment(std::move(command), std::move(done));
}

void ledger_service::provider_event(provider_event_command command, std::function<void(money_result)> done) {
  impl_->flows->provider_event(std::move(command), std::move(done));
}

void ledger_service::create_provider(request_origin origin, std::string name, std::string signing_secret,
                                     query_callback<std::optional<provider_view>> done) {
  read_view<std::optional<persistence::provider_record>>(
      *impl_->core.readers,
      [this, origin = std::move(origin), name = std::move(name),
       secret = std::move(signing_secret)](pqxx::connection& conn) {
        const auto audit = audit_entry_for(origin, "provider.create");
        auto created = persistence::create_provider(conn, name, secret, &audit, origin.key_hash_hex);
        if (created) impl_->flows->remember_provider(*created);
        return created;
      },
      std::move(done));
}

void ledger_service::rotate_provider_secret(request_origin origin, std::string name, std::string new_secret,
                                            std::optional<replay_ticket<provider_view>> replay,
                                            std::int64_t previous_valid_s,
                                            query_callback<provider_rotation_view> done) {
  impl_->core.readers->read<provider_rotation_view>(
      [this, origin = std::move(origin), name = std::move(name), secret = std::move(new_secret),
       replay = std::move(replay), previous_valid_s](pqxx::connection& conn) {
        const auto audit = audit_entry_for(origin, "provider.rotate_secret");
        auto guard = replay_guard<persistence::provider_record>(
            origin, replay, "provider.rotate_secret", 200,
            [](const persistence::provider_record& p) { return to_view(p); });
        const auto r = persistence::rotate_provider_secret(conn, name, secret, previous_valid_s, &audit,
                                                           guard ? &*guard : nullptr, origin.key_hash_hex);
        provider_rotation_view out;
        if (guard && guard->stored) {
          out.replayed = to_replayed(*guard->stored);
          return out;
        }
        switch (r.outcome) {
          case persistence::provider_rotation_outcome::rotated:
            impl_->flows->remember_provider(r.provider);
            out.provider = to_view(r.provider);
            break;
          case persistence::provider_rotation_outcome::no_provider:
            out.outcome = provider_rotation_outcome::no_provider;
            break;
          case persistence::provider_rotation_outcome::no_secret:
            out.outcome = provider_rotation_outcome::no_secret;
            break;
        }
        return out;
      },
      std::move(done));
}

void ledger_service::list_providers(query_callback<std::vector<provider_view>> done) {
  impl_->core.readers->read<std::vector<provider_view>>(
      [](pqxx::connection& conn) {
        std::vector<provider_view> out;
        for (const auto& p : persistence::list_providers(conn)) out.push_back(to_view(p));
        return out;
      },
      std::move(done));
}

bool ledger_service::provider_cached(const std::string& name) {
  return impl_->flows->cached_provider(name).has_value();
}

void ledger_service::find_provider(std::string name, query_callback<std::optional<provider_view>> done) {
  impl_->flows->provider(
      name, [done = std::move(done)](ledger::error_code code, std::optional<persistence::provider_record> p) {
        done({code, {}, to_view(p)});
      });
}

void ledger_service::place_hold(hold_command command, std::function<void(money_result)> done) {
  impl_->flows->place_hold(std::move(command), std::move(done));
}

void ledger_service::capture_hold(hold_capture_command command, std::function<void(money_result)> done) {
  impl_->flows->capture_hold(std::move(command), std::move(done));
}

void ledger_service::void_hold(hold_void_command command, std::function<void(money_result)> done) {
  impl_->flows->void_hold(std::move(command), std::move(done));
}

void ledger_service::find_hold(std::string id, query_callback<std::optional<hold_view>> done) {
  read_view<std::optional<persistence::hold_record>>(
      *impl_->core.readers, [id = std::move(id)](pqxx::connection& conn) { return persistence::find_hold(conn, id); },
      std::move(done));
}

void ledger_service::find_withdrawal(std::string id, query_callback<std::optional<withdrawal_view>> done) {
  read_view<std::optional<persistence::withdrawal_record>>(
      *impl_->core.readers,
      [id = std::move(id)](pqxx::connection& conn) { return persistence::find_withdrawal(conn, id); }, std::move(done));
}

std::optional<principal_view> ledger_service::cached_principal(const std::string& key_hash_hex) {
  return impl_->keys.find(key_hash_hex);
}

bool ledger_service::knows_key(const std::string& key_hash_hex) { return impl_->keys.knows(key_hash_hex); }

void ledger_service::authenticate(std::string key_hash_hex, query_callback<std::optional<principal_view>> done) {
  auto& d = *impl_;
  if (auto known = d.keys.find(key_hash_hex)) return done({ledger::error_code::ok, {}, std::move(known)});
  // A key the database did not know a moment ago: a flood of bad keys costs no reads.
  if (d.keys.known_unknown(key_hash_hex, std::chrono::steady_clock::now())) return done({});
  // The read sees the key as of some moment after this one: a revocation this server learns of
  // after this moment may be newer than what the read saw (actors/key_cache.hpp).
  const auto read_at = key_cache::clock::now();
  read_view<std::optional<persistence::principal_record>>(
      *d.core.readers,
      [key_hash_hex](pqxx::connection& conn) { return persistence::find_principal_by_key(conn, key_hash_hex); },
      [this, key_hash_hex, read_at, done](query_result<std::optional<principal_view>> r) {
        if (r.outcome == ledger::error_code::ok) {
          if (r.value) {
            impl_->keys.remember(key_hash_hex, *r.value, read_at);
          } else {
            impl_->keys.remember_unknown(key_hash_hex, std::chrono::steady_clock::now());
          }
        }
        done(std::move(r));
      });
}

void ledger_service::create_principal(request_origin origin, std::string name, ledger::role role,
                                      std::string key_hash_hex, std::string key_hint,
                                      query_callback<principal_view> done) {
  read_view<persistence::principal_record>(
      *impl_->core.readers,
      [this, origin = std::move(origin), name = std::move(name), role, key_hash_hex = std::move(key_hash_hex),
       key_hint = std::move(key_hint)](pqxx::connection& conn) {
        boost::json::object detail;
        detail["name"] = name;
        detail["role"] = ledger::to_string(role);
        const auto audit = audit_entry_for(origin, "principal.create", {}, boost::json::serialize(detail));
        auto principal =
            persistence::create_principal(conn, name, role, key_hash_hex, key_hint, &audit, origin.key_hash_hex);
        // The new key is about to be used: a payday of fresh payees must not start with a
        // database lookup per key.
        impl_->keys.remember(key_hash_hex, to_view(principal));
        return principal;
      },
      std::move(done));
}

void ledger_service::create_account(request_origin origin, ledger::principal_id owner, std::string currency, int shards,
                                    std::optional<replay_ticket<account_view>> replay,
                                    query_callback<account_create_view> done) {
  impl_->core.readers->read<account_create_view>(
      [this, origin = std::move(origin), owner, currency = std::move(currency), shards,
       replay = std::move(replay)](pqxx::connection& conn) {
        account_create_view out;
        if (!persistence::find_principal(conn, owner)) return out;
        boost::json::object detail;
        detail["ownerId"] = owner;
        detail["currency"] = currency;
        detail["shards"] = shards;
        const auto audit = audit_entry_for(origin, "account.create", {}, boost::json::serialize(detail));
        auto guard = replay_guard<persistence::account_record>(
            origin, replay, "account.create", 201, [](const persistence::account_record& a) { return to_view(a); });
        auto created = persistence::create_account(conn, owner, currency, shards, &audit, guard ? &*guard : nullptr);
        if (guard && guard->stored) {
          out.replayed = to_replayed(*guard->stored);
          return out;
        }
        impl_->accounts->remember(created);
        out.account = to_view(created);
        return out;
      },
      std::move(done));
}

void ledger_service::reserved(ledger::account_id id, std::function<void(ledger::amount_minor)> done) {
  impl_->core.reserved(id, std::move(done));
}

void ledger_service::find_account(ledger::account_id id, query_callback<std::optional<account_view>> done) {
  read_view<std::optional<persistence::account_record>>(
      *impl_->core.readers, [id](pqxx::connection& conn) { return persistence::find_account(conn, id); },
      std::move(done));
}

namespace {

// A change of an account (its status, its shards), run on a reader connection. A refusal of the
// change itself (closed, not empty) is the answer; otherwise the account as it stands, or nullopt.
// With `announce`, the account's live actor learns the status it has now.
void change_account(service_core& core, ledger::account_id id, bool announce,
                    std::function<persistence::status_change(pqxx::connection&)> change,
                    query_callback<std::optional<account_view>> done) {
  core.readers->read<persistence::status_change>(
      std::move(change), [&core, id, announce, done = std::move(done)](query_result<persistence::status_change> r) {
        if (r.outcome == ledger::error_code::ok && r.value.outcome != ledger::error_code::ok &&
            r.value.outcome != ledger::error_code::not_found) {
          return done({r.value.outcome, std::move(r.value.detail), std::nullopt});
        }
        auto view = to_view(r.value.account);
        // The account's live actor learns the new status before the caller is answered, so every
        // payment sent after the answer is decided under it (the registry shard forwards in order).
        if (announce && r.outcome == ledger::error_code::ok && view && !core.stopped.load()) {
          caf::anon_send(core.registry_for(id), status_atom::value, id, view->status, view->status_version);
        }
        done({r.outcome, std::move(r.detail), std::move(view)});
      });
}

}  // namespace

void ledger_service::make_hot(request_origin origin, ledger::account_id id, int shards,
                              query_callback<std::optional<account_view>> done) {
  change_account(
      impl_->core, id, false,
      [this, origin = std::move(origin), id, shards](pqxx::connection& conn) {
        boost::json::object detail;
        detail["shards"] = shards;
        const auto audit = audit_entry_for(origin, "account.make_hot", "account:" + std::to_string(id),
                                           boost::json::serialize(detail));
        auto out = persistence::make_hot(conn, id, shards, &audit);
        if (out.account) impl_->accounts->remember(*out.account);
        return out;
      },
      std::move(done));
}

void ledger_service::set_status(request_origin origin, ledger::account_id id, ledger::account_status status,
                                query_callback<std::optional<account_view>> done) {
  change_account(
      impl_->core, id, true,
      [origin = std::move(origin), id, status](pqxx::connection& conn) {
        const auto audit =
            audit_entry_for(origin, status == ledger::account_status::frozen ? "account.freeze" : "account.unfreeze",
                            "account:" + std::to_string(id));
        return persistence::set_status(conn, id, status, &audit);
      },
      std::move(done));
}

void ledger_service::close_account(request_origin origin, ledger::account_id id, ledger::role closer,
                                   query_callback<std::optional<account_view>> done) {
  change_account(
      impl_->core, id, true,
      [origin = std::move(origin), id, closer](pqxx::connection& conn) {
        const auto audit = audit_entry_for(origin, "account.close", "account:" + std::to_string(id));
        return persistence::close_account(conn, id, closer, &audit);
      },
      std::move(done));
}

void ledger_service::set_fees(request_origin origin, ledger::account_id id, ledger::fee_schedule schedule,
                              query_callback<std::optional<account_view>> done) {
  read_view<std::optional<persistence::account_record>>(
      *impl_->core.readers,
      [this, origin = std::move(origin), id, schedule](pqxx::connection& conn) {
        boost::json::object detail;
        detail["feeBps"] = schedule.bps;
        detail["feeFixed"] = std::to_string(schedule.fixed);
        const auto audit = audit_entry_for(origin, "account.set_fees", "account:" + std::to_string(id),
                                           boost::json::serialize(detail));
        auto out = persistence::set_fees(conn, id, schedule, &audit);
        // The cached schedule is a hint (actors/directory.hpp): replacing it here spares the next
        // payment a refusal by the writer, which prices the fee from the database either way.
        if (out) impl_->accounts->remember(*out);
        return out;
      },
      std::move(done));
}

void ledger_service::list_entries(ledger::account_id id, std::int64_t after, int limit,
                                  query_callback<entries_view> done) {
  read_view<persistence::entries_page>(
      *impl_->core.readers,
      [id, after, limit](pqxx::connection& conn) { return persistence::list_entries(conn, id, after, limit); },
      std::move(done));
}

void ledger_service::find_transaction(std::string id, query_callback<std::optional<transaction_view>> done) {
  impl_->core.readers->read<std::optional<transaction_view>>(
      [id = std::move(id)](pqxx::connection& conn) {
        auto view = to_view(persistence::find_transaction(conn, id));
        // A payment shows its refunds, a refund the payment it gave back (migration 007).
        if (view && (view->type == ledger::to_string(ledger::transaction_type::transfer) ||
                     view->type == ledger::to_string(ledger::transaction_type::capture))) {
          auto refunds = persistence::find_payment_refunds(conn, id);
          view->refunded_amount = refunds.refunded;
          view->refunds = std::move(refunds.refund_ids);
        } else if (view && view->type == ledger::to_string(ledger::transaction_type::refund)) {
          view->refunded_transfer = persistence::find_refunded_payment(conn, id);
        }
        // Corrections (docs/corrections.md): either side of a reversal names the other.
        if (view) {
          auto links = persistence::find_reversal_links(conn, id);
          view->reversed_by = std::move(links.reversed_by);
          view->reverses = std::move(links.reverses);
        }
        return view;
      },
      std::move(done));
}

void ledger_service::lookup_transactions(std::vector<std::string> ids,
                                         query_callback<std::vector<transaction_view>> done) {
  impl_->core.readers->read<std::vector<transaction_view>>(
      [ids = std::move(ids)](pqxx::connection& conn) {
        std::vector<transaction_view> views;
        for (const auto& record : persistence::lookup_transactions(conn, ids)) {
          auto view = to_view(record);
          // What find_transaction adds, by the same rules, from the columns read with the rows.
          if (view.type == ledger::to_string(ledger::transaction_type::transfer) ||
              view.type == ledger::to_string(ledger::transaction_type::capture)) {
            view.refunded_amount = record.refunded.value_or(0);
            if (*view.refunded_amount != 0) view.refunds = record.refund_ids;
          } else if (view.type == ledger::to_string(ledger::transaction_type::refund)) {
            view.refunded_transfer = record.refunded_payment;
          }
          view.reversed_by = record.reversed_by;
          view.reverses = record.reverses;
          views.push_back(std::move(view));
        }
        return views;
      },
      std::move(done));
}

void ledger_service::list_events(std::int64_t after, int limit, std::optional<ledger::principal_id> owner,
                                 std::optional<ledger::account_id> account, query_callback<events_view> done) {
  const persistence::event_filter filter{owner, account};
  const auto scan_max = impl_->settings.events.feed_scan_max;
  read_view<persistence::events_page>(
      *impl_->core.readers,
      [after, limit, scan_max, filter](pqxx::connection& conn) {
        return persistence::read_event_feed(conn, after, limit, scan_max, filter);
      },
      std::move(done));
}

void ledger_service::start_reconciliation(request_origin origin, bool full, std::string requested_by,
                                          query_callback<reconciliation_claim_view> done) {
  impl_->reconciliations->request(
      full, std::move(requested_by),
      [this, origin = std::move(origin), done](ledger::error_code code, std::string detail,
                                               persistence::run_claim claim) {
        if (code != ledger::error_code::ok) return done({code, std::move(detail), to_view(claim)});
        // The run is claimed on the reconciler's own connection: its audit row follows in a
        // transaction of its own, before the answer (repeating a request whose row could not be
        // written is harmless: it names the run in progress).
        auto view = to_view(claim);
        boost::json::object o;
        o["runId"] = view.run_id;
        o["kind"] = view.kind;
        o["started"] = view.started;
        auto audit = audit_entry_for(origin, "reconciliation.start",
                                     "reconciliation_run:" + std::to_string(view.run_id), boost::json::serialize(o));
        impl_->keys_and_audit->record(std::move(audit), [done, view](query_result<bool> r) {
          done({r.outcome, std::move(r.detail), view});
        });
      });
}

void ledger_service::find_reconciliation_run(std::int64_t id,
                                             query_callback<std::optional<reconciliation_run_view>> done) {
  read_view<std::optional<persistence::reconcile_run>>(
      *impl_->core.readers, [id](pqxx::connection& conn) { return persistence::find_run(conn, id); }, std::move(done));
}

void ledger_service::latest_reconciliation(query_callback<reconciliation_status> done) {
  impl_->core.readers->read<reconciliation_status>(
      [](pqxx::connection& conn) {
        return reconciliation_status{to_view(persistence::latest_finished_run(conn)),
                                     persistence::running_run_id(conn)};
      },
      std::move(done));
}

void ledger_service::ping_database(query_callback<bool> done) {
  impl_->core.readers->read<bool>([](pqxx::connection& conn) { return persistence::ping(conn); }, std::move(done));
}

void ledger_service::sweep_now(request_origin origin, query_callback<sweep_view> done) {
  if (impl_->core.stopped.load()) return done({ledger::error_code::server_busy, "the server is shutting down", {}});
  impl_->sweeps->sweep_all([this, origin = std::move(origin), done](query_result<sweep_view> swept) {
    const bool attempted = swept.value.sweeps > 0 || swept.value.failed > 0;
    if (swept.outcome != ledger::error_code::ok && !attempted) return done(std::move(swept));
    // The sweeps are system transactions of their own: the operator's request is recorded once
    // they are done, before the answer (a repeated request sweeps what is left, harmlessly). It is
    // recorded even when some sweeps failed, since the others were committed.
    boost::json::object o;
    o["sweeps"] = swept.value.sweeps;
    o["deferred"] = swept.value.deferred;
    o["failed"] = swept.value.failed;
    if (swept.outcome != ledger::error_code::ok) o["error"] = swept.detail;
    auto audit = audit_entry_for(origin, "sweep.run", "hot_accounts", boost::json::serialize(o));
    impl_->keys_and_audit->record(std::move(audit), [done, swept = std::move(swept)](query_result<bool> r) mutable {
      if (swept.outcome != ledger::error_code::ok) {
        if (r.outcome != ledger::error_code::ok) swept.detail += "; the sweep's audit row was not written: " + r.detail;
        return done(std::move(swept));
      }
      done({r.outcome, std::move(r.detail), swept.value});
    });
  });
}

void ledger_service::create_key(request_origin origin, ledger::principal_id principal, std::string key_hash_hex,
                                std::string key_hint, query_callback<key_change_view> done) {
  impl_->keys_and_audit->create_key(std::move(origin), principal, std::move(key_hash_hex), std::move(key_hint),
                                    std::move(done));
}

void ledger_service::revoke_key(request_origin origin, ledger::principal_id principal, std::int64_t key_id,
                                query_callback<key_change_view> done) {
  impl_->keys_and_audit->revoke_key(std::move(origin), principal, key_id, std::move(done));
}

void ledger_service::revoke_all_keys(request_origin origin, ledger::principal_id principal,
                                     query_callback<keys_revoked_view> done) {
  impl_->keys_and_audit->revoke_all_keys(std::move(origin), principal, std::move(done));
}

void ledger_service::list_keys(ledger::principal_id principal, std::int64_t after, int limit,
                               query_callback<std::optional<api_keys_view>> done) {
  impl_->keys_and_audit->list_keys(principal, after, limit, std::move(done));
}

void ledger_service::list_audit(std::int64_t after, int limit, query_callback<audit_page_view> done) {
  impl_->keys_and_audit->list_audit(after, limit, std::move(done));
}

void ledger_service::create_webhook_endpoint(request_origin origin, webhook_endpoint_request request,
                                             query_callback<webhook_create_view> done) {
  impl_->webhooks->create(std::move(origin), std::move(request), std::move(done));
}

void ledger_service::list_webhook_endpoints(std::optional<ledger::principal_id> owner, std::int64_t after, int limit,
                                            query_callback<std::vector<webhook_endpoint_view>> done) {
  impl_->webhooks->list(owner, after, limit, std::move(done));
}

void ledger_service::find_webhook_endpoint(std::int64_t id, std::optional<ledger::principal_id> owner,
                                           query_callback<std::optional<webhook_endpoint_view>> done) {
  impl_->webhooks->find(id, owner, std::move(done));
}

void ledger_service::delete_webhook_endpoint(request_origin origin, std::int64_t id,
                                             std::optional<ledger::principal_id> owner, query_callback<bool> done) {
  impl_->webhooks->remove(std::move(origin), id, owner, std::move(done));
}

void ledger_service::set_webhook_endpoint_enabled(request_origin origin, std::int64_t id,
                                                  std::optional<ledger::principal_id> owner, bool enabled,
                                                  std::string reason,
                                                  query_callback<std::optional<webhook_endpoint_view>> done) {
  impl_->webhooks->set_enabled(std::move(origin), id, owner, enabled, std::move(reason), std::move(done));
}

void ledger_service::rotate_webhook_secret(request_origin origin, std::int64_t id,
                                           std::optional<ledger::principal_id> owner, std::string new_secret,
                                           std::int64_t previous_valid_s, std::optional<webhook_replay_ticket> replay,
                                           query_callback<webhook_rotate_view> done) {
  impl_->webhooks->rotate_secret(std::move(origin), id, owner, std::move(replay), std::move(new_secret),
                                 previous_valid_s, std::move(done));
}

void ledger_service::update_webhook_endpoint(request_origin origin, std::int64_t id,
                                             std::optional<ledger::principal_id> owner, webhook_endpoint_change change,
                                             query_callback<webhook_update_view> done) {
  impl_->webhooks->update(std::move(origin), id, owner, std::move(change), std::move(done));
}

void ledger_service::list_webhook_deliveries(std::int64_t endpoint_id, std::optional<ledger::principal_id> owner,
                                             std::int64_t after, int limit,
                                             query_callback<std::optional<webhook_deliveries_view>> done) {
  impl_->webhooks->deliveries(endpoint_id, owner, after, limit, std::move(done));
}

void ledger_service::retry_webhook_delivery(request_origin origin, std::int64_t endpoint_id, std::int64_t delivery_id,
                                            query_callback<webhook_retry_view> done) {
  impl_->webhooks->retry(std::move(origin), endpoint_id, delivery_id, std::move(done));
}

void ledger_service::balance_as_of(ledger::account_id id, std::optional<std::int64_t> as_of_us,
                                   query_callback<balance_view> done) {
  impl_->keys_and_audit->balance_as_of(id, as_of_us, std::move(done));
}

void ledger_service::import_settlements(request_origin origin, std::shared_ptr<const std::string> report,
                                        std::string imported_by, query_callback<settlement_import_view> done) {
  impl_->settlements->import(
      std::move(report), std::move(imported_by),
      [this, origin = std::move(origin), done](query_result<settlement_import_view> r) {
        if (r.outcome != ledger::error_code::ok) return done(std::move(r));
        // The import commits in a transaction of its own (persistence/settlements.cpp): its audit
        // row follows before the answer. A repeated report is imported again, harmlessly: it
        // matches what the first one matched.
        boost::json::object o;
        o["importId"] = r.value.import_id;
        o["provider"] = r.value.provider;
        o["lines"] = r.value.lines;
        o["newExceptions"] = r.value.new_exceptions;
        o["resolvedExceptions"] = r.value.resolved_exceptions;
        const auto target = "settlement_import:" + std::to_string(r.value.import_id);
        auto audit = audit_entry_for(origin, "settlement.import", target, boost::json::serialize(o));
        impl_->keys_and_audit->record(std::move(audit), [done, view = std::move(r.value)](query_result<bool> written) {
          done({written.outcome, std::move(written.detail), view});
        });
      });
}

void ledger_service::list_settlement_exceptions(std::string status, std::int64_t after, int limit,
                                                query_callback<settlement_exceptions_view> done) {
  impl_->settlements->list(status, after, limit, std::move(done));
}

void ledger_service::resolve_settlement_exception(request_origin origin, std::int64_t id, std::int64_t seen_import_id,
                                                  std::string note, std::optional<std::string> owner,
                                                  std::string resolved_by,
                                                  query_callback<std::optional<settlement_exception_view>> done) {
  boost::json::object detail;
  if (owner) detail["owner"] = *owner;
  detail["importId"] = seen_import_id;  // the amounts the operator accepted are that import's
  auto audit = audit_entry_for(origin, "settlement_exception.resolve", "settlement_exception:" + std::to_string(id),
                               boost::json::serialize(detail));
  impl_->settlements->resolve(id, seen_import_id, std::move(note), std::move(owner), std::move(resolved_by),
                              std::move(audit), std::move(done));
}

void ledger_service::ensure_operator_blocking(const std::string& key_hash_hex) {
  auto conn = persistence::connect(database_options(impl_->settings, "wallet-bootstrap"));
  persistence::ensure_operator(*conn, "bootstrap operator", key_hash_hex);
}

void ledger_service::set_forward_handler(forward_handler handler) { impl_->serve_forwarded = std::move(handler); }

bool ledger_service::forwards() const { return impl_->link != nullptr; }

void ledger_service::forward(int partition, forwarded_request request, std::function<void(forwarded_reply)> done) {
  if (!impl_->link || impl_->core.stopped.load()) {
    forwarded_reply r;
    r.detail = "the server is shutting down";
    return done(std::move(r));
  }
  auto& d = *impl_;
  if (const auto holder = d.ownership->holder_address(partition); !holder.empty() && holder != d.cluster_address) {
    return d.link->forward(partition, std::move(request), std::move(done));
  }
  // The keeper's last round saw nobody, or this node, holding it: the partition has moved since.
  // One read of the lease table, then the forward (which fails at once if still nobody holds it).
  d.core.readers->read<std::vector<persistence::lease_owner>>(
      [](pqxx::connection& conn) { return persistence::lease_owners(conn); },
      [&d, partition, request = std::move(request),
       done = std::move(done)](query_result<std::vector<persistence::lease_owner>> r) mutable {
        if (r.outcome == ledger::error_code::ok) {
          std::vector<std::string> holders(static_cast<std::size_t>(d.ownership->partitions()));
          for (const auto& owner : r.value) {
            if (owner.partition >= 0 && owner.partition < d.ownership->partitions()) {
              holders[static_cast<std::size_t>(owner.partition)] = owner.address;
            }
          }
          d.ownership->set_holders(std::move(holders));
        }
        if (d.core.stopped.load()) {
          forwarded_reply stopped;
          stopped.detail = "the server is shutting down";
          return done(std::move(stopped));
        }
        d.link->forward(partition, std::move(request), std::move(done));
      });
}

service_stats ledger_service::stats() const {
  auto& d = *impl_;
  service_stats s;
  if (!d.core.runtime) return s;
  s.live_account_actors = d.core.runtime->live_actors.load();
  s.writers_connected = true;
  for (const auto& g : d.core.runtime->writer_gauges) {
    s.writer_queued += g->queued.load();
    s.writer_run_postings_queued += g->run_postings_queued.load();
    s.batches += g->batches.load();
    s.postings += g->postings.load();
    s.writer_failures += g->failures.load();
    s.fenced_postings += g->fenced.load();
    s.relocked_batches += g->relocked.load();
    s.writer_busy_us += g->busy_us.load();
    s.writers_connected = s.writers_connected && g->connected.load();
  }
  s.reader_queued = d.core.readers ? d.core.readers->queued() : 0;
  s.reader_jobs = d.core.readers ? d.core.readers->submitted() : 0;
  s.preloaded_keys = d.preloaded_keys;
  s.preloaded_accounts = d.preloaded_accounts;
  const auto sw = d.sweeps ? d.sweeps->stats() : sweeper_stats{};
  s.sweeps_committed = sw.committed;
  s.sweeps_deferred = sw.deferred;
  s.sweeper_ticks = sw.ticks;
  s.holds_expired = d.expiries ? d.expiries->expired() : 0;
  s.replays_pruned = d.replays ? d.replays->pruned() : 0;
  s.unknown_keys_cached = d.keys.unknown_count();
  const auto r = d.reconciliations ? d.reconciliations->stats() : reconciler_stats{};
  s.reconcile_runs = r.runs;
  s.reconcile_failures = r.failures;
  s.reconcile_errors = r.errors;
  s.reconcile_last_ok = r.last_ok;
  s.reconcile_last_ms = r.last_ms;
  s.reconcile_watermark = r.watermark;
  if (d.leases) {
    const auto k = d.leases->stats();
    s.cluster_enabled = true;
    s.partitions_held = k.held;
    s.cluster_nodes = k.nodes;
    s.leases_lost = k.lost;
    s.lease_failures = k.failures;
    s.node_id_in_use_elsewhere = k.in_use_elsewhere;
  }
  return s;
}

}  // namespace actors
