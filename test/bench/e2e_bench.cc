// gangkeeper: Kueue's scheduler-performance trace in REAL time, end to end
// (issue #11, "Real time, end to end"), on the real binary over real TLS on
// loopback:
//   - FakeKubeApi (an in-memory kube-apiserver over HTTPS, test/testing/)
//     plays the cluster; `gangkeeper serve --kube=KUBECONFIG` watches it and
//     releases Jobs by PATCHing them (suspend: false);
//   - every workload of the trace arrives at its time (from the start of the
//     run) as the API server would send it: AdmissionReview CREATE of a
//     batch/v1 Job to /mutate, the patch applied (it suspends the Job),
//     /validate, then the Job stored in the fake. Several client threads with
//     TLS keep-alive connections take the arrivals in order, so one slow
//     request does not delay the next arrival; how late each arrival was
//     sent is measured;
//   - the fake tells the bench about every request it handled (on_call):
//     a PATCH setting /spec/suspend false is a release (its time is the
//     fake's receipt), true a suspension (preemption). `runtime` after a
//     release the bench marks the Job complete in the fake (status:
//     Complete=True, succeeded, startTime, completionTime), as the Job
//     controller would, and gangkeeper's reconciler sees it through its
//     watch and frees the quota. A suspension cancels the pending
//     completion; the workload runs from zero when released again;
//   - when every workload has completed (or at --limit), gangkeeper's audit
//     log gives the workload.admitted times (release latency).
// Figures: makespan, ClusterQueue usage (Kueue's definition, see Report),
// time to admission per class, admission and release latency p50/p99,
// preemptions, arrival lateness, CPU by process.
//
// A plain program (it drives processes), built with -DGK_BUILD_BENCH=ON.
// Usage: gangkeeper_e2e_bench [--trace FILE] [--scale F] [--clients N]
//          [--limit SECONDS] [--json FILE] [--policies DIR] [--log-level L]
//          [--keep-dir]  (keeps the directory, with gangkeeper.log and releases.csv)
// Default trace: test/bench/kueue/baseline/generator.yaml (the source tree's).
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gangkeeper/model/encode.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/sim/trace.h"
#include "nlohmann/json.hpp"
#include "test/testing/fake_kube_api.h"
#include "test/testing/job_review.h"
#include "test/testing/process.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"

namespace gangkeeper {
namespace {

using nlohmann::json;

constexpr char kQueueLabel[] = "kueue.x-k8s.io/queue-name";
constexpr char kPriorityLabel[] = "kueue.x-k8s.io/priority-class";
constexpr char kAdminToken[] = "e2e-admin-secret";

// ---------------------------------------------------------------------------
// Small helpers

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

double Mean(const std::vector<double>& v) {
  if (v.empty()) return std::nan("");
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

std::string Rfc3339(absl::Time t) { return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone()); }

void NameThread(const char* name) { ::pthread_setname_np(::pthread_self(), name); }

// CPU seconds (user + system) by thread name of process `pid` ("self" for
// this one), from /proc/PID/task/*/stat.
std::map<std::string, double> CpuByThread(const std::string& pid) {
  std::map<std::string, double> out;
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  std::error_code ec;
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + pid + "/task", ec)) {
    if (++n > 4096) break;
    std::ifstream f(e.path() / "stat");
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t open = s.find('('), close = s.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    const std::string comm = s.substr(open + 1, close - open - 1);
    std::vector<std::string> fields = absl::StrSplit(s.substr(close + 2), ' ', absl::SkipEmpty());
    // After the comm: state is field 3, utime 14, stime 15 (1-based).
    if (fields.size() < 13) continue;
    double u = 0, st = 0;
    if (!absl::SimpleAtod(fields[11], &u) || !absl::SimpleAtod(fields[12], &st)) continue;
    out[comm] += (u + st) / tick;
  }
  return out;
}

