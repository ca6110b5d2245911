#include "http/metrics.hpp"

#include <sstream>

namespace api {

void metrics::observe(const std::string& route, int status, double seconds) {
  std::lock_guard lock(mutex_);
  ++requests_[{route, status}];
  auto& h = latency_[route];
  std::size_t i = 0;
  while (i < bounds_s.size() && seconds > bounds_s[i]) ++i;
  ++h.buckets[i];
  h.sum_s += seconds;
  ++h.count;
}

std::string metrics::render(const std::string& extra) const {
  std::ostringstream out;
  out << "# HELP wallet_http_requests_total HTTP requests answered, by route and status.\n"
      << "# TYPE wallet_http_requests_total counter\n";
  std::lock_guard lock(mutex_);
  for (const auto& [key, count] : requests_) {
    out << "wallet_http_requests_total{route=\"" << key.first << "\",status=\"" << key.second << "\"} " << count
        << "\n";
  }
  out << "# HELP wallet_http_request_duration_seconds Time from a request's arrival to its answer.\n"
      << "# TYPE wallet_http_request_duration_seconds histogram\n";
  for (const auto& [route, h] : latency_) {
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < bounds_s.size(); ++i) {
      cumulative += h.buckets[i];
      out << "wallet_http_request_duration_seconds_bucket{route=\"" << route << "\",le=\"" << bounds_s[i] << "\"} "
          << cumulative << "\n";
    }
    cumulative += h.buckets[bounds_s.size()];
    out << "wallet_http_request_duration_seconds_bucket{route=\"" << route << "\",le=\"+Inf\"} " << cumulative << "\n";
    out << "wallet_http_request_duration_seconds_sum{route=\"" << route << "\"} " << h.sum_s << "\n";
    out << "wallet_http_request_duration_seconds_count{route=\"" << route << "\"} " << h.count << "\n";
  }
  out << "# HELP wallet_http_open_connections Open HTTP connections.\n# TYPE wallet_http_open_connections gauge\n"
      << "wallet_http_open_connections " << open_connections.load() << "\n"
      << "# HELP wallet_http_inflight_requests Requests being served.\n# TYPE wallet_http_inflight_requests gauge\n"
      << "wallet_http_inflight_requests " << inflight_requests.load() << "\n"
      << "# HELP wallet_http_admitted_requests Requests whose work has not ended, answered or not.\n"
      << "# TYPE wallet_http_admitted_requests gauge\n"
      << "wallet_http_admitted_requests " << admission->requests.load() << "\n"
      << "# HELP wallet_http_connections_refused_total Connections closed at accept: over the limit.\n"
      << "# TYPE wallet_http_connections_refused_total counter\n"
      << "wallet_http_connections_refused_total " << connections_refused.load() << "\n"
      << "# HELP wallet_http_accept_failures_total Accepts that failed (out of file descriptors: retried after 100 "
         "ms).\n"
      << "# TYPE wallet_http_accept_failures_total counter\n"
      << "wallet_http_accept_failures_total " << accept_failures.load() << "\n"
      << "# HELP wallet_http_unauthenticated_refused_total Requests refused (429) before a key lookup: over the "
         "client address's allowance.\n"
      << "# TYPE wallet_http_unauthenticated_refused_total counter\n"
      << "wallet_http_unauthenticated_refused_total " << unauthenticated_refused.load() << "\n"
      << "# HELP wallet_http_unknown_account_refused_total Requests refused (429): the principal named too many "
         "accounts that do not exist.\n"
      << "# TYPE wallet_http_unknown_account_refused_total counter\n"
      << "wallet_http_unknown_account_refused_total " << unknown_account_refused.load() << "\n"
      << "# HELP wallet_http_bodies_lingered_total Error answers after which the rest of the body was read and "
         "discarded.\n"
      << "# TYPE wallet_http_bodies_lingered_total counter\n"
      << "wallet_http_bodies_lingered_total " << bodies_lingered.load() << "\n"
      << "# HELP wallet_cluster_forwarded_requests_total Debits sent to the node holding their partition.\n"
      << "# TYPE wallet_cluster_forwarded_requests_total counter\n"
      << "wallet_cluster_forwarded_requests_total " << forwarded_requests.load() << "\n"
      << "# HELP wallet_cluster_forward_failures_total Forwarded debits that did not reach the holder or got no "
         "answer in time.\n"
      << "# TYPE wallet_cluster_forward_failures_total counter\n"
      << "wallet_cluster_forward_failures_total " << forward_failures.load() << "\n";
  const auto returns = retry_returns.read();
  out << "# HELP wallet_http_answers_total Answers other than 503, those to requests other nodes forwarded here "
         "included: what the capacity counts.\n"
      << "# TYPE wallet_http_answers_total counter\n"
      << "wallet_http_answers_total " << retry_returns.answered_total() << "\n"
      << "# HELP wallet_http_capacity_per_second Answers other than 503 of the busiest of the last seconds: what "
         "bounds the requests admitted (admission.queue_target_ms).\n"
      << "# TYPE wallet_http_capacity_per_second gauge\n"
      << "wallet_http_capacity_per_second " << retry_returns.capacity_per_second() << "\n";
  out << "# HELP wallet_http_retry_returns_per_second Returns of clients answered 503 that one second takes at "
         "most, now.\n"
      << "# TYPE wallet_http_retry_returns_per_second gauge\n"
      << "wallet_http_retry_returns_per_second " << returns.returns_per_second << "\n"
      << "# HELP wallet_http_retry_returns_booked Clients answered 503 told to come back in the seconds ahead.\n"
      << "# TYPE wallet_http_retry_returns_booked gauge\n"
      << "wallet_http_retry_returns_booked " << returns.booked << "\n"
      << "# HELP wallet_http_retry_returns_furthest_seconds The furthest second ahead a return is booked for.\n"
      << "# TYPE wallet_http_retry_returns_furthest_seconds gauge\n"
      << "wallet_http_retry_returns_furthest_seconds " << returns.furthest_s << "\n";
  out << extra;
  return out.str();
}

