#pragma once

// The one reader of the server's /metrics page (Prometheus text) for the tests.

#include <optional>
#include <string>

namespace test_support {

class http_client;

// The value of one series in a Prometheus text page: the series name with its labels exactly as
// the server writes them, e.g. `wallet_http_requests_total{route="/healthz",status="200"}`, or a
// plain name such as `wallet_http_open_connections`. nullopt when the page has no such series.
std::optional<double> metric(const std::string& page, const std::string& series);

// GET /metrics through `c`, or through a fresh connection to `port`. An answer other than 200 is
// a test failure.
std::string metrics_page(http_client& c);
std::string metrics_page(int port);

// One series' value from a fresh scrape; `missing` when the page has no such series.
double metric_value(http_client& c, const std::string& series, double missing = -1);
double metric_value(int port, const std::string& series, double missing = -1);

}  // namespace test_support
