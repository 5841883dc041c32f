// gangkeeper sim: the self-contained HTML report (see report.h): inline CSS,
// inline SVG charts, tables; no scripts and nothing fetched. One page lays
// out one run, or two (before | after) side by side: the page is about
// 1,400 px wide, a chart 660 px, two to a row.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gangkeeper/sim/report.h"
#include "src/sim/report_format.h"

namespace gangkeeper::sim {
namespace {

// Above this many ClusterQueues (in a run) the utilization charts are per cohort.
constexpr size_t kMaxQueueCharts = 64;
constexpr size_t kMaxCdfPoints = 300;
constexpr int kChartWidth = 660;
constexpr int kChartHeight = 230;
constexpr int kGap = 12;
constexpr int kWideWidth = 2 * kChartWidth + kGap;
const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

// One run on the page: "before"/"after", or "" for a single report.
struct Run {
  std::string label;
  const Report* report;
};

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

std::string Dur(int64_t ms) { return HumanDuration(static_cast<double>(ms)); }
const char* Color(size_t i) { return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))]; }

struct Series {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x in ms, y in axis units)
  bool step = false;                              // draw as steps between points
  std::string color;
};

struct ChartSpec {
  std::string title;
  std::string y_label;
  int width = kChartWidth;
  int height = kChartHeight;
  double reference_y = -1;  // a dashed line (e.g. the nominal quota) when >= 0
  bool legend = false;
};

// One line chart as an <svg> element, x from 0 to the time axis's end.
std::string LineChart(const ChartSpec& spec, const std::vector<Series>& series, const TimeAxis& x_axis,
                      const ValueAxis& y_axis) {
  const int left = 58, right = 30, top = 26, bottom = 36;
  const double pw = spec.width - left - right, ph = spec.height - top - bottom;
  auto X = [&](double x) { return left + std::clamp(x / x_axis.end_ms, 0.0, 1.0) * pw; };
  auto Y = [&](double y) { return top + ph - std::clamp(y / y_axis.max, 0.0, 1.0) * ph; };
  std::string svg = absl::StrFormat(
      "<svg class=\"chart\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">"
      "<title>%s</title><rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>",
      spec.width, spec.height, spec.width, spec.height, Escape(spec.title), spec.width, spec.height);
  absl::StrAppendFormat(&svg, "<text x=\"%d\" y=\"17\" class=\"t\">%s</text>", left, Escape(spec.title));
  for (const Tick& t : y_axis.ticks) {
    absl::StrAppendFormat(&svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"g\"/>", X(0),
                          Y(t.value), X(x_axis.end_ms), Y(t.value));
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" class=\"ya\">%s</text>", X(0) - 5, Y(t.value) + 4,
                          Escape(t.label));
  }
  for (const Tick& t : x_axis.ticks) {
    absl::StrAppendFormat(&svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"g\"/>", X(t.value),
                          Y(0), X(t.value), Y(y_axis.max));
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" class=\"xa\">%s</text>", X(t.value), Y(0) + 15,
                          Escape(t.label));
  }
  absl::StrAppendFormat(&svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"ax\"/>", X(0), Y(0),
                        X(x_axis.end_ms), Y(0));
  absl::StrAppendFormat(&svg, "<text x=\"14\" y=\"%.1f\" class=\"yl\" transform=\"rotate(-90 14 %.1f)\">%s</text>",
                        Y(y_axis.max / 2), Y(y_axis.max / 2), Escape(spec.y_label));
  if (spec.reference_y >= 0 && spec.reference_y <= y_axis.max) {
    absl::StrAppendFormat(&svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"ref\"/>", X(0),
                          Y(spec.reference_y), X(x_axis.end_ms), Y(spec.reference_y));
  }
  for (const Series& s : series) {
    if (s.points.empty()) continue;
    std::string pts;
    double prev_y = 0;
    for (size_t k = 0; k < s.points.size(); ++k) {
      const auto& [x, y] = s.points[k];
      if (s.step && k > 0) absl::StrAppendFormat(&pts, "%.1f,%.1f ", X(x), Y(prev_y));
      absl::StrAppendFormat(&pts, "%.1f,%.1f ", X(x), Y(y));
      prev_y = y;
    }
    if (!pts.empty()) pts.pop_back();
    absl::StrAppendFormat(&svg,
                          "<polyline class=\"series\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
                          "points=\"%s\"/>",
                          s.color, pts);
  }
  if (spec.legend && series.size() > 1) {
    for (size_t i = 0; i < series.size() && i < 12; ++i) {
      // Bottom right, where a cumulative distribution has no lines.
      const double ly = Y(0) - 10 - 14.0 * static_cast<double>(std::min<size_t>(series.size(), 12) - 1 - i);
      const double lx = X(x_axis.end_ms) - 190;
      absl::StrAppendFormat(&svg,
                            "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"4\" fill=\"%s\"/>"
                            "<text x=\"%.1f\" y=\"%.1f\" class=\"lg\">%s</text>",
                            lx, ly - 4, series[i].color, lx + 16, ly, Escape(series[i].label));
    }
  }
  svg += "</svg>";
  return svg;
}

