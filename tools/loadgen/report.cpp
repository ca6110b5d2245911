#include "tools/loadgen/report.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace loadgen {
namespace {

double ms(std::int64_t us) { return static_cast<double>(us) / 1000.0; }

// A p99 send lag above this says the generator could not keep to its schedule.
constexpr std::int64_t k_send_lag_warning_us = 10'000;

// Milliseconds rounded to microseconds, so the JSON stays readable.
double json_ms(std::int64_t us) { return std::round(static_cast<double>(us)) / 1000.0; }

boost::json::object latency_json(const histogram& h) {
  return {{"count", h.count()},
          {"p50_ms", json_ms(h.value_at_percentile(50))},
          {"p90_ms", json_ms(h.value_at_percentile(90))},
          {"p99_ms", json_ms(h.value_at_percentile(99))},
          {"p999_ms", json_ms(h.value_at_percentile(99.9))},
          {"max_ms", json_ms(h.max())},
          {"mean_ms", std::round(h.mean()) / 1000.0}};
}

boost::json::object counts_json(const std::map<std::string, std::int64_t>& counts) {
  boost::json::object o;
  for (const auto& [name, n] : counts) o[name] = n;
  return o;
}

boost::json::object step_json(const search_step& s) {
  return {{"rate", s.rate},
          {"achieved", s.achieved},
          {"p50_ms", json_ms(s.p50_us)},
          {"p99_ms", json_ms(s.p99_us)},
          {"not_accepted", s.not_accepted},
          {"ok", s.ok}};
}

// The p-th percentile of a second's accepted latencies, or nothing when none was accepted.
std::optional<std::int64_t> second_percentile(const second_stats& s, double p) {
  if (!s.accepted_us || s.accepted_us->count() == 0) return std::nullopt;
  return s.accepted_us->value_at_percentile(p);
}

std::string escape_html(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* const k_palette[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e",
                                 "#e6ab02", "#a6761d", "#666666", "#1f78b4", "#b2df8a"};

struct series_line {
  std::string name;
  std::string color;
  std::vector<std::optional<double>> values;
};

// A line chart as inline SVG. With `log_scale` the y axis is logarithmic (latencies span orders
// of magnitude during a spike).
std::string svg_chart(const std::string& title, const std::string& unit, const std::vector<series_line>& lines,
                      bool log_scale) {
  const double width = 960, height = 320, left = 70, right = 160, top = 30, bottom = 40;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  std::size_t n = 0;
  double max_v = 0, min_v = 1e300;
  for (const auto& l : lines) {
    n = std::max(n, l.values.size());
    for (const auto& v : l.values) {
      if (!v) continue;
      max_v = std::max(max_v, *v);
      if (*v > 0) min_v = std::min(min_v, *v);
    }
  }
  if (n < 2) n = 2;
  if (max_v <= 0) max_v = 1;
  if (min_v > max_v) min_v = max_v / 10;
  // A linear axis ends at the next 1, 2 or 5 times a power of ten, so its labels are round.
  double lo = 0, hi = max_v;
  {
    const double magnitude = std::pow(10.0, std::floor(std::log10(max_v)));
    for (double step : {1.0, 2.0, 5.0, 10.0}) {
      if (step * magnitude >= max_v) {
        hi = step * magnitude;
        break;
      }
    }
  }
  if (log_scale) {
    lo = std::floor(std::log10(std::max(min_v, 1e-3)));
    hi = std::ceil(std::log10(max_v));
    if (hi <= lo) hi = lo + 1;
  }
  auto y_of = [&](double v) {
    double f = log_scale ? (std::log10(std::max(v, std::pow(10.0, lo))) - lo) / (hi - lo) : v / hi;
    return top + plot_h * (1 - std::clamp(f, 0.0, 1.0));
  };
  auto x_of = [&](std::size_t i) { return left + plot_w * static_cast<double>(i) / static_cast<double>(n - 1); };

  std::ostringstream svg;
  svg << std::fixed << std::setprecision(1);
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
      << "' font-family='sans-serif' font-size='11'>\n";
  svg << "<text x='" << left << "' y='18' font-size='14' font-weight='bold'>" << escape_html(title) << "</text>\n";
  svg << "<rect x='" << left << "' y='" << top << "' width='" << plot_w << "' height='" << plot_h
      << "' fill='none' stroke='#ccc'/>\n";
  // Horizontal grid lines with labels.
  if (log_scale) {
    for (int e = static_cast<int>(lo); e <= static_cast<int>(hi); ++e) {
      const double v = std::pow(10.0, e);
      svg << "<line x1='" << left << "' x2='" << left + plot_w << "' y1='" << y_of(v) << "' y2='" << y_of(v)
          << "' stroke='#eee'/><text x='" << left - 6 << "' y='" << y_of(v) + 4 << "' text-anchor='end'>" << v << " "
          << unit << "</text>\n";
    }
  } else {
    for (int k = 0; k <= 4; ++k) {
      const double v = hi * k / 4;
      svg << "<line x1='" << left << "' x2='" << left + plot_w << "' y1='" << y_of(v) << "' y2='" << y_of(v)
          << "' stroke='#eee'/><text x='" << left - 6 << "' y='" << y_of(v) + 4 << "' text-anchor='end'>"
          << std::setprecision(0) << v << std::setprecision(1) << "</text>\n";
    }
  }
  // Time axis, a label every tenth of the run.
  const std::size_t tick = std::max<std::size_t>(1, n / 10);
  for (std::size_t i = 0; i < n; i += tick) {
    svg << "<text x='" << x_of(i) << "' y='" << top + plot_h + 16 << "' text-anchor='middle'>" << i << " s</text>\n";
  }
  for (std::size_t k = 0; k < lines.size(); ++k) {
    const auto& l = lines[k];
    std::ostringstream path;
    path << std::fixed << std::setprecision(1);
    bool pen_down = false;
    for (std::size_t i = 0; i < l.values.size(); ++i) {
      if (!l.values[i]) {
        pen_down = false;
        continue;
      }
      path << (pen_down ? " L" : " M") << x_of(i) << " " << y_of(*l.values[i]);
      pen_down = true;
    }
    svg << "<path d='" << path.str() << "' fill='none' stroke='" << l.color << "' stroke-width='1.5'/>\n";
    svg << "<rect x='" << left + plot_w + 12 << "' y='" << top + 14 * k << "' width='10' height='10' fill='" << l.color
        << "'/><text x='" << left + plot_w + 26 << "' y='" << top + 14 * k + 9 << "'>" << escape_html(l.name)
        << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace

std::optional<spike_result> analyze_spike(const options& o, const run_stats& stats) {
  const auto& series = stats.series();
  spike_result r;
  r.start_s = o.spike_start_s;
  r.duration_s = o.spike_duration_s + 2 * o.spike_ramp_s;
  r.end_s = r.start_s + r.duration_s;
  if (series.empty() || r.start_s >= o.duration_s) return std::nullopt;

  const auto total = stats.total();
  const double requests = static_cast<double>(std::max<std::int64_t>(1, total.scheduled));
  auto first = [&](const char* cls) {
    const auto it = total.first_attempt.find(cls);
    return it == total.first_attempt.end() ? 0.0 : static_cast<double>(it->second);
  };
  r.share_429 = first("429") / requests;
  r.share_503 = first("503") / requests;
  for (const auto& [name, n] : total.first_attempt) {
    if (name.starts_with("error")) r.share_errors += static_cast<double>(n) / requests;
  }

  histogram before(k_second_latency_us_max, 2), during(k_second_latency_us_max, 2);
  histogram answers_during(k_second_latency_us_max, 2);
  for (std::size_t s = 0; s < series.size(); ++s) {
    if (!series[s].accepted_us) continue;
    const double t = static_cast<double>(s);
    if (t >= o.warmup_s && t + 1 <= r.start_s) before.merge(*series[s].accepted_us);
    if (t >= r.start_s && t < r.end_s) {
      during.merge(*series[s].accepted_us);
      answers_during.merge(*series[s].accepted_attempt_us);
    }
  }
  r.baseline_p99_us = before.value_at_percentile(99);
  r.p99_accepted_us = during.value_at_percentile(99);
  r.p99_accepted_answer_us = answers_during.value_at_percentile(99);
  // Back at baseline: three seconds in a row whose p99 is within half again the baseline's
  // (or 5 ms above it, so that a sub-millisecond baseline does not demand the impossible).
  const double threshold =
      std::max(1.5 * static_cast<double>(r.baseline_p99_us), static_cast<double>(r.baseline_p99_us) + 5'000.0);
  const auto first_second = static_cast<std::size_t>(std::ceil(r.end_s));
  for (std::size_t s = first_second; s + 3 <= series.size(); ++s) {
    bool calm = true;
    for (std::size_t k = s; k < s + 3 && calm; ++k) {
      const auto p99 = second_percentile(series[k], 99);
      calm = p99 && static_cast<double>(*p99) <= threshold;
    }
    if (calm) {
      r.recovery_s = static_cast<double>(s) - r.end_s;
      if (r.recovery_s < 0) r.recovery_s = 0;
      break;
    }
  }
  return r;
}

void print_table(std::ostream& out, const run_report& report) {
  const auto& t = report.total;
  out << "wallet-loadgen: " << report.description << "\n\n";
  out << std::left << std::setw(30) << "status" << std::right << std::setw(10) << "count" << std::setw(10) << "p50 ms"
      << std::setw(10) << "p90 ms" << std::setw(10) << "p99 ms" << std::setw(10) << "p99.9 ms" << std::setw(10)
      << "max ms"
      << "\n";
  auto row = [&](const std::string& name, std::int64_t count, const histogram& h) {
    out << std::left << std::setw(30) << name << std::right << std::setw(10) << count << std::fixed
        << std::setprecision(2) << std::setw(10) << ms(h.value_at_percentile(50)) << std::setw(10)
        << ms(h.value_at_percentile(90)) << std::setw(10) << ms(h.value_at_percentile(99)) << std::setw(10)
        << ms(h.value_at_percentile(99.9)) << std::setw(10) << ms(h.max()) << "\n";
  };
  for (const auto& [name, c] : t.classes) row(name, c.count, c.latency_us);
  row("accepted (200/201)", t.accepted_us.count(), t.accepted_us);
  out << "\n"
      << std::fixed << std::setprecision(1) << "requests: " << t.scheduled << " scheduled, " << t.finished
      << " answered; intended rate " << t.intended_rate() << "/s, achieved " << t.achieved_rate() << "/s\n";
  out << "latency is counted from each request's scheduled send time; sent late by p99 "
      << ms(t.send_lag_us.value_at_percentile(99)) << " ms, max " << ms(t.send_lag_us.max()) << " ms\n";
  if (t.send_lag_us.value_at_percentile(99) > k_send_lag_warning_us) {
    out << "WARNING: the load generator fell behind its own schedule (p99 send lag above " << ms(k_send_lag_warning_us)
        << " ms; starved of CPU or overloaded): the server saw less load than intended\n";
  }
  if (t.retries > 0) {
    out << "retries: " << t.retries << " extra attempts for " << t.retried_requests << " requests; they ended as";
    for (const auto& [name, n] : t.retried_outcome) out << " " << name << ": " << n;
    out << "; " << report.retries_found_committed << " answered from the stored result of an earlier attempt\n";
  } else if (report.opts->retries) {
    out << "retries: none were needed\n";
  }
  if (!t.first_attempt.empty()) {
    out << "first answers:";
    for (const auto& [name, n] : t.first_attempt) out << " " << name << ": " << n;
    out << "\n";
  }
  const double cpu = report.cpu.user_s + report.cpu.system_s;
  const double wall = report.cpu.wall_s > 0 ? report.cpu.wall_s : 1;
  out << std::setprecision(2) << "client CPU: " << cpu << " s (user " << report.cpu.user_s << ", system "
      << report.cpu.system_s << ") over " << report.cpu.wall_s << " s, " << 100 * cpu / wall
      << "% of one core; I/O threads " << report.cpu.io_threads_s << " s (" << 100 * report.cpu.io_threads_s / wall
      << "%); reconnects " << report.reconnects << "\n";
  if (report.search) {
    out << "\nsearch steps (p99 target " << report.opts->p99_target_ms << " ms):\n";
    for (const auto& s : report.search->steps) {
      out << std::setprecision(1) << "  " << std::setw(10) << s.rate << "/s -> " << std::setw(10) << s.achieved
          << "/s accepted, p50 " << ms(s.p50_us) << " ms, p99 " << ms(s.p99_us) << " ms, " << s.not_accepted
          << " not accepted" << (s.ok ? "" : "  (missed)") << "\n";
    }
    if (report.search->best) {
      out << "highest throughput within target: " << report.search->best->achieved << "/s (p50 "
          << ms(report.search->best->p50_us) << " ms, p99 " << ms(report.search->best->p99_us) << " ms)\n";
    } else {
      out << "no step met the target\n";
    }
  }
  if (report.spike) {
    const auto& s = *report.spike;
    out << std::setprecision(1) << "\nspike: " << s.start_s << " s to " << s.end_s
        << " s; first answers 429: " << 100 * s.share_429 << "%, 503: " << 100 * s.share_503
        << "%; p99 of accepted during the spike " << ms(s.p99_accepted_us) << " ms with retries' waits, "
        << ms(s.p99_accepted_answer_us) << " ms of the accepted answers alone (before: " << ms(s.baseline_p99_us)
        << " ms); no answer: " << 100 * s.share_errors << "%; ";
    if (s.recovery_s >= 0) {
      out << "back at baseline " << s.recovery_s << " s after the spike\n";
    } else {
      out << "not back at baseline by the end of the run\n";
    }
  }
  if (report.unknown) {
    const auto& u = *report.unknown;
    out << "\ntransfers acknowledged (201): " << report.acknowledged << "\n";
    out << "unknown outcomes replayed with their Idempotency-Key: " << u.replayed << "; " << u.found_committed
        << " had committed, " << u.applied_on_replay << " applied on replay, " << u.refused << " refused, "
        << u.unresolved << " unresolved\n";
  }
  if (report.verdict) {
    const auto& v = *report.verdict;
    out << "\nverification: " << (v.pass ? "PASS" : "FAIL") << " in " << std::setprecision(2)
        << v.reconcile_s + v.transactions_s + v.balances_s << " s (reconciliation " << v.reconcile_s
        << " s, transactions " << v.transactions_s << " s in " << v.lookup_requests << " lookups, balances "
        << v.balances_s << " s)\n";
    for (const auto& n : report.verdict->notes) out << "  ok: " << n << "\n";
    for (const auto& f : report.verdict->failures) out << "  FAILED: " << f << "\n";
  } else {
    out << "\nverification: skipped\n";
  }
}

std::string summary_json(const run_report& report) {
  const auto& t = report.total;
  const auto& o = *report.opts;
  boost::json::object statuses;
  for (const auto& [name, c] : t.classes) statuses[name] = latency_json(c.latency_us);
  boost::json::object retries{{"enabled", o.retries},
                              {"retries", t.retries},
                              {"retried_requests", t.retried_requests},
                              {"found_committed", report.retries_found_committed},
                              {"outcomes", counts_json(t.retried_outcome)}};
  boost::json::object summary{
      {"description", report.description},
      {"workload", to_string(o.workload)},
      {"mode", to_string(o.mode)},
      {"profile", to_string(o.profile)},
      {"baseline_rate", o.rate},
      {"scheduled", t.scheduled},
      {"answered", t.finished},
      {"intended_rate", t.intended_rate()},
      {"achieved_rate", t.achieved_rate()},
      {"statuses", std::move(statuses)},
      {"accepted", latency_json(t.accepted_us)},
      {"first_attempt", counts_json(t.first_attempt)},
      {"every_attempt", counts_json(t.every_attempt)},
      {"send_lag", latency_json(t.send_lag_us)},
      {"retries", std::move(retries)},
      {"cpu",
       {{"user_s", report.cpu.user_s},
        {"system_s", report.cpu.system_s},
        {"io_threads_s", report.cpu.io_threads_s},
        {"wall_s", report.cpu.wall_s}}},
      {"reconnects", report.reconnects},
  };
  if (report.unknown) {
    const auto& u = *report.unknown;
    summary["acknowledged"] = report.acknowledged;
    summary["unknown_outcomes"] = {{"replayed", u.replayed},
                                   {"found_committed", u.found_committed},
                                   {"applied_on_replay", u.applied_on_replay},
                                   {"refused", u.refused},
                                   {"unresolved", u.unresolved}};
  }
  if (report.verdict) {
    boost::json::array failures, notes;
    for (const auto& f : report.verdict->failures) failures.push_back(boost::json::string(f));
    for (const auto& n : report.verdict->notes) notes.push_back(boost::json::string(n));
    const auto& v = *report.verdict;
    summary["verify"] = {{"pass", v.pass},
                         {"failures", failures},
                         {"notes", notes},
                         {"reconcileSeconds", v.reconcile_s},
                         {"transactionsSeconds", v.transactions_s},
                         {"balancesSeconds", v.balances_s},
                         {"lookupRequests", v.lookup_requests}};
  }
  if (report.search) {
    boost::json::array steps;
    for (const auto& s : report.search->steps) steps.push_back(step_json(s));
    boost::json::object search{{"steps", steps}, {"p99_target_ms", o.p99_target_ms}};
    if (report.search->best) {
      search["best_rate"] = report.search->best->rate;
      search["best_achieved"] = report.search->best->achieved;
      search["best_p50_ms"] = json_ms(report.search->best->p50_us);
      search["best_p99_ms"] = json_ms(report.search->best->p99_us);
    }
    summary["search"] = search;
  }
  if (report.spike) {
    const auto& s = *report.spike;
    boost::json::object spike{{"start_s", s.start_s},
                              {"end_s", s.end_s},
                              {"duration_s", s.duration_s},
                              {"multiplier", o.spike_multiplier},
                              {"share_429", s.share_429},
                              {"share_503", s.share_503},
                              {"share_errors", s.share_errors},
                              {"p99_accepted_ms", json_ms(s.p99_accepted_us)},
                              {"p99_accepted_answer_ms", json_ms(s.p99_accepted_answer_us)},
                              {"baseline_p99_ms", json_ms(s.baseline_p99_us)}};
    spike["recovery_s"] = s.recovery_s >= 0 ? boost::json::value(s.recovery_s) : boost::json::value(nullptr);
    summary["spike"] = spike;
  }
  return boost::json::serialize(summary);
}

std::string timeseries_json(const run_stats& stats) {
  boost::json::array seconds;
  const auto& series = stats.series();
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    boost::json::object o{{"t", i},
                          {"intended", s.intended},
                          {"achieved", s.completed},
                          {"accepted_achieved", s.accepted_completed},
                          {"send_lag_max_ms", json_ms(s.send_lag_max_us)},
                          {"counts", counts_json(s.counts)}};
    for (const auto& [key, p] : {std::pair{"p50_ms", 50.0}, {"p90_ms", 90.0}, {"p99_ms", 99.0}, {"max_ms", 100.0}}) {
      const auto v = second_percentile(s, p);
      o[key] = v ? boost::json::value(json_ms(*v)) : boost::json::value(nullptr);
    }
    seconds.push_back(std::move(o));
  }
  return boost::json::serialize(boost::json::object{{"seconds", seconds}});
}

std::string html_report(const run_report& report, const run_stats& stats) {
  const auto& series = stats.series();
  std::vector<series_line> latency;
  std::size_t color = 0;
  for (const auto& [name, p] : {std::pair{"p50", 50.0}, {"p90", 90.0}, {"p99", 99.0}, {"max", 100.0}}) {
    series_line l{name, k_palette[color++ % 10], {}};
    for (const auto& s : series) {
      const auto v = second_percentile(s, p);
      l.values.push_back(v ? std::optional<double>(ms(*v)) : std::nullopt);
    }
    latency.push_back(std::move(l));
  }
  std::vector<series_line> rates;
  series_line intended{"intended", "#000000", {}}, achieved{"answered", "#999999", {}};
  std::map<std::string, series_line> by_class;
  for (const auto& s : series) {
    for (const auto& [name, n] : s.counts) by_class.emplace(name, series_line{name, "", {}});
  }
  color = 0;
  for (auto& [name, l] : by_class) l.color = k_palette[color++ % 10];
  for (const auto& s : series) {
    intended.values.push_back(static_cast<double>(s.intended));
    achieved.values.push_back(static_cast<double>(s.completed));
    for (auto& [name, l] : by_class) {
      const auto it = s.counts.find(name);
      l.values.push_back(static_cast<double>(it == s.counts.end() ? 0 : it->second));
    }
  }
  rates.push_back(std::move(intended));
  rates.push_back(std::move(achieved));
  for (auto& [name, l] : by_class) rates.push_back(std::move(l));

  std::ostringstream table;
  print_table(table, report);
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>wallet-loadgen report</title>\n"
       << "<style>body{font-family:sans-serif;margin:2em;max-width:1000px}pre{background:#f6f6f6;padding:1em;"
       << "overflow-x:auto}</style></head><body>\n<h1>wallet-loadgen</h1>\n<p>" << escape_html(report.description)
       << "</p>\n"
       << svg_chart("Latency of accepted requests by scheduled second (from scheduled send time)", "ms", latency, true)
       << svg_chart("Requests per second: intended, answered, and final status by scheduled second", "/s", rates, false)
       << "<h2>Summary</h2>\n<pre>" << escape_html(table.str()) << "</pre>\n</body></html>\n";
  return html.str();
}

void write_outputs(const std::string& dir, const run_report& report, const run_stats& stats) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create " + dir + ": " + ec.message());
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream out(dir + "/" + name, std::ios::trunc);
    out << text << "\n";
    if (!out) throw std::runtime_error("cannot write " + dir + "/" + name);
  };
  write("summary.json", summary_json(report));
  write("timeseries.json", timeseries_json(stats));
  write("report.html", html_report(report, stats));
}

}  // namespace loadgen
