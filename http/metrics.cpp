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
    out << "wallet_http_request_duration_seconds_bucket{route=\"" << route << "\",le=\"+Inf\"} " << cumulative
        << "\n";
    out << "wallet_http_request_duration_seconds_sum{route=\"" << route << "\"} " << h.sum_s << "\n";
    out << "wallet_http_request_duration_seconds_count{route=\"" << route << "\"} " << h.count << "\n";
  }
  out << "# HELP wallet_http_open_connections Open HTTP connections.\n# TYPE wallet_http_open_connections gauge\n"
      << "wallet_http_open_connections " << open_connections.load() << "\n"
      << "# HELP wallet_http_inflight_requests Requests being served.\n# TYPE wallet_http_inflight_requests gauge\n"
      << "wallet_http_inflight_requests " << inflight_requests.load() << "\n"
      << "# HELP wallet_http_connections_refused_total Connections closed at accept: over the limit.\n"
      << "# TYPE wallet_http_connections_refused_total counter\n"
      << "wallet_http_connections_refused_total " << connections_refused.load() << "\n"
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
      << "wallet_http_bodies_lingered_total " << bodies_lingered.load() << "\n";
  out << extra;
  return out.str();
}

}  // namespace api
