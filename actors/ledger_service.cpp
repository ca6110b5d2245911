#include "actors/ledger_service.hpp"

#include <pthread.h>
#include <caf/all.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "actors/accounts.hpp"
#include "actors/directory.hpp"
#include "actors/ledger_writer.hpp"
#include "actors/messages.hpp"
#include "actors/outcomes.hpp"
#include "actors/reader_pool.hpp"
#include "actors/single_flight.hpp"
#include "actors/reconciler.hpp"
#include "actors/uuid.hpp"
#include "base/assert.hpp"

namespace actors {
namespace {

// The bridge between callers outside the actor system and the actors that answer by response:
// it makes the request(...).then(...) and hands the answer to the caller's sink. (Debits do not
// pass here: the account actor answers their sink itself.)
//
// No timeout here on purpose: a posting handed to a writer always gets its true outcome (the
// database bounds every statement), and the single flight of its Idempotency-Key stays open
// until then, so a retry waits for that outcome instead of racing it. The client is answered
// on time by the HTTP layer's own deadline ("outcome unknown, retry with the same key").
//
// `reserved_wait` is an argument rather than a constant inside on purpose: CAF 0.17 spawns an
// actor function without arguments through a null argument tuple it then dereferences (UBSan:
// reference binding to null pointer, caf/detail/init_fun_factory.hpp), so every actor we spawn
// takes at least one.
caf::behavior bridge(caf::event_based_actor* self, std::chrono::milliseconds reserved_wait) {
  auto failed = [](caf::error&) {
    return unavailable(ledger::error_code::outcome_unknown,
                       "the server stopped before this request finished; retry with the same Idempotency-Key");
  };
  return {
      [=](call_atom, caf::actor& registry, ledger::account_id id, amount_sink& sink) {
        // A read for display: bounded, and 0 (nothing known in flight) if the answer is late.
        self->request(registry, reserved_wait, reserved_atom::value, id)
            .then([sink](ledger::amount_minor reserved) { sink.deliver(reserved); },
                  [sink](caf::error&) { sink.deliver(0); });
      },
      [=](call_atom, caf::actor& writer, persistence::posting_request& request, reply_sink& sink) {
        self->request(writer, caf::infinite, posting_atom::value, std::move(request))
            .then([sink](persistence::posting_outcome& outcome) { sink.deliver(to_money_result(outcome)); },
                  [sink, failed](caf::error& e) { sink.deliver(failed(e)); });
      },
  };
}

money_result shutting_down() {
  return unavailable(ledger::error_code::server_busy,
                     "the server is shutting down; retry with the same Idempotency-Key on another server or later");
}

account_facts facts_of(const persistence::account_record& record) {
  account_facts f;
  f.id = record.id;
  f.owner_id = record.owner_id;
  f.currency = record.currency;
  f.kind = record.kind;
  for (const auto& s : record.shards) f.shards.push_back(s.id);
  return f;
}

// How long a display read waits for an account actor's reserved amount (0 when it is late).
constexpr std::chrono::milliseconds k_reserved_wait{200};

// Hot accounts swept per tick at most.
constexpr int k_sweep_candidates_max = 1'000;

persistence::connection_options database_options(const config::settings& s, std::string name) {
  persistence::connection_options o;
  o.url = s.database.url;
  o.connect_timeout_ms = s.database.connect_timeout_ms;
  o.statement_timeout_ms = s.database.statement_timeout_ms;
  o.lock_timeout_ms = s.database.lock_timeout_ms;
  o.application_name = std::move(name);
  return o;
}

}  // namespace

struct ledger_service::impl {
  config::settings settings;
  std::unique_ptr<caf::actor_system_config> caf_config;
  std::unique_ptr<caf::actor_system> system;
  std::shared_ptr<reader_pool> readers;
  std::shared_ptr<account_runtime> runtime;
  std::vector<caf::actor> registry;
  std::vector<caf::actor> bridges;
  std::atomic<std::uint64_t> next_bridge{0};
  account_directory directory;
  single_flight flights;

  std::mutex clearing_mutex;
  std::unordered_map<std::string, ledger::account_id> clearing_accounts;

  std::mutex auth_mutex;
  std::unordered_map<std::string, persistence::principal_record> auth_cache;
  // Keys the database did not know, until when they are answered "unknown" without a read.
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> unknown_keys;

