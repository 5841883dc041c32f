// gangkeeper sim: the self-contained HTML report (see report.h): inline CSS,
// inline SVG line charts, tables; no scripts and nothing fetched.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gangkeeper/sim/report.h"

namespace gangkeeper::sim {
namespace {

// Above this many ClusterQueues the utilization charts are per cohort.
constexpr size_t kMaxQueueCharts = 64;
constexpr size_t kMaxCdfPoints = 300;
const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Num(double v, int decimals = 3) { return absl::StrFormat("%.*f", decimals, v); }
std::string Sec(int64_t ms) { return Num(static_cast<double>(ms) / 1000.0); }
std::string Percent(double v) { return absl::StrFormat("%.1f%%", v * 100.0); }
const char* Color(size_t i) { return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))]; }

// A "nice" upper end for an axis: 1, 2 or 5 times a power of ten >= v.
double NiceMax(double v) {
  if (!(v > 0)) return 1.0;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= v * (1 - 1e-12)) return m * p;
  }
  return 10.0 * p;
}

struct Series {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y)
  bool step = false;                              // draw as steps (a CDF)
};

// One line chart as an <svg> element. `reference_y` draws a dashed line
// (e.g. 100% of nominal) when >= 0.
std::string LineChart(const std::string& title, const std::vector<Series>& series, double x_max, double y_max,
                      const std::string& x_label, const std::string& y_label, bool y_percent, int width, int height,
                      double reference_y = -1, bool legend = true) {
  const int left = 48, right = 12, top = 22, bottom = 34;
  const double pw = width - left - right, ph = height - top - bottom;
  x_max = NiceMax(x_max);
  y_max = NiceMax(y_max);
  auto X = [&](double x) { return left + (x_max > 0 ? x / x_max : 0) * pw; };
  auto Y = [&](double y) { return top + ph - (y_max > 0 ? std::min(y, y_max) / y_max : 0) * ph; };
  std::string svg = absl::StrFormat(
      "<svg width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">"
      "<title>%s</title><rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>",
      width, height, width, height, Escape(title), width, height);
  absl::StrAppendFormat(&svg, "<text x=\"%d\" y=\"14\" class=\"t\">%s</text>", left, Escape(title));
  // Grid and ticks: five divisions on each axis.
  for (int i = 0; i <= 4; ++i) {
    const double yv = y_max * i / 4, xv = x_max * i / 4;
    absl::StrAppendFormat(&svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"g\"/>", X(0), Y(yv),
                          X(x_max), Y(yv));
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" class=\"ya\">%s</text>", X(0) - 4, Y(yv) + 3,
                          y_percent ? absl::StrFormat("%.0f%%", yv * 100) : absl::StrFormat("%.3g", yv));
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" class=\"xa\">%s</text>", X(xv), Y(0) + 13,
                          absl::StrFormat("%.3g", xv));
  }
  absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%d\" class=\"xa\">%s</text>", X(x_max / 2), height - 4,
                        Escape(x_label));
  absl::StrAppendFormat(&svg, "<text x=\"10\" y=\"%.1f\" class=\"yl\" transform=\"rotate(-90 10 %.1f)\">%s</text>",
                        Y(y_max / 2), Y(y_max / 2), Escape(y_label));
  if (reference_y >= 0 && reference_y <= y_max) {
    absl::StrAppendFormat(&svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"ref\"/>", X(0),
                          Y(reference_y), X(x_max), Y(reference_y));
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    if (s.points.empty()) continue;
    std::string pts;
    double prev_y = 0;
    for (size_t k = 0; k < s.points.size(); ++k) {
      const auto& [x, y] = s.points[k];
      if (s.step && k > 0) absl::StrAppendFormat(&pts, "%.1f,%.1f ", X(x), Y(prev_y));
      absl::StrAppendFormat(&pts, "%.1f,%.1f ", X(x), Y(y));
      prev_y = y;
    }
    absl::StrAppendFormat(&svg, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"%s\"/>",
                          Color(i), pts);
  }
  if (legend && series.size() > 1) {
    for (size_t i = 0; i < series.size() && i < 12; ++i) {
      const double ly = top + 4 + 12.0 * static_cast<double>(i);
      absl::StrAppendFormat(&svg,
                            "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"3\" fill=\"%s\"/>"
                            "<text x=\"%.1f\" y=\"%.1f\" class=\"lg\">%s</text>",
                            X(x_max) - 150, ly, Color(i), X(x_max) - 136, ly + 4, Escape(series[i].label));
    }
  }
  svg += "</svg>";
  return svg;
}