// Bucket values as steps over [0, end]: each bucket's value from its start to its end.
std::vector<std::pair<double, double>> BucketSteps(const std::vector<double>& values, double scale,
                                                   int64_t interval_ms, int64_t end_ms) {
  std::vector<std::pair<double, double>> pts;
  for (size_t b = 0; b < values.size(); ++b) {
    const double lo = static_cast<double>(b) * static_cast<double>(interval_ms);
    const double hi = std::min(static_cast<double>(end_ms), lo + static_cast<double>(interval_ms));
    pts.emplace_back(lo, values[b] * scale);
    pts.emplace_back(hi, values[b] * scale);
  }
  return pts;
}

constexpr char kHead[] =
    "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    "<title>gangkeeper simulate report</title><style>"
    "body{font-family:sans-serif;margin:1.5em;color:#222;max-width:1340px}h1{font-size:1.4em}"
    "h2{font-size:1.15em;margin-top:1.6em}h3{font-size:1em;margin:1.2em 0 .4em}"
    "table{border-collapse:collapse;font-size:.85em}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
    "th{background:#f3f3f3}td.l,th.l{text-align:left}table.sum td{white-space:nowrap}"
    ".grid{display:flex;flex-wrap:wrap;gap:12px}.pair{display:flex;gap:12px;margin-bottom:12px}"
    ".verdict{background:#f4f7fb;border-left:4px solid #1f77b4;padding:.4em 1em;font-size:1.05em}"
    ".verdict li{margin:.3em 0}"
    "svg{border:1px solid #ddd}svg .t{font-size:13px;font-weight:bold}svg .g{stroke:#eee}svg .ax{stroke:#999}"
    "svg .ref{stroke:#555;stroke-dasharray:5 4}svg .xa{font-size:11px;text-anchor:middle}"
    "svg .ya{font-size:11px;text-anchor:end}svg .yl{font-size:11px;text-anchor:middle}svg .lg{font-size:11px}"
    ".note{color:#555;font-size:.85em}"
    "</style></head><body>\n";

// The longest of the runs (the time axis of every chart on the page).
int64_t PageEnd(const std::vector<Run>& runs) {
  int64_t end = 1;
  for (const Run& r : runs) end = std::max(end, r.report->end_ms);
  return end;
}

// "42" -> "42", a quantity of a resource in the scale's unit.
std::string Amount(double base_units, const AmountScale& scale) {
  return RoundedNumber(base_units / scale.divisor) + (scale.suffix.empty() ? "" : " " + scale.suffix);
}

void SummaryRow(std::string* h, const std::string& k, const std::vector<std::string>& values,
                const std::string& change = "") {
  absl::StrAppend(h, "<tr><th class=\"l\">", Escape(k), "</th>");
  for (const std::string& v : values) absl::StrAppend(h, "<td>", Escape(v), "</td>");
  if (values.size() > 1) absl::StrAppend(h, "<td>", Escape(change), "</td>");
  *h += "</tr>\n";
}

// A signed change of a duration: "-35 min", "+20 s", "0".
std::string DurChange(double before_ms, double after_ms) {
  const std::string d = HumanDuration(std::abs(after_ms - before_ms));
  if (d == "0") return "0";
  return (after_ms < before_ms ? "-" : "+") + d;
}

// The change of a share, in percentage points of the rounded shares: "+5.1 pts".
std::string PointsChange(double before, double after) {
  const double d = std::round(after * 1000) / 10 - std::round(before * 1000) / 10;
  if (std::abs(d) < 0.05) return "0";
  return absl::StrFormat("%s%.1f pts", d > 0 ? "+" : "-", std::abs(d));
}

