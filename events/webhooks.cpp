#include "events/webhooks.hpp"

#include <spdlog/spdlog.h>

#include <boost/json.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <random>
#include <set>
#include <span>
#include <tuple>
#include <sstream>

#include "events/event_json.hpp"
#include "http/signature.hpp"
#include "ledger/webhooks.hpp"
#include "persistence/outbox.hpp"
#include "persistence/webhooks.hpp"

namespace events {
namespace {

// Endpoints read from the database at a time while fanning out.
constexpr int k_endpoints_page = 500;
// Events one read of the feed takes at most while fanning out: one step of every endpoint it serves,
// written in one transaction, or in several of at most k_fan_out_deliveries_max deliveries each.
constexpr int k_fan_out_events_max = 1'000;
constexpr std::size_t k_fan_out_deliveries_max = 2'000;
// How much longer than an attempt's deadline its lease lasts: time to record the outcome.
constexpr std::int64_t k_lease_margin_ms = 30'000;
// Finished deliveries one prune statement deletes at most (one transaction), and statements a
// prune round runs at most: a backlog is deleted over several rounds, never in one long one.
constexpr int k_prune_batch = 5'000;
constexpr int k_prune_statements_max = 10;

// Where a step over `page` leaves its endpoints: the page's last event, or, when the feed ended
// within the page, the last cursor of that event's row (a row's events never change once it has its
// position, and the page took all of them), which is what the feed's end is measured in, so that a
// step that reached the end leaves nothing to read again.
std::int64_t reached(const persistence::events_page& page) {
  if (page.more || page.next == 0) return page.next;
  return persistence::event_cursor(page.next >> persistence::k_event_index_bits, persistence::k_events_per_row_max - 1);
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

webhook_config webhook_config_from(const config::settings& s) {
  webhook_config c;
  c.database.url = s.database.url;
  c.database.connect_timeout_ms = s.database.connect_timeout_ms;
  c.database.statement_timeout_ms = s.database.statement_timeout_ms;
  c.database.lock_timeout_ms = s.database.lock_timeout_ms;
  c.database.application_name = "wallet-webhooks";
  c.sender.timeout_ms = s.webhooks.timeout_ms;
  c.sender.allow_loopback = s.webhooks.allow_loopback;
  c.sender.ca_file = s.webhooks.ca_file;
  c.backoff.base_ms = s.webhooks.backoff_base_ms;
  c.backoff.cap_ms = s.webhooks.backoff_cap_ms;
  c.backoff.span_ms = s.webhooks.retry_span_ms;
  c.concurrency = s.webhooks.concurrency;
  c.poll_interval_ms = s.webhooks.poll_interval_ms;
  c.feed_scan_max = s.events.feed_scan_max;
  c.error_backoff_ms_max = s.events.backoff_ms_max;
  c.delivery_retention_days = s.webhooks.delivery_retention_days;
  c.prune_interval_ms = s.webhooks.prune_interval_ms;
  return c;
}

// What the dispatcher's thread and the sender's thread share: finished attempts handed over, the
// stop flag, and the counters.
struct webhook_dispatcher::state {
  explicit state(webhook_config c) : config(std::move(c)), sender(config.sender) {}

  webhook_config config;
  webhook_sender sender;
  mutable std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  bool new_deliveries = false;  // the fan-out made deliveries since the sender last looked
  std::deque<std::pair<persistence::claimed_webhook_delivery, webhook_response>> finished;
  webhook_stats stats;
};

// One of the dispatcher's two threads (fan-out, or delivery): its connection, its in-flight
// endpoints, its rounds.
class webhook_dispatcher::worker {
 public:
  explicit worker(state& s) : s_(s), random_(std::random_device{}()) {}

  // One round of this worker's part; true when another round is worth running at once. The two
  // parts run on threads of their own, each with its connection, so that a long fan-out (a backlog
  // of events times the endpoints) never holds up the next attempt of an endpoint.
  bool round(worker_part part) {
    if (!conn_) {
      conn_ = persistence::connect(s_.config.database);
      // Every statement of the dispatcher finds its rows by key (the claim probes each endpoint's
      // oldest pending delivery, the fan-out reads the feed from a cursor): none is meant to read a
      // table whole, which plans made on a new database's empty tables would.
      persistence::find_rows_by_key(*conn_);
    }
    if (part == worker_part::fan_out) {
      prune_when_due();
      const auto created_before = created_;
      const bool more = fan_out();
      if (created_ != created_before) {
        {
          std::lock_guard lock(s_.mutex);
          s_.new_deliveries = true;
        }
        s_.wake.notify_all();
      }
      return more;
    }
    bool busy = record_finished();
    busy = claim_and_send() || busy;
    return busy;
  }

  void drop_connection() { conn_.reset(); }

 private:
  bool record_finished() {
    {
      std::lock_guard lock(s_.mutex);
      while (!s_.finished.empty()) {
        unrecorded_.push_back(std::move(s_.finished.front()));
        s_.finished.pop_front();
      }
    }
    bool any = false;
    while (!unrecorded_.empty()) {
      const auto& [claimed, response] = unrecorded_.front();
      persistence::webhook_attempt_outcome o;
      o.delivery_id = claimed.id;
      o.attempts = claimed.attempts;
      o.delivered = response.delivered;
      o.status_code = response.status_code;
      o.error = response.error;
      if (!o.delivered) {
        // uniform_real_distribution may round up to its upper bound: the draw stays below 1.
        const double unit = std::min(unit_(random_), std::nextafter(1.0, 0.0));
        o.retry_delay_ms = next_retry_delay_ms(s_.config.backoff, claimed.span_attempts, claimed.span_elapsed_ms,
                                               response.elapsed_ms, unit);
      }
      // A false answer means the attempt was fenced out (the lease had expired and another attempt
      // followed): its outcome is not this attempt's to write.
      const auto recorded = persistence::record_webhook_attempt(*conn_, o);
      const bool written = recorded != persistence::webhook_attempt_recorded::fenced_out;
      const bool disabled = recorded == persistence::webhook_attempt_recorded::endpoint_disabled;
      {
        std::lock_guard lock(s_.mutex);
        if (written && o.delivered) ++s_.stats.delivered;
        if (written && !o.delivered && o.retry_delay_ms) ++s_.stats.retries;
        if (written && !o.delivered && !o.retry_delay_ms) ++s_.stats.failed;
        if (disabled) ++s_.stats.endpoints_disabled;
        if (response.timed_out) ++s_.stats.timeouts;
        --s_.stats.in_flight;
      }
      if (!o.delivered) {
        spdlog::info("webhooks: delivery {} of event {} attempt {} failed ({}){}", claimed.id, claimed.event_id,
                     claimed.attempts, response.error,
                     o.retry_delay_ms ? fmt::format("; next in {} ms", *o.retry_delay_ms) : "; FAILED");
      }
      if (disabled) {
        spdlog::warn(
            "webhooks: endpoint {} disabled: delivery {} was given up; nothing more is sent to it until it is "
            "enabled",
            claimed.endpoint_id, claimed.id);
      }
      busy_endpoints_.erase(claimed.endpoint_id);
      unrecorded_.pop_front();
      any = true;
    }
    return any;
  }

  // Deletes finished deliveries past their retention, when a prune is due (every
  // prune_interval_ms, the first at once).
  void prune_when_due() {
    if (s_.config.delivery_retention_days == 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (pruned_at_ && now - *pruned_at_ < std::chrono::milliseconds(s_.config.prune_interval_ms)) return;
    pruned_at_ = now;
    std::int64_t deleted = 0;
    for (int i = 0; i < k_prune_statements_max; ++i) {
      const auto n = persistence::prune_webhook_deliveries(*conn_, s_.config.delivery_retention_days, k_prune_batch);
      deleted += n;
      if (n < k_prune_batch) break;
    }
    if (deleted == 0) return;
    {
      std::lock_guard lock(s_.mutex);
      s_.stats.pruned += static_cast<std::uint64_t>(deleted);
    }
    spdlog::info("webhooks: deleted {} deliveries that ended more than {} days ago", deleted,
                 s_.config.delivery_retention_days);
  }

  // Brings every enabled endpoint over the feed events it has not seen; true when there is more
  // waiting than one round takes. Most endpoints follow the shared position (migration 029): one
  // step of it reads the feed once, makes the deliveries of the endpoints its events are for, and
  // moves the position, whatever the number of endpoints that get nothing. The endpoints that do
  // not follow it (new ones, enabled again after a pause) are brought to the feed's end by steps of
  // their own and then join it. An idle feed costs one query a round.
  bool fan_out() {
    const auto state = persistence::read_webhook_fan_out_state(*conn_);
    bool more = false;
    if (state.position < state.feed_end) more = take_shared_step(state.position);
    if (state.lagging) {
      more = catch_up(state.feed_end) || more;
      if (const auto joined = persistence::join_webhook_fan_out(*conn_); joined > 0) {
        spdlog::debug("webhooks: {} endpoints now follow the fan-out's position", joined);
      }
    }
    return more;
  }

  // One step of the shared position: a page of the feed after it, each following endpoint its
  // events are for given its deliveries, the position moved past the page. True when the feed
  // goes on past the page, or when another server moved the position meanwhile.
  bool take_shared_step(std::int64_t position) {
    const auto page = persistence::read_event_feed(*conn_, position, k_fan_out_events_max, s_.config.feed_scan_max,
                                                   persistence::event_filter{});
    {
      std::lock_guard lock(s_.mutex);
      ++s_.stats.feed_reads;
    }
    std::set<ledger::principal_id> touched;
    for (const auto& event : page.events) {
      for (const auto& leg : event.legs) {
        if (leg.owner) touched.insert(*leg.owner);
      }
    }
    std::vector<std::optional<std::string>> bodies(page.events.size());
    const auto made = persistence::take_shared_fan_out_step(
        *conn_, position, reached(page), std::vector<ledger::principal_id>(touched.begin(), touched.end()),
        k_fan_out_deliveries_max, [&](const std::vector<persistence::webhook_endpoint_record>& following) {
          std::vector<persistence::webhook_fan_out_step> steps;
          for (const auto& e : following) {
            auto step = step_of(e, std::max(e.feed_cursor, position), page, bodies);
            if (!step.deliveries.empty()) steps.push_back(std::move(step));
          }
          return steps;
        });
    if (!made) return true;
    count_created(*made);
    return page.more;
  }

  // The endpoints that do not follow the shared position, brought towards the feed's end by steps
  // of their own; true when one has more waiting than one step takes.
  //
  // The feed is read once for all of them, not once per endpoint: the endpoints behind, lowest
  // cursor first, take one step each from a page read at the lowest of their cursors, every
  // endpoint whose cursor the page passes being served from it; an endpoint the page does not reach
  // gets a page of its own (with those near it). So one far behind (enabled after a pause) holds
  // none of the others back.
  bool catch_up(std::int64_t end) {
    // Read lowest cursor first, up to the feed's end.
    std::vector<persistence::webhook_endpoint_record> behind;
    std::int64_t after_cursor = -1, after_id = 0;
    for (;;) {
      auto endpoints = persistence::lagging_webhook_endpoints(*conn_, after_cursor, after_id, k_endpoints_page);
      const bool last_page = static_cast<int>(endpoints.size()) < k_endpoints_page;
      if (!endpoints.empty())
        std::tie(after_cursor, after_id) = std::pair(endpoints.back().feed_cursor, endpoints.back().id);
      bool at_end = false;
      for (auto& e : endpoints) {
        if (e.feed_cursor >= end) {
          at_end = true;
          break;
        }
        behind.push_back(std::move(e));
      }
      if (last_page || at_end) break;
    }
    bool more = false;
    for (std::size_t first = 0; first < behind.size();) {
      const auto page = persistence::read_event_feed(*conn_, behind[first].feed_cursor, k_fan_out_events_max,
                                                     s_.config.feed_scan_max, persistence::event_filter{});
      {
        std::lock_guard lock(s_.mutex);
        ++s_.stats.feed_reads;
      }
      std::size_t served = first;
      while (served < behind.size() && behind[served].feed_cursor < reached(page)) ++served;
      if (served > first && !take_steps(behind.begin() + first, behind.begin() + served, page)) more = true;
      // The feed ended within this page: the endpoints it did not reach have nothing new.
      if (!page.more) break;
      more = true;
      first = served;
    }
    return more;
  }

  // The step of endpoint `e`, standing at `from`, over `page` (read at or below `from`, ending
  // past it): the page's events after `from` that the endpoint is for, as deliveries. Each event's
  // JSON is written once (`bodies`, by the event's index in the page), for every endpoint that
  // gets it.
  persistence::webhook_fan_out_step step_of(const persistence::webhook_endpoint_record& e, std::int64_t from,
                                            const persistence::events_page& page,
                                            std::vector<std::optional<std::string>>& bodies) {
    if (from < page.pruned_through) {
      // Only an endpoint disabled while the feed's retention passed gets here: the relay keeps
      // every event an enabled endpoint has still to be given.
      spdlog::warn(
          "webhooks: endpoint {} missed the events after cursor {} through {}: they were deleted past "
          "events.feed_retention_days while it was disabled; it goes on from the oldest event kept",
          e.id, from, page.pruned_through);
      std::lock_guard lock(s_.mutex);
      ++s_.stats.feed_gaps;
    }
    persistence::webhook_fan_out_step step{e.id, from, reached(page), e.event_types, e.account, {}};
    for (std::size_t i = 0; i < page.events.size(); ++i) {
      const auto& event = page.events[i];
      if (event.cursor <= from) continue;
      // The feed's rule: an operator's endpoint every event, any other its owner's; then its account.
      if (!e.all_accounts && !event.touches_owner(e.owner)) continue;
      if (e.account && !event.touches_account(*e.account)) continue;
      if (!ledger::wants_event_type(e.event_types, event.type)) continue;
      if (!bodies[i]) bodies[i] = boost::json::serialize(event_json(event));
      step.deliveries.push_back({event.cursor, event.transaction_id, event.type, *bodies[i]});
    }
    return step;
  }

  void count_created(std::size_t made) {
    created_ += made;
    std::lock_guard lock(s_.mutex);
    s_.stats.deliveries_created += made;
  }

  // One step of each endpoint of [first, last) over `page` (read at or below their cursors, ending
  // past them), written in one transaction; each cursor becomes where it now stands. False when an
  // endpoint's cursor could not be moved (another server moved it, it joined the shared position,
  // or it was disabled, deleted or given other event types meanwhile) and the endpoints are to be
  // looked at again.
  template <typename It>
  bool take_steps(It first, It last, const persistence::events_page& page) {
    std::vector<std::optional<std::string>> bodies(page.events.size());
    std::vector<persistence::webhook_fan_out_step> steps;
    for (auto it = first; it != last; ++it) steps.push_back(step_of(*it, it->feed_cursor, page, bodies));
    // Written a few endpoints at a time when many of them get the page's events: no statement
    // carries more than k_fan_out_deliveries_max deliveries (an endpoint's own step may alone).
    std::set<std::int64_t> written;
    for (std::size_t from = 0; from < steps.size();) {
      std::size_t to = from, deliveries = 0;
      while (to < steps.size() && (to == from || deliveries + steps[to].deliveries.size() <= k_fan_out_deliveries_max))
        deliveries += steps[to++].deliveries.size();
      const std::span<const persistence::webhook_fan_out_step> part(steps.data() + from, to - from);
      for (const auto id : persistence::add_webhook_deliveries(*conn_, part)) written.insert(id);
      from = to;
    }
    std::size_t made = 0;
    auto step = steps.begin();
    for (auto it = first; it != last; ++it, ++step) {
      if (written.count(it->id) == 0) continue;
      it->feed_cursor = step->to;
      made += step->deliveries.size();
    }
    count_created(made);
    return written.size() == steps.size();
  }

  bool claim_and_send() {
    const auto room = s_.config.concurrency - static_cast<std::int64_t>(busy_endpoints_.size());
    if (room <= 0) return false;
    const std::vector<std::int64_t> busy(busy_endpoints_.begin(), busy_endpoints_.end());
    auto claimed = persistence::claim_webhook_deliveries(*conn_, static_cast<int>(room), busy,
                                                         s_.config.sender.timeout_ms + k_lease_margin_ms);
    for (auto& c : claimed) {
      busy_endpoints_.insert(c.endpoint_id);
      {
        std::lock_guard lock(s_.mutex);
        ++s_.stats.attempts;
        ++s_.stats.in_flight;
      }
      webhook_request request;
      request.url = c.url;
      request.body = c.body;
      // The current secret first; a rotated-out one that still signs after it (docs/events.md).
      request.signature =
          c.previous_signing_secret.empty()
              ? api::sign(c.signing_secret, unix_now(), c.body)
              : api::sign_with_secrets({c.signing_secret, c.previous_signing_secret}, unix_now(), c.body);
      request.event_id = c.event_id;
      request.delivery_id = c.id;
      state* s = &s_;
      s_.sender.send(std::move(request), [s, c](webhook_response r) mutable {
        {
          std::lock_guard lock(s->mutex);
          s->finished.emplace_back(std::move(c), std::move(r));
        }
        // Both threads wait on `wake`: notify_one could wake the fan-out thread only.
        s->wake.notify_all();
      });
    }
    return false;
  }

  state& s_;
  std::unique_ptr<pqxx::connection> conn_;
  std::set<std::int64_t> busy_endpoints_;  // endpoints with an attempt of this server in flight
  std::uint64_t created_ = 0;              // deliveries this worker made
  std::optional<std::chrono::steady_clock::time_point> pruned_at_;  // the last prune (fan-out worker)
  std::deque<std::pair<persistence::claimed_webhook_delivery, webhook_response>> unrecorded_;
  std::mt19937_64 random_;
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
};

webhook_dispatcher::webhook_dispatcher(webhook_config config) : state_(std::make_unique<state>(std::move(config))) {}

webhook_dispatcher::~webhook_dispatcher() { stop(); }

void webhook_dispatcher::start() {
  if (thread_.joinable()) return;
  state_->sender.start();
  fan_out_thread_ = std::thread([this] { run(worker_part::fan_out); });
  thread_ = std::thread([this] { run(worker_part::deliver); });
}

void webhook_dispatcher::stop() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  if (fan_out_thread_.joinable()) fan_out_thread_.join();
  if (thread_.joinable()) thread_.join();
  state_->sender.stop();
}

void webhook_dispatcher::run(worker_part part) {
  worker w(*state_);
  const auto poll = std::chrono::milliseconds(state_->config.poll_interval_ms);
  const char* name = part == worker_part::fan_out ? "fan-out" : "delivery";
  auto pause = poll;
  bool failing = false;
  for (;;) {
    bool busy = false;
    try {
      busy = w.round(part);
      if (failing) spdlog::info("webhooks: {} database work succeeds again", name);
      failing = false;
      pause = poll;
    } catch (const std::exception& e) {
      w.drop_connection();
      {
        std::lock_guard lock(state_->mutex);
        ++state_->stats.database_errors;
      }
      if (!failing) spdlog::warn("webhooks: {} database work failed ({}); retrying", name, e.what());
      failing = true;
      pause = std::min(pause * 2, std::chrono::milliseconds(state_->config.error_backoff_ms_max));
    }
    std::unique_lock lock(state_->mutex);
    if (state_->stopping) return;
    if (busy) continue;
    if (part == worker_part::fan_out) {
      state_->wake.wait_for(lock, pause, [this] { return state_->stopping; });
    } else {
      // An attempt that ended or new deliveries wake the sender before its poll is up.
      state_->wake.wait_for(lock, pause,
                            [this] { return state_->stopping || !state_->finished.empty() || state_->new_deliveries; });
      state_->new_deliveries = false;
    }
    if (state_->stopping) return;
  }
}

webhook_stats webhook_dispatcher::stats() const {
  std::lock_guard lock(state_->mutex);
  return state_->stats;
}

std::string webhook_dispatcher::render_metrics() const {
  const auto s = stats();
  std::ostringstream out;
  auto counter = [&out](const char* name, const char* help, std::uint64_t v) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " counter\n" << name << ' ' << v << '\n';
  };
  counter("wallet_webhook_deliveries_created_total", "Webhook deliveries made from feed events.", s.deliveries_created);
  counter("wallet_webhook_attempts_total", "Webhook delivery attempts started.", s.attempts);
  counter("wallet_webhook_deliveries_sent_total", "Webhook deliveries answered 2xx (DELIVERED).", s.delivered);
  counter("wallet_webhook_retries_total", "Failed webhook attempts followed by another.", s.retries);
  counter("wallet_webhook_deliveries_failed_total", "Webhook deliveries given up after the retry span (FAILED).",
          s.failed);
  counter("wallet_webhook_endpoints_disabled_total",
          "Webhook endpoints disabled by this server because one of their deliveries was given up.",
          s.endpoints_disabled);
  counter("wallet_webhook_timeouts_total", "Webhook attempts that ran out of webhooks.timeout_ms.", s.timeouts);
  counter("wallet_webhook_database_errors_total", "Failed rounds of the webhook dispatcher's database work.",
          s.database_errors);
  counter("wallet_webhook_deliveries_pruned_total",
          "Finished webhook deliveries this server deleted past webhooks.delivery_retention_days.", s.pruned);
  counter("wallet_webhook_feed_reads_total",
          "Reads of the event feed this server's fan-out made (one serves every endpoint at its cursors).",
          s.feed_reads);
  counter("wallet_webhook_feed_gaps_total",
          "Fan-outs that found an endpoint's next events deleted past events.feed_retention_days (it was disabled).",
          s.feed_gaps);
  out << "# HELP wallet_webhook_attempts_in_flight Webhook attempts in flight in this server.\n"
      << "# TYPE wallet_webhook_attempts_in_flight gauge\nwallet_webhook_attempts_in_flight " << s.in_flight << '\n';
  return out.str();
}

}  // namespace events