// CPU seconds (user + system) of process `pid` ("self"), exited threads
// included, from /proc/PID/stat.
double ProcessCpu(const std::string& pid) {
  std::ifstream f("/proc/" + pid + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = s.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> fields = absl::StrSplit(s.substr(close + 2), ' ', absl::SkipEmpty());
  double u = 0, st = 0;
  if (fields.size() < 13 || !absl::SimpleAtod(fields[11], &u) || !absl::SimpleAtod(fields[12], &st)) return 0;
  return (u + st) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Machine-wide busy and total CPU seconds since boot (/proc/stat).
std::pair<double, double> MachineCpu() {
  std::ifstream f("/proc/stat");
  std::string line;
  std::getline(f, line);
  std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
  double total = 0, idle = 0;
  for (size_t i = 1; i < fields.size() && i <= 8; ++i) {
    double v = 0;
    if (!absl::SimpleAtod(fields[i], &v)) continue;
    total += v;
    if (i == 4 || i == 5) idle += v;  // idle, iowait
  }
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return {(total - idle) / tick, total / tick};
}

std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

// ---------------------------------------------------------------------------
// Options

struct Options {
  std::string trace = std::string(GK_SOURCE_DIR) + "/test/bench/kueue/baseline/generator.yaml";
  double scale = 1.0;
  int clients = 8;
  double limit_s = 600;
  std::string json_out;
  std::string policies;  // extra policy files (required for CSV / JSON Lines traces)
  std::string log_level = "warn";
  bool keep_dir = false;
};

// Kueue's own figures for one of its scheduler-performance shapes (the
// calibrated means in its test/performance/scheduler/configs/*/rangespec.yaml)
// and this bench's targets for that shape (issue #26).
struct KueueReference {
  std::string name;  // "baseline", "large-scale"; "" = no reference (another trace)
  double wall_s = 0;
  double usage_percent = 0;
  std::map<std::string, double> tta_s;  // mean time to admission per workload class
  double makespan_target_s = 0;         // whole trace only; 0 = none
  double release_p99_target_ms = 0;     // 0 = none
  double cpu_cores_target = 0;          // gangkeeper's mean CPU over the run; 0 = none
};

// The reference for `trace`, by the directory of a Kueue generator file
// (test/bench/kueue/<shape>/generator.yaml).
KueueReference ReferenceFor(const std::string& trace) {
  const std::string shape = std::filesystem::path(trace).parent_path().filename().string();
  if (shape == "baseline") {
    return {"baseline", 351.1, 55.9, {{"large", 16.5}, {"medium", 76.8}, {"small", 215.5}}, 85, 50, 0.5};
  }
  if (shape == "large-scale") {
    return {"large-scale", 1179.4, 38.6, {{"large", 105.6}, {"medium", 256.4}, {"small", 700.4}}, 300, 0, 0};
  }
  return {};
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string* out) {
      const size_t eq = a.find('=');
      if (eq != std::string::npos) {
        *out = a.substr(eq + 1);
        return true;
      }
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    auto flag = [&](const char* name) { return a == name || absl::StartsWith(a, std::string(name) + "="); };
    std::string v;
    if (flag("--trace")) {
      if (!value(&o->trace)) return false;
    } else if (flag("--scale")) {
      if (!value(&v) || !absl::SimpleAtod(v, &o->scale) || !(o->scale > 0) || o->scale > 1) return false;
    } else if (flag("--clients")) {
      if (!value(&v) || !absl::SimpleAtoi(v, &o->clients) || o->clients < 1 || o->clients > 256) return false;
    } else if (flag("--limit")) {
      if (!value(&v) || !absl::SimpleAtod(v, &o->limit_s) || !(o->limit_s > 0)) return false;
    } else if (flag("--json")) {
      if (!value(&o->json_out)) return false;
    } else if (flag("--policies")) {
      if (!value(&o->policies)) return false;
    } else if (flag("--log-level")) {
      if (!value(&o->log_level)) return false;
    } else if (a == "--keep-dir") {
      o->keep_dir = true;
    } else {
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// The run

// One workload of the trace, as the bench follows it.
struct Workload {
  const sim::TraceWorkload* t = nullptr;
  std::string path;          // /apis/batch/v1/namespaces/NS/jobs/NAME
  std::string priority_label;  // WorkloadPriorityClass name, "" = none
  std::string pod_priority_class;  // PriorityClass name for the pod template, "" = none
  std::string cluster_queue;
  double cpu = 0;            // cpu of the whole gang (units)
  absl::Time scheduled;      // bench start + arrival
  absl::Time sent;           // /mutate sent (the API server's create began)
  absl::Time stored;         // stored in the fake
  bool created = false;
  std::string create_error;
  // Guarded by Bench::mu_:
  std::vector<absl::Time> releases;  // release PATCHes received by the fake
  std::vector<absl::Time> suspends;  // suspension PATCHes received after a release
  std::vector<absl::Time> gets;                // every GET of the Job (the actuator reads before it writes)
  bool running = false;
  absl::Time run_start;
  int generation = 0;        // bumped by each release and suspension: stale completions are dropped
  bool done = false;
  absl::Time completed;
  double cpu_seconds = 0;    // cpu × time held running (released → completed or suspended)
};

struct PatchEvent {
  bool get = false;  // a GET of the Job (the actuator reads before it patches)
  std::string path;
  std::string body;
  absl::Time received;
};

struct Completion {
  absl::Time due;
  size_t index;
  int generation;
  bool operator>(const Completion& o) const { return due > o.due; }
};

class Bench {
 public:
  explicit Bench(Options options) : options_(std::move(options)) {}

  ~Bench() {
    StopThreads();
    if (options_.keep_dir) {
      dir_.Keep();
      std::fprintf(stderr, "kept %s\n", dir_.path().c_str());
    }
  }

  int Main() {
    if (!LoadTrace()) return 1;
    if (!Setup()) return 1;
    Drive();
    Collect();
    Report();
    return 0;
  }

 private:
  // --- trace and policies --------------------------------------------------

  bool LoadTrace() {
    absl::StatusOr<sim::Trace> trace = sim::ReadTraceFile(options_.trace);
    if (!trace.ok()) {
      std::fprintf(stderr, "trace %s: %s\n", options_.trace.c_str(), std::string(trace.status().message()).c_str());
      return false;
    }
    trace_ = *std::move(trace);
    if (trace_.policies != nullptr) {
      policies_ = *trace_.policies;
      written_ = *trace_.policies;
    }
    if (!options_.policies.empty()) {
      // The extra policies, for the queue → ClusterQueue map, the nominal
      // quotas and the priority classes (serve reads them itself; the
      // final directory goes through check-policies below).
      absl::StatusOr<model::LoadResult> extra = model::LoadPolicies(options_.policies);
      if (!extra.ok()) {
        std::fprintf(stderr, "--policies %s: %s\n", options_.policies.c_str(),
                     std::string(extra.status().message()).c_str());
        return false;
      }
      model::PolicySet& e = extra->policies;
      policies_.flavors.merge(e.flavors);
      policies_.cluster_queues.merge(e.cluster_queues);
      policies_.local_queues.merge(e.local_queues);
      policies_.cohorts.merge(e.cohorts);
      policies_.workload_priority_classes.merge(e.workload_priority_classes);
      policies_.priority_classes.merge(e.priority_classes);
      policies_.namespaces.merge(e.namespaces);
    } else if (trace_.policies == nullptr) {
      std::fprintf(stderr, "%s has no policies (only Kueue generator files do): give --policies DIR\n",
                   options_.trace.c_str());
      return false;
    }
    // --scale: the first ceil(F × n) workloads of each (namespace, queue,
    // class) in arrival order; for Kueue generator files that is the first
    // F of each workloads set (each set cycles through its templates).
    std::map<std::tuple<std::string, std::string, std::string>, std::vector<const sim::TraceWorkload*>> groups;
    for (const sim::TraceWorkload& w : trace_.workloads) {
      groups[{w.namespace_name, w.queue, w.class_name}].push_back(&w);
    }
    std::vector<const sim::TraceWorkload*> kept;
    for (auto& [key, list] : groups) {
      std::stable_sort(list.begin(), list.end(),
                       [](const sim::TraceWorkload* a, const sim::TraceWorkload* b) { return a->arrival_ms < b->arrival_ms; });
      const size_t keep = static_cast<size_t>(std::ceil(options_.scale * static_cast<double>(list.size()) - 1e-9));
      kept.insert(kept.end(), list.begin(), list.begin() + static_cast<std::ptrdiff_t>(std::min(keep, list.size())));
    }
    std::stable_sort(kept.begin(), kept.end(), [](const sim::TraceWorkload* a, const sim::TraceWorkload* b) {
      return a->arrival_ms < b->arrival_ms;
    });
    // Integer priorities become WorkloadPriorityClasses p<value> (Kueue's
    // generator sets Workload.spec.priority directly; gangkeeper reads a
    // Job's priority from the kueue.x-k8s.io/priority-class label).
    for (const sim::TraceWorkload* t : kept) {
      Workload w;
      w.t = t;
      w.path = absl::StrCat("/apis/batch/v1/namespaces/", t->namespace_name, "/jobs/", t->name);
      if (!t->priority_class.empty()) {
        if (policies_.workload_priority_classes.count(t->priority_class) != 0) {
          w.priority_label = t->priority_class;
        } else {
          w.pod_priority_class = t->priority_class;
        }
      } else {
        const std::string name = t->priority >= 0 ? absl::StrCat("p", t->priority) : absl::StrCat("pm", -int64_t{t->priority});
        if (policies_.workload_priority_classes.count(name) == 0) {
          model::WorkloadPriorityClass pc;
          pc.meta.name = name;
          pc.meta.api_version = "kueue.x-k8s.io/v1beta1";
          pc.value = t->priority;
          pc.description = "gangkeeper_e2e_bench: the trace's integer priority";
          policies_.workload_priority_classes[name] = pc;
          written_.workload_priority_classes[name] = pc;
          generated_priority_classes_.push_back(name);
        }
        w.priority_label = name;
      }
      for (const workload::PodSet& ps : t->pod_sets) {
        auto cpu = ps.requests.find("cpu");
        if (cpu != ps.requests.end()) {
          w.cpu += static_cast<double>(ps.count) * static_cast<double>(cpu->second.milli()) / 1000.0;
        }
      }
      auto lq = policies_.local_queues.find({t->namespace_name, t->queue});
      w.cluster_queue = lq != policies_.local_queues.end() ? lq->second.cluster_queue : "";
      workloads_.push_back(std::move(w));
    }
    for (size_t i = 0; i < workloads_.size(); ++i) index_[workloads_[i].path] = i;
    if (index_.size() != workloads_.size()) {
      std::fprintf(stderr, "the trace names two workloads the same in one namespace\n");
      return false;
    }
    return !workloads_.empty();
  }

  // --- processes -----------------------------------------------------------

  bool Setup() {
    auto certs = testing::RunCommand({testing::GangkeeperBinary(), "certs", "--out", dir_.File("certs")},
                                     absl::Seconds(60));
    if (!certs.ok() || certs->exit_code != 0) {
      std::fprintf(stderr, "gangkeeper certs failed\n");
      return false;
    }
    // Policies: the trace's and the generated WorkloadPriorityClasses as
    // one manifest file, plus a copy of --policies.
    std::filesystem::create_directories(dir_.File("policies"));
    std::ofstream(dir_.File("policies/trace.json")) << model::EncodeManifests(written_);
    if (!options_.policies.empty()) {
      std::error_code ec;
      std::filesystem::copy(options_.policies, dir_.File("policies/extra"),
                            std::filesystem::copy_options::recursive, ec);
    }
    auto check = testing::RunCommand({testing::GangkeeperBinary(), "check-policies", dir_.File("policies")},
                                     absl::Seconds(60));
    if (!check.ok() || check->exit_code != 0) {
      std::fprintf(stderr, "gangkeeper check-policies refused the policies:\n%s%s\n",
                   check.ok() ? check->out.c_str() : "", check.ok() ? check->err.c_str() : "");
      return false;
    }
    json tokens = json::array({{{"name", "e2e-bench"}, {"sha256", testing::Sha256Hex(kAdminToken)}, {"role", "admin"}}});
    std::ofstream(dir_.File("tokens.json")) << tokens.dump();

    testing::FakeKubeOptions fo;
    fo.cert_file = dir_.File("certs/tls.crt");
    fo.key_file = dir_.File("certs/tls.key");
    // About 3 events per workload (ADDED, release, completion): keep every
    // event of a baseline run so that a slow watch is never sent 410.
    fo.history = std::max<size_t>(10000, workloads_.size() * 4);
    fo.on_call = [this](const testing::RecordedCall& c, absl::Time received) { OnCall(c, received); };
    // gangkeeper's watches (one per kind) and pooled connections (its 24
    // actuator workers, Event writers, ...) and the bench's own clients:
    // a thread for each, so that none waits for the fake's pool.
    fo.threads = 128;
    auto fake = testing::FakeKubeApi::Start(fo);
    if (!fake.ok()) {
      std::fprintf(stderr, "fake API server: %s\n", std::string(fake.status().message()).c_str());
      return false;
    }
    fake_ = *std::move(fake);
    // The Namespaces, as a cluster has them (gangkeeper takes namespace
    // labels from the policies; the objects are there for realism).
    std::set<std::string> namespaces;
    for (const Workload& w : workloads_) namespaces.insert(w.t->namespace_name);
    for (const std::string& ns : namespaces) {
      json obj = {{"apiVersion", "v1"},
                  {"kind", "Namespace"},
                  {"metadata", {{"name", ns}, {"labels", {{"kubernetes.io/metadata.name", ns}}}}}};
      (void)fake_->Create("/api/v1/namespaces", obj);
    }
    std::ofstream(dir_.File("kubeconfig")) << "apiVersion: v1\nkind: Config\ncurrent-context: e2e\n"
                                           << "clusters:\n- name: fake\n  cluster:\n    server: " << fake_->url()
                                           << "\n    certificate-authority: " << dir_.File("certs/ca.crt") << "\n"
                                           << "users:\n- name: gk\n  user:\n    token: fake-token\n"
                                           << "contexts:\n- name: e2e\n  context:\n    cluster: fake\n    user: gk\n";

    events_thread_ = std::thread([this] { EventLoop(); });
    completer_thread_ = std::thread([this] { CompletionLoop(); });

    auto p = testing::ServerProcess::Start(
        {"--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0", "--tls-cert=" + dir_.File("certs/tls.crt"),
         "--tls-key=" + dir_.File("certs/tls.key"), "--data-dir=" + dir_.File("data"),
         "--policies=" + dir_.File("policies"), "--kube=" + dir_.File("kubeconfig"),
         "--tokens=" + dir_.File("tokens.json"), "--drain-delay=0s", "--log-level=" + options_.log_level},
        dir_.path(), absl::Seconds(60));
    if (!p.ok()) {
      std::fprintf(stderr, "gangkeeper serve: %s\n", std::string(p.status().message()).c_str());
      return false;
    }
    server_ = *std::move(p);
    tls_.ca_file = dir_.File("certs/ca.crt");
    // Ready once the policies are loaded and the reconciler's first list is done.
    bool ready = false;
    for (int i = 0; i < 600 && !ready; ++i) {
      auto api = testing::TlsConnection::Connect(server_->api_port(), tls_);
      if (api.ok()) {
        auto r = (*api)->Request("GET", "/readyz");
        ready = r.ok() && r->status == 200;
      }
      if (!ready) absl::SleepFor(absl::Milliseconds(100));
    }
    if (!ready) {
      std::fprintf(stderr, "gangkeeper never became ready; stderr:\n%s\n", server_->Stderr().c_str());
      return false;
    }
    return true;
  }

  void StopThreads() {
    stopping_.store(true);
    events_cv_.notify_all();
    completions_cv_.notify_all();
    if (events_thread_.joinable()) events_thread_.join();
    if (completer_thread_.joinable()) completer_thread_.join();
  }

  // --- what the fake saw -----------------------------------------------------

  // On the fake's worker thread: as little as possible.
  void OnCall(const testing::RecordedCall& c, absl::Time received) {
    calls_.fetch_add(1, std::memory_order_relaxed);
    if (c.method == "GET" && c.status == 404) get_404_.fetch_add(1, std::memory_order_relaxed);
    if (c.status >= 400 && !(c.method == "GET" && c.status == 404)) api_errors_.fetch_add(1, std::memory_order_relaxed);
    const bool get = c.method == "GET" && c.status == 200 && c.query.empty();
    if (c.method != "PATCH" && !get) return;
    if (!get) patches_.fetch_add(1, std::memory_order_relaxed);
    if (c.status != 200 || absl::EndsWith(c.path, "/status")) return;
    {
      std::lock_guard<std::mutex> lock(events_mu_);
      events_.push_back(PatchEvent{get, c.path, get ? std::string() : c.body, received});
    }
    events_cv_.notify_one();
  }

  void EventLoop() {
    NameThread("e2e-events");
    std::deque<PatchEvent> batch;
    for (int64_t round = 0; round < 100'000'000; ++round) {
      {
        std::unique_lock<std::mutex> lock(events_mu_);
        events_cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return !events_.empty() || stopping_.load(); });
        if (events_.empty() && stopping_.load()) return;
        batch.swap(events_);
      }
      for (const PatchEvent& e : batch) Handle(e);
      batch.clear();
    }
  }

  void Handle(const PatchEvent& e) {
    auto it = index_.find(e.path);
    if (it == index_.end()) return;
    if (e.get) {
      std::lock_guard<std::mutex> lock(mu_);
      workloads_[it->second].gets.push_back(e.received);
      return;
    }
    json ops = json::parse(e.body, nullptr, false);
    if (!ops.is_array()) return;  // the actuator sends JSON patches
    std::optional<bool> suspend;
    for (const json& op : ops) {
      if (op.is_object() && op.value("path", "") == "/spec/suspend" && op.contains("value") && op["value"].is_boolean()) {
        suspend = op["value"].get<bool>();
      }
    }
    if (!suspend.has_value()) return;
    Workload& w = workloads_[it->second];
    std::lock_guard<std::mutex> lock(mu_);
    if (w.done) {
      (*suspend ? suspended_after_completion_ : released_after_completion_)++;
      return;
    }
    if (!*suspend) {
      if (w.running) {
        ++double_releases_;
        return;
      }
      w.releases.push_back(e.received);
      w.running = true;
      w.run_start = e.received;
      ++w.generation;
      {
        std::lock_guard<std::mutex> c(completions_mu_);
        completions_.push(Completion{e.received + absl::Milliseconds(w.t->runtime_ms), it->second, w.generation});
      }
      completions_cv_.notify_one();
    } else {
      if (!w.running) return;  // suspending a suspended Job changes nothing
      w.suspends.push_back(e.received);
      w.running = false;
      w.cpu_seconds += w.cpu * absl::ToDoubleSeconds(e.received - w.run_start);
      ++w.generation;  // the pending completion is dropped
    }
  }

  // The Job controller: `runtime` after the release, the Job completes.
  void CompletionLoop() {
    NameThread("e2e-complete");
    for (int64_t round = 0; round < 100'000'000; ++round) {
      Completion next{};
      {
        std::unique_lock<std::mutex> lock(completions_mu_);
        if (stopping_.load()) return;
        if (completions_.empty()) {
          completions_cv_.wait_for(lock, std::chrono::milliseconds(100));
          continue;
        }
        next = completions_.top();
        const absl::Duration wait = next.due - absl::Now();
        if (wait > absl::ZeroDuration()) {
          completions_cv_.wait_for(lock, std::chrono::microseconds(
                                             std::min<int64_t>(absl::ToInt64Microseconds(wait) + 1, 100'000)));
          continue;
        }
        completions_.pop();
      }
      Complete(next);
    }
  }

  void Complete(const Completion& c) {
    Workload& w = workloads_[c.index];
    absl::Time started;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (w.generation != c.generation || !w.running || w.done) return;  // preempted meanwhile
      started = w.run_start;
    }
    absl::StatusOr<json> obj = fake_->Get(w.path);
    if (!obj.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++completion_errors_;
      return;
    }
    if ((*obj)["spec"].value("suspend", false)) return;  // suspended: its PATCH event is on its way
    const absl::Time now = absl::Now();
    int64_t pods = 0;
    for (const workload::PodSet& ps : w.t->pod_sets) pods += ps.count;
    (*obj)["status"] = {{"startTime", Rfc3339(started)},
                        {"completionTime", Rfc3339(now)},
                        {"succeeded", pods},
                        {"active", 0},
                        {"conditions", json::array({{{"type", "Complete"},
                                                     {"status", "True"},
                                                     {"lastProbeTime", Rfc3339(now)},
                                                     {"lastTransitionTime", Rfc3339(now)}}})}};
    absl::StatusOr<json> replaced = fake_->Replace(w.path, *std::move(obj));
    std::lock_guard<std::mutex> lock(mu_);
    if (!replaced.ok()) {
      ++completion_errors_;
      return;
    }
    completion_lateness_ms_.push_back(Ms(now - c.due));
    if (w.generation != c.generation || !w.running) {
      // A suspension PATCH came between the Get and the Replace: the Job is
      // complete in the fake (the Replace wrote its own spec), so it is done.
      ++completion_races_;
    } else {
      w.cpu_seconds += w.cpu * absl::ToDoubleSeconds(now - w.run_start);
    }
    w.running = false;
    w.done = true;
    w.completed = now;
    ++done_;
    done_cv_.notify_all();
  }

  // --- the arrivals ----------------------------------------------------------

  static json MakeJob(const Workload& w, const std::string& uid) {
    const sim::TraceWorkload& t = *w.t;
    json labels = {{kQueueLabel, t.queue}};
    if (!w.priority_label.empty()) labels[kPriorityLabel] = w.priority_label;
    // One pod set (Kueue's generator makes one, "main"): several pod sets
    // of a trace are summed into one Job only when they share the shape,
    // else the first one is used (the Kueue traces have exactly one).
    const workload::PodSet& ps = t.pod_sets.front();
    json requests = json::object();
    for (const auto& [res, q] : ps.requests) requests[res] = q.Format();
    json pod_spec = {{"restartPolicy", "Never"},
                     {"containers", json::array({{{"name", "main"},
                                                  {"image", "registry.k8s.io/pause:3.9"},
                                                  {"resources", {{"requests", requests}, {"limits", requests}}}}})}};
    if (!w.pod_priority_class.empty()) pod_spec["priorityClassName"] = w.pod_priority_class;
    json spec = {{"parallelism", ps.count},
                 {"completions", ps.count},
                 {"suspend", false},  // the API server's default, before /mutate
                 {"backoffLimit", 6},
                 {"completionMode", "NonIndexed"}};
    spec["template"] = {{"metadata", {{"labels", {{"app", t.name}}}}}, {"spec", pod_spec}};
    json job = {{"apiVersion", "batch/v1"}, {"kind", "Job"}};
    job["metadata"] = {{"name", t.name}, {"namespace", t.namespace_name}, {"uid", uid}, {"labels", labels}};
    job["spec"] = std::move(spec);
    return job;
  }

  // One arrival, as the API server handles a create: /mutate, its patch,
  // /validate, store. Returns "" or what went wrong.
  std::string Submit(Workload& w, std::unique_ptr<testing::TlsConnection>& conn, int64_t serial) {
    const std::string uid = absl::StrCat("e2e-", serial, "-", w.t->namespace_name, "-", w.t->name);
    json job = MakeJob(w, uid);
    auto exchange = [&](const std::string& path, const json& review) -> absl::StatusOr<json> {
      const std::string body = review.dump();
      for (int attempt = 0; attempt < 3; ++attempt) {
        if (conn == nullptr) {
          auto c = testing::TlsConnection::Connect(server_->webhook_port(), tls_);
          if (!c.ok()) continue;
          conn = *std::move(c);
        }
        auto r = conn->Request("POST", path, body);
        if (!r.ok()) {
          conn.reset();
          reconnects_.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        if (r->status != 200) return absl::InternalError(absl::StrCat(path, " answered ", r->status, ": ", r->body));
        if (r->headers.find("onnection: close") != std::string::npos) conn.reset();
        json answer = json::parse(r->body, nullptr, false);
        if (!answer.is_object() || !answer.contains("response")) return absl::InternalError(path + ": bad answer");
        return answer["response"];
      }
      return absl::UnavailableError(path + ": no answer after 3 attempts");
    };
    auto m = exchange("/mutate", testing::Review("CREATE", uid + "-m", w.t->namespace_name, w.t->name, job, nullptr));
    if (!m.ok()) return std::string(m.status().message());
    if (!m->value("allowed", false)) return "/mutate denied: " + m->dump();
    if (m->contains("patch")) {
      std::string patch;
      if (!absl::Base64Unescape((*m)["patch"].get<std::string>(), &patch)) return "/mutate: patch is not base64";
      try {
        job = job.patch(json::parse(patch));
      } catch (const std::exception& e) {
        return absl::StrCat("/mutate patch does not apply: ", e.what());
      }
    }
    auto v = exchange("/validate", testing::Review("CREATE", uid + "-v", w.t->namespace_name, w.t->name, job, nullptr));
    if (!v.ok()) return std::string(v.status().message());
    if (!v->value("allowed", false)) return "/validate denied: " + v->dump();
    auto stored = fake_->Create(absl::StrCat("/apis/batch/v1/namespaces/", w.t->namespace_name, "/jobs"), job);
    if (!stored.ok()) return absl::StrCat("store: ", stored.status().message());
    if (!(*stored)["spec"].value("suspend", false)) return "stored Job is not suspended: /mutate did not suspend it";
    return "";
  }

  void Drive() {
    start_ = absl::Now() + absl::Milliseconds(200);  // trace time 0
    machine_before_ = MachineCpu();
    bench_cpu_before_ = ProcessCpu("self");
    gk_total_before_ = ProcessCpu(std::to_string(server_->pid()));
    gk_cpu_before_ = CpuByThread(std::to_string(server_->pid()));
    for (Workload& w : workloads_) w.scheduled = start_ + absl::Milliseconds(w.t->arrival_ms);
    std::atomic<size_t> next{0};
    std::vector<std::thread> clients;
    std::mutex errors_mu;
    for (int c = 0; c < options_.clients; ++c) {
      clients.emplace_back([&] {
        NameThread("e2e-client");
        std::unique_ptr<testing::TlsConnection> conn;
        for (size_t round = 0; round < workloads_.size(); ++round) {
          const size_t i = next.fetch_add(1);
          if (i >= workloads_.size()) return;
          Workload& w = workloads_[i];
          const absl::Duration wait = w.scheduled - absl::Now();
          if (wait > absl::ZeroDuration()) absl::SleepFor(wait);
          w.sent = absl::Now();
          std::string err = Submit(w, conn, static_cast<int64_t>(i));
          w.stored = absl::Now();
          if (err.empty()) {
            w.created = true;
          } else {
            w.create_error = err;
            std::lock_guard<std::mutex> lock(errors_mu);
            if (++create_errors_ <= 5) std::fprintf(stderr, "%s/%s: %s\n", w.t->namespace_name.c_str(), w.t->name.c_str(), err.c_str());
          }
        }
      });
    }
    for (std::thread& t : clients) t.join();
    size_t created = 0;
    for (const Workload& w : workloads_) created += w.created ? 1 : 0;
    // Every created workload completes, or the limit.
    const absl::Time deadline = start_ + absl::Seconds(options_.limit_s);
    std::unique_lock<std::mutex> lock(mu_);
    for (int round = 0; round < 1'000'000 && done_ < created && absl::Now() < deadline; ++round) {
      done_cv_.wait_for(lock, std::chrono::milliseconds(200));
    }
    finished_ = absl::Now();
    timed_out_ = done_ < created;
  }

  // --- after the run -----------------------------------------------------------

  json ApiGet(const std::string& path) {
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto c = testing::TlsConnection::Connect(server_->api_port(), tls_);
      if (!c.ok()) continue;
      auto r = (*c)->Request("GET", path, "", absl::StrCat("Authorization: Bearer ", kAdminToken, "\r\n"));
      if (!r.ok() || r->status != 200) continue;
      return json::parse(r->body, nullptr, false);
    }
    return json();
  }

  // Every audit event of `action`: (namespace/name) -> times, oldest first.
  std::map<std::string, std::vector<absl::Time>> AuditTimes(const std::string& action, int64_t* count) {
    std::map<std::string, std::vector<absl::Time>> out;
    std::string cursor;
    for (int page = 0; page < 10000; ++page) {
      json p = ApiGet(absl::StrCat("/v1/audit?action=", action, "&limit=1000", cursor.empty() ? "" : "&cursor=" + cursor));
      if (!p.is_object() || !p.contains("items")) {
        audit_error_ = true;
        break;
      }
      for (const json& e : p["items"]) {
        if (!e.contains("object") || !e["object"].is_object()) continue;
        absl::Time t;
        std::string err;
        if (!absl::ParseTime(absl::RFC3339_full, e.value("time", ""), &t, &err)) continue;
        out[absl::StrCat(e["object"].value("namespace", ""), "/", e["object"].value("name", ""))].push_back(t);
        ++*count;
      }
      if (!p.contains("next") || !p["next"].is_string() || p["next"].get<std::string>().empty() ||
          p["items"].empty()) {
        break;
      }
      cursor = p["next"].get<std::string>();
    }
    return out;
  }

  void Collect() {
    machine_after_ = MachineCpu();
    bench_cpu_after_ = ProcessCpu("self");
    bench_threads_cpu_ = CpuByThread("self");
    gk_total_after_ = ProcessCpu(std::to_string(server_->pid()));
    gk_cpu_after_ = CpuByThread(std::to_string(server_->pid()));
    admitted_ = AuditTimes("workload.admitted", &admitted_events_);
    (void)AuditTimes("workload.preempted", &preempted_events_);
    server_->Signal(SIGTERM);
    auto code = server_->Wait(absl::Seconds(40));
    server_exit_ = code.ok() ? *code : -1;
    if (!code.ok()) {
      server_->Signal(SIGKILL);
      (void)server_->Wait(absl::Seconds(10));
    }
    gk_stderr_tail_ = server_->Stderr();
    if (options_.keep_dir) std::ofstream(dir_.File("gangkeeper.log")) << gk_stderr_tail_;
    if (gk_stderr_tail_.size() > 4000) gk_stderr_tail_ = gk_stderr_tail_.substr(gk_stderr_tail_.size() - 4000);
    StopThreads();
    struct rusage ru {};
    ::getrusage(RUSAGE_SELF, &ru);
    bench_max_rss_mb_ = static_cast<double>(ru.ru_maxrss) / 1024.0;
  }

  // --- the report ----------------------------------------------------------------

  void Report() {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t n = workloads_.size();
    size_t created = 0, admitted = 0, completed = 0;
    absl::Time first_arrival = absl::InfiniteFuture(), last_completion = absl::InfinitePast();
    std::vector<double> lateness, admission, release, arrival_answer, admitted_to_get, get_to_patch;
    int64_t read_first = 0;
    std::map<std::string, std::vector<double>> by_class;
    std::map<std::string, double> cq_cpu_seconds;
    int64_t preemptions = 0, unmatched_release = 0;
    // With --keep-dir, every release's times (unix ms) for a closer look at
    // the tail: workload, its latest workload.admitted, the actuator's first
    // GET after it, the release PATCH, and suspensions of it so far.
    std::ofstream releases_csv;
    if (options_.keep_dir) {
      releases_csv.open(dir_.File("releases.csv"));
      releases_csv << "workload,class,admitted_ms,first_get_ms,patch_ms,latency_ms,suspends_before\n";
    }
    auto unix_ms = [](absl::Time t) { return absl::StrFormat("%.3f", absl::ToDoubleMilliseconds(t - absl::UnixEpoch())); };
    for (const Workload& w : workloads_) {
      lateness.push_back(Ms(w.sent - w.scheduled));
      if (!w.created) continue;
      ++created;
      arrival_answer.push_back(Ms(w.stored - w.sent));
      first_arrival = std::min(first_arrival, w.sent);
      preemptions += static_cast<int64_t>(w.suspends.size());
      cq_cpu_seconds[w.cluster_queue] += w.cpu_seconds;
      if (!w.releases.empty()) {
        ++admitted;
        const double ms = Ms(w.releases.front() - w.sent);
        admission.push_back(ms);
        by_class[w.t->class_name].push_back(ms);
      }
      if (w.done) {
        ++completed;
        last_completion = std::max(last_completion, w.completed);
      }
      // Release latency: each release PATCH from the latest workload.admitted
      // of the workload before it (an admission whose release was never
      // sent, e.g. preempted first, is skipped). Both times are this
      // machine's realtime clock.
      auto a = admitted_.find(absl::StrCat(w.t->namespace_name, "/", w.t->name));
      for (const absl::Time r : w.releases) {
        const absl::Time* latest = nullptr;
        if (a != admitted_.end()) {
          for (const absl::Time& t : a->second) {
            if (t <= r) latest = &t;
          }
        }
        if (latest == nullptr) {
          ++unmatched_release;  // no admission before it (or the audit read failed)
          continue;
        }
        release.push_back(Ms(r - *latest));
        // A release read first (its kept object was out of date, or none
        // was kept): admitted → the actuator's first GET of the Job after
        // it, and its last GET → the PATCH.
        const absl::Time* first_get = nullptr;
        const absl::Time* last_get = nullptr;
        for (const absl::Time& g : w.gets) {
          if (g < *latest || g > r) continue;
          if (first_get == nullptr) first_get = &g;
          last_get = &g;
        }
        if (first_get != nullptr) {
          ++read_first;
          admitted_to_get.push_back(Ms(*first_get - *latest));
          get_to_patch.push_back(Ms(r - *last_get));
        }
        if (releases_csv.is_open()) {
          const auto suspends_before =
              std::count_if(w.suspends.begin(), w.suspends.end(), [&](absl::Time s) { return s < r; });
          releases_csv << w.t->namespace_name << "/" << w.t->name << "," << w.t->class_name << "," << unix_ms(*latest)
                       << "," << (first_get != nullptr ? unix_ms(*first_get) : "") << "," << unix_ms(r) << ","
                       << absl::StrFormat("%.3f", Ms(r - *latest)) << "," << suspends_before << "\n";
        }
      }
    }
    // Not every workload completed (--limit): the run is cut, and so is the
    // makespan, which is then a lower bound (the limit).
    if (timed_out_) last_completion = finished_;
    const double makespan_s = completed > 0 ? absl::ToDoubleSeconds(last_completion - first_arrival) : std::nan("");
    const double wall_s = completed > 0 ? absl::ToDoubleSeconds(last_completion - start_) : std::nan("");
    // Usage, Kueue's way (test/performance/scheduler recorder): per
    // ClusterQueue, cpu used (cpu × time each of its workloads held quota
    // running: release PATCH → completion, or → suspension for a preempted
    // run) ÷ (its nominal cpu × the monitoring time), the monitoring time
    // being the same window for every queue (first arrival → last
    // completion); averaged over the ClusterQueues. With equal nominal quotas
    // this is Kueue's class figure (Σ used ÷ (Σ nominal × time)).
    double usage_sum = 0, used_total = 0, nominal_total = 0;
    int usage_queues = 0;
    std::map<std::string, double> nominal;
    for (const auto& [name, cq] : policies_.cluster_queues) {
      double cpu = 0;
      for (const model::ResourceGroup& g : cq.resource_groups) {
        for (const model::FlavorQuotas& f : g.flavors) {
          for (const model::ResourceQuota& r : f.resources) {
            if (r.name == "cpu") cpu += static_cast<double>(r.nominal.milli()) / 1000.0;
          }
        }
      }
      nominal[name] = cpu;
    }
    for (const auto& [name, cpu] : nominal) {
      if (cpu <= 0 || !(makespan_s > 0)) continue;
      const double used = cq_cpu_seconds.count(name) != 0 ? cq_cpu_seconds.at(name) : 0;
      usage_sum += used / (cpu * makespan_s);
      used_total += used;
      nominal_total += cpu;
      ++usage_queues;
    }
    const double usage = usage_queues > 0 ? 100.0 * usage_sum / usage_queues : std::nan("");
    const double usage_pooled = nominal_total > 0 && makespan_s > 0 ? 100.0 * used_total / (nominal_total * makespan_s)
                                                                    : std::nan("");
    // Lower bound on the makespan: total work ÷ total nominal quota.
    double work = 0;
    for (const Workload& w : workloads_) work += w.cpu * static_cast<double>(w.t->runtime_ms) / 1000.0;
    const double bound_s = nominal_total > 0 ? work / nominal_total : std::nan("");

    const double machine_busy = machine_after_.first - machine_before_.first;
    const double machine_total = machine_after_.second - machine_before_.second;
    const double gk_cpu = gk_total_after_ - gk_total_before_;
    const double bench_cpu = bench_cpu_after_ - bench_cpu_before_;
    const double run_s = absl::ToDoubleSeconds(finished_ - start_);
    int64_t late_10 = 0, late_100 = 0;
    for (double l : lateness) {
      late_10 += l > 10 ? 1 : 0;
      late_100 += l > 100 ? 1 : 0;
    }
    const KueueReference ref = ReferenceFor(options_.trace);
    const double gk_cores = run_s > 0 ? gk_cpu / run_s : std::nan("");

    auto f1 = [](double v) { return std::isnan(v) ? std::string("–") : absl::StrFormat("%.1f", v); };
    auto f2 = [](double v) { return std::isnan(v) ? std::string("–") : absl::StrFormat("%.2f", v); };
    const std::filesystem::path trace_path(options_.trace);
    std::printf("## gangkeeper end to end in real time: %s\n\n",
                (trace_path.parent_path().filename() / trace_path.filename()).c_str());
    std::printf("%zu workloads (scale %g of %zu), %d client threads, the real `gangkeeper serve --kube` over TLS "
                "against FakeKubeApi, one machine (%ld cores, load average before/after: %s / %s)\n\n",
                n, options_.scale, trace_.workloads.size(), options_.clients, ::sysconf(_SC_NPROCESSORS_ONLN),
                load_before_.c_str(), LoadAverage().c_str());
    if (!generated_priority_classes_.empty()) {
      std::printf("The trace's integer priorities are WorkloadPriorityClasses %s (label %s on each Job).\n\n",
                  absl::StrJoin(generated_priority_classes_, ", ").c_str(), kPriorityLabel);
    }
    const bool whole = options_.scale >= 1;  // targets are for the whole trace
    // "< 85 s ✓", "< 85 s (whole trace only)", or "" without a target.
    auto target = [&](double limit, const char* unit, double value, bool whole_only) {
      if (limit <= 0) return std::string();
      std::string t = absl::StrFormat("< %g %s", limit, unit);
      if (whole_only && !whole) return t + " (whole trace only)";
      return t + (value < limit && !timed_out_ ? " ✓" : " ✗");
    };
    auto kueue = [&](double v, const char* unit) {
      return ref.name.empty() ? std::string() : absl::StrFormat("%.1f%s", v, unit);
    };
    std::printf("| figure | gangkeeper | Kueue %s (CI) | target |\n|---|---|---|---|\n",
                ref.name.empty() ? "(no reference for this trace)" : ref.name.c_str());
    std::printf("| makespan: first arrival → last completion | %s%s s | %s | %s |\n", timed_out_ ? "> " : "",
                f1(makespan_s).c_str(), kueue(ref.wall_s, " s (wall)").c_str(),
                target(ref.makespan_target_s, "s", makespan_s, true).c_str());
    std::printf("| wall: trace start → last completion | %s s | %s | |\n", f1(wall_s).c_str(),
                kueue(ref.wall_s, " s").c_str());
    std::printf("| lower bound: total work ÷ nominal quota | %s s | | |\n", f1(bound_s).c_str());
    std::printf("| ClusterQueue usage (mean over %d ClusterQueues) | %s %% | %s | |\n", usage_queues, f1(usage).c_str(),
                kueue(ref.usage_percent, " %").c_str());
    std::printf("| gangkeeper CPU, mean over the run | %s cores | | %s |\n", f2(gk_cores).c_str(),
                target(ref.cpu_cores_target, "cores", gk_cores, true).c_str());
    for (const auto& [cls, v] : by_class) {
      auto k = ref.tta_s.find(cls);
      std::printf("| mean time to admission, %s (%zu; p50 / p99 / max %s / %s / %s ms) | %s ms | %s | |\n", cls.c_str(),
                  v.size(), f1(Percentile(v, 0.5)).c_str(), f1(Percentile(v, 0.99)).c_str(),
                  f1(Percentile(v, 1.0)).c_str(), f1(Mean(v)).c_str(),
                  k != ref.tta_s.end() ? absl::StrFormat("%.1f s", k->second).c_str() : "");
    }
    std::printf("| admission latency p50 / p99 (creation → release PATCH received) | %s / %s ms | | |\n",
                f1(Percentile(admission, 0.5)).c_str(), f1(Percentile(admission, 0.99)).c_str());
    std::printf("| release latency p50 / p99 / max (workload.admitted → release PATCH received; %zu releases) | %s / %s / %s ms "
                "| | %s%s |\n",
                release.size(), f2(Percentile(release, 0.5)).c_str(), f2(Percentile(release, 0.99)).c_str(),
                f2(Percentile(release, 1.0)).c_str(), ref.release_p99_target_ms > 0 ? "p99 " : "",
                target(ref.release_p99_target_ms, "ms", Percentile(release, 0.99), true).c_str());
    std::printf("| preemptions (suspension PATCHes; audit workload.preempted) | %lld (%lld) | | |\n",
                static_cast<long long>(preemptions), static_cast<long long>(preempted_events_));
    std::printf("| arrivals sent late p50 / p99 / max; > 10 ms; > 100 ms | %s / %s / %s ms; %lld; %lld | | |\n",
                f2(Percentile(lateness, 0.5)).c_str(), f2(Percentile(lateness, 0.99)).c_str(),
                f2(Percentile(lateness, 1.0)).c_str(), static_cast<long long>(late_10), static_cast<long long>(late_100));
    std::printf("| create (mutate + validate + store) p50 / p99 | %s / %s ms | | |\n",
                f2(Percentile(arrival_answer, 0.5)).c_str(), f2(Percentile(arrival_answer, 0.99)).c_str());
    std::printf("| releases that read the Job first (GET between admission and PATCH; the rest used the object the "
                "reconciler kept) | %lld of %zu | | |\n",
                static_cast<long long>(read_first), release.size());
    std::printf("| of those, workload.admitted → the actuator's first GET of the Job, p50 / p99 | %s / %s ms | | |\n",
                f2(Percentile(admitted_to_get, 0.5)).c_str(), f2(Percentile(admitted_to_get, 0.99)).c_str());
    std::printf("| of those, the actuator's last GET of the Job → its release PATCH, p50 / p99 | %s / %s ms | | |\n",
                f2(Percentile(get_to_patch, 0.5)).c_str(), f2(Percentile(get_to_patch, 0.99)).c_str());
    std::printf("| completions written late p50 / p99 (bench's Job controller) | %s / %s ms | | |\n",
                f2(Percentile(completion_lateness_ms_, 0.5)).c_str(), f2(Percentile(completion_lateness_ms_, 0.99)).c_str());
    std::printf("| CPU over the run (%.1f s on %ld cores): gangkeeper / bench (clients, fake API server) | %.1f / %.1f s "
                "| | |\n",
                run_s, ::sysconf(_SC_NPROCESSORS_ONLN), gk_cpu, bench_cpu);
    std::printf("\ncreated %zu of %zu, admitted %zu, completed %zu%s; create errors %lld; webhook reconnects %lld; "
                "fake API: %lld requests, %lld PATCHes, %lld GETs answered 404, %lld other errors; "
                "audit workload.admitted events %lld%s; releases without an audit workload.admitted before them %lld; "
                "completion races %lld, completion errors %lld, released/suspended after completion %lld/%lld, "
                "double releases %lld; gangkeeper exit %d; bench max RSS %.0f MB\n",
                created, n, admitted, completed, timed_out_ ? " (TIMED OUT at --limit)" : "",
                static_cast<long long>(create_errors_), static_cast<long long>(reconnects_.load()),
                static_cast<long long>(calls_.load()), static_cast<long long>(patches_.load()),
                static_cast<long long>(get_404_.load()), static_cast<long long>(api_errors_.load()),
                static_cast<long long>(admitted_events_), audit_error_ ? " (audit read FAILED)" : "",
                static_cast<long long>(unmatched_release),
                static_cast<long long>(completion_races_), static_cast<long long>(completion_errors_),
                static_cast<long long>(released_after_completion_), static_cast<long long>(suspended_after_completion_),
                static_cast<long long>(double_releases_), server_exit_, bench_max_rss_mb_);
    std::printf("usage: %s %% pooled (Σ used ÷ (Σ nominal × makespan))\n", f1(usage_pooled).c_str());
    auto top = [](const std::map<std::string, double>& after, const std::map<std::string, double>& before) {
      std::vector<std::pair<double, std::string>> v;
      for (const auto& [k, x] : after) {
        auto b = before.find(k);
        v.push_back({x - (b != before.end() ? b->second : 0), k});
      }
      std::sort(v.rbegin(), v.rend());
      std::string out;
      for (size_t i = 0; i < v.size() && i < 8; ++i) {
        if (v[i].first < 0.05) break;
        absl::StrAppend(&out, i > 0 ? ", " : "", v[i].second, " ", absl::StrFormat("%.1f", v[i].first), " s");
      }
      return out;
    };
    std::printf("gangkeeper CPU by thread name (live threads): %s\n", top(gk_cpu_after_, gk_cpu_before_).c_str());
    std::printf("bench CPU by thread name (live threads; gangkeeper_e2e_ = the fake API server's workers, the "
                "client threads once ended, and main): %s\n\n",
                top(bench_threads_cpu_, {}).c_str());
    if (server_exit_ != 0 || created < n) std::printf("gangkeeper stderr (tail):\n```\n%s\n```\n", gk_stderr_tail_.c_str());

    if (!options_.json_out.empty()) {
      auto num = [](double v) { return std::isnan(v) ? json(nullptr) : json(v); };
      json classes = json::object();
      for (const auto& [cls, v] : by_class) {
        classes[cls] = {{"count", v.size()},
                        {"mean_ms", num(Mean(v))},
                        {"p50_ms", num(Percentile(v, 0.5))},
                        {"p90_ms", num(Percentile(v, 0.9))},
                        {"p99_ms", num(Percentile(v, 0.99))},
                        {"max_ms", num(Percentile(v, 1.0))}};
      }
      json out = {
          {"bench", "e2e"},
          {"trace", options_.trace},
          {"scale", options_.scale},
          {"workloads", n},
          {"created", created},
          {"admitted", admitted},
          {"completed", completed},
          {"timed_out", timed_out_},
          {"clients", options_.clients},
          {"makespan_s", num(makespan_s)},
          {"wall_s", num(wall_s)},
          {"lower_bound_s", num(bound_s)},
          {"usage_percent", num(usage)},
          {"usage_pooled_percent", num(usage_pooled)},
          {"time_to_admission", classes},
          {"admission_latency_ms", {{"p50", num(Percentile(admission, 0.5))}, {"p99", num(Percentile(admission, 0.99))}}},
          {"release_latency_ms",
           {{"count", release.size()},
            {"p50", num(Percentile(release, 0.5))},
            {"p99", num(Percentile(release, 0.99))},
            {"max", num(Percentile(release, 1.0))},
            {"unmatched", unmatched_release}}},
          {"preemptions", preemptions},
          {"audit_preempted", preempted_events_},
          {"arrival_lateness_ms",
           {{"p50", num(Percentile(lateness, 0.5))},
            {"p99", num(Percentile(lateness, 0.99))},
            {"max", num(Percentile(lateness, 1.0))},
            {"over_10ms", late_10},
            {"over_100ms", late_100}}},
          {"create_ms", {{"p50", num(Percentile(arrival_answer, 0.5))}, {"p99", num(Percentile(arrival_answer, 0.99))}}},
          {"admitted_to_first_get_ms",
           {{"p50", num(Percentile(admitted_to_get, 0.5))}, {"p99", num(Percentile(admitted_to_get, 0.99))}}},
          {"releases_read_first", read_first},
          {"get_to_release_patch_ms",
           {{"p50", num(Percentile(get_to_patch, 0.5))}, {"p99", num(Percentile(get_to_patch, 0.99))}}},
          {"completion_lateness_ms",
           {{"p50", num(Percentile(completion_lateness_ms_, 0.5))}, {"p99", num(Percentile(completion_lateness_ms_, 0.99))}}},
          {"cpu_s",
           {{"run_s", run_s},
            {"gangkeeper", gk_cpu},
            {"bench_and_fake", bench_cpu},
            // /proc/stat's busy time; in a sandboxed kernel it may not
            // count every process.
            {"machine_busy_proc_stat", machine_busy},
            {"machine_capacity", machine_total}}},
          {"fake_api", {{"requests", calls_.load()}, {"patches", patches_.load()}, {"get_404", get_404_.load()},
                        {"errors", api_errors_.load()}}},
          {"create_errors", create_errors_},
          {"completion_races", completion_races_},
          {"gangkeeper_exit", server_exit_},
          {"gangkeeper_cores", num(gk_cores)},
          {"targets",
           {{"makespan_s_below", ref.makespan_target_s > 0 ? json(ref.makespan_target_s) : json(nullptr)},
            {"release_p99_ms_below", ref.release_p99_target_ms > 0 ? json(ref.release_p99_target_ms) : json(nullptr)},
            {"gangkeeper_cores_below", ref.cpu_cores_target > 0 ? json(ref.cpu_cores_target) : json(nullptr)}}},
          {"kueue",
           ref.name.empty() ? json(nullptr)
                            : json{{"shape", ref.name},
                                   {"wall_s", ref.wall_s},
                                   {"usage_percent", ref.usage_percent},
                                   {"tta_s", ref.tta_s}}},
      };
      std::ofstream(options_.json_out) << out.dump(2) << "\n";
    }
  }

  Options options_;
  testing::TempDir dir_;
  sim::Trace trace_;
  model::PolicySet policies_;  // everything serve loads (for the report)
  model::PolicySet written_;   // the trace's policies and the generated priority classes
  std::vector<std::string> generated_priority_classes_;
  std::vector<Workload> workloads_;
  std::unordered_map<std::string, size_t> index_;  // path -> workloads_ index (read-only once built)
  std::unique_ptr<testing::FakeKubeApi> fake_;
  std::unique_ptr<testing::ServerProcess> server_;
  testing::TlsClientOptions tls_;
  std::string load_before_ = LoadAverage();

  std::atomic<bool> stopping_{false};
  std::mutex events_mu_;
  std::condition_variable events_cv_;
  std::deque<PatchEvent> events_;
  std::thread events_thread_, completer_thread_;
  std::mutex completions_mu_;
  std::condition_variable completions_cv_;
  std::priority_queue<Completion, std::vector<Completion>, std::greater<Completion>> completions_;

  std::mutex mu_;  // the Workload run state and the counters below
  std::condition_variable done_cv_;
  size_t done_ = 0;
  int64_t completion_races_ = 0, completion_errors_ = 0, released_after_completion_ = 0,
          suspended_after_completion_ = 0, double_releases_ = 0;
  std::vector<double> completion_lateness_ms_;

  std::atomic<int64_t> calls_{0}, patches_{0}, get_404_{0}, api_errors_{0}, reconnects_{0};
  int64_t create_errors_ = 0;
  absl::Time start_, finished_;
  bool timed_out_ = false;
  std::pair<double, double> machine_before_, machine_after_;
  double bench_cpu_before_ = 0, bench_cpu_after_ = 0, bench_max_rss_mb_ = 0, gk_total_before_ = 0, gk_total_after_ = 0;
  std::map<std::string, double> gk_cpu_before_, gk_cpu_after_, bench_threads_cpu_;
  std::map<std::string, std::vector<absl::Time>> admitted_;
  int64_t admitted_events_ = 0, preempted_events_ = 0;
  bool audit_error_ = false;
  std::string gk_stderr_tail_;
  int server_exit_ = -1;
};

}  // namespace
}  // namespace gangkeeper

int main(int argc, char** argv) {
  gangkeeper::Options o;
  if (!gangkeeper::ParseArgs(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: %s [--trace FILE] [--scale F (0 < F <= 1)] [--clients N] [--limit SECONDS] [--json FILE]\n"
                 "          [--policies DIR] [--log-level LEVEL] [--keep-dir]\n",
                 argv[0]);
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  gangkeeper::Bench bench(std::move(o));
  return bench.Main();
}