// The summary table: makespan, its bound, utilization and counts.
void AppendSummary(const std::vector<Run>& runs, std::string* out) {
  std::string& h = *out;
  h += "<h2>Summary</h2>\n<table class=\"sum\">\n";
  if (runs.size() > 1) {
    h += "<tr><th></th>";
    for (const Run& run : runs) absl::StrAppend(&h, "<th>", Escape(run.label), "</th>");
    h += "<th>change</th></tr>\n";
  }
  auto each = [&](auto f) {
    std::vector<std::string> v;
    for (const Run& run : runs) v.push_back(f(*run.report));
    return v;
  };
  const Report& first = *runs.front().report;
  const Report& last = *runs.back().report;
  SummaryRow(&h, "makespan", each([](const Report& r) {
               return r.makespan_ms.has_value()
                          ? Dur(*r.makespan_ms)
                          : absl::StrCat("none: ", r.finished, " of ", r.workloads, " finished by ", Dur(r.end_ms));
             }),
             first.makespan_ms.has_value() && last.makespan_ms.has_value()
                 ? DurChange(static_cast<double>(*first.makespan_ms), static_cast<double>(*last.makespan_ms))
                 : "");
  const bool detail = runs.size() == 1;  // which cohort and workload bound it: in one column only
  SummaryRow(&h, "lower bound", each([&](const Report& r) {
               return detail ? absl::StrCat(Dur(r.bounds.max_ms()), " (work ", Dur(r.bounds.work_ms), ": ",
                                            r.bounds.work_bound_by, "; arrivals ", Dur(r.bounds.arrival_ms), ": ",
                                            r.bounds.arrival_bound_by, ")")
                             : absl::StrCat(Dur(r.bounds.max_ms()), " (work ", Dur(r.bounds.work_ms), ", arrivals ",
                                            Dur(r.bounds.arrival_ms), ")");
             }));
  SummaryRow(&h, "makespan / lower bound", each([](const Report& r) {
               return r.makespan_ms.has_value() && r.bounds.max_ms() > 0
                          ? absl::StrFormat("%.2f", static_cast<double>(*r.makespan_ms) /
                                                        static_cast<double>(r.bounds.max_ms()))
                          : std::string("-");
             }));
  std::set<std::string> resources;
  for (const Run& run : runs) {
    for (const auto& [res, v] : run.report->utilization) resources.insert(res);
  }
  for (const std::string& res : resources) {
    auto util = [&](const Report& r) {
      auto it = r.utilization.find(res);
      return it == r.utilization.end() ? -1.0 : it->second;
    };
    const double b = util(first), a = util(last);
    SummaryRow(&h, "utilization of nominal quota, " + res,
               each([&](const Report& r) { return util(r) < 0 ? std::string("-") : RoundedPercent(util(r)); }),
               a >= 0 && b >= 0 ? PointsChange(b, a) : "");
  }
  if (runs.size() == 1) {
    for (const auto& [cls, per] : first.utilization_by_queue_class) {
      for (const auto& [res, v] : per) {
        SummaryRow(&h, absl::StrCat("utilization, ClusterQueue class ", cls, ", ", res), {RoundedPercent(v)});
      }
    }
  }
  auto count_change = [](int64_t b, int64_t a) { return a == b ? "0" : absl::StrCat(a > b ? "+" : "", a - b); };
  auto count = [](int64_t n) { return RoundedNumber(static_cast<double>(n)); };
  SummaryRow(&h, "admissions", each([&](const Report& r) { return count(r.admissions); }),
             count_change(first.admissions, last.admissions));
  SummaryRow(&h, "preemptions", each([&](const Report& r) { return count(r.preemptions); }),
             count_change(first.preemptions, last.preemptions));
  SummaryRow(&h, "work lost to preemption", each([](const Report& r) { return Dur(r.lost_work_ms); }),
             DurChange(static_cast<double>(first.lost_work_ms), static_cast<double>(last.lost_work_ms)));
  SummaryRow(&h, "never admitted", each([&](const Report& r) { return count(r.unadmitted_count); }),
             count_change(first.unadmitted_count, last.unadmitted_count));
  SummaryRow(&h, "scheduling passes / cycles",
             each([&](const Report& r) { return count(r.scheduling_passes) + " / " + count(r.scheduling_cycles); }));
  SummaryRow(&h, "stop delay", each([](const Report& r) { return Dur(r.stop_delay_ms); }));
  h += "</table>\n";
}

