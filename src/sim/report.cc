// gangkeeper sim: the JSON report and the terminal summary (see report.h).
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gangkeeper/sim/report.h"
#include "nlohmann/json.hpp"
#include "src/sim/report_format.h"

namespace gangkeeper::sim {
namespace {

using ojson = nlohmann::ordered_json;

constexpr char kFormat[] = "gangkeeper-simulate/v1";
constexpr char kCompareFormat[] = "gangkeeper-simulate-compare/v1";
constexpr char kCycleModel[] =
    "at each instant with events: completions, then stops, then arrivals; then Schedule(t) to a fixed point; "
    "admissions are released at once and run from t; preempted gangs stop after the stop delay and are re-queued";

// Milliseconds as seconds (exact to the millisecond in the shortest form).
double Seconds(int64_t ms) { return static_cast<double>(ms) / 1000.0; }
double Seconds(double ms) { return std::round(ms) / 1000.0; }
std::string Human(int64_t ms) { return HumanDuration(static_cast<double>(ms)); }
// A ratio to four decimals.
double Ratio(double v) { return std::round(v * 10000.0) / 10000.0; }

ojson Stats(const WaitStats& s) {
  ojson o = ojson::object();
  o["count"] = s.count;
  if (s.count == 0) {
    for (const char* k : {"mean", "p50", "p90", "p99", "max"}) o[k] = nullptr;
    return o;
  }
  o["mean"] = Seconds(s.mean_ms);
  o["p50"] = Seconds(s.p50_ms);
  o["p90"] = Seconds(s.p90_ms);
  o["p99"] = Seconds(s.p99_ms);
  o["max"] = Seconds(s.max_ms);
  return o;
}

// What was simulated.
ojson InputJson(const Report& r) {
  ojson input = ojson::object();
  input["workload_file"] = r.workload_file;
  input["trace_format"] = r.trace_format;
  input["policies"] = r.policies;
  input["workloads"] = r.workloads;
  input["cluster_queues"] = r.cluster_queues.size();
  return input;
}

// How the simulation modelled the scheduler.
ojson ModelJson(const Report& r) {
  ojson model = ojson::object();
  model["cycle"] = kCycleModel;
  model["until_s"] = r.until_ms.has_value() ? ojson(Seconds(*r.until_ms)) : ojson(nullptr);
  model["stop_delay_s"] = Seconds(r.stop_delay_ms);
  model["one_head_per_cycle"] = r.one_head_per_cycle;
  model["fair_sharing"] = r.fair_sharing;
  return model;
}

// The outcome: makespan, counts, utilization.
ojson SummaryJson(const Report& r) {
  ojson summary = ojson::object();
  summary["makespan_s"] = r.makespan_ms.has_value() ? ojson(Seconds(*r.makespan_ms)) : ojson(nullptr);
  summary["end_s"] = Seconds(r.end_ms);
  summary["finished"] = r.finished;
  summary["not_finished"] = r.workloads - r.finished;
  summary["never_admitted"] = r.unadmitted_count;
  summary["admissions"] = r.admissions;
  summary["preemptions"] = r.preemptions;
  summary["lost_work_s"] = Seconds(r.lost_work_ms);
  summary["scheduling_passes"] = r.scheduling_passes;
  summary["scheduling_cycles"] = r.scheduling_cycles;
  ojson util = ojson::object();
  for (const auto& [res, v] : r.utilization) util[res] = Ratio(v);
  summary["utilization"] = std::move(util);
  ojson by_class = ojson::object();
  for (const auto& [cls, per] : r.utilization_by_queue_class) {
    ojson o = ojson::object();
    for (const auto& [res, v] : per) o[res] = Ratio(v);
    by_class[cls] = std::move(o);
  }
  summary["utilization_by_queue_class"] = std::move(by_class);
  return summary;
}

// Lower bounds of the makespan and how close the run came.
ojson BoundsJson(const Report& r) {
  ojson bounds = ojson::object();
  bounds["work_s"] = Seconds(r.bounds.work_ms);
  bounds["work_bound_by"] = r.bounds.work_bound_by;
  bounds["arrival_s"] = Seconds(r.bounds.arrival_ms);
  bounds["arrival_bound_by"] = r.bounds.arrival_bound_by;
  bounds["max_s"] = Seconds(r.bounds.max_ms());
  bounds["makespan_over_bound"] =
      r.makespan_ms.has_value() && r.bounds.max_ms() > 0
          ? ojson(Ratio(static_cast<double>(*r.makespan_ms) / static_cast<double>(r.bounds.max_ms())))
          : ojson(nullptr);
  return bounds;
}

// Per workload class: counts and times to admission.
ojson ClassesJson(const Report& r) {
  ojson classes = ojson::object();
  for (const auto& [name, c] : r.classes) {
    ojson o = ojson::object();
    o["workloads"] = c.workloads;
    o["admitted"] = c.admitted;
    o["finished"] = c.finished;
    o["preemptions"] = c.preemptions;
    o["time_to_admission_s"] = Stats(c.time_to_admission);
    o["time_to_first_admission_s"] = Stats(c.time_to_first_admission);
    classes[name] = std::move(o);
  }
  return classes;
}

// Per ClusterQueue: admissions, preemptions, quota use.
ojson ClusterQueuesJson(const Report& r) {
  ojson cqs = ojson::object();
  for (const auto& [name, f] : r.cluster_queues) {
    ojson o = ojson::object();
    o["cohort"] = f.cohort;
    o["class"] = f.class_name;
    o["admissions"] = f.admissions;
    o["preemptions"] = f.preemptions;
    ojson pbc = ojson::object();
    for (const auto& [cls, n] : f.preemptions_by_class) pbc[cls] = n;
    o["preemptions_by_class"] = std::move(pbc);
    ojson res = ojson::object();
    for (const auto& [fr, rf] : f.resources) {
      ojson x = ojson::object();
      x["nominal"] = rf.nominal.Format();
      x["peak"] = rf.peak.Format();
      x["utilization"] = rf.utilization.has_value() ? ojson(Ratio(*rf.utilization)) : ojson(nullptr);
      res[fr.ToString()] = std::move(x);
    }
    o["resources"] = std::move(res);
    cqs[name] = std::move(o);
  }
  return cqs;
}

// The workloads never admitted (the first of them).
ojson UnadmittedJson(const Report& r) {
  ojson unadmitted = ojson::object();
  unadmitted["count"] = r.unadmitted_count;
  ojson first = ojson::array();
  for (const Unadmitted& u : r.unadmitted) {
    first.push_back(ojson{{"workload", u.workload}, {"class", u.class_name}, {"reason", u.reason}});
  }
  unadmitted["first"] = std::move(first);
  return unadmitted;
}

// Utilization and weighted share over time.
ojson TimeseriesJson(const Report& r) {
  ojson ts = ojson::object();
  ts["interval_s"] = Seconds(r.interval_ms);
  ts["buckets"] = r.buckets;
  ojson usage = ojson::object();
  ojson shares = ojson::object();
  for (const auto& [name, f] : r.cluster_queues) {
    ojson per = ojson::object();
    for (const auto& [fr, rf] : f.resources) {
      if (rf.series.empty()) continue;
      ojson values = ojson::array();
      for (double v : rf.series) values.push_back(Ratio(v));
      per[fr.ToString()] = std::move(values);
    }
    usage[name] = std::move(per);
    ojson values = ojson::array();
    for (double v : f.weighted_share) values.push_back(v);
    shares[name] = std::move(values);
  }
  ts["utilization"] = std::move(usage);
  ts["weighted_share"] = std::move(shares);
  return ts;
}

ojson ReportObject(const Report& r) {
  ojson root = ojson::object();
  root["format"] = kFormat;
  root["input"] = InputJson(r);
  root["model"] = ModelJson(r);
  root["summary"] = SummaryJson(r);
  root["lower_bounds"] = BoundsJson(r);
  root["classes"] = ClassesJson(r);
  root["cluster_queues"] = ClusterQueuesJson(r);
  root["unadmitted"] = UnadmittedJson(r);
  root["timeseries"] = TimeseriesJson(r);
  return root;
}

// {"before": b, "after": a, "change": a - b}, null where a run has no value.
ojson Change(const ojson& b, const ojson& a) {
  ojson o = ojson::object();
  o["before"] = b;
  o["after"] = a;
  o["change"] = b.is_number() && a.is_number()
                    ? ojson(std::round((a.get<double>() - b.get<double>()) * 10000.0) / 10000.0)
                    : ojson(nullptr);
  return o;
}

// The figures a reader compares first, before and after.
ojson ChangesJson(const Report& b, const Report& a) {
  ojson changes = ojson::object();
  auto makespan = [](const Report& r) {
    return r.makespan_ms.has_value() ? ojson(Seconds(*r.makespan_ms)) : ojson(nullptr);
  };
  changes["makespan_s"] = Change(makespan(b), makespan(a));
  changes["finished"] = Change(b.finished, a.finished);
  changes["never_admitted"] = Change(b.unadmitted_count, a.unadmitted_count);
  changes["preemptions"] = Change(b.preemptions, a.preemptions);
  changes["lost_work_s"] = Change(Seconds(b.lost_work_ms), Seconds(a.lost_work_ms));
  auto util = [](const Report& r, const std::string& res) {
    auto it = r.utilization.find(res);
    return it == r.utilization.end() ? ojson(nullptr) : ojson(Ratio(it->second));
  };
  ojson utilization = ojson::object();
  for (const auto& [res, v] : b.utilization) utilization[res] = Change(util(b, res), util(a, res));
  for (const auto& [res, v] : a.utilization) {
    if (!utilization.contains(res)) utilization[res] = Change(util(b, res), util(a, res));
  }
  changes["utilization"] = std::move(utilization);
  auto wait = [](const Report& r, const std::string& cls, bool p90) {
    auto it = r.classes.find(cls);
    if (it == r.classes.end() || it->second.time_to_admission.count == 0) return ojson(nullptr);
    const WaitStats& s = it->second.time_to_admission;
    return p90 ? ojson(Seconds(s.p90_ms)) : ojson(Seconds(s.mean_ms));
  };
  ojson mean = ojson::object(), p90 = ojson::object();
  for (const Report* r : {&b, &a}) {
    for (const auto& [cls, c] : r->classes) {
      if (mean.contains(cls)) continue;
      mean[cls] = Change(wait(b, cls, false), wait(a, cls, false));
      p90[cls] = Change(wait(b, cls, true), wait(a, cls, true));
    }
  }
  changes["mean_time_to_admission_s"] = std::move(mean);
  changes["p90_time_to_admission_s"] = std::move(p90);
  return changes;
}

}  // namespace

std::string ReportJson(const Report& r) {
  return ReportObject(r).dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

std::string ComparisonJson(const Comparison& c) {
  ojson root = ojson::object();
  root["format"] = kCompareFormat;
  ojson verdict = ojson::array();
  for (const std::string& s : Verdict(c.before, c.after)) verdict.push_back(s);
  root["verdict"] = std::move(verdict);
  root["changes"] = ChangesJson(c.before, c.after);
  root["before"] = ReportObject(c.before);
  root["after"] = ReportObject(c.after);
  return root.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

std::string ReportSummary(const Report& r) {
  std::string out = absl::StrFormat("simulated %d workloads (%s trace %s) on %d ClusterQueues\n", r.workloads,
                                    r.trace_format, r.workload_file, r.cluster_queues.size());
  if (r.makespan_ms.has_value()) {
    absl::StrAppendFormat(&out, "makespan        %s", Human(*r.makespan_ms));
    if (r.bounds.max_ms() > 0) {
      absl::StrAppendFormat(&out, "  (%.2fx the lower bound)",
                            static_cast<double>(*r.makespan_ms) / static_cast<double>(r.bounds.max_ms()));
    }
    out += "\n";
  } else {
    absl::StrAppendFormat(&out, "makespan        none: %d of %d workloads finished by %s\n", r.finished,
                          r.workloads, Human(r.end_ms));
  }
  absl::StrAppendFormat(&out, "lower bound     %s  (work %s: %s; arrivals %s: %s)\n", Human(r.bounds.max_ms()),
                        Human(r.bounds.work_ms), r.bounds.work_bound_by, Human(r.bounds.arrival_ms),
                        r.bounds.arrival_bound_by);
  out += "utilization     ";
  bool first = true;
  for (const auto& [res, v] : r.utilization) {
    absl::StrAppendFormat(&out, "%s%s %s", first ? "" : ", ", res, RoundedPercent(v));
    first = false;
  }
  if (first) out += "-";
  out += " of nominal quota\n";
  absl::StrAppendFormat(&out, "preemptions     %d (work lost %s); admissions %d; scheduling passes %d\n",
                        r.preemptions, Human(r.lost_work_ms), r.admissions, r.scheduling_passes);
  int width = 5;
  for (const auto& [name, c] : r.classes) width = std::max(width, static_cast<int>(name.size()));
  absl::StrAppendFormat(&out, "time to admission\n  %-*s %6s %11s %11s %11s %11s %11s\n", width, "class", "n",
                        "mean", "p50", "p90", "p99", "max");
  for (const auto& [name, c] : r.classes) {
    const WaitStats& s = c.time_to_admission;
    if (s.count == 0) {
      absl::StrAppendFormat(&out, "  %-*s %6d %11s\n", width, name, 0, "-");
      continue;
    }
    absl::StrAppendFormat(&out, "  %-*s %6d %11s %11s %11s %11s %11s\n", width, name, s.count,
                          HumanDuration(s.mean_ms), Human(s.p50_ms), Human(s.p90_ms), Human(s.p99_ms),
                          Human(s.max_ms));
  }
  if (r.unadmitted_count > 0) {
    absl::StrAppendFormat(&out, "never admitted  %d workload(s)", r.unadmitted_count);
    if (!r.unadmitted.empty()) {
      absl::StrAppendFormat(&out, ", e.g. %s: %s", r.unadmitted.front().workload, r.unadmitted.front().reason);
    }
    out += "\n";
  }
  return out;
}

namespace {

// "17.5 min (p90 45 min)" for one class in one run.
std::string MeanAndP90(const Report& r, const std::string& cls) {
  auto it = r.classes.find(cls);
  if (it == r.classes.end() || it->second.time_to_admission.count == 0) return "-";
  const WaitStats& s = it->second.time_to_admission;
  return absl::StrCat(HumanDuration(s.mean_ms), " (", Human(s.p90_ms), ")");
}

}  // namespace

std::string ComparisonSummary(const Comparison& c) {
  const Report& b = c.before;
  const Report& a = c.after;
  std::string out = absl::StrFormat("compared %d workloads (%s trace %s)\n  before: %s\n  after:  %s\n", b.workloads,
                                    b.trace_format, b.workload_file, b.policies, a.policies);
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> rows;
  auto makespan = [](const Report& r) {
    return r.makespan_ms.has_value() ? Human(*r.makespan_ms)
                                     : absl::StrCat(r.finished, " of ", r.workloads, " done");
  };
  rows.push_back({"makespan", {makespan(b), makespan(a)}});
  for (const auto& [res, v] : b.utilization) {
    auto it = a.utilization.find(res);
    rows.push_back({"utilization " + res, {RoundedPercent(v), it == a.utilization.end() ? "-" : RoundedPercent(it->second)}});
  }
  rows.push_back({"preemptions", {absl::StrCat(b.preemptions), absl::StrCat(a.preemptions)}});
  rows.push_back({"work lost", {Human(b.lost_work_ms), Human(a.lost_work_ms)}});
  rows.push_back({"never admitted", {absl::StrCat(b.unadmitted_count), absl::StrCat(a.unadmitted_count)}});
  rows.push_back({"time to admission, mean (p90)", {"", ""}});
  for (const auto& [cls, f] : b.classes) rows.push_back({"  " + cls, {MeanAndP90(b, cls), MeanAndP90(a, cls)}});
  size_t w0 = 6, w1 = 6, w2 = 5;
  for (const auto& [k, v] : rows) {
    if (!v.first.empty()) w0 = std::max(w0, k.size());
    w1 = std::max(w1, v.first.size());
    w2 = std::max(w2, v.second.size());
  }
  absl::StrAppendFormat(&out, "%-*s  %*s  %*s\n", w0, "", w1, "before", w2, "after");
  for (const auto& [k, v] : rows) {
    if (v.first.empty() && v.second.empty()) {
      absl::StrAppend(&out, k, "\n");
      continue;
    }
    absl::StrAppendFormat(&out, "%-*s  %*s  %*s\n", w0, k, w1, v.first, w2, v.second);
  }
  out += "verdict\n";
  for (const std::string& s : Verdict(b, a)) absl::StrAppend(&out, "  ", s, "\n");
  return out;
}

}  // namespace gangkeeper::sim