  // Set by stop(): from then on every call answers at once that the server is shutting down
  // (the registry and writers it would use are gone).
  std::atomic<bool> stopped{false};

  std::atomic<std::uint64_t> sweeps_committed{0};
  std::atomic<std::uint64_t> sweeps_deferred{0};
  std::atomic<std::uint64_t> sweeper_ticks{0};
  // Hot accounts with a sweep in flight, and how many of its shard postings are still out.
  std::mutex sweep_mutex;
  std::unordered_map<ledger::account_id, int> sweeping;
  std::uint64_t preloaded_keys = 0;  // written once in start(), before any reader of stats()
  std::uint64_t preloaded_accounts = 0;
  std::unique_ptr<actors::reconciler> reconciler;

  std::mutex timer_mutex;
  std::condition_variable timer_wake;
  bool stopping = false;
  std::vector<std::thread> timers;
  bool started = false;

  explicit impl(const config::settings& s)
      : settings(s), directory(static_cast<std::size_t>(s.actors.accounts_live_max)) {}

  const caf::actor& any_bridge() { return bridges[next_bridge++ % bridges.size()]; }

  template <typename T>
  void read(std::function<T(pqxx::connection&)> run, query_callback<T> done) {
    readers->submit({
        [run = std::move(run), done](pqxx::connection& conn) -> std::function<void()> {
          query_result<T> result;
          result.value = run(conn);
          return [done, result = std::move(result)]() mutable { done(std::move(result)); };
        },
        [done](ledger::error_code code, std::string detail) {
          query_result<T> result;
          result.outcome = code;
          result.detail = std::move(detail);
          done(std::move(result));
        },
    });
  }

  // The facts of an account: from the directory, or loaded once from the database.
  void facts(ledger::account_id id, std::function<void(ledger::error_code, std::optional<account_facts>)> done) {
    if (auto known = directory.find(id)) {
      done(ledger::error_code::ok, std::move(known));
      return;
    }
    read<std::optional<persistence::account_record>>(
        [id](pqxx::connection& conn) { return persistence::find_account(conn, id); },
        [this, done](query_result<std::optional<persistence::account_record>> r) {
          if (r.outcome != ledger::error_code::ok) return done(r.outcome, std::nullopt);
          if (!r.value) return done(ledger::error_code::ok, std::nullopt);
          auto f = facts_of(*r.value);
          directory.put(f);
          done(ledger::error_code::ok, std::move(f));
        });
  }

  void clearing_account(const std::string& currency, std::function<void(ledger::error_code, ledger::account_id)> done) {
    {
      std::lock_guard lock(clearing_mutex);
      if (auto it = clearing_accounts.find(currency); it != clearing_accounts.end()) {
        done(ledger::error_code::ok, it->second);
        return;
      }
    }
    read<ledger::account_id>(
        [currency](pqxx::connection& conn) { return persistence::ensure_clearing_account(conn, currency); },
        [this, currency, done](query_result<ledger::account_id> r) {
          if (r.outcome == ledger::error_code::ok) {
            std::lock_guard lock(clearing_mutex);
            clearing_accounts[currency] = r.value;
          }
          done(r.outcome, r.value);
        });
  }

  // A refusal decided before the database was asked may hide a committed replay of the same
  // key (the funds were spent by the original): look the key up before answering.
  void settle(ledger::principal_id principal, std::string key, std::string hash, money_result result,
              std::function<void(money_result)> done) {
    if (!result.decided_before_writer) return done(std::move(result));
    read<std::optional<persistence::stored_response>>(
        [principal, key](pqxx::connection& conn) { return persistence::find_committed(conn, principal, key); },
        [result, hash, done](query_result<std::optional<persistence::stored_response>> r) mutable {
          if (r.outcome != ledger::error_code::ok) {
            // The refusal may hide a committed original: without the lookup it is not final.
            return done(unavailable(ledger::error_code::outcome_unknown,
                                    "the outcome of this request could not be confirmed; retry with the same "
                                    "Idempotency-Key",
                                    1));
          }
          if (!r.value) return done(std::move(result));
          if (r.value->request_hash != hash) {
            return done(refusal(ledger::error_code::idempotency_key_reused,
                                "this Idempotency-Key was already used for a different request"));
          }
          money_result replay;
          replay.replayed = true;
          replay.status = r.value->status;
          replay.body = r.value->body;
          done(std::move(replay));
        });
  }