// One chart's data: a line per series, in base units of the resource (or a
// fraction of nominal for cohort charts), and the nominal quota.
struct ChartData {
  std::vector<double> values;  // per bucket
  double scale = 1;            // values * scale = the plotted amount (before AmountScale)
  double nominal = 0;          // in the same units, or -1 for none
};

// charts[flavor/resource][chart name][run index]
using ChartTable = std::map<broker::FlavorResource, std::map<std::string, std::map<size_t, ChartData>>>;

// One chart per ClusterQueue and flavor/resource: the quota it holds.
ChartTable QueueCharts(const std::vector<Run>& runs) {
  ChartTable t;
  for (size_t i = 0; i < runs.size(); ++i) {
    for (const auto& [name, f] : runs[i].report->cluster_queues) {
      for (const auto& [fr, rf] : f.resources) {
        if (rf.series.empty()) continue;
        const double nominal = static_cast<double>(rf.nominal.milli()) / 1000.0;
        t[fr][name][i] = ChartData{rf.series, nominal, nominal};
      }
    }
  }
  return t;
}

// One chart per cohort tree and flavor/resource: sum(series * nominal) /
// sum(nominal) over its ClusterQueues, a fraction of nominal.
ChartTable CohortCharts(const std::vector<Run>& runs) {
  ChartTable t;
  for (size_t i = 0; i < runs.size(); ++i) {
    std::map<broker::FlavorResource, std::map<std::string, std::pair<std::vector<double>, double>>> agg;
    for (const auto& [name, f] : runs[i].report->cluster_queues) {
      const std::string cohort = f.cohort.empty() ? name : f.cohort;
      for (const auto& [fr, rf] : f.resources) {
        if (rf.series.empty()) continue;
        const double nominal = static_cast<double>(rf.nominal.milli());
        auto& [sum, nominals] = agg[fr][cohort];
        sum.resize(std::max(sum.size(), rf.series.size()), 0.0);
        for (size_t b = 0; b < rf.series.size(); ++b) sum[b] += rf.series[b] * nominal;
        nominals += nominal;
      }
    }
    for (auto& [fr, per] : agg) {
      for (auto& [cohort, sn] : per) {
        for (double& v : sn.first) v /= sn.second;
        t[fr][cohort][i] = ChartData{std::move(sn.first), 1.0, 1.0};
      }
    }
  }
  return t;
}

