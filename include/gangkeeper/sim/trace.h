// gangkeeper sim: workload traces for `gangkeeper simulate`.
//
// A Trace is the list of workloads to replay, each with its arrival time,
// queue, priority, gang shape, runtime and optional checkpoint interval.
// Three formats are read; ReadTraceFile picks one by the file's extension
// (.csv; .jsonl / .ndjson; .yaml / .yml = Kueue generator), else by content.
//
// 1. CSV (ParseCsvTrace). Blank lines and lines starting with `#` are
//    skipped. The first other line is the header: column names in any order,
//    separated by commas. Fields may be quoted ("...", "" for a quote), as in
//    RFC 4180, but none of the formats below needs quotes.
//      time        required  arrival, from the start of the trace (see Durations)
//      namespace   required  the workload's namespace
//      queue       required  its LocalQueue (kueue.x-k8s.io/queue-name)
//      podsets     required  the gang (see Pod sets)
//      runtime     required  how long it runs once admitted, > 0
//      priority    optional  an integer, or a WorkloadPriorityClass (else
//                            PriorityClass) name from the policies; empty = 0
//      checkpoint  optional  checkpoint interval: a preempted workload resumes
//                            from its last whole interval instead of from zero
//      name        optional  unique within the namespace; default wl-<N>, N
//                            the workload's 1-based position in the file
//      class       optional  groups workloads in the report; default: the
//                            priority field as written ("0" when empty)
//    Example:
//      time,namespace,queue,priority,podsets,runtime,checkpoint,class
//      0,team-a,gpu-queue,10000,4x[nvidia.com/gpu=1;cpu=8],2h,30m,train
//      90s,team-b,gpu-queue,,1x[nvidia.com/mig-1g.10gb=1],15m,,notebook
//
// 2. JSON Lines (ParseJsonLinesTrace): one JSON object per line with the same
//    keys (blank lines and `#` lines skipped). time, runtime and checkpoint
//    are numbers of seconds or duration strings; priority is a number or a
//    class name; podsets is the string form below or an array of
//    {"name"?, "count", "requests": {"resource": "quantity" | number}}.
//      {"time": 0, "namespace": "team-a", "queue": "gpu-queue",
//       "podsets": [{"name": "worker", "count": 4, "requests": {"nvidia.com/gpu": 1}}],
//       "runtime": "2h", "priority": "training-batch", "checkpoint": "30m"}
//
//    Durations: a number of seconds ("90", "0.25") or a duration with units
//    ("250ms", "90s", "1h30m"); whole milliseconds, not negative.
//    Pod sets: `COUNTx[RESOURCE=QUANTITY;...]`, several joined with `+`, each
//    optionally named `NAME:` (default "main" for a single pod set, else
//    "podset-<i>"): `launcher:1x[cpu=2]+worker:8x[nvidia.com/gpu=1;cpu=16]`.
//    Quantities are Kubernetes quantities ("500m", "16Gi", "2").
//
// 3. Kueue's scheduler-performance generator (ParseKueueGenerator), the
//    `generator.yaml` of kueue/test/performance/scheduler: `cohorts` of
//    {className, count, queuesSets: [{className, count, nominalQuota,
//    borrowingLimit, reclaimWithinCohort, withinClusterQueue, workloadsSets:
//    [{count, creationIntervalMs, workloads: [{className, runtimeMs,
//    priority, request, podCount}]}]}]}, and an optional `resourceFlavor:
//    {name}` (default "rf"). It yields the policies as well as the workloads,
//    named and timed as Kueue's generator makes them:
//      cohort        <cohort className>-<i>
//      ClusterQueue  <queue className>-<queue set index>-<j>-<cohort name>,
//                    one flavor, cpu nominalQuota / borrowingLimit, the two
//                    preemption policies, every namespace selected
//      namespace, LocalQueue   both named after the ClusterQueue
//      workload      <className>-<workloads set index>-<s>-<t>: one pod set
//                    "main" of podCount (default 1) pods requesting `request` cpu
//    Every workloads set of every ClusterQueue starts at time 0 and creates
//    its workloads one after another, one per creationIntervalMs, cycling
//    through its `workloads` templates: the k-th creation (k = 1, 2, ...) is
//    at k * creationIntervalMs. Topology-aware (TAS) configurations are
//    rejected: the simulator has no nodes.
//
// Errors name the file, the line and the field, and say how to fix it.
// Pure functions (ReadTraceFile reads one file); thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/workload/workload.h"

namespace gangkeeper::sim {

enum class TraceFormat { kCsv, kJsonLines, kKueueGenerator };
const char* TraceFormatName(TraceFormat format);

// One workload of a trace. Times are whole milliseconds from the start of
// the trace.
struct TraceWorkload {
  std::string namespace_name;
  std::string name;
  std::string queue;  // LocalQueue
  int32_t priority = 0;
  // A WorkloadPriorityClass or PriorityClass name, resolved against the
  // policies by the simulator (then `priority` is replaced); empty when the
  // trace gives a number.
  std::string priority_class;
  std::string class_name;
  std::vector<workload::PodSet> pod_sets;
  int64_t arrival_ms = 0;
  int64_t runtime_ms = 0;
  int64_t checkpoint_ms = 0;  // 0 = no checkpoints: a preempted run restarts from zero
  std::string source;         // "trace.csv:12", for messages
};

struct Trace {
  TraceFormat format = TraceFormat::kCsv;
  std::string file;
  std::vector<TraceWorkload> workloads;  // in file order
  // Kueue generator only: the ClusterQueues, LocalQueues, Namespaces, the
  // flavor and cohorts it creates (null for CSV and JSON Lines), and each
  // generated ClusterQueue's class (its queue set's className).
  std::shared_ptr<const model::PolicySet> policies;
  std::map<model::ClusterQueueName, std::string> cluster_queue_classes;
};

// `file` names the source in messages. InvalidArgument naming the line and
// field for anything malformed (every problem up to a limit, one per line).
[[nodiscard]] absl::StatusOr<Trace> ParseCsvTrace(absl::string_view text, absl::string_view file);
[[nodiscard]] absl::StatusOr<Trace> ParseJsonLinesTrace(absl::string_view text, absl::string_view file);
[[nodiscard]] absl::StatusOr<Trace> ParseKueueGenerator(absl::string_view text, absl::string_view file);

// Reads `path` and parses it in the format its extension names (.csv,
// .jsonl/.ndjson, .yaml/.yml); for other names, by content: `{` first ->
// JSON Lines, a `cohorts:` key -> Kueue generator, else CSV. NotFound /
// PermissionDenied when unreadable; the parsers' errors otherwise.
[[nodiscard]] absl::StatusOr<Trace> ReadTraceFile(const std::string& path);

// A duration field: seconds ("90", "0.25") or a duration with units
// ("250ms", "1h30m"), in whole milliseconds, >= 0. InvalidArgument naming
// the text and the accepted forms.
[[nodiscard]] absl::StatusOr<int64_t> ParseTraceDuration(absl::string_view text);

// The pod-set form `[NAME:]COUNTx[RESOURCE=QUANTITY;...]` joined with `+`.
// InvalidArgument naming the offending part.
[[nodiscard]] absl::StatusOr<std::vector<workload::PodSet>> ParsePodSets(absl::string_view text);

}  // namespace gangkeeper::sim