// A utilization series as points at bucket midpoints (seconds, fraction).
std::vector<std::pair<double, double>> BucketPoints(const std::vector<double>& values, int64_t interval_ms,
                                                    int64_t end_ms) {
  std::vector<std::pair<double, double>> pts;
  for (size_t b = 0; b < values.size(); ++b) {
    const double lo = static_cast<double>(b) * static_cast<double>(interval_ms);
    const double hi = std::min(static_cast<double>(end_ms), lo + static_cast<double>(interval_ms));
    pts.emplace_back((lo + hi) / 2000.0, values[b]);
  }
  return pts;
}

constexpr char kHead[] =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    "<title>gangkeeper simulate report</title><style>"
    "body{font-family:sans-serif;margin:1.5em;color:#222}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}"
    "table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
    "th{background:#f3f3f3}td.l,th.l{text-align:left}.grid{display:flex;flex-wrap:wrap;gap:6px}"
    "svg{border:1px solid #ddd}svg .t{font-size:11px;font-weight:bold}svg .g{stroke:#eee}"
    "svg .ref{stroke:#999;stroke-dasharray:4 3}svg .xa{font-size:9px;text-anchor:middle}"
    "svg .ya{font-size:9px;text-anchor:end}svg .yl{font-size:9px;text-anchor:middle}svg .lg{font-size:9px}"
    ".note{color:#555;font-size:.85em}"
    "</style></head><body>\n";

// The summary table: makespan, its bound, utilization and counts.
void AppendSummary(const Report& r, std::string* out) {
  std::string& h = *out;
  h += "<h2>Summary</h2>\n<table>\n";
  auto row = [&](const std::string& k, const std::string& v) {
    absl::StrAppend(&h, "<tr><th class=\"l\">", Escape(k), "</th><td class=\"l\">", Escape(v), "</td></tr>\n");
  };
  row("makespan", r.makespan_ms.has_value() ? Sec(*r.makespan_ms) + " s"
                                            : absl::StrCat("none: ", r.finished, " of ", r.workloads,
                                                           " finished by ", Sec(r.end_ms), " s"));
  row("lower bound", absl::StrCat(Sec(r.bounds.max_ms()), " s (work ", Sec(r.bounds.work_ms), " s: ",
                                  r.bounds.work_bound_by, "; arrivals ", Sec(r.bounds.arrival_ms), " s: ",
                                  r.bounds.arrival_bound_by, ")"));
  if (r.makespan_ms.has_value() && r.bounds.max_ms() > 0) {
    row("makespan / bound",
        Num(static_cast<double>(*r.makespan_ms) / static_cast<double>(r.bounds.max_ms()), 3));
  }
  for (const auto& [res, v] : r.utilization) row("utilization of nominal, " + res, Percent(v));
  for (const auto& [cls, per] : r.utilization_by_queue_class) {
    for (const auto& [res, v] : per) row(absl::StrCat("utilization, ClusterQueue class ", cls, ", ", res), Percent(v));
  }
  row("admissions", absl::StrCat(r.admissions));
  row("preemptions", absl::StrCat(r.preemptions, " (work lost ", Sec(r.lost_work_ms), " s)"));
  row("never admitted", absl::StrCat(r.unadmitted_count));
  row("scheduling passes / cycles", absl::StrCat(r.scheduling_passes, " / ", r.scheduling_cycles));
  row("stop delay", Sec(r.stop_delay_ms) + " s");
  h += "</table>\n";
}

using Charts = std::map<std::string, std::vector<std::pair<std::string, std::vector<double>>>>;