// Utilization over time: per flavor/resource one y-scale for every chart
// (every ClusterQueue, both runs), one time axis for the page.
void AppendUtilization(const std::vector<Run>& runs, std::string* out) {
  std::string& h = *out;
  bool per_cohort = false;
  size_t queues = 0;
  for (const Run& r : runs) {
    queues = std::max(queues, r.report->cluster_queues.size());
    per_cohort = per_cohort || r.report->cluster_queues.size() > kMaxQueueCharts;
  }
  const ChartTable table = per_cohort ? CohortCharts(runs) : QueueCharts(runs);
  const TimeAxis x_axis = ChooseTimeAxis(static_cast<double>(PageEnd(runs)));
  h += per_cohort ? "<h2>Utilization of nominal quota over time, per cohort</h2>\n"
                  : "<h2>Quota held over time</h2>\n";
  absl::StrAppend(&h, "<p class=\"note\">Averages over ", Dur(runs.front().report->interval_ms),
                  per_cohort ? absl::StrCat("; ", queues, " ClusterQueues, so one chart per cohort (weighted by "
                                            "nominal quota; the JSON report has every ClusterQueue's series). ")
                             : std::string(". "),
                  "The dashed line is the nominal quota: above it, the queue borrows. Every chart of a resource has "
                  "the same scale", runs.size() > 1 ? ", in both runs" : "", ".</p>\n");
  std::vector<std::string> unused;
  std::map<std::string, size_t> colors;  // chart name -> palette index, the same in both runs
  for (const auto& [fr, charts] : table) {
    double max = 0;
    for (const auto& [name, per_run] : charts) {
      for (const auto& [i, d] : per_run) {
        for (double v : d.values) max = std::max(max, v * d.scale);
      }
    }
    if (max <= 0) {
      unused.push_back(fr.ToString());
      continue;
    }
    for (const auto& [name, per_run] : charts) {
      for (const auto& [i, d] : per_run) max = std::max(max, d.nominal);
    }
    const AmountScale scale = per_cohort ? AmountScale{} : ChooseAmountScale(fr.resource, max);
    const ValueAxis y_axis = ChooseValueAxis(max / scale.divisor, per_cohort);
    const std::string y_label =
        per_cohort ? "of nominal" : absl::StrCat(fr.resource, scale.suffix.empty() ? "" : " (" + scale.suffix + ")");
    absl::StrAppend(&h, "<h3>", Escape(fr.resource), " (flavor ", Escape(fr.flavor), ")</h3>\n");
    h += runs.size() > 1 ? "" : "<div class=\"grid\">\n";
    for (const auto& [name, per_run] : charts) {
      const size_t color = colors.emplace(name, colors.size()).first->second;
      if (runs.size() > 1) h += "<div class=\"pair\">";
      for (size_t i = 0; i < runs.size(); ++i) {
        ChartSpec spec;
        spec.y_label = y_label;
        auto it = per_run.find(i);
        std::vector<Series> series;
        if (it != per_run.end()) {
          const ChartData& d = it->second;
          Series s;
          s.label = name;
          s.color = Color(color);
          s.points = BucketSteps(d.values, d.scale / scale.divisor, runs[i].report->interval_ms,
                                 runs[i].report->end_ms);
          series.push_back(std::move(s));
          spec.reference_y = d.nominal / scale.divisor;
          spec.title = absl::StrCat(runs[i].label.empty() ? "" : runs[i].label + ": ", name,
                                    per_cohort ? "" : absl::StrCat(", nominal ", Amount(d.nominal, scale)));
        } else {
          spec.title = absl::StrCat(runs[i].label, ": ", name, " (not in this run)");
        }
        h += LineChart(spec, series, x_axis, y_axis);
      }
      h += runs.size() > 1 ? "</div>\n" : "\n";
    }
    h += runs.size() > 1 ? "" : "</div>\n";
  }
  if (!unused.empty()) {
    absl::StrAppend(&h, "<p class=\"note\">Never used, so not drawn: ");
    for (size_t i = 0; i < unused.size(); ++i) absl::StrAppend(&h, i ? ", " : "", Escape(unused[i]));
    h += ".</p>\n";
  }
}

// Time to admission per class: the table (one run), or before and after next to each other.
void AppendWaitTable(const std::vector<Run>& runs, std::string* out) {
  std::string& h = *out;
  h += "<h2>Time to admission per class</h2>\n<table>\n";
  std::set<std::string> names;
  for (const Run& run : runs) {
    for (const auto& [name, c] : run.report->classes) names.insert(name);
  }
  auto stat = [](const Run& run, const std::string& name, int64_t WaitStats::*field) -> std::string {
    auto it = run.report->classes.find(name);
    if (it == run.report->classes.end() || it->second.time_to_admission.count == 0) return "-";
    return Dur(it->second.time_to_admission.*field);
  };
  auto mean = [](const Run& run, const std::string& name, bool first_admission) -> std::string {
    auto it = run.report->classes.find(name);
    if (it == run.report->classes.end()) return "-";
    const WaitStats& s = first_admission ? it->second.time_to_first_admission : it->second.time_to_admission;
    return s.count == 0 ? "-" : HumanDuration(s.mean_ms);
  };
  if (runs.size() == 1) {
    h += "<tr><th class=\"l\">class</th><th>workloads</th><th>admitted</th><th>preemptions</th><th>mean</th>"
         "<th>p50</th><th>p90</th><th>p99</th><th>max</th><th>to first admission: mean</th></tr>\n";
    const Run& run = runs.front();
    for (const std::string& name : names) {
      const ClassFigures& c = run.report->classes.at(name);
      absl::StrAppend(&h, "<tr><td class=\"l\">", Escape(name), "</td><td>", c.workloads, "</td><td>", c.admitted,
                      "</td><td>", c.preemptions, "</td><td>", mean(run, name, false), "</td><td>",
                      stat(run, name, &WaitStats::p50_ms), "</td><td>", stat(run, name, &WaitStats::p90_ms),
                      "</td><td>", stat(run, name, &WaitStats::p99_ms), "</td><td>",
                      stat(run, name, &WaitStats::max_ms), "</td><td>", mean(run, name, true), "</td></tr>\n");
    }
    h += "</table>\n";
    return;
  }
  h += "<tr><th class=\"l\" rowspan=\"2\">class</th>";
  for (const char* group : {"mean", "p50", "p90", "max", "preemptions"}) {
    absl::StrAppend(&h, "<th colspan=\"", runs.size(), "\">", group, "</th>");
  }
  h += "</tr>\n<tr>";
  for (int g = 0; g < 5; ++g) {
    for (const Run& run : runs) absl::StrAppend(&h, "<th>", Escape(run.label), "</th>");
  }
  h += "</tr>\n";
  for (const std::string& name : names) {
    absl::StrAppend(&h, "<tr><td class=\"l\">", Escape(name), "</td>");
    for (const Run& run : runs) absl::StrAppend(&h, "<td>", mean(run, name, false), "</td>");
    for (int64_t WaitStats::*field : {&WaitStats::p50_ms, &WaitStats::p90_ms, &WaitStats::max_ms}) {
      for (const Run& run : runs) absl::StrAppend(&h, "<td>", stat(run, name, field), "</td>");
    }
    for (const Run& run : runs) {
      auto it = run.report->classes.find(name);
      absl::StrAppend(&h, "<td>", it == run.report->classes.end() ? 0 : it->second.preemptions, "</td>");
    }
    h += "</tr>\n";
  }
  h += "</table>\n";
}