  // Joins the single flight of an Idempotency-Key. True for the caller that must execute the
  // request; a duplicate waits for its answer, and a different request under the same key is
  // refused at once.
  bool begin_flight(const std::string& key, const std::string& hash, std::function<void(money_result)>& done) {
    switch (flights.join(key, hash, done)) {
      case single_flight::join_result::leader: return true;
      case single_flight::join_result::follower: return false;
      case single_flight::join_result::conflict:
        done(refusal(ledger::error_code::idempotency_key_reused,
                     "this Idempotency-Key is in use by a different request"));
        return false;
    }
    return false;
  }

  std::size_t writer_index(ledger::account_id id) const { return writer_for(id, runtime->writers.size()); }

  // Sweeps the shards of every hot account into its main row. At most one sweep of an account is
  // in flight at a time, and none is sent while the account's writer is at its queue bound: when
  // the writer is slow, sweeps wait for the next tick instead of piling up in front of payments.
  // `done` gets the sweeps committed, or the reason the candidates could not be read.
  void sweep_all(std::function<void(query_result<int>)> done) {
    ++sweeper_ticks;
    read<std::vector<persistence::sweep_candidate>>(
        [](pqxx::connection& conn) { return persistence::sweep_candidates(conn, k_sweep_candidates_max); },
        [this, done](query_result<std::vector<persistence::sweep_candidate>> r) {
          if (r.outcome != ledger::error_code::ok) {
            query_result<int> failed;
            failed.outcome = r.outcome;
            failed.detail = r.detail;
            return done(std::move(failed));
          }
          if (r.value.empty()) return done(query_result<int>{});
          struct progress {
            std::atomic<int> remaining{0};
            std::atomic<int> committed{0};
            std::atomic<int> failed{0};
            std::function<void(query_result<int>)> done;
          };
          auto p = std::make_shared<progress>();
          p->done = done;
          std::vector<persistence::sweep_candidate> chosen;
          {
            std::lock_guard lock(sweep_mutex);
            for (auto& c : r.value) {
              const auto& gauges = *runtime->writer_gauges[writer_index(c.account)];
              if (sweeping.count(c.account) != 0 ||
                  gauges.queued.load() + static_cast<std::int64_t>(c.shards.size()) > runtime->writer_queue_max) {
                ++sweeps_deferred;
                continue;
              }
              sweeping.emplace(c.account, static_cast<int>(c.shards.size()));
              chosen.push_back(std::move(c));
            }
          }
          int total = 0;
          for (const auto& c : chosen) total += static_cast<int>(c.shards.size());
          if (total == 0) return done(query_result<int>{});
          p->remaining = total;
          for (const auto& c : chosen) {
            for (ledger::account_id shard : c.shards) {
              persistence::posting_request request;
              request.posting.type = ledger::transaction_type::sweep;
              request.posting.debit_account = shard;
              request.posting.credit_account = c.account;
              request.posting.credit_parent = c.account;
              request.posting.amount = 0;  // whatever the shard holds under the lock
              request.posting.currency = c.currency;
              request.transaction_id = make_transaction_id();
              request.idempotency_key = "sweep:" + request.transaction_id;
              request.request_hash = "sweep";
              const auto w = writer_index(c.account);
              ++runtime->writer_gauges[w]->queued;
              reply_sink sink{[this, p, account = c.account](money_result result) {
                if (result.outcome == ledger::error_code::ok && !result.body.empty()) {
                  ++p->committed;
                  ++sweeps_committed;
                } else if (result.outcome != ledger::error_code::ok) {
                  ++p->failed;
                  spdlog::warn("a sweep into account {} failed: {}", account, result.detail);
                }
                {
                  std::lock_guard lock(sweep_mutex);
                  if (auto it = sweeping.find(account); it != sweeping.end() && --it->second == 0) sweeping.erase(it);
                }
                if (--p->remaining == 0) {
                  query_result<int> swept;
                  swept.value = p->committed.load();
                  if (const int failed = p->failed.load(); failed > 0) {
                    // Sweeping again is harmless (an emptied shard moves nothing): the caller may
                    // simply ask again.
                    swept.outcome = ledger::error_code::database_unavailable;
                    swept.detail = std::to_string(failed) + " sweeps could not be committed (" +
                                   std::to_string(swept.value) + " were); sweep again later";
                  }
                  p->done(std::move(swept));
                }
              }};
              caf::anon_send(any_bridge(), call_atom::value, runtime->writers[w], std::move(request), std::move(sink));
            }
          }
        });
  }