std::string metrics::render_page(const actors::service_stats& s,
                                 const std::optional<ratelimit::limiter::stats>& limiter) const {
  std::ostringstream out;
  auto gauge = [&](const char* name, const char* help, const char* type, auto value) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n'
        << name << ' ' << value << '\n';
  };
  gauge("wallet_account_actors_live", "Live account actors.", "gauge", s.live_account_actors);
  gauge("wallet_writer_postings_queued", "Postings queued at ledger writers (a batch counts once).", "gauge",
        s.writer_queued);
  gauge("wallet_writer_batch_transfers_queued", "Transfers of batches queued at ledger writers.", "gauge",
        s.writer_run_postings_queued);
  gauge("wallet_writer_batches_total", "Batches committed by ledger writers.", "counter", s.batches);
  gauge("wallet_writer_postings_total", "Postings processed by ledger writers.", "counter", s.postings);
  gauge("wallet_writer_failures_total", "Batches that failed as a whole.", "counter", s.writer_failures);
  gauge("wallet_writer_busy_seconds_total", "Time the ledger writers spent committing, summed over writers.", "counter",
        static_cast<double>(s.writer_busy_us) / 1e6);
  gauge("wallet_writer_fenced_postings_total",
        "Debits refused at commit because this node no longer held their partition's lease.", "counter",
        s.fenced_postings);
  gauge("wallet_writer_relocked_batches_total",
        "Batches first read without row locks that were redone under them (a row had moved, or a posting was "
        "refused).",
        "counter", s.relocked_batches);
  if (s.cluster_enabled) {
    gauge("wallet_cluster_partitions_held", "Partitions this node leases.", "gauge", s.partitions_held);
    gauge("wallet_cluster_nodes", "Nodes up, as this node's last lease round counted them.", "gauge", s.cluster_nodes);
    gauge("wallet_cluster_leases_lost_total", "Leases another node took over while this node held them.", "counter",
          s.leases_lost);
    gauge("wallet_cluster_lease_failures_total", "Lease rounds the database did not answer.", "counter",
          s.lease_failures);
    gauge("wallet_cluster_node_id_in_use_elsewhere",
          "1 when another live process speaks for this node's id: this one holds and takes no lease.", "gauge",
          s.node_id_in_use_elsewhere ? 1 : 0);
  }
  gauge("wallet_writers_connected", "1 when every ledger writer has a database connection.", "gauge",
        s.writers_connected ? 1 : 0);
  gauge("wallet_reader_jobs_queued", "Database reads waiting for a connection.", "gauge", s.reader_queued);
  gauge("wallet_reader_jobs_total", "Database reads asked for since the start.", "counter", s.reader_jobs);
  gauge("wallet_preloaded_api_keys", "API keys loaded into the key cache at start.", "gauge", s.preloaded_keys);
  gauge("wallet_preloaded_accounts", "Accounts loaded into the account directory at start.", "gauge",
        s.preloaded_accounts);
  gauge("wallet_sweeps_total", "Sweep transactions committed.", "counter", s.sweeps_committed);
  gauge("wallet_sweeps_deferred_total",
        "Hot accounts a sweeper tick skipped: a sweep of it in flight, or its writer at the queue bound.", "counter",
        s.sweeps_deferred);
  gauge("wallet_sweeper_ticks_total", "Sweeper ticks.", "counter", s.sweeper_ticks);
  gauge("wallet_holds_expired_total", "Holds the hold expirer released because their time had passed.", "counter",
        s.holds_expired);
  gauge("wallet_replays_pruned_total",
        "Answers kept for requests sent with an Idempotency-Key that were deleted past their retention.", "counter",
        s.replays_pruned);
  gauge("wallet_unknown_keys_cached", "Unknown API keys answered 401 without a database read.", "gauge",
        s.unknown_keys_cached);
  gauge("wallet_reconciliation_runs_total", "Reconciliation runs.", "counter", s.reconcile_runs);
  gauge("wallet_reconciliation_failures_total", "Reconciliation runs that found a broken invariant.", "counter",
        s.reconcile_failures);
  gauge("wallet_reconciliation_ok", "1 when the last reconciliation was clean.", "gauge", s.reconcile_last_ok ? 1 : 0);
  gauge("wallet_reconciliation_errors_total", "Reconciliation runs that ended without a verdict.", "counter",
        s.reconcile_errors);
  gauge("wallet_reconciliation_last_duration_ms", "How long the last reconciliation run took.", "gauge",
        s.reconcile_last_ms);
  gauge("wallet_reconciliation_watermark_entry_id", "The entry id the last reconciliation covers.", "gauge",
        s.reconcile_watermark);
  if (limiter) {
    const auto& l = *limiter;
    gauge("wallet_ratelimit_redis_decisions_total", "Rate-limit decisions made in Redis.", "counter",
          l.redis_decisions);
    gauge("wallet_ratelimit_fallback_decisions_total", "Rate-limit decisions made in process (Redis unusable).",
          "counter", l.fallback_decisions);
    gauge("wallet_ratelimit_redis_failures_total", "Failed Redis calls.", "counter", l.redis_failures);
    gauge("wallet_ratelimit_fallback_transitions_total", "Switches to the in-process limiter.", "counter",
          l.transitions_to_fallback);
    gauge("wallet_ratelimit_fallback_active", "1 while the in-process limiter decides.", "gauge",
          l.using_fallback ? 1 : 0);
    gauge("wallet_ratelimit_local_spends_total", "Rate-limit checks admitted from a leased allowance, no Redis call.",
          "counter", l.local_spends);
    gauge("wallet_ratelimit_local_admissions_total",
          "Rate-limit checks admitted from the local allowance (ratelimit.local_tokens), no Redis call.", "counter",
          l.local_admissions);
    gauge("wallet_ratelimit_processes_counted",
          "Server processes whose local allowance the shared limit keeps back now (0: no local allowance).", "gauge",
          l.processes_counted);
    gauge("wallet_ratelimit_local_ready", "1 while this process may admit from its local allowance.", "gauge",
          l.local_ready ? 1 : 0);
    gauge("wallet_ratelimit_lease_tokens_expired_total", "Leased rate-limit tokens that expired unspent.", "counter",
          l.lease_tokens_expired);
  }
  if (more_series) out << more_series();
  return render(out.str());
}

}  // namespace api
