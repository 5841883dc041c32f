// gangkeeper: metric families, the registry and its exposition (see
// include/gangkeeper/metrics/registry.h). Updates are relaxed atomics; the
// registry mutex guards only the family map, each family's mutex only its
// children map.
#include "gangkeeper/metrics/registry.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gangkeeper/base/check.h"
#include "src/metrics/exposition.h"

namespace gangkeeper::metrics {
namespace {

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<double>::is_always_lock_free);

// The series a histogram named `name` adds besides its own name.
constexpr absl::string_view kHistogramSuffixes[] = {"_bucket", "_sum", "_count"};

bool IsAsciiLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidMetricName(absl::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = IsAsciiLetter(c) || c == '_' || c == ':' || (i > 0 && IsAsciiDigit(c));
    if (!ok) return false;
  }
  return true;
}

// [a-zA-Z_][a-zA-Z0-9_]*
bool IsValidLabelName(absl::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = IsAsciiLetter(c) || c == '_' || (i > 0 && IsAsciiDigit(c));
    if (!ok) return false;
  }
  return true;
}

absl::Status ValidateDefinition(absl::string_view name, const std::vector<std::string>& label_names,
                                bool histogram) {
  if (!IsValidMetricName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric name \"", name, "\" must match [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  for (size_t i = 0; i < label_names.size(); ++i) {
    const std::string& label = label_names[i];
    if (!IsValidLabelName(label)) {
      return absl::InvalidArgumentError(absl::StrCat("metric ", name, ": label name \"", label,
                                                     "\" must match [a-zA-Z_][a-zA-Z0-9_]*"));
    }
    if (absl::StartsWith(label, "__")) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric ", name, ": label name \"", label, "\" starts with \"__\", which is reserved"));
    }
    if (histogram && label == "le") {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram ", name, ": label name \"le\" is reserved for bucket bounds"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (label_names[j] == label) {
        return absl::InvalidArgumentError(
            absl::StrCat("metric ", name, ": label name \"", label, "\" is repeated"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateBounds(absl::string_view name, const std::vector<double>& bounds) {
  if (bounds.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("histogram ", name, ": needs at least one bucket bound"));
  }
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      return absl::InvalidArgumentError(absl::StrCat("histogram ", name, ": bucket bound ", i, " is ",
                                                     FormatValue(bounds[i]),
                                                     "; bounds must be finite (+Inf is implicit)"));
    }
    if (i > 0 && !(bounds[i - 1] < bounds[i])) {
      return absl::InvalidArgumentError(absl::StrCat("histogram ", name, ": bucket bounds must be strictly increasing, but ",
                                                     FormatValue(bounds[i - 1]), " is followed by ",
                                                     FormatValue(bounds[i])));
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Span<const absl::string_view> AsViews(const std::initializer_list<T>& values) {
  return absl::MakeConstSpan(values.begin(), values.size());
}

// A family whose samples come from a callback at scrape time.
class CallbackFamily final : public Family {
 public:
  CallbackFamily(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
                 SampleCallback collect)
      : Family(std::move(name), std::move(help), type, std::move(label_names)), collect_(std::move(collect)) {}

 private:
  void AppendText(std::string* out) const override {
    AppendHeader(out, name(), help(), type());
    std::vector<Sample> samples = collect_();
    std::erase_if(samples, [this](const Sample& s) {
      bool ok = s.label_values.size() == label_names().size();
      GK_BUG(ok, "callback metric returned a sample with the wrong number of label values");
      // A counter is never negative or NaN: such a sample is a bug, not data.
      const bool counter_ok = type() != MetricType::kCounter || s.value >= 0;
      GK_BUG(counter_ok, "callback counter returned a negative or NaN value");
      return !ok || !counter_ok;
    });
    std::sort(samples.begin(), samples.end(), [](const Sample& a, const Sample& b) {
      return metrics_internal::LabelValuesLess()(a.label_values, b.label_values);
    });
    for (size_t i = 0; i < samples.size(); ++i) {
      if (i > 0 && samples[i - 1].label_values == samples[i].label_values) {
        GK_BUG(false, "callback metric returned the same label values twice");
        continue;
      }
      AppendSample(out, name(), label_names(), samples[i].label_values, FormatValue(samples[i].value));
    }
  }

  SampleCallback collect_;
};

bool SameDefinition(const Family& a, const Family& b) {
  if (a.type() != b.type() || a.help() != b.help() || a.label_names() != b.label_names()) return false;
  if (a.type() == MetricType::kHistogram) {
    return static_cast<const HistogramFamily&>(a).upper_bounds() ==
           static_cast<const HistogramFamily&>(b).upper_bounds();
  }
  return true;
}

}  // namespace

// ---------------------------------------------------------------------------
// Values

void Gauge::Add(double delta) {
  double current = value_.load(std::memory_order_relaxed);
  while (!value_.compare_exchange_weak(current, current + delta, std::memory_order_relaxed)) {
  }
}

Histogram::Histogram(std::shared_ptr<const std::vector<double>> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)),
      counts_(std::make_unique<std::atomic<uint64_t>[]>(upper_bounds_->size() + 1)) {}

void Histogram::Observe(double value) {
  const std::vector<double>& bounds = *upper_bounds_;
  // First bound >= value (buckets are inclusive); NaN goes to +Inf.
  size_t bucket = std::isnan(value)
                      ? bounds.size()
                      : static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  double current = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(current, current + value, std::memory_order_relaxed)) {
  }
}

uint64_t Histogram::count() const {
  uint64_t total = 0;
  for (size_t i = 0; i <= upper_bounds_->size(); ++i) total += counts_[i].load(std::memory_order_relaxed);
  return total;
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> out(upper_bounds_->size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    total += counts_[i].load(std::memory_order_relaxed);
    out[i] = total;
  }
  return out;
}

std::vector<double> LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  if (!(start > 0) || !(factor > 1) || count < 1) return {};
  std::vector<double> out;
  out.reserve(count);
  double bound = start;
  for (int i = 0; i < count; ++i) {
    out.push_back(bound);
    bound *= factor;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Families

Family::Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names)
    : name_(std::move(name)), help_(std::move(help)), type_(type), label_names_(std::move(label_names)) {}

void Family::CheckLabelCount(size_t count) const {
  GK_CHECK_MSG(count == label_names_.size(), "WithLabels: wrong number of label values for this metric family");
}

CounterFamily::CounterFamily(std::string name, std::string help, std::vector<std::string> label_names)
    : Family(std::move(name), std::move(help), MetricType::kCounter, std::move(label_names)) {}

Counter& CounterFamily::WithLabels(std::initializer_list<absl::string_view> values) {
  return WithLabels(AsViews(values));
}
Counter& CounterFamily::WithLabels(absl::Span<const absl::string_view> values) {
  CheckLabelCount(values.size());
  return children_.GetOrCreate(values);
}
Counter& CounterFamily::WithLabels(absl::Span<const std::string> values) {
  CheckLabelCount(values.size());
  return children_.GetOrCreate(values);
}

void CounterFamily::AppendText(std::string* out) const {
  AppendHeader(out, name(), help(), type());
  children_.ForEach([&](const std::vector<std::string>& values, const Counter& counter) {
    AppendSample(out, name(), label_names(), values, absl::StrCat(counter.value()));
  });
}

GaugeFamily::GaugeFamily(std::string name, std::string help, std::vector<std::string> label_names)
    : Family(std::move(name), std::move(help), MetricType::kGauge, std::move(label_names)) {}

Gauge& GaugeFamily::WithLabels(std::initializer_list<absl::string_view> values) {
  return WithLabels(AsViews(values));
}
Gauge& GaugeFamily::WithLabels(absl::Span<const absl::string_view> values) {
  CheckLabelCount(values.size());
  return children_.GetOrCreate(values);
}
Gauge& GaugeFamily::WithLabels(absl::Span<const std::string> values) {
  CheckLabelCount(values.size());
  return children_.GetOrCreate(values);
}

void GaugeFamily::AppendText(std::string* out) const {
  AppendHeader(out, name(), help(), type());
  children_.ForEach([&](const std::vector<std::string>& values, const Gauge& gauge) {
    AppendSample(out, name(), label_names(), values, FormatValue(gauge.value()));
  });
}

HistogramFamily::HistogramFamily(std::string name, std::string help, std::vector<std::string> label_names,
                                 std::vector<double> upper_bounds)
    : Family(std::move(name), std::move(help), MetricType::kHistogram, std::move(label_names)),
      upper_bounds_(std::make_shared<const std::vector<double>>(std::move(upper_bounds))) {}

Histogram& HistogramFamily::WithLabels(std::initializer_list<absl::string_view> values) {
  return WithLabels(AsViews(values));
}
Histogram& HistogramFamily::WithLabels(absl::Span<const absl::string_view> values) {
  CheckLabelCount(values.size());
  return children_.GetOrCreate(values, upper_bounds_);
}
Histogram& HistogramFamily::WithLabels(absl::Span<const std::string> values) {
  CheckLabelCount(values.size());
  return children_.GetOrCreate(values, upper_bounds_);
}

void HistogramFamily::AppendText(std::string* out) const {
  AppendHeader(out, name(), help(), type());
  const std::string bucket_name = absl::StrCat(name(), "_bucket");
  const std::string sum_name = absl::StrCat(name(), "_sum");
  const std::string count_name = absl::StrCat(name(), "_count");
  std::vector<std::string> le_values;
  le_values.reserve(upper_bounds_->size() + 1);
  for (double bound : *upper_bounds_) le_values.push_back(FormatValue(bound));
  le_values.push_back("+Inf");
  children_.ForEach([&](const std::vector<std::string>& values, const Histogram& histogram) {
    // Sum first: an observation racing with this scrape then shows up in the
    // counts rather than only in the sum.
    double sum = histogram.sum();
    std::vector<uint64_t> cumulative = histogram.CumulativeCounts();
    for (size_t i = 0; i < cumulative.size(); ++i) {
      AppendSample(out, bucket_name, label_names(), values, absl::StrCat(cumulative[i]), le_values[i]);
    }
    AppendSample(out, sum_name, label_names(), values, FormatValue(sum));
    AppendSample(out, count_name, label_names(), values, absl::StrCat(cumulative.back()));
  });
}

// ---------------------------------------------------------------------------
// Registry

Registry::Registry() = default;
Registry::~Registry() = default;

absl::StatusOr<Family*> Registry::FindCompatible(const Family& candidate) const {
  const std::string& name = candidate.name();
  // 1. The candidate's own name.
  if (auto it = families_.find(name); it != families_.end()) {
    const Family& existing = *it->second;
    bool callback = dynamic_cast<const CallbackFamily*>(&existing) != nullptr ||
                    dynamic_cast<const CallbackFamily*>(&candidate) != nullptr;
    if (callback || !SameDefinition(existing, candidate)) {
      return absl::AlreadyExistsError(absl::StrCat("metric ", name,
                                                   " is already registered with a different definition "
                                                   "(type, help, label names, buckets, or as a callback)"));
    }
    return it->second.get();
  }
  // 2. A histogram's extra series must not be taken by other families...
  if (candidate.type() == MetricType::kHistogram) {
    for (absl::string_view suffix : kHistogramSuffixes) {
      std::string series = absl::StrCat(name, suffix);
      if (families_.find(series) != families_.end()) {
        return absl::AlreadyExistsError(
            absl::StrCat("histogram ", name, " would expose series ", series, ", which is already a metric"));
      }
    }
  }
  // 3. ...and a new family must not take an existing histogram's series.
  for (absl::string_view suffix : kHistogramSuffixes) {
    if (!absl::EndsWith(name, suffix)) continue;
    absl::string_view base = absl::string_view(name).substr(0, name.size() - suffix.size());
    auto it = families_.find(base);
    if (it != families_.end() && it->second->type() == MetricType::kHistogram) {
      return absl::AlreadyExistsError(
          absl::StrCat("metric ", name, " collides with a series of histogram ", base));
    }
  }
  return nullptr;
}

template <typename F>
absl::StatusOr<F*> Registry::Insert(std::unique_ptr<F> family) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Family*> existing = FindCompatible(*family);
  if (!existing.ok()) return existing.status();
  if (*existing != nullptr) {
    // SameDefinition() compared types, and callback families never match, so
    // the existing family has the dynamic type F.
    return static_cast<F*>(*existing);
  }
  F* raw = family.get();
  families_.emplace(raw->name(), std::move(family));
  return raw;
}