  // Fills the key cache and the account directory from the database, newest first and within
  // their bounds, so that after a restart under load the first request of each client needs no
  // read (measured: without it, 10,000 returning payers at 3,200/s met a p99 of 2.5 s for the
  // first seconds while every key and account was read one by one). Best effort: with the
  // database down the caches simply fill as requests come.
  void warm_caches() {
    const auto started = std::chrono::steady_clock::now();
    try {
      auto conn = persistence::connect(database_options(settings, "wallet-preload"));
      const auto keys = persistence::recent_keys(*conn, settings.auth.key_cache_max);
      {
        std::lock_guard lock(auth_mutex);
        for (const auto& k : keys) auth_cache.emplace(k.key_hash_hex, k.principal);
      }
      const auto accounts = persistence::recent_accounts(*conn, settings.actors.accounts_live_max);
      for (const auto& a : accounts) directory.put(account_facts{a.id, a.owner_id, a.currency, a.kind, a.shards});
      preloaded_keys = keys.size();
      preloaded_accounts = accounts.size();
      spdlog::info("preloaded {} API keys and {} accounts in {:.0f} ms", keys.size(), accounts.size(),
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
    } catch (const std::exception& e) {
      spdlog::warn("could not preload keys and accounts ({}); they will be read on first use", e.what());
    }
  }

  // A background timer thread: calls `tick` every `interval` until stop.
  void every(std::chrono::milliseconds interval, std::function<void()> tick) {
    timers.emplace_back([this, interval, tick = std::move(tick)] {
      pthread_setname_np(pthread_self(), "wallet-timer");
      std::unique_lock lock(timer_mutex);
      while (!timer_wake.wait_for(lock, interval, [this] { return stopping; })) {
        lock.unlock();
        tick();
        lock.lock();
      }
    });
  }
};

ledger_service::ledger_service(const config::settings& settings) : impl_(std::make_unique<impl>(settings)) {}

ledger_service::~ledger_service() { stop(); }

void ledger_service::start() {
  auto& d = *impl_;
  const auto& s = d.settings;
  d.caf_config = std::make_unique<caf::actor_system_config>();
  d.caf_config->set("scheduler.max-threads", static_cast<std::size_t>(s.actors.scheduler_threads));
  // The work-stealing scheduler's idle workers poll (spin, then sleep in short steps); on two
  // cores shared with PostgreSQL that polling takes CPU the database needs. The sharing policy
  // parks idle workers on a condition variable instead (measured: see bench/PROFILE.md).
  d.caf_config->set("scheduler.policy",
                    s.actors.scheduler_policy == "sharing" ? caf::atom("sharing") : caf::atom("stealing"));
  d.caf_config->set("logger.console", caf::atom("none"));
  d.system = std::make_unique<caf::actor_system>(*d.caf_config);

  d.readers = std::make_shared<reader_pool>(database_options(s, "wallet-reader"), static_cast<int>(s.database.readers),
                                            s.database.reader_queue_max, s.database.connection_wait_ms,
                                            s.database.reconnect_backoff_ms);

  d.runtime = std::make_shared<account_runtime>();
  d.runtime->load = load_from_database(d.readers);
  d.runtime->writer_queue_max = s.writer.queue_postings_max;
  d.runtime->inflight_max = s.actors.account_inflight_max;
  d.runtime->idle_ms = s.actors.account_idle_ms;
  d.runtime->live_max_per_shard =
      static_cast<std::size_t>(std::max<std::int64_t>(1, s.actors.accounts_live_max / s.actors.registry_shards));
  for (std::int64_t i = 0; i < s.writer.count; ++i) {
    writer_config wc;
    wc.database = database_options(s, "wallet-writer-" + std::to_string(i));
    wc.index = static_cast<std::size_t>(i);
    wc.batch_postings_max = static_cast<std::size_t>(s.writer.batch_postings_max);
    wc.batch_wait_us = s.writer.batch_wait_us;
    wc.reconnect_backoff_ms = s.database.reconnect_backoff_ms;
    auto gauges = std::make_shared<writer_gauges>();
    d.runtime->writer_gauges.push_back(gauges);
    d.runtime->writers.push_back(spawn_ledger_writer(*d.system, std::move(wc), gauges));
  }
  for (std::int64_t i = 0; i < s.actors.registry_shards; ++i) {
    d.registry.push_back(spawn_account_registry(*d.system, d.runtime));
  }
  for (const auto& w : d.runtime->writers) caf::anon_send(w, registry_handles{d.registry});
  for (std::int64_t i = 0; i < std::max<std::int64_t>(2, s.actors.scheduler_threads); ++i) {
    d.bridges.push_back(d.system->spawn(bridge, k_reserved_wait));
  }

  d.warm_caches();
  d.every(std::chrono::milliseconds(s.ledger.sweep_interval_ms), [this] { impl_->sweep_all([](query_result<int>) {}); });
  reconciler_config rc;
  rc.database = database_options(s, "wallet-reconciler");
  rc.database.statement_timeout_ms = s.ledger.reconcile_statement_timeout_ms;
  rc.incremental_interval_s = s.ledger.reconcile_interval_s;
  rc.full_interval_s = s.ledger.reconcile_full_interval_s;
  rc.reconnect_backoff_ms = s.database.reconnect_backoff_ms;
  rc.work_mem_mb = s.ledger.reconcile_work_mem_mb;
  d.reconciler = std::make_unique<actors::reconciler>(std::move(rc));
  d.reconciler->start();
  d.started = true;
}

void ledger_service::stop() {
  auto& d = *impl_;
  if (!d.started) return;
  d.started = false;
  d.stopped = true;
  {
    std::lock_guard lock(d.timer_mutex);
    d.stopping = true;
  }
  d.timer_wake.notify_all();
  for (auto& t : d.timers) t.join();
  d.timers.clear();
  d.reconciler->stop();
  d.readers->stop();
  for (auto& a : d.bridges) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  for (auto& a : d.registry) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  for (auto& a : d.runtime->writers) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  d.bridges.clear();
  d.registry.clear();
  d.runtime->writers.clear();
  // Account actors hold a handle to their registry shard only; shutting the system down ends them.
  d.system.reset();
  d.caf_config.reset();
}

void ledger_service::transfer(transfer_command command, std::function<void(money_result)> done) {
  auto& d = *impl_;
  if (d.stopped.load()) return done(shutting_down());
  const std::string flight_key = std::to_string(command.principal) + '\n' + command.idempotency_key;
  if (!d.begin_flight(flight_key, command.request_hash, done)) return;
  auto finish = [this, flight_key, principal = command.principal, key = command.idempotency_key,
                 hash = command.request_hash](money_result result) {
    impl_->settle(principal, key, hash, std::move(result),
                  [this, flight_key](money_result settled) { impl_->flights.finish(flight_key, settled); });
  };
  // Both accounts must exist before an actor is asked: an actor is only ever started for an
  // account that exists, so naming one that does not leaves nothing behind (an account created
  // later under that id works at once).
  d.facts(command.from, [this, command = std::move(command), finish](ledger::error_code code,
                                                                      std::optional<account_facts> payer) mutable {
    auto& d = *impl_;
    if (code != ledger::error_code::ok) {
      return finish(unavailable(code, "the database is unavailable; retry with the same Idempotency-Key"));
    }
    if (!payer || payer->kind != ledger::account_kind::user || payer->owner_id != command.principal) {
      return finish(refusal(ledger::error_code::not_found,
                            "account " + std::to_string(command.from) + " (fromAccountId) was not found"));
    }
    const auto to = command.to;
    d.facts(to, [this, command = std::move(command), payer = std::move(payer), finish](
                    ledger::error_code code, std::optional<account_facts> payee) mutable {
      auto& d = *impl_;
      if (code != ledger::error_code::ok) {
        return finish(unavailable(code, "the database is unavailable; retry with the same Idempotency-Key"));
      }
      if (!payee || payee->kind != ledger::account_kind::user) {
        return finish(refusal(ledger::error_code::not_found,
                              "account " + std::to_string(command.to) + " (toAccountId) was not found"));
      }
      if (d.stopped.load()) return finish(shutting_down());
      const auto& shard = d.registry[static_cast<std::size_t>(command.from) % d.registry.size()];
      debit_request request{std::move(command), std::move(*payee), std::move(payer)};
      // Straight to the registry shard, which forwards to the account's actor; the actor answers
      // the sink itself when the writer has committed (no response travels back through here).
      caf::anon_send(shard, debit_atom::value, std::move(request), reply_sink{finish});
    });
  });
}

void ledger_service::deposit(deposit_command command, std::function<void(money_result)> done) {
  auto& d = *impl_;
  if (d.stopped.load()) return done(shutting_down());
  const std::string flight_key = std::to_string(command.principal) + '\n' + command.idempotency_key;
  if (!d.begin_flight(flight_key, command.request_hash, done)) return;
  auto finish = [this, flight_key](money_result result) { impl_->flights.finish(flight_key, result); };
  d.facts(command.account, [this, command = std::move(command), finish](ledger::error_code code,
                                                                         std::optional<account_facts> target) mutable {
    auto& d = *impl_;
    if (code != ledger::error_code::ok) {
      return finish(unavailable(code, "the database is unavailable; retry with the same Idempotency-Key"));
    }
    if (!target || target->kind != ledger::account_kind::user) {
      return finish(refusal(ledger::error_code::not_found,
                            "account " + std::to_string(command.account) + " (accountId) was not found"));
    }
    const std::string currency = target->currency;
    d.clearing_account(currency, [this, command = std::move(command), target = std::move(*target),
                                          finish](ledger::error_code code, ledger::account_id clearing) mutable {
      auto& d = *impl_;
      if (code != ledger::error_code::ok) {
        return finish(unavailable(code, "the database is unavailable; retry with the same Idempotency-Key"));
      }
      if (d.stopped.load()) return finish(shutting_down());
      const auto w = d.writer_index(clearing);
      auto& gauges = *d.runtime->writer_gauges[w];
      if (const auto queued = gauges.queued.load(); queued >= d.runtime->writer_queue_max) {
        return finish(unavailable(ledger::error_code::writer_busy, "the ledger writer is saturated",
                                  gauges.drain_seconds(queued)));
      }
      persistence::posting_request request;
      request.posting.type = ledger::transaction_type::deposit;
      request.posting.debit_account = clearing;
      request.posting.credit_account =
          account_directory::credit_row(target, w, d.runtime->writers.size(), std::hash<std::string>{}(command.idempotency_key));
      request.posting.credit_parent = target.id;
      request.posting.amount = command.amount;
      request.posting.currency = target.currency;
      request.transaction_id = make_transaction_id();
      request.principal = command.principal;
      request.idempotency_key = std::move(command.idempotency_key);
      request.request_hash = std::move(command.request_hash);
      request.metadata_json = std::move(command.metadata_json);
      ++gauges.queued;
      caf::anon_send(d.any_bridge(), call_atom::value, d.runtime->writers[w], std::move(request), reply_sink{finish});
    });
  });
}

std::optional<persistence::principal_record> ledger_service::cached_principal(const std::string& key_hash_hex) {
  auto& d = *impl_;
  std::lock_guard lock(d.auth_mutex);
  if (auto it = d.auth_cache.find(key_hash_hex); it != d.auth_cache.end()) return it->second;
  return std::nullopt;
}

void ledger_service::authenticate(std::string key_hash_hex,
                                  query_callback<std::optional<persistence::principal_record>> done) {
  auto& d = *impl_;
  {
    std::lock_guard lock(d.auth_mutex);
    if (auto it = d.auth_cache.find(key_hash_hex); it != d.auth_cache.end()) {
      query_result<std::optional<persistence::principal_record>> r;
      r.value = it->second;
      done(std::move(r));
      return;
    }
    // A key the database did not know a moment ago: a flood of bad keys costs no reads.
    if (auto it = d.unknown_keys.find(key_hash_hex); it != d.unknown_keys.end()) {
      if (std::chrono::steady_clock::now() < it->second) {
        done(query_result<std::optional<persistence::principal_record>>{});
        return;
      }
      d.unknown_keys.erase(it);
    }
  }
  d.read<std::optional<persistence::principal_record>>(
      [key_hash_hex](pqxx::connection& conn) { return persistence::find_principal_by_key(conn, key_hash_hex); },
      [this, key_hash_hex, done](query_result<std::optional<persistence::principal_record>> r) {
        auto& d = *impl_;
        if (r.outcome == ledger::error_code::ok) {
          std::lock_guard lock(d.auth_mutex);
          if (r.value) {
            if (static_cast<std::int64_t>(d.auth_cache.size()) >= d.settings.auth.key_cache_max) d.auth_cache.clear();
            d.auth_cache[key_hash_hex] = *r.value;
          } else if (d.settings.auth.unknown_key_cache_ms > 0) {
            const auto now = std::chrono::steady_clock::now();
            if (static_cast<std::int64_t>(d.unknown_keys.size()) >= d.settings.auth.unknown_key_cache_max) {
              std::erase_if(d.unknown_keys, [now](const auto& item) { return item.second <= now; });
              if (static_cast<std::int64_t>(d.unknown_keys.size()) >= d.settings.auth.unknown_key_cache_max) {
                d.unknown_keys.clear();
              }
            }
            d.unknown_keys[key_hash_hex] = now + std::chrono::milliseconds(d.settings.auth.unknown_key_cache_ms);
          }
        }
        done(std::move(r));
      });
}

void ledger_service::create_principal(std::string name, ledger::role role, std::string key_hash_hex,
                                      query_callback<persistence::principal_record> done) {
  impl_->read<persistence::principal_record>(
      [this, name = std::move(name), role, key_hash_hex = std::move(key_hash_hex)](pqxx::connection& conn) {
        auto principal = persistence::create_principal(conn, name, role, key_hash_hex);
        // The new key is about to be used: a payday of fresh payees must not start with a
        // database lookup per key.
        auto& d = *impl_;
        std::lock_guard lock(d.auth_mutex);
        if (static_cast<std::int64_t>(d.auth_cache.size()) >= d.settings.auth.key_cache_max) d.auth_cache.clear();
        d.auth_cache[key_hash_hex] = principal;
        d.unknown_keys.erase(key_hash_hex);
        return principal;
      },
      std::move(done));
}

void ledger_service::create_account(ledger::principal_id owner, std::string currency, int shards,
                                    query_callback<std::optional<persistence::account_record>> done) {
  impl_->read<std::optional<persistence::account_record>>(
      [this, owner, currency = std::move(currency), shards](pqxx::connection& conn) {
        std::optional<persistence::account_record> out;
        if (!persistence::find_principal(conn, owner)) return out;
        out = persistence::create_account(conn, owner, currency, shards);
        impl_->directory.put(facts_of(*out));
        return out;
      },
      std::move(done));
}

void ledger_service::reserved(ledger::account_id id, std::function<void(ledger::amount_minor)> done) {
  auto& d = *impl_;
  if (d.stopped.load()) return done(0);
  const auto& shard = d.registry[static_cast<std::size_t>(id) % d.registry.size()];
  caf::anon_send(d.any_bridge(), call_atom::value, shard, id, amount_sink{std::move(done)});
}

void ledger_service::find_account(ledger::account_id id,
                                  query_callback<std::optional<persistence::account_record>> done) {
  impl_->read<std::optional<persistence::account_record>>(
      [id](pqxx::connection& conn) { return persistence::find_account(conn, id); }, std::move(done));
}

void ledger_service::make_hot(ledger::account_id id, int shards,
                              query_callback<std::optional<persistence::account_record>> done) {
  impl_->read<std::optional<persistence::account_record>>(
      [this, id, shards](pqxx::connection& conn) {
        auto out = persistence::make_hot(conn, id, shards);
        if (out) impl_->directory.put(facts_of(*out));
        return out;
      },
      std::move(done));
}

void ledger_service::set_status(ledger::account_id id, ledger::account_status status,
                                query_callback<std::optional<persistence::account_record>> done) {
  impl_->read<std::optional<persistence::account_record>>(
      [id, status](pqxx::connection& conn) { return persistence::set_status(conn, id, status); },
      [this, id, done](query_result<std::optional<persistence::account_record>> r) {
        // The account's live actor learns the new status before the caller is answered, so every
        // payment sent after the answer is decided under it (the registry shard forwards in order).
        auto& d = *impl_;
        if (r.outcome == ledger::error_code::ok && r.value && !d.stopped.load()) {
          caf::anon_send(d.registry[static_cast<std::size_t>(id) % d.registry.size()], status_atom::value, id,
                         r.value->status);
        }
        done(std::move(r));
      });
}

void ledger_service::list_entries(ledger::account_id id, std::int64_t after, int limit,
                                  query_callback<persistence::entries_page> done) {
  impl_->read<persistence::entries_page>(
      [id, after, limit](pqxx::connection& conn) { return persistence::list_entries(conn, id, after, limit); },
      std::move(done));
}

void ledger_service::find_transaction(std::string id,
                                      query_callback<std::optional<persistence::transaction_record>> done) {
  impl_->read<std::optional<persistence::transaction_record>>(
      [id = std::move(id)](pqxx::connection& conn) { return persistence::find_transaction(conn, id); },
      std::move(done));
}

void ledger_service::start_reconciliation(bool full, std::string requested_by,
                                          query_callback<persistence::run_claim> done) {
  impl_->reconciler->request(full, std::move(requested_by),
                             [done](ledger::error_code code, std::string detail, persistence::run_claim claim) {
                               query_result<persistence::run_claim> r;
                               r.outcome = code;
                               r.detail = std::move(detail);
                               r.value = claim;
                               done(std::move(r));
                             });
}

void ledger_service::find_reconciliation_run(std::int64_t id,
                                             query_callback<std::optional<persistence::reconcile_run>> done) {
  impl_->read<std::optional<persistence::reconcile_run>>(
      [id](pqxx::connection& conn) { return persistence::find_run(conn, id); }, std::move(done));
}

void ledger_service::latest_reconciliation(query_callback<actors::reconciliation_status> done) {
  impl_->read<actors::reconciliation_status>(
      [](pqxx::connection& conn) {
        return actors::reconciliation_status{persistence::latest_finished_run(conn), persistence::running_run_id(conn)};
      },
      std::move(done));
}

void ledger_service::ping_database(query_callback<bool> done) {
  impl_->read<bool>([](pqxx::connection& conn) { return persistence::ping(conn); }, std::move(done));
}

void ledger_service::sweep_now(query_callback<int> done) {
  if (impl_->stopped.load()) {
    query_result<int> r;
    r.outcome = ledger::error_code::server_busy;
    r.detail = "the server is shutting down";
    return done(std::move(r));
  }
  impl_->sweep_all(std::move(done));
}

void ledger_service::ensure_operator_blocking(const std::string& key_hash_hex) {
  auto conn = persistence::connect(database_options(impl_->settings, "wallet-bootstrap"));
  persistence::ensure_operator(*conn, "bootstrap operator", key_hash_hex);
}

service_stats ledger_service::stats() const {
  auto& d = *impl_;
  service_stats s;
  if (!d.runtime) return s;
  s.live_account_actors = d.runtime->live_actors.load();
  s.writers_connected = true;
  for (const auto& g : d.runtime->writer_gauges) {
    s.writer_queued += g->queued.load();
    s.batches += g->batches.load();
    s.postings += g->postings.load();
    s.writer_failures += g->failures.load();
    s.writers_connected = s.writers_connected && g->connected.load();
  }
  s.reader_queued = d.readers ? d.readers->queued() : 0;
  s.reader_jobs = d.readers ? d.readers->submitted() : 0;
  s.preloaded_keys = d.preloaded_keys;
  s.preloaded_accounts = d.preloaded_accounts;
  s.sweeps_committed = d.sweeps_committed.load();
  s.sweeps_deferred = d.sweeps_deferred.load();
  s.sweeper_ticks = d.sweeper_ticks.load();
  {
    std::lock_guard lock(d.auth_mutex);
    s.unknown_keys_cached = d.unknown_keys.size();
  }
  const auto r = d.reconciler ? d.reconciler->stats() : reconciler_stats{};
  s.reconcile_runs = r.runs;
  s.reconcile_failures = r.failures;
  s.reconcile_errors = r.errors;
  s.reconcile_last_ok = r.last_ok;
  s.reconcile_last_ms = r.last_ms;
  s.reconcile_watermark = r.watermark;
  return s;
}

}  // namespace actors
