// gangkeeper sim: human numbers, axes and the comparison verdict (see report_format.h).
#include "src/sim/report_format.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace gangkeeper::sim {
namespace {

// "%.*f" without trailing zeros (and without a trailing ".").
std::string Trimmed(double v, int decimals) {
  std::string s = absl::StrFormat("%.*f", decimals, v);
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

// An integer with "," between thousands.
std::string Grouped(int64_t v) {
  std::string digits = absl::StrCat(v < 0 ? -v : v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

// v of `unit`: one decimal below 10, whole units above.
std::string InUnit(double v, const char* unit) {
  return absl::StrCat(v < 9.95 ? Trimmed(v, 1) : absl::StrCat(std::llround(v)), " ", unit);
}

}  // namespace

std::string HumanDuration(double ms) {
  if (std::isnan(ms)) return "-";
  if (ms < 0) return "-" + HumanDuration(-ms);
  if (ms < 0.5) return "0";
  if (ms < 999.5) return absl::StrCat(std::llround(ms), " ms");
  if (ms < 59'500) return InUnit(ms / 1000.0, "s");
  if (ms < 59.5 * 60'000) return InUnit(ms / 60'000.0, "min");
  const int64_t minutes = std::llround(ms / 60'000.0);
  if (minutes >= 48 * 60) return absl::StrCat(std::llround(ms / 3'600'000.0), " h");
  if (minutes % 60 == 0) return absl::StrCat(minutes / 60, " h");
  return absl::StrCat(minutes / 60, " h ", minutes % 60, " min");
}

std::string RoundedNumber(double v) {
  if (std::isnan(v)) return "-";
  if (v < 0) {
    std::string s = RoundedNumber(-v);
    return s == "0" ? s : "-" + s;
  }
  if (v < 5e-7) return "0";
  if (v >= 999.5) return Grouped(std::llround(v));
  const int magnitude = static_cast<int>(std::floor(std::log10(v)));
  const int decimals = std::clamp(2 - magnitude, 0, 6);
  return Trimmed(v, decimals);
}

std::string RoundedPercent(double fraction) {
  if (std::isnan(fraction)) return "-";
  return Trimmed(fraction * 100.0, 1) + "%";
}

TimeAxis ChooseTimeAxis(double end_ms) {
  TimeAxis axis;
  if (!(end_ms > 0)) end_ms = 1000;
  axis.end_ms = end_ms;
  double unit_ms = 1000;
  std::vector<double> steps;
  if (end_ms <= 120'000) {
    axis.unit = "s";
    for (double p = 0.001; p <= 100; p *= 10) {
      for (double m : {1.0, 2.0, 5.0}) steps.push_back(m * p);
    }
  } else if (end_ms <= 7'200'000) {
    axis.unit = "min";
    unit_ms = 60'000;
    steps = {1, 2, 5, 10, 15, 20, 30, 60};
  } else {
    axis.unit = "h";
    unit_ms = 3'600'000;
    steps = {0.5, 1, 2, 3, 4, 6, 12, 24, 48, 72, 168, 336};
    for (double p = 1000; p <= 1e9; p *= 10) {
      for (double m : {1.0, 2.0, 5.0}) steps.push_back(m * p);
    }
  }
  const double end = end_ms / unit_ms;
  double step = steps.back();
  for (double s : steps) {
    if (end / s <= 8.0 + 1e-9) {
      step = s;
      break;
    }
  }
  for (int k = 0; k <= 100 && k * step <= end * (1 + 1e-9); ++k) {
    const double v = k * step;
    axis.ticks.push_back(Tick{v * unit_ms, k == 0 ? "0" : absl::StrCat(RoundedNumber(v), " ", axis.unit)});
  }
  return axis;
}

ValueAxis ChooseValueAxis(double max_value, bool percent) {
  ValueAxis axis;
  if (!(max_value > 0)) max_value = 1;
  const int magnitude = static_cast<int>(std::floor(std::log10(max_value)));
  double step = max_value;
  int n = 1;
  bool found = false;
  for (int k = magnitude - 2; k <= magnitude + 1 && !found; ++k) {
    for (double m : {1.0, 2.0, 2.5, 5.0}) {
      const double s = m * std::pow(10.0, k);
      const double count = std::ceil(max_value / s - 1e-9);
      if (count <= 5) {
        step = s;
        n = static_cast<int>(count);
        found = true;
        break;
      }
    }
  }
  n = std::max(n, 1);
  axis.max = step * n;
  for (int i = 0; i <= n; ++i) {
    const double v = step * i;
    axis.ticks.push_back(Tick{v, percent ? RoundedNumber(v * 100) + "%" : RoundedNumber(v)});
  }
  return axis;
}

AmountScale ChooseAmountScale(const std::string& resource, double max_amount) {
  if (resource == "memory" || absl::EndsWith(resource, "storage") || absl::StartsWith(resource, "hugepages-")) {
    constexpr double kGi = 1024.0 * 1024.0 * 1024.0;
    if (max_amount >= kGi) return AmountScale{kGi, "Gi"};
    return AmountScale{1024.0 * 1024.0, "Mi"};
  }
  return AmountScale{1, ""};
}

namespace {

constexpr size_t kMaxVerdictClasses = 6;

// "team-a/eval's drops from 17.5 min to 2.9 min" (the first clause also says
// what is measured).
std::string WaitClause(const std::string& name, const ClassFigures* b, const ClassFigures* a, bool first) {
  const std::string subject = absl::StrCat(name, first ? "'s mean wait " : "'s ");
  const bool b_any = b != nullptr && b->time_to_admission.count > 0;
  const bool a_any = a != nullptr && a->time_to_admission.count > 0;
  if (!b_any && !a_any) return absl::StrCat(name, "'s workloads are never admitted");
  if (!b_any) return absl::StrCat(subject, "goes from none admitted to ", HumanDuration(a->time_to_admission.mean_ms));
  if (!a_any) return absl::StrCat(subject, "goes from ", HumanDuration(b->time_to_admission.mean_ms), " to none admitted");
  const double bm = b->time_to_admission.mean_ms, am = a->time_to_admission.mean_ms;
  const std::string bs = HumanDuration(bm), as = HumanDuration(am);
  if (bs == as) return absl::StrCat(subject, "stays at ", bs);
  return absl::StrCat(subject, am < bm ? "drops" : "rises", " from ", bs, " to ", as);
}

double MeanOrZero(const ClassFigures* c) {
  return c != nullptr && c->time_to_admission.count > 0 ? c->time_to_admission.mean_ms : 0.0;
}

std::string WaitSentence(const Report& before, const Report& after) {
  std::set<std::string> names;
  for (const auto& [name, c] : before.classes) names.insert(name);
  for (const auto& [name, c] : after.classes) names.insert(name);
  if (names.empty()) return "";
  auto find = [](const Report& r, const std::string& name) -> const ClassFigures* {
    auto it = r.classes.find(name);
    return it == r.classes.end() ? nullptr : &it->second;
  };
  std::vector<std::string> shown(names.begin(), names.end());
  size_t hidden = 0;
  if (shown.size() > kMaxVerdictClasses) {
    // The classes whose mean wait changes most, then in name order.
    std::stable_sort(shown.begin(), shown.end(), [&](const std::string& x, const std::string& y) {
      return std::abs(MeanOrZero(find(after, x)) - MeanOrZero(find(before, x))) >
             std::abs(MeanOrZero(find(after, y)) - MeanOrZero(find(before, y)));
    });
    hidden = shown.size() - kMaxVerdictClasses;
    shown.resize(kMaxVerdictClasses);
    std::sort(shown.begin(), shown.end());
  }
  std::vector<std::string> clauses;
  for (const std::string& name : shown) {
    clauses.push_back(WaitClause(name, find(before, name), find(after, name), clauses.empty()));
  }
  std::string s = absl::StrJoin(clauses, "; ");
  if (hidden > 0) absl::StrAppend(&s, " (", hidden, " more classes change less; see the table)");
  return s + ".";
}

std::string MakespanSentence(const Report& before, const Report& after) {
  if (before.makespan_ms.has_value() && after.makespan_ms.has_value()) {
    const std::string bs = HumanDuration(static_cast<double>(*before.makespan_ms));
    const std::string as = HumanDuration(static_cast<double>(*after.makespan_ms));
    if (bs == as) return absl::StrCat("The last workload finishes at the same time (", as, ").");
    const double diff = static_cast<double>(*after.makespan_ms - *before.makespan_ms);
    return absl::StrCat("The last workload finishes ", HumanDuration(std::abs(diff)), diff < 0 ? " earlier" : " later",
                        " (", as, " instead of ", bs, ").");
  }
  auto part = [](const Report& r) {
    return r.makespan_ms.has_value()
               ? absl::StrCat("all ", r.workloads, " by ", HumanDuration(static_cast<double>(*r.makespan_ms)))
               : absl::StrCat(r.finished, " of ", r.workloads, " by ", HumanDuration(static_cast<double>(r.end_ms)));
  };
  return absl::StrCat("Workloads finished: ", part(before), " before, ", part(after), " after.");
}

std::string PreemptionSentence(const Report& before, const Report& after) {
  if (before.preemptions == 0 && after.preemptions == 0) return "No preemptions in either run.";
  std::string s = before.preemptions == after.preemptions
                      ? absl::StrCat("Preemptions stay at ", after.preemptions)
                      : absl::StrCat("Preemptions ", after.preemptions < before.preemptions ? "drop" : "rise",
                                     " from ", before.preemptions, " to ", after.preemptions);
  absl::StrAppend(&s, " (work thrown away: ", HumanDuration(static_cast<double>(before.lost_work_ms)), " before, ",
                  HumanDuration(static_cast<double>(after.lost_work_ms)), " after).");
  return s;
}

std::string UtilizationSentence(const Report& before, const Report& after) {
  std::set<std::string> names;
  for (const auto& [res, v] : before.utilization) names.insert(res);
  for (const auto& [res, v] : after.utilization) names.insert(res);
  std::vector<std::string> clauses;
  for (const std::string& res : names) {
    auto b = before.utilization.find(res);
    auto a = after.utilization.find(res);
    const double bv = b == before.utilization.end() ? 0.0 : b->second;
    const double av = a == after.utilization.end() ? 0.0 : a->second;
    if (bv == 0 && av == 0) continue;
    const std::string bs = RoundedPercent(bv), as = RoundedPercent(av);
    clauses.push_back(bs == as ? absl::StrCat(res, " stays at ", bs)
                               : absl::StrCat(res, av < bv ? " drops" : " rises", " from ", bs, " to ", as));
    if (clauses.size() == 4) break;
  }
  if (clauses.empty()) return "";
  return absl::StrCat("Use of nominal quota: ", absl::StrJoin(clauses, "; "), ".");
}

}  // namespace

std::vector<std::string> Verdict(const Report& before, const Report& after) {
  std::vector<std::string> out;
  for (std::string s : {WaitSentence(before, after), MakespanSentence(before, after),
                        PreemptionSentence(before, after), UtilizationSentence(before, after)}) {
    if (!s.empty()) out.push_back(std::move(s));
  }
  if (before.unadmitted_count > 0 || after.unadmitted_count > 0) {
    out.push_back(absl::StrCat("Never admitted: ", before.unadmitted_count, " before, ", after.unadmitted_count,
                               " after."));
  }
  return out;
}

}  // namespace gangkeeper::sim
