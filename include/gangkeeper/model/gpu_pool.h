// gangkeeper: GPU node pools (`gangkeeper.io/v1alpha1 GPUNodePool`) and NVIDIA MIG layouts.
//
// A GPUNodePool says how much GPU capacity a ResourceFlavor's nodes have: the GPU model, GPUs per
// node, node count and, with MIG, the partition layout of every GPU. This header owns the MIG
// profile tables (PEERS §6.2), layout validation by exact placement (PEERS §6.3, Rule P) and the
// extended resources the NVIDIA device plugin advertises for a pool (PEERS §6.4). The policy
// loader decodes and validates pools; the broker and the admission path use Advertise() and
// MigResourceNames() to tell "the pool has 0 free 4g.40gb" from "the pool never advertises
// 4g.40gb" from "no GPU has such a profile". Every function here is pure over static tables:
// thread-safe, no shared mutable state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gangkeeper/base/field_path.h"

namespace gangkeeper::model {

inline constexpr absl::string_view kGpuNodePoolApiVersion = "gangkeeper.io/v1alpha1";
inline constexpr absl::string_view kGpuNodePoolKind = "GPUNodePool";

// Extended resource names of the NVIDIA device plugin.
inline constexpr absl::string_view kNvidiaGpuResource = "nvidia.com/gpu";
inline constexpr absl::string_view kNvidiaMigResourcePrefix = "nvidia.com/mig-";

// MIG geometry shared by every model in GpuModel (MIG User Guide, "Concepts").
inline constexpr int kComputeSlicesPerGpu = 7;
inline constexpr int kMemorySlicesPerGpu = 8;
inline constexpr int kMaxMigInstancesPerGpu = 7;

// Sanity bounds enforced by ValidateGpuNodePool.
inline constexpr int64_t kMaxGpusPerNode = 16;
inline constexpr int64_t kMaxNodesPerPool = 100000;

// MIG-capable GPU models. The names (GpuModelName) are the spellings accepted in `spec.gpu`.
enum class GpuModel { kA100_40GB, kA100_80GB, kH100_80GB, kH200_141GB };

inline constexpr GpuModel kAllGpuModels[] = {GpuModel::kA100_40GB, GpuModel::kA100_80GB,
                                             GpuModel::kH100_80GB, GpuModel::kH200_141GB};

// The device plugin's MIG strategy (`--mig-strategy`): kNone advertises whole GPUs as
// nvidia.com/gpu; kSingle advertises each MIG device as nvidia.com/gpu and requires one profile
// everywhere; kMixed advertises each profile as nvidia.com/mig-<profile>.
enum class MigStrategy { kNone, kSingle, kMixed };

// One MIG GPU-instance profile of one GPU model (a row of PEERS §6.2). Points into static tables;
// copy freely.
struct MigProfile {
  // NVIDIA's name for this model, as `nvidia-smi mig -lgip` prints it: "3g.40gb", "1g.10gb+me".
  absl::string_view name;
  // The AKS short name ("MIG3g"), or empty for profiles AKS does not name (+me, 2-slice 1g).
  absl::string_view aks_name;
  // NVML GPU-instance profile ID: 19 (1g), 20 (1g+me), 15 (1g, 2 memory slices), 14 (2g),
  // 9 (3g), 5 (4g), 0 (7g).
  int profile_id = 0;
  int compute_slices = 0;  // of kComputeSlicesPerGpu
  int memory_slices = 0;   // of kMemorySlicesPerGpu; also the placement size
  int max_instances = 0;   // per GPU
  // Bit i set: an instance may start at memory slice i (`nvidia-smi mig -lgipp`).
  uint8_t start_slots = 0;
  // A media-extensions ("+me") profile: at most one per GPU, whatever its max_instances says.
  bool media_extensions = false;
};

// The GPUNodePool manifest, decoded. `mig_profiles` is the layout of ONE GPU, as written in the
// manifest (AKS or NVIDIA spellings, see ResolveMigProfile); every GPU of the pool has it.
struct GpuNodePool {
  std::string name;    // metadata.name
  std::string resource_version;  // metadata.resourceVersion (set by the API on changes)
  std::string flavor;  // the ResourceFlavor whose nodeLabels select these nodes
  GpuModel gpu = GpuModel::kA100_80GB;
  int64_t gpus_per_node = 1;
  int64_t nodes = 0;
  MigStrategy mig_strategy = MigStrategy::kNone;
  std::vector<std::string> mig_profiles;
};

// "A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB".
std::string GpuModelName(GpuModel model);
// Exact, case-sensitive match of GpuModelName. InvalidArgument listing the valid names otherwise
// (with a "did you mean" when only case or separators differ).
[[nodiscard]] absl::StatusOr<GpuModel> ParseGpuModel(absl::string_view name);

// "none", "single", "mixed".
std::string MigStrategyName(MigStrategy strategy);
// Exact, case-sensitive. InvalidArgument listing the valid names otherwise.
[[nodiscard]] absl::StatusOr<MigStrategy> ParseMigStrategy(absl::string_view name);

// The model's profiles in NVIDIA's listing order (IDs 19, 20, 15, 14, 9, 5, 0).
absl::Span<const MigProfile> MigProfileTable(GpuModel model);

// Resolves one `spec.migProfiles` entry for `model`. Accepted spellings, case-sensitive:
//   - the AKS short names MIG1g, MIG2g, MIG3g, MIG4g, MIG7g (MIG1g is the 1-memory-slice 1g
//     profile, ID 19: "1g.10gb" on an A100-80GB);
//   - the model's NVIDIA names ("3g.40gb", "1g.20gb", "1g.10gb+me" on an A100-80GB).
// InvalidArgument otherwise. The message names the model's valid spellings, and says so when the
// name belongs to another model ("3g.20gb" is an A100-40GB profile) or is a resource name
// ("nvidia.com/mig-3g.40gb") or differs only in case ("mig3g").
[[nodiscard]] absl::StatusOr<MigProfile> ResolveMigProfile(GpuModel model,
                                                           absl::string_view spelling);

// The device plugin's mixed-strategy resource for a profile: "nvidia.com/mig-" + name, with '+'
// replaced by '.' (the plugin does this because '+' is not valid in a resource name), e.g.
// "nvidia.com/mig-3g.40gb", "nvidia.com/mig-1g.10gb.me".
std::string MigResourceName(const MigProfile& profile);

// Every mixed-strategy resource name `model` can advertise, in MigProfileTable order.
std::vector<std::string> MigResourceNames(GpuModel model);

// Rule P (PEERS §6.3) on an empty GPU: assigns each instance a start slot from its profile's
// allowed set so that the memory ranges [start, start + memory_slices) are disjoint within 0..7.
// Returns the start slot of each instance (same order as `layout`), or an empty vector when no
// assignment exists or `layout` is empty. Geometry only: the "+me at most once" rule is
// CheckMigLayout's.
std::vector<int> PlaceMigLayout(absl::Span<const MigProfile> layout);

// OK iff one GPU of `model` can hold `layout` at once: Rule P, at most one +me instance, and at
// least one instance. Otherwise InvalidArgument explaining the reason with numbers and a fix,
// e.g. "layout [4g.40gb, 4g.40gb] does not fit one A100-80GB: 4g.40gb can only start at memory
// slice 0, so 2 of them overlap (compute 8 of 7 slices, memory 8 of 8); valid examples:
// [4g.40gb, 3g.40gb] or [4g.40gb, 2g.20gb, 1g.10gb]".
[[nodiscard]] absl::Status CheckMigLayout(GpuModel model, absl::Span<const MigProfile> layout);

// Adds every problem of `pool` to `errors`, with paths under `spec_path` (usually "spec"):
//   flavor required (a DNS-1123 subdomain); 1 <= gpusPerNode <= kMaxGpusPerNode;
//   0 <= nodes <= kMaxNodesPerPool; migStrategy none => no migProfiles; single/mixed =>
//   migProfiles non-empty, each entry resolvable (error at `migProfiles[i]`), the layout fits one
//   GPU (CheckMigLayout, error at `migProfiles`); single => one profile repeated (the device
//   plugin refuses mixed MIG device types under the single strategy). Note: unlike AKS, a
//   single-strategy list is the literal per-GPU layout, so [MIG1g] means one 1g instance per GPU.
void ValidateGpuNodePool(const GpuNodePool& pool, const base::FieldPath& spec_path,
                         base::FieldErrors* errors);

// Extended resources the NVIDIA device plugin advertises for a pool. Keys are resource names.
struct AdvertisedResources {
  std::map<std::string, int64_t> per_node;
  // per_node x nodes. A pool with 0 nodes keeps its keys, with 0 values.
  std::map<std::string, int64_t> total;
};

// none:   nvidia.com/gpu = gpusPerNode;
// single: nvidia.com/gpu = (instances per GPU) x gpusPerNode;
// mixed:  MigResourceName(p) = (count of p in the layout) x gpusPerNode, for each profile p.
// InvalidArgument (the ValidateGpuNodePool message, paths under "spec") if the pool is invalid.
[[nodiscard]] absl::StatusOr<AdvertisedResources> Advertise(const GpuNodePool& pool);

}  // namespace gangkeeper::model
