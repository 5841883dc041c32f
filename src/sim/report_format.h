// gangkeeper sim: numbers, durations and axes as people read them, and the
// verdict of a comparison, shared by the summary, the JSON and the HTML
// report (report.h). Pure functions; private to src/sim and its tests.
#pragma once

#include <string>
#include <vector>

#include "gangkeeper/sim/report.h"

namespace gangkeeper::sim {

// A duration rounded for reading: "0", "250 ms", "4.5 s", "20 s", "7.5 min",
// "35 min", "8 h 20 min", "50 h". Below 10 of a unit one decimal (dropped
// when it is 0), else whole units; from an hour on, hours and whole minutes.
std::string HumanDuration(double ms);

// A number with at most three significant digits, never in scientific
// notation, thousands separated by ",": "0", "0.125", "7.5", "42", "1,234",
// "30,000" (integers above 999 keep every digit).
std::string RoundedNumber(double v);

// A fraction as a percentage with one decimal, the ".0" dropped: "70.1%", "100%".
std::string RoundedPercent(double fraction);

struct Tick {
  double value = 0;  // in the axis's data units (milliseconds for a time axis)
  std::string label;
};

// A time axis from 0 to end_ms (exactly: the axis ends at the data's end):
// the unit is s up to 2 minutes, min up to 2 hours, h above; ticks at a
// round step of that unit (1, 2, 5 × 10^k; 15 and 30 for min; 3, 6, 12 for h),
// at most 8 of them, labelled "0", "30 min", "1 h", "1.5 h".
struct TimeAxis {
  double end_ms = 0;
  std::string unit;  // "s", "min" or "h"
  std::vector<Tick> ticks;
};
TimeAxis ChooseTimeAxis(double end_ms);

// A value axis from 0 to a round maximum >= max_value with 3 to 6 ticks at a
// step of 1, 2, 2.5 or 5 × 10^k; labels from RoundedNumber (times 100 and a
// "%" when percent).
struct ValueAxis {
  double max = 1;
  std::vector<Tick> ticks;
};
ValueAxis ChooseValueAxis(double max_value, bool percent);

// How an amount of a resource is shown: memory and storage in binary units
// (divisor 2^30, suffix "Gi"; Mi when the largest amount is under 1 Gi),
// everything else as counted (cpu cores, GPUs).
struct AmountScale {
  double divisor = 1;
  std::string suffix;
};
AmountScale ChooseAmountScale(const std::string& resource, double max_amount);

// The verdict of a comparison: a few sentences, each ending with ".", e.g.
// "Mean time to admission: team-a/eval's drops from 17.5 min to 2.9 min;
// team-b/batch's stays at 7.5 min." then the makespan, preemptions,
// utilization and never-admitted workloads when they change. Durations and
// percentages are compared as rounded (HumanDuration, RoundedPercent), so a
// change too small to show reads "stays at".
std::vector<std::string> Verdict(const Report& before, const Report& after);

}  // namespace gangkeeper::sim