absl::StatusOr<CounterFamily*> Registry::AddCounter(absl::string_view name, absl::string_view help,
                                                    std::vector<std::string> label_names) {
  if (absl::Status s = ValidateDefinition(name, label_names, /*histogram=*/false); !s.ok()) return s;
  bool unlabeled = label_names.empty();
  absl::StatusOr<CounterFamily*> family = Insert(std::unique_ptr<CounterFamily>(
      new CounterFamily(std::string(name), std::string(help), std::move(label_names))));
  if (family.ok() && unlabeled) (*family)->WithLabels();
  return family;
}

absl::StatusOr<GaugeFamily*> Registry::AddGauge(absl::string_view name, absl::string_view help,
                                                std::vector<std::string> label_names) {
  if (absl::Status s = ValidateDefinition(name, label_names, /*histogram=*/false); !s.ok()) return s;
  bool unlabeled = label_names.empty();
  absl::StatusOr<GaugeFamily*> family = Insert(
      std::unique_ptr<GaugeFamily>(new GaugeFamily(std::string(name), std::string(help), std::move(label_names))));
  if (family.ok() && unlabeled) (*family)->WithLabels();
  return family;
}

absl::StatusOr<HistogramFamily*> Registry::AddHistogram(absl::string_view name, absl::string_view help,
                                                        std::vector<std::string> label_names,
                                                        std::vector<double> upper_bounds) {
  if (absl::Status s = ValidateDefinition(name, label_names, /*histogram=*/true); !s.ok()) return s;
  if (absl::Status s = ValidateBounds(name, upper_bounds); !s.ok()) return s;
  bool unlabeled = label_names.empty();
  absl::StatusOr<HistogramFamily*> family = Insert(std::unique_ptr<HistogramFamily>(new HistogramFamily(
      std::string(name), std::string(help), std::move(label_names), std::move(upper_bounds))));
  if (family.ok() && unlabeled) (*family)->WithLabels();
  return family;
}