// One chart per cohort tree, one line per FlavorResource:
// sum(series * nominal) / sum(nominal) over its ClusterQueues.
Charts CohortCharts(const Report& r) {
  Charts charts;
  std::map<std::string, std::map<std::string, std::pair<std::vector<double>, double>>> agg;
  for (const auto& [name, f] : r.cluster_queues) {
    const std::string cohort = f.cohort.empty() ? name : f.cohort;
    for (const auto& [fr, rf] : f.resources) {
      if (rf.series.empty()) continue;
      const double nominal = static_cast<double>(rf.nominal.milli());
      auto& [sum, nominals] = agg[cohort][fr.ToString()];
      sum.resize(rf.series.size(), 0.0);
      for (size_t b = 0; b < rf.series.size(); ++b) sum[b] += rf.series[b] * nominal;
      nominals += nominal;
    }
  }
  for (auto& [cohort, per] : agg) {
    for (auto& [fr, sn] : per) {
      for (double& v : sn.first) v /= sn.second;
      charts[cohort].emplace_back(fr, sn.first);
    }
  }
  return charts;
}

// Utilization of nominal quota over time: a chart per ClusterQueue, or per
// cohort when there are many.
void AppendUtilization(const Report& r, std::string* out) {
  std::string& h = *out;
  h += "<h2>Utilization of nominal quota over time</h2>\n";
  absl::StrAppend(&h, "<p class=\"note\">Average over buckets of ", Sec(r.interval_ms),
                  " s; the dashed line is 100% of nominal (above it, the queue borrows).</p>\n");
  Charts charts;
  if (r.cluster_queues.size() <= kMaxQueueCharts) {
    for (const auto& [name, f] : r.cluster_queues) {
      for (const auto& [fr, rf] : f.resources) {
        if (!rf.series.empty()) charts[name].emplace_back(fr.ToString(), rf.series);
      }
    }
  } else {
    absl::StrAppend(&h, "<p class=\"note\">", r.cluster_queues.size(),
                    " ClusterQueues: one chart per cohort (quota-weighted); the JSON report has every "
                    "ClusterQueue's series.</p>\n");
    charts = CohortCharts(r);
  }
  h += "<div class=\"grid\">\n";
  const double x_max = static_cast<double>(std::max<int64_t>(r.end_ms, 1)) / 1000.0;
  for (const auto& [name, list] : charts) {
    std::vector<Series> series;
    double y_max = 1.0;
    for (const auto& [label, values] : list) {
      Series s;
      s.label = label;
      s.points = BucketPoints(values, r.interval_ms, r.end_ms);
      for (double v : values) y_max = std::max(y_max, v);
      series.push_back(std::move(s));
    }
    h += LineChart(name, series, x_max, y_max, "time (s)", "of nominal", true, 300, 170, 1.0);
    h += "\n";
  }
  h += "</div>\n";
}

// Time to admission per class: the table.
void AppendWaitTable(const Report& r, std::string* out) {
  std::string& h = *out;
  h += "<h2>Time to admission per class</h2>\n<table>\n<tr><th class=\"l\">class</th><th>workloads</th>"
       "<th>admitted</th><th>preemptions</th><th>mean (s)</th><th>p50</th><th>p90</th><th>p99</th><th>max</th>"
       "<th>first admission: mean (s)</th></tr>\n";
  for (const auto& [name, c] : r.classes) {
    const WaitStats& s = c.time_to_admission;
    absl::StrAppend(&h, "<tr><td class=\"l\">", Escape(name), "</td><td>", c.workloads, "</td><td>", c.admitted,
                    "</td><td>", c.preemptions, "</td>");
    if (s.count == 0) {
      h += "<td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td></tr>\n";
      continue;
    }
    absl::StrAppend(&h, "<td>", Num(std::round(s.mean_ms) / 1000.0), "</td><td>", Sec(s.p50_ms), "</td><td>",
                    Sec(s.p90_ms), "</td><td>", Sec(s.p99_ms), "</td><td>", Sec(s.max_ms), "</td><td>",
                    Num(std::round(c.time_to_first_admission.mean_ms) / 1000.0), "</td></tr>\n");
  }
  h += "</table>\n";
}

