// gangkeeper: counters, gauges and histograms with fixed label sets, exposed in
// the Prometheus text format 0.0.4.
//
// Modules receive a `Registry&` at construction (there is no global registry),
// register their metric families once at start-up, resolve the children they
// need with `WithLabels(...)`, and keep the returned references. On the request
// path they only call `Increment`/`Set`/`Observe`, which are lock-free atomic
// operations. The API server calls `ExposePrometheus()` for `GET /metrics`.
//
// Thread contract: everything here is thread-safe. Registration and
// `WithLabels` take a mutex (`WithLabels` takes it shared and allocates nothing
// when the child already exists); updates to a child never lock. References to
// families and children stay valid for the lifetime of the Registry.
//
// Example:
//   GK_ASSIGN_OR_RETURN(metrics::CounterFamily* requests,
//       registry.AddCounter("gangkeeper_http_requests_total", "HTTP requests served.",
//                           {"listener", "path", "code"}));
//   metrics::Counter& ok = requests->WithLabels({"webhook", "/mutate", "200"});
//   ok.Increment();
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace gangkeeper::metrics {

// The Content-Type of ExposePrometheus() output.
inline constexpr absl::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { kCounter, kGauge, kHistogram };

// A monotonically increasing 64-bit count. Thread-safe; lock-free.
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  void Increment(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A value that can go up and down. Thread-safe; lock-free (Add is a
// compare-and-swap loop).
class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta);
  void Sub(double delta) { Add(-delta); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Counts observations into buckets with fixed inclusive upper bounds (`le`),
// plus an implicit +Inf bucket, and keeps their sum. Thread-safe; lock-free.
// A NaN observation lands in the +Inf bucket and makes the sum NaN.
class Histogram {
 public:
  // `upper_bounds` must be finite and strictly increasing (AddHistogram
  // checks this before constructing any Histogram).
  explicit Histogram(std::shared_ptr<const std::vector<double>> upper_bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void Observe(double value);

  const std::vector<double>& upper_bounds() const { return *upper_bounds_; }
  // Number of observations (equals the +Inf bucket).
  uint64_t count() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }
  // Cumulative counts, one per upper bound followed by the +Inf bucket:
  // element i counts observations <= upper_bounds()[i].
  std::vector<uint64_t> CumulativeCounts() const;

 private:
  std::shared_ptr<const std::vector<double>> upper_bounds_;
  // Non-cumulative per-bucket counts; upper_bounds_->size() + 1 entries.
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0.0};
};

// Bucket bounds in seconds for request latencies: 100µs … 10s.
std::vector<double> LatencyBuckets();
// `count` bounds: start, start*factor, start*factor², …. Returns an empty
// vector (which AddHistogram rejects) unless start > 0, factor > 1, count >= 1.
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// One sample produced by a callback family at scrape time.
struct Sample {
  std::vector<std::string> label_values;  // one per label name, in order
  double value = 0;
};
// Computes the samples of a callback family. Called on every scrape, possibly
// from several threads at once, without any registry lock held; must be
// thread-safe and must not block for long. Returning no samples is fine (the
// family then shows only its HELP and TYPE lines).
using SampleCallback = std::function<std::vector<Sample>()>;

namespace metrics_internal {

// Orders label-value tuples lexicographically; compares any two ranges of
// string-like elements so that lookups need no allocation.
struct LabelValuesLess {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return std::lexicographical_compare(
        a.begin(), a.end(), b.begin(), b.end(),
        [](absl::string_view x, absl::string_view y) { return x < y; });
  }
};

// The children of one family, keyed by label values, in label-value order.
// Children are never removed, so references to them stay valid. Thread-safe.
template <typename T>
class Children {
 public:
  // Returns the child for `values`, constructing it as T(args...) on first use.
  template <typename V, typename... Args>
  T& GetOrCreate(absl::Span<const V> values, const Args&... args) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::ReaderMutexLock lock(&mu_);
      auto it = map_.find(values);
      if (it != map_.end()) return it->second;
    }
    absl::MutexLock lock(&mu_);
    auto it = map_.find(values);
    if (it == map_.end()) {
      it = map_.try_emplace(std::vector<std::string>(values.begin(), values.end()), args...).first;
    }
    return it->second;
  }

  // Calls fn(label_values, child) for every child in label-value order, with
  // a shared lock held (fn must not create children of this family).
  template <typename Fn>
  void ForEach(Fn&& fn) const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [values, child] : map_) fn(values, child);
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, T, LabelValuesLess> map_ ABSL_GUARDED_BY(mu_);
};

}  // namespace metrics_internal

// A named metric with a fixed list of label names. Owned by the Registry.
// Thread-safe.
class Family {
 public:
  virtual ~Family() = default;
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

 protected:
  Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names);
  // GK_CHECKs that `count` label values were given.
  void CheckLabelCount(size_t count) const;

 private:
  friend class Registry;
  // Appends the HELP, TYPE and sample lines of this family to `out`.
  virtual void AppendText(std::string* out) const = 0;

  std::string name_;
  std::string help_;
  MetricType type_;
  std::vector<std::string> label_names_;
};