absl::Status Registry::AddCallbackGauge(absl::string_view name, absl::string_view help,
                                        std::vector<std::string> label_names, SampleCallback collect) {
  if (absl::Status s = ValidateDefinition(name, label_names, /*histogram=*/false); !s.ok()) return s;
  if (!collect) return absl::InvalidArgumentError(absl::StrCat("metric ", name, ": callback is empty"));
  return Insert(std::make_unique<CallbackFamily>(std::string(name), std::string(help), MetricType::kGauge,
                                                 std::move(label_names), std::move(collect)))
      .status();
}

absl::Status Registry::AddCallbackCounter(absl::string_view name, absl::string_view help,
                                          std::vector<std::string> label_names, SampleCallback collect) {
  if (absl::Status s = ValidateDefinition(name, label_names, /*histogram=*/false); !s.ok()) return s;
  if (!collect) return absl::InvalidArgumentError(absl::StrCat("metric ", name, ": callback is empty"));
  return Insert(std::make_unique<CallbackFamily>(std::string(name), std::string(help), MetricType::kCounter,
                                                 std::move(label_names), std::move(collect)))
      .status();
}

std::string Registry::ExposePrometheus() const {
  // Families are never removed, so the pointers outlive the lock; rendering
  // (and running callbacks) happens without it.
  std::vector<const Family*> families;
  {
    absl::ReaderMutexLock lock(&mu_);
    families.reserve(families_.size());
    for (const auto& [name, family] : families_) families.push_back(family.get());
  }
  std::string out;
  out.reserve(families.size() * 256);
  for (const Family* family : families) family->AppendText(&out);
  return out;
}

}  // namespace gangkeeper::metrics
