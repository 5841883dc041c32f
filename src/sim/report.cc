// gangkeeper sim: the JSON report and the terminal summary (see report.h).
#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "gangkeeper/sim/report.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::sim {
namespace {

using ojson = nlohmann::ordered_json;

constexpr char kFormat[] = "gangkeeper-simulate/v1";
constexpr char kCycleModel[] =
    "at each instant with events: completions, then stops, then arrivals; then Schedule(t) to a fixed point; "
    "admissions are released at once and run from t; preempted gangs stop after the stop delay and are re-queued";

// Milliseconds as seconds (exact to the millisecond in the shortest form).
double Seconds(int64_t ms) { return static_cast<double>(ms) / 1000.0; }
double Seconds(double ms) { return std::round(ms) / 1000.0; }
// " (1h30m)" after a duration of a minute or more, for people.
std::string Human(int64_t ms) {
  return ms >= 60'000 ? absl::StrCat(" (", absl::FormatDuration(absl::Milliseconds(ms)), ")") : std::string();
}
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

}  // namespace

std::string ReportJson(const Report& r) {
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
  return root.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

std::string ReportSummary(const Report& r) {
  std::string out = absl::StrFormat("simulated %d workloads (%s trace %s) on %d ClusterQueues\n", r.workloads,
                                    r.trace_format, r.workload_file, r.cluster_queues.size());
  if (r.makespan_ms.has_value()) {
    absl::StrAppendFormat(&out, "makespan        %.3f s%s", Seconds(*r.makespan_ms), Human(*r.makespan_ms));
    if (r.bounds.max_ms() > 0) {
      absl::StrAppendFormat(&out, "  (%.2fx the lower bound)",
                            static_cast<double>(*r.makespan_ms) / static_cast<double>(r.bounds.max_ms()));
    }
    out += "\n";
  } else {
    absl::StrAppendFormat(&out, "makespan        none: %d of %d workloads finished by %.3f s\n", r.finished,
                          r.workloads, Seconds(r.end_ms));
  }
  absl::StrAppendFormat(&out, "lower bound     %.3f s%s  (work %.3f s: %s; arrivals %.3f s: %s)\n",
                        Seconds(r.bounds.max_ms()), Human(r.bounds.max_ms()), Seconds(r.bounds.work_ms),
                        r.bounds.work_bound_by,
                        Seconds(r.bounds.arrival_ms), r.bounds.arrival_bound_by);
  out += "utilization     ";
  bool first = true;
  for (const auto& [res, v] : r.utilization) {
    absl::StrAppendFormat(&out, "%s%s %.1f%%", first ? "" : ", ", res, v * 100.0);
    first = false;
  }
  if (first) out += "-";
  out += " of nominal quota\n";
  absl::StrAppendFormat(&out, "preemptions     %d (work lost %.3f s); admissions %d; scheduling passes %d\n",
                        r.preemptions, Seconds(r.lost_work_ms), r.admissions, r.scheduling_passes);
  int width = 5;
  for (const auto& [name, c] : r.classes) width = std::max(width, static_cast<int>(name.size()));
  absl::StrAppendFormat(&out, "time to admission (s)\n  %-*s %8s %10s %10s %10s %10s %10s\n", width, "class", "n",
                        "mean", "p50", "p90", "p99", "max");
  for (const auto& [name, c] : r.classes) {
    const WaitStats& s = c.time_to_admission;
    if (s.count == 0) {
      absl::StrAppendFormat(&out, "  %-*s %8d %10s\n", width, name, 0, "-");
      continue;
    }
    absl::StrAppendFormat(&out, "  %-*s %8d %10.3f %10.3f %10.3f %10.3f %10.3f\n", width, name, s.count,
                          Seconds(s.mean_ms), Seconds(s.p50_ms), Seconds(s.p90_ms), Seconds(s.p99_ms),
                          Seconds(s.max_ms));
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

}  // namespace gangkeeper::sim