// Time to admission per class: the cumulative distribution, one chart per run
// with one time axis for both.
void AppendWaitCdf(const std::vector<Run>& runs, std::string* out) {
  std::string& h = *out;
  double wait_max = 0;
  std::map<std::string, size_t> colors;
  for (const Run& run : runs) {
    for (const auto& [name, c] : run.report->classes) {
      colors.emplace(name, colors.size());
      if (!c.waits_ms.empty()) wait_max = std::max(wait_max, static_cast<double>(c.waits_ms.back()));
    }
  }
  if (colors.empty()) return;
  const TimeAxis x_axis = ChooseTimeAxis(std::max(wait_max, 1000.0));
  const ValueAxis y_axis = ChooseValueAxis(1.0, true);
  h += "<p class=\"note\">Cumulative distribution: the share of each class admitted within the time on the x axis "
       "after arriving.</p>\n<div class=\"pair\">";
  for (const Run& run : runs) {
    std::vector<Series> cdf;
    for (const auto& [name, c] : run.report->classes) {
      if (c.waits_ms.empty()) continue;
      Series s;
      s.label = name;
      s.step = true;
      s.color = Color(colors[name]);
      const size_t n = c.waits_ms.size();
      const size_t points = std::min(n, kMaxCdfPoints);
      s.points.emplace_back(0.0, 0.0);
      for (size_t k = 0; k < points; ++k) {
        // Evenly spaced ranks, always including the largest.
        const size_t idx = points == 1 ? n - 1 : k * (n - 1) / (points - 1);
        s.points.emplace_back(static_cast<double>(c.waits_ms[idx]), static_cast<double>(idx + 1) / static_cast<double>(n));
      }
      s.points.emplace_back(x_axis.end_ms, 1.0);
      cdf.push_back(std::move(s));
    }
    ChartSpec spec;
    spec.title = run.label.empty() ? "time to admission, cumulative"
                                   : absl::StrCat(run.label, ": time to admission, cumulative");
    spec.y_label = "share admitted";
    spec.width = runs.size() > 1 ? kChartWidth : kWideWidth;
    spec.height = 300;
    spec.legend = true;
    h += LineChart(spec, cdf, x_axis, y_axis);
  }
  h += "</div>\n";
}