// WithLabels contract for the three family types below: pass exactly one value
// per label name, in the order the label names were registered (a family
// without labels takes `WithLabels()`). A wrong number of values is a
// programming error and aborts via GK_CHECK. Label values may be any UTF-8
// text; they are escaped on exposition. Each distinct tuple of values creates
// a child that lives as long as the registry, so keep label values bounded
// (never user names, UIDs or object names).

// A family of Counters. Thread-safe.
class CounterFamily final : public Family {
 public:
  Counter& WithLabels(std::initializer_list<absl::string_view> values = {});
  Counter& WithLabels(absl::Span<const absl::string_view> values);
  Counter& WithLabels(absl::Span<const std::string> values);

 private:
  friend class Registry;
  CounterFamily(std::string name, std::string help, std::vector<std::string> label_names);
  void AppendText(std::string* out) const override;

  metrics_internal::Children<Counter> children_;
};

// A family of Gauges. Thread-safe.
class GaugeFamily final : public Family {
 public:
  Gauge& WithLabels(std::initializer_list<absl::string_view> values = {});
  Gauge& WithLabels(absl::Span<const absl::string_view> values);
  Gauge& WithLabels(absl::Span<const std::string> values);

 private:
  friend class Registry;
  GaugeFamily(std::string name, std::string help, std::vector<std::string> label_names);
  void AppendText(std::string* out) const override;

  metrics_internal::Children<Gauge> children_;
};

// A family of Histograms sharing one set of bucket bounds. Thread-safe.
class HistogramFamily final : public Family {
 public:
  Histogram& WithLabels(std::initializer_list<absl::string_view> values = {});
  Histogram& WithLabels(absl::Span<const absl::string_view> values);
  Histogram& WithLabels(absl::Span<const std::string> values);

  const std::vector<double>& upper_bounds() const { return *upper_bounds_; }

 private:
  friend class Registry;
  HistogramFamily(std::string name, std::string help, std::vector<std::string> label_names,
                  std::vector<double> upper_bounds);
  void AppendText(std::string* out) const override;

  std::shared_ptr<const std::vector<double>> upper_bounds_;
  metrics_internal::Children<Histogram> children_;
};

// Owns metric families and renders them. Passed by reference to every module
// that records metrics; outlives them. Thread-safe.
//
// Registration contract (all Add* methods):
// - InvalidArgument: the metric name does not match [a-zA-Z_:][a-zA-Z0-9_:]*;
//   a label name does not match [a-zA-Z_][a-zA-Z0-9_]*, starts with "__", or
//   is repeated; a histogram uses the label "le"; histogram bounds are empty,
//   not finite, or not strictly increasing (+Inf is always added implicitly).
// - AlreadyExists: the name is taken by a family with a different definition
//   (type, help, label names or bounds), by any callback family, or collides
//   with a histogram's `_bucket`/`_sum`/`_count` series.
// - Registering exactly the same definition again returns the existing
//   family, so two components may share one metric.
// Returned pointers are never null and live as long as the Registry.
// A family without labels has its single child from the start, so it is
// exposed with a zero value before first use.
class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  [[nodiscard]] absl::StatusOr<CounterFamily*> AddCounter(absl::string_view name, absl::string_view help,
                                                          std::vector<std::string> label_names = {});
  [[nodiscard]] absl::StatusOr<GaugeFamily*> AddGauge(absl::string_view name, absl::string_view help,
                                                      std::vector<std::string> label_names = {});
  [[nodiscard]] absl::StatusOr<HistogramFamily*> AddHistogram(absl::string_view name, absl::string_view help,
                                                              std::vector<std::string> label_names,
                                                              std::vector<double> upper_bounds);

  // Families whose samples are computed at scrape time by `collect` (see
  // SampleCallback), for values owned elsewhere: queue lengths in a snapshot,
  // process RSS. A returned sample with the wrong number of label values, or
  // a repeated label-value tuple, is dropped and reported with GK_BUG.
  [[nodiscard]] absl::Status AddCallbackGauge(absl::string_view name, absl::string_view help,
                                              std::vector<std::string> label_names, SampleCallback collect);
  [[nodiscard]] absl::Status AddCallbackCounter(absl::string_view name, absl::string_view help,
                                                std::vector<std::string> label_names, SampleCallback collect);

  // All families in the Prometheus text format 0.0.4 (kPrometheusContentType),
  // sorted by family name, children sorted by label values. Runs callbacks
  // without holding the registry lock.
  std::string ExposePrometheus() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Returns the existing family named `name` if it has the same definition
  // as `candidate`, nullptr if the name is free, or AlreadyExists.
  absl::StatusOr<Family*> FindCompatible(const Family& candidate) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  template <typename F>
  absl::StatusOr<F*> Insert(std::unique_ptr<F> family) ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  // Keyed by family name; iteration order is exposition order.
  std::map<std::string, std::unique_ptr<Family>, std::less<>> families_ ABSL_GUARDED_BY(mu_);
};

// Registers the standard process metrics, read from /proc/self on every
// scrape: process_resident_memory_bytes, process_virtual_memory_bytes,
// process_cpu_seconds_total, process_open_fds, process_max_fds and
// process_start_time_seconds. A value that cannot be read is left out of that
// scrape. Returns the registration error (AlreadyExists if called twice).
[[nodiscard]] absl::Status RegisterProcessMetrics(Registry& registry);

}  // namespace gangkeeper::metrics
