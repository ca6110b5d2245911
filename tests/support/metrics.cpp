#include "tests/support/metrics.hpp"

#include "tests/support/http_client.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <sstream>

namespace test_support {

std::optional<double> metric(const std::string& page, const std::string& series) {
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 && line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::nullopt;
}

std::string metrics_page(http_client& c) {
  auto r = c.request("GET", "/metrics");
  EXPECT_EQ(r.status, 200) << r.body;
  return r.body;
}

std::string metrics_page(int port) {
  http_client c(port, std::chrono::seconds(10));
  return metrics_page(c);
}

double metric_value(http_client& c, const std::string& series, double missing) {
  return metric(metrics_page(c), series).value_or(missing);
}

double metric_value(int port, const std::string& series, double missing) {
  return metric(metrics_page(port), series).value_or(missing);
}

}  // namespace test_support