// The ClusterQueues' quota use.
void AppendClusterQueues(const std::vector<Run>& runs, std::string* out) {
  std::string& h = *out;
  h += "<h2>ClusterQueues</h2>\n<table>\n<tr><th class=\"l\">ClusterQueue</th><th class=\"l\">cohort</th>"
       "<th class=\"l\">flavor/resource</th>";
  for (const char* group : {"nominal", "peak", "utilization", "admissions", "preemptions"}) {
    absl::StrAppend(&h, "<th>", group, "</th>");
    for (size_t i = 1; i < runs.size(); ++i) absl::StrAppend(&h, "<th>", group, "</th>");
  }
  h += "</tr>\n";
  if (runs.size() > 1) {
    h += "<tr><th></th><th></th><th></th>";
    for (int g = 0; g < 5; ++g) {
      for (const Run& run : runs) absl::StrAppend(&h, "<th>", Escape(run.label), "</th>");
    }
    h += "</tr>\n";
  }
  std::map<std::string, std::set<broker::FlavorResource>> rows;
  std::map<std::string, std::string> cohorts;
  for (const Run& run : runs) {
    for (const auto& [name, f] : run.report->cluster_queues) {
      cohorts.emplace(name, f.cohort);
      for (const auto& [fr, rf] : f.resources) rows[name].insert(fr);
    }
  }
  for (const auto& [name, frs] : rows) {
    for (const broker::FlavorResource& fr : frs) {
      absl::StrAppend(&h, "<tr><td class=\"l\">", Escape(name), "</td><td class=\"l\">", Escape(cohorts[name]),
                      "</td><td class=\"l\">", Escape(fr.ToString()), "</td>");
      for (int g = 0; g < 5; ++g) {
        for (const Run& run : runs) {
          auto q = run.report->cluster_queues.find(name);
          const ResourceFigures* rf = nullptr;
          if (q != run.report->cluster_queues.end()) {
            auto it = q->second.resources.find(fr);
            if (it != q->second.resources.end()) rf = &it->second;
          }
          std::string v = "-";
          if (rf != nullptr) {
            switch (g) {
              case 0: v = rf->nominal.Format(); break;
              case 1: v = rf->peak.Format(); break;
              case 2: v = rf->utilization.has_value() ? RoundedPercent(*rf->utilization) : "-"; break;
              case 3: v = absl::StrCat(q->second.admissions); break;
              default: v = absl::StrCat(q->second.preemptions); break;
            }
          }
          absl::StrAppend(&h, "<td>", Escape(v), "</td>");
        }
      }
      h += "</tr>\n";
    }
  }
  h += "</table>\n";
}

// The workloads never admitted, if any.
void AppendUnadmitted(const std::vector<Run>& runs, std::string* out) {
  std::string& h = *out;
  for (const Run& run : runs) {
    const Report& r = *run.report;
    if (r.unadmitted_count == 0) continue;
    absl::StrAppend(&h, "<h2>Never admitted", run.label.empty() ? "" : ", " + Escape(run.label), " (",
                    r.unadmitted_count, ")</h2>\n<table>\n"
                    "<tr><th class=\"l\">workload</th><th class=\"l\">class</th><th class=\"l\">why</th></tr>\n");
    for (const Unadmitted& u : r.unadmitted) {
      absl::StrAppend(&h, "<tr><td class=\"l\">", Escape(u.workload), "</td><td class=\"l\">", Escape(u.class_name),
                      "</td><td class=\"l\">", Escape(u.reason), "</td></tr>\n");
    }
    h += "</table>\n";
  }
}

std::string Page(const std::vector<Run>& runs, const std::string& intro) {
  std::string h = kHead;
  h += intro;
  AppendSummary(runs, &h);
  AppendUtilization(runs, &h);
  AppendWaitTable(runs, &h);
  AppendWaitCdf(runs, &h);
  AppendClusterQueues(runs, &h);
  AppendUnadmitted(runs, &h);
  h += "</body></html>\n";
  return h;
}

}  // namespace

std::string ReportHtml(const Report& r) {
  const std::string intro = absl::StrCat(
      "<h1>gangkeeper simulate</h1>\n<p>", r.workloads, " workloads from <code>", Escape(r.workload_file), "</code> (",
      Escape(r.trace_format), "), policies: <code>", Escape(r.policies), "</code>, ", r.cluster_queues.size(),
      " ClusterQueues.</p>\n");
  return Page({Run{"", &r}}, intro);
}

std::string ComparisonHtml(const Comparison& c) {
  const Report& b = c.before;
  std::string intro = absl::StrCat(
      "<h1>gangkeeper simulate: before and after</h1>\n<p>", b.workloads, " workloads from <code>",
      Escape(b.workload_file), "</code> (", Escape(b.trace_format), ") against two sets of policies: before <code>",
      Escape(b.policies), "</code>, after <code>", Escape(c.after.policies), "</code>.</p>\n<div class=\"verdict\"><ul>\n");
  for (const std::string& s : Verdict(b, c.after)) absl::StrAppend(&intro, "<li>", Escape(s), "</li>\n");
  intro += "</ul></div>\n";
  return Page({Run{"before", &b}, Run{"after", &c.after}}, intro);
}

}  // namespace gangkeeper::sim