// Time to admission per class: the cumulative distribution chart.
void AppendWaitCdf(const Report& r, std::string* out) {
  std::string& h = *out;
  std::vector<Series> cdf;
  double wait_max = 0;
  for (const auto& [name, c] : r.classes) {
    if (c.waits_ms.empty()) continue;
    Series s;
    s.label = name;
    s.step = true;
    const size_t n = c.waits_ms.size();
    const size_t points = std::min(n, kMaxCdfPoints);
    for (size_t k = 0; k < points; ++k) {
      // Evenly spaced ranks, always including the largest.
      const size_t idx = points == 1 ? n - 1 : k * (n - 1) / (points - 1);
      s.points.emplace_back(static_cast<double>(c.waits_ms[idx]) / 1000.0,
                            static_cast<double>(idx + 1) / static_cast<double>(n));
    }
    wait_max = std::max(wait_max, static_cast<double>(c.waits_ms.back()) / 1000.0);
    cdf.push_back(std::move(s));
  }
  if (!cdf.empty()) {
    h += "<p class=\"note\">Cumulative distribution: the fraction of each class admitted within x seconds of "
         "arriving.</p>\n";
    h += LineChart("time to admission, cumulative", cdf, std::max(wait_max, 0.001), 1.0, "seconds after arrival",
                   "fraction admitted", true, 640, 320);
    h += "\n";
  }
}

// The ClusterQueues' quota use.
void AppendClusterQueues(const Report& r, std::string* out) {
  std::string& h = *out;
  h += "<h2>ClusterQueues</h2>\n<table>\n<tr><th class=\"l\">ClusterQueue</th><th class=\"l\">cohort</th>"
       "<th class=\"l\">flavor/resource</th><th>nominal</th><th>peak</th><th>utilization</th><th>admissions</th>"
       "<th>preemptions</th></tr>\n";
  for (const auto& [name, f] : r.cluster_queues) {
    for (const auto& [fr, rf] : f.resources) {
      absl::StrAppend(&h, "<tr><td class=\"l\">", Escape(name), "</td><td class=\"l\">", Escape(f.cohort),
                      "</td><td class=\"l\">", Escape(fr.ToString()), "</td><td>", rf.nominal.Format(), "</td><td>",
                      rf.peak.Format(), "</td><td>", rf.utilization.has_value() ? Percent(*rf.utilization) : "-",
                      "</td><td>", f.admissions, "</td><td>", f.preemptions, "</td></tr>\n");
    }
  }
  h += "</table>\n";
}

// The workloads never admitted, if any.
void AppendUnadmitted(const Report& r, std::string* out) {
  if (r.unadmitted_count == 0) return;
  std::string& h = *out;
  absl::StrAppend(&h, "<h2>Never admitted (", r.unadmitted_count, ")</h2>\n<table>\n"
                  "<tr><th class=\"l\">workload</th><th class=\"l\">class</th><th class=\"l\">why</th></tr>\n");
  for (const Unadmitted& u : r.unadmitted) {
    absl::StrAppend(&h, "<tr><td class=\"l\">", Escape(u.workload), "</td><td class=\"l\">", Escape(u.class_name),
                    "</td><td class=\"l\">", Escape(u.reason), "</td></tr>\n");
  }
  h += "</table>\n";
}

}  // namespace

std::string ReportHtml(const Report& r) {
  std::string h = kHead;
  absl::StrAppend(&h, "<h1>gangkeeper simulate</h1>\n<p>", r.workloads, " workloads from <code>",
                  Escape(r.workload_file), "</code> (", Escape(r.trace_format), "), policies: ", Escape(r.policies),
                  ", ", r.cluster_queues.size(), " ClusterQueues.</p>\n");
  AppendSummary(r, &h);
  AppendUtilization(r, &h);
  AppendWaitTable(r, &h);
  AppendWaitCdf(r, &h);
  AppendClusterQueues(r, &h);
  AppendUnadmitted(r, &h);
  h += "</body></html>\n";
  return h;
}

}  // namespace gangkeeper::sim
