// gangkeeper: GPU node pools and NVIDIA MIG layouts (see the header for the contracts).
//
// The profile tables are PEERS §6.2 (MIG User Guide Tables 6-8, placements from
// `nvidia-smi mig -lgipp`). H200 placements are not printed in the guide; the table assumes the
// H100 geometry, which Table 8 gives the same fractions and instance counts. Layout checks are an
// exact placement search (Rule P), not slice counting, so they stay right for any future table
// whose allowed start slots do not line up with the counts. Pure functions over constant data;
// thread-safe.
#include "gangkeeper/model/gpu_pool.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "src/model/gpu_pool_decode.h"

namespace gangkeeper::model {
namespace {

constexpr size_t kProfilesPerModel = 7;
using ProfileTable = std::array<MigProfile, kProfilesPerModel>;

// Geometry of the seven GPU-instance profiles, in NVIDIA's listing order; only the names differ
// between models.
constexpr MigProfile Row(absl::string_view name, absl::string_view aks_name, int id, int compute,
                         int memory, int max_instances, uint8_t starts, bool me) {
  MigProfile p;
  p.name = name;
  p.aks_name = aks_name;
  p.profile_id = id;
  p.compute_slices = compute;
  p.memory_slices = memory;
  p.max_instances = max_instances;
  p.start_slots = starts;
  p.media_extensions = me;
  return p;
}

// Names in the order 1g (1 memory slice), 1g+me, 1g (2 memory slices), 2g, 3g, 4g, 7g.
constexpr ProfileTable MakeTable(absl::string_view g1, absl::string_view g1me,
                                 absl::string_view g1x2, absl::string_view g2,
                                 absl::string_view g3, absl::string_view g4,
                                 absl::string_view g7) {
  return ProfileTable{
      Row(g1, "MIG1g", 19, 1, 1, 7, 0b0111'1111, false),
      Row(g1me, "", 20, 1, 1, 1, 0b0111'1111, true),
      Row(g1x2, "", 15, 1, 2, 4, 0b0101'0101, false),
      Row(g2, "MIG2g", 14, 2, 2, 3, 0b0001'0101, false),
      Row(g3, "MIG3g", 9, 3, 4, 2, 0b0001'0001, false),
      Row(g4, "MIG4g", 5, 4, 4, 1, 0b0000'0001, false),
      Row(g7, "MIG7g", 0, 7, 8, 1, 0b0000'0001, false),
  };
}

constexpr ProfileTable kA100_40GBProfiles =
    MakeTable("1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb");
constexpr ProfileTable kA100_80GBProfiles =
    MakeTable("1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb");
constexpr ProfileTable kH100_80GBProfiles = kA100_80GBProfiles;
constexpr ProfileTable kH200_141GBProfiles =
    MakeTable("1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb");

const ProfileTable& Table(GpuModel model) {
  switch (model) {
    case GpuModel::kA100_40GB: return kA100_40GBProfiles;
    case GpuModel::kA100_80GB: return kA100_80GBProfiles;
    case GpuModel::kH100_80GB: return kH100_80GBProfiles;
    case GpuModel::kH200_141GB: return kH200_141GBProfiles;
  }
  return kA100_80GBProfiles;
}

bool IsKnownModel(GpuModel model) {
  for (GpuModel m : kAllGpuModels) {
    if (m == model) return true;
  }
  return false;
}

// Index of `profile` in its model's table (by NVML profile ID), or -1.
int TableIndex(GpuModel model, const MigProfile& profile) {
  const ProfileTable& table = Table(model);
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i].profile_id == profile.profile_id && table[i].name == profile.name) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// Lower-cased with separators dropped: "A100 80GB" and "a100_80gb" both give "a10080gb".
std::string Fold(absl::string_view s) {
  std::string out;
  for (char c : s) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c))) {
      out.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

std::string ValidProfileSpellings(GpuModel model) {
  std::vector<absl::string_view> names;
  std::vector<absl::string_view> aks;
  for (const MigProfile& p : Table(model)) {
    names.push_back(p.name);
    if (!p.aks_name.empty()) aks.push_back(p.aks_name);
  }
  return absl::StrCat(GpuModelName(model), " profiles are ", absl::StrJoin(names, ", "),
                      " (or the AKS names ", absl::StrJoin(aks, ", "), ")");
}

// ---- Rule P -----------------------------------------------------------------------------------

struct Instance {
  int memory_slices;
  uint8_t start_slots;
  int profile_id;
  size_t index;  // position in the caller's layout
};

// Assigns start slots to items[i..] given the occupied memory slices `used`. Identical profiles
// are adjacent and take increasing start slots, which removes permutation symmetry.
bool PlaceFrom(const std::vector<Instance>& items, size_t i, unsigned used,
               std::vector<int>* starts) {
  if (i == items.size()) return true;
  const Instance& item = items[i];
  int first = 0;
  if (i > 0 && items[i - 1].profile_id == item.profile_id) {
    first = (*starts)[items[i - 1].index] + 1;
  }
  for (int s = first; s + item.memory_slices <= kMemorySlicesPerGpu; ++s) {
    if ((item.start_slots & (1u << s)) == 0) continue;
    const unsigned range = ((1u << item.memory_slices) - 1u) << s;
    if ((used & range) != 0) continue;
    (*starts)[item.index] = s;
    if (PlaceFrom(items, i + 1, used | range, starts)) return true;
  }
  return false;
}

// ---- Explanations -----------------------------------------------------------------------------

// Display and preference order: more compute first, then less memory, +me last.
auto DisplayKey(const MigProfile& p) {
  return std::make_tuple(-p.compute_slices, p.memory_slices, p.media_extensions);
}

std::string FormatLayout(absl::Span<const MigProfile> layout) {
  return absl::StrCat(
      "[", absl::StrJoin(layout, ", ", [](std::string* out, const MigProfile& p) {
        absl::StrAppend(out, p.name);
      }),
      "]");
}

std::string FormatStarts(uint8_t slots) {
  std::vector<int> list;
  for (int s = 0; s < kMemorySlicesPerGpu; ++s) {
    if (slots & (1u << s)) list.push_back(s);
  }
  if (list.size() == 1) return absl::StrCat("memory slice ", list[0]);
  std::string out = "memory slices ";
  for (size_t i = 0; i < list.size(); ++i) {
    if (i > 0) out += (i + 1 == list.size()) ? " and " : ", ";
    absl::StrAppend(&out, list[i]);
  }
  return out;
}

using Counts = std::array<int, kProfilesPerModel>;

bool CountsFit(GpuModel model, const Counts& counts) {
  std::vector<MigProfile> layout;
  int me = 0;
  for (size_t i = 0; i < kProfilesPerModel; ++i) {
    for (int k = 0; k < counts[i]; ++k) layout.push_back(Table(model)[i]);
    if (Table(model)[i].media_extensions) me += counts[i];
  }
  return me <= 1 && !layout.empty() && !PlaceMigLayout(layout).empty();
}

// Every valid layout of `model` that no allowed profile can be added to (counts per table
// index). +me profiles are allowed only if `allow_me`.
void CollectMaximal(GpuModel model, bool allow_me, size_t next, Counts* counts,
                    std::vector<Counts>* out) {
  bool maximal = true;
  for (size_t i = 0; i < kProfilesPerModel; ++i) {
    if (Table(model)[i].media_extensions && !allow_me) continue;
    ++(*counts)[i];
    const bool fits = CountsFit(model, *counts);
    if (fits) {
      maximal = false;
      if (i >= next) CollectMaximal(model, allow_me, i, counts, out);
    }
    --(*counts)[i];
  }
  int total = 0;
  for (int c : *counts) total += c;
  if (maximal && total > 0) out->push_back(*counts);
}

std::vector<MigProfile> Expand(GpuModel model, const Counts& counts) {
  std::vector<MigProfile> layout;
  for (size_t i = 0; i < kProfilesPerModel; ++i) {
    for (int k = 0; k < counts[i]; ++k) layout.push_back(Table(model)[i]);
  }
  std::stable_sort(layout.begin(), layout.end(), [](const MigProfile& a, const MigProfile& b) {
    return DisplayKey(a) < DisplayKey(b);
  });
  return layout;
}

struct MaximalLayout {
  Counts counts;
  std::vector<MigProfile> layout;  // in display order
};

// CollectMaximal for every model, with and without +me, computed once (thread-safe static).
const std::vector<MaximalLayout>& MaximalLayouts(GpuModel model, bool allow_me) {
  static const auto* const kMaximal = [] {
    auto* all = new std::vector<std::vector<MaximalLayout>>();
    for (GpuModel m : kAllGpuModels) {
      for (bool me : {false, true}) {
        Counts counts{};
        std::vector<Counts> found;
        CollectMaximal(m, me, 0, &counts, &found);
        std::vector<MaximalLayout> layouts;
        for (const Counts& c : found) layouts.push_back({c, Expand(m, c)});
        all->push_back(std::move(layouts));
      }
    }
    return all;
  }();
  size_t index = 0;
  for (GpuModel m : kAllGpuModels) {
    if (m == model) break;
    ++index;
  }
  return (*kMaximal)[2 * index + (allow_me ? 1 : 0)];
}

// Up to two full (maximal) layouts that keep as many of the requested instances as possible,
// preferring fewer, larger instances.
std::vector<const std::vector<MigProfile>*> SuggestLayouts(GpuModel model,
                                                           const Counts& requested) {
  bool allow_me = false;
  for (size_t i = 0; i < kProfilesPerModel; ++i) {
    if (Table(model)[i].media_extensions && requested[i] > 0) allow_me = true;
  }
  struct Candidate {
    int kept;
    const std::vector<MigProfile>* layout;
  };
  std::vector<Candidate> candidates;
  for (const MaximalLayout& m : MaximalLayouts(model, allow_me)) {
    int kept = 0;
    for (size_t i = 0; i < kProfilesPerModel; ++i) kept += std::min(m.counts[i], requested[i]);
    candidates.push_back({kept, &m.layout});
  }
  auto better = [](const Candidate& a, const Candidate& b) {
    if (a.kept != b.kept) return a.kept > b.kept;
    if (a.layout->size() != b.layout->size()) return a.layout->size() < b.layout->size();
    return std::lexicographical_compare(
        a.layout->begin(), a.layout->end(), b.layout->begin(), b.layout->end(),
        [](const MigProfile& x, const MigProfile& y) { return DisplayKey(x) < DisplayKey(y); });
  };
  const size_t n = std::min<size_t>(2, candidates.size());
  std::partial_sort(candidates.begin(), candidates.begin() + n, candidates.end(), better);
  std::vector<const std::vector<MigProfile>*> out;
  for (size_t i = 0; i < n; ++i) out.push_back(candidates[i].layout);
  return out;
}

std::string ExplainMisfit(GpuModel model, absl::Span<const MigProfile> layout,
                          const Counts& counts) {
  const ProfileTable& table = Table(model);
  int compute = 0;
  int memory = 0;
  int me = 0;
  for (const MigProfile& p : layout) {
    compute += p.compute_slices;
    memory += p.memory_slices;
    if (p.media_extensions) ++me;
  }
  const size_t n = layout.size();
  const MigProfile& full = table[kProfilesPerModel - 1];

  std::string reason;
  if (counts[kProfilesPerModel - 1] > 0 && n > 1) {
    reason = absl::StrCat(full.name, " takes the whole GPU (", full.compute_slices,
                          " compute and ", full.memory_slices,
                          " memory slices), so it must be the only instance");
  } else if (me > 1) {
    reason = absl::StrCat("at most one +me (media extensions) instance fits on a GPU, the layout has ",
                          me);
  } else if (n > static_cast<size_t>(kMaxMigInstancesPerGpu)) {
    reason = absl::StrCat("it has ", n, " instances and one GPU holds at most ",
                          kMaxMigInstancesPerGpu);
  } else {
    for (size_t i = 0; i < kProfilesPerModel && reason.empty(); ++i) {
      const MigProfile& p = table[i];
      if (counts[i] <= p.max_instances) continue;
      if (p.max_instances == 1) {
        reason = absl::StrCat(p.name, " can only start at ", FormatStarts(p.start_slots), ", so ",
                              counts[i], " of them overlap");
      } else {
        reason = absl::StrCat(p.name, " can only start at ", FormatStarts(p.start_slots),
                              ", so at most ", p.max_instances, " fit, not ", counts[i]);
      }
    }
  }
  if (reason.empty()) {
    if (compute > kComputeSlicesPerGpu) {
      reason = "it needs more compute slices than the GPU has";
    } else if (memory > kMemorySlicesPerGpu) {
      reason = "it needs more memory slices than the GPU has";
    } else {
      reason = "no choice of allowed start slices keeps the memory ranges of its instances apart";
    }
  }

  std::string msg = absl::StrCat("layout ", FormatLayout(layout), " does not fit one ",
                                 GpuModelName(model), ": ", reason, " (compute ", compute, " of ",
                                 kComputeSlicesPerGpu, " slices, memory ", memory, " of ",
                                 kMemorySlicesPerGpu, ")");
  const std::vector<const std::vector<MigProfile>*> suggestions = SuggestLayouts(model, counts);
  if (!suggestions.empty()) {
    absl::StrAppend(&msg, suggestions.size() == 1 ? "; valid example: " : "; valid examples: ",
                    absl::StrJoin(suggestions, " or ",
                                  [](std::string* out, const std::vector<MigProfile>* l) {
                                    absl::StrAppend(out, FormatLayout(*l));
                                  }));
  }
  return msg;
}

// Most entries one migProfiles list may have before entries are no longer checked one by one.
constexpr size_t kMaxListedProfiles = 2 * kMaxMigInstancesPerGpu;

}  // namespace

// ---- Names ------------------------------------------------------------------------------------

std::string GpuModelName(GpuModel model) {
  switch (model) {
    case GpuModel::kA100_40GB: return "A100-40GB";
    case GpuModel::kA100_80GB: return "A100-80GB";
    case GpuModel::kH100_80GB: return "H100-80GB";
    case GpuModel::kH200_141GB: return "H200-141GB";
  }
  return absl::StrCat("GpuModel(", static_cast<int>(model), ")");
}

absl::StatusOr<GpuModel> ParseGpuModel(absl::string_view name) {
  std::vector<std::string> valid;
  for (GpuModel m : kAllGpuModels) {
    const std::string candidate = GpuModelName(m);
    if (name == candidate) return m;
    valid.push_back(candidate);
  }
  std::string msg = absl::StrCat("unknown GPU model \"", name, "\"");
  for (GpuModel m : kAllGpuModels) {
    if (!name.empty() && Fold(name) == Fold(GpuModelName(m))) {
      absl::StrAppend(&msg, " (did you mean ", GpuModelName(m), "?)");
      break;
    }
  }
  absl::StrAppend(&msg, "; supported: ", absl::StrJoin(valid, ", "));
  return absl::InvalidArgumentError(msg);
}

std::string MigStrategyName(MigStrategy strategy) {
  switch (strategy) {
    case MigStrategy::kNone: return "none";
    case MigStrategy::kSingle: return "single";
    case MigStrategy::kMixed: return "mixed";
  }
  return absl::StrCat("MigStrategy(", static_cast<int>(strategy), ")");
}

absl::StatusOr<MigStrategy> ParseMigStrategy(absl::string_view name) {
  for (MigStrategy s : {MigStrategy::kNone, MigStrategy::kSingle, MigStrategy::kMixed}) {
    if (name == MigStrategyName(s)) return s;
  }
  std::string msg = absl::StrCat("unknown MIG strategy \"", name, "\"");
  for (MigStrategy s : {MigStrategy::kNone, MigStrategy::kSingle, MigStrategy::kMixed}) {
    if (!name.empty() && Fold(name) == MigStrategyName(s)) {
      absl::StrAppend(&msg, " (did you mean ", MigStrategyName(s), "?)");
    }
  }
  absl::StrAppend(&msg, "; supported: none, single, mixed");
  return absl::InvalidArgumentError(msg);
}

// ---- Profiles ---------------------------------------------------------------------------------

absl::Span<const MigProfile> MigProfileTable(GpuModel model) { return Table(model); }

absl::StatusOr<MigProfile> ResolveMigProfile(GpuModel model, absl::string_view spelling) {
  for (const MigProfile& p : Table(model)) {
    if (spelling == p.name || (!p.aks_name.empty() && spelling == p.aks_name)) return p;
  }

  std::string msg = absl::StrCat("unknown MIG profile \"", spelling, "\" for ",
                                 GpuModelName(model));
  // Another model's name?
  std::vector<std::string> owners;
  for (GpuModel other : kAllGpuModels) {
    if (other == model) continue;
    for (const MigProfile& p : Table(other)) {
      if (spelling == p.name) owners.push_back(GpuModelName(other));
    }
  }
  // A resource name or its '.me' spelling instead of the profile name?
  absl::string_view bare = spelling;
  bool had_prefix = absl::ConsumePrefix(&bare, "nvidia.com/");
  if (absl::ConsumePrefix(&bare, "mig-")) had_prefix = true;
  std::string hint;
  for (const MigProfile& p : Table(model)) {
    const std::string resource_form = absl::StrReplaceAll(p.name, {{"+", "."}});
    if ((had_prefix && (bare == p.name || bare == resource_form)) ||
        (!had_prefix && bare == resource_form && resource_form != p.name)) {
      hint = absl::StrCat("write the profile name ", p.name, ", not the resource name");
      break;
    }
    if (Fold(spelling) == Fold(p.name) ||
        (!p.aks_name.empty() && Fold(spelling) == Fold(p.aks_name))) {
      hint = absl::StrCat("did you mean ", Fold(spelling) == Fold(p.name) ? p.name : p.aks_name,
                          "? names are case-sensitive");
      break;
    }
  }
  if (!owners.empty()) {
    absl::StrAppend(&msg, ": it is a profile of ", absl::StrJoin(owners, " and "));
  } else if (!hint.empty()) {
    absl::StrAppend(&msg, ": ", hint);
  }
  absl::StrAppend(&msg, "; ", ValidProfileSpellings(model));
  return absl::InvalidArgumentError(msg);
}

std::string MigResourceName(const MigProfile& profile) {
  return absl::StrCat(kNvidiaMigResourcePrefix, absl::StrReplaceAll(profile.name, {{"+", "."}}));
}

std::vector<std::string> MigResourceNames(GpuModel model) {
  std::vector<std::string> names;
  for (const MigProfile& p : Table(model)) names.push_back(MigResourceName(p));
  return names;
}

// ---- Layouts ----------------------------------------------------------------------------------

std::vector<int> PlaceMigLayout(absl::Span<const MigProfile> layout) {
  // Every instance covers at least one of the 8 memory slices.
  if (layout.empty() || layout.size() > static_cast<size_t>(kMemorySlicesPerGpu)) return {};
  std::vector<Instance> items;
  items.reserve(layout.size());
  for (size_t i = 0; i < layout.size(); ++i) {
    const MigProfile& p = layout[i];
    if (p.memory_slices < 1 || p.memory_slices > kMemorySlicesPerGpu) return {};
    items.push_back({p.memory_slices, p.start_slots, p.profile_id, i});
  }
  // Big and constrained first; identical profiles adjacent (see PlaceFrom).
  std::sort(items.begin(), items.end(), [](const Instance& a, const Instance& b) {
    if (a.memory_slices != b.memory_slices) return a.memory_slices > b.memory_slices;
    const int sa = __builtin_popcount(a.start_slots);
    const int sb = __builtin_popcount(b.start_slots);
    if (sa != sb) return sa < sb;
    if (a.profile_id != b.profile_id) return a.profile_id < b.profile_id;
    return a.index < b.index;
  });
  std::vector<int> starts(layout.size(), -1);
  if (!PlaceFrom(items, 0, 0u, &starts)) return {};
  return starts;
}

absl::Status CheckMigLayout(GpuModel model, absl::Span<const MigProfile> layout) {
  if (layout.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("an empty layout creates no MIG instances; list at least one profile, e.g. [",
                     Table(model)[kProfilesPerModel - 1].name, "]"));
  }
  Counts counts{};
  int me = 0;
  for (const MigProfile& p : layout) {
    const int index = TableIndex(model, p);
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat("profile ", p.name, " (ID ", p.profile_id,
                                                     ") is not a ", GpuModelName(model),
                                                     " profile"));
    }
    ++counts[index];
    if (p.media_extensions) ++me;
  }
  if (me <= 1 && !PlaceMigLayout(layout).empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(ExplainMisfit(model, layout, counts));
}

// ---- Pools ------------------------------------------------------------------------------------

namespace {

// The flavor, the GPU model and the counts; whether the model is known.
bool ValidatePoolHardware(const GpuNodePool& pool, const base::FieldPath& spec_path,
                          base::FieldErrors* errors) {
  using base::FieldErrorType;
  const base::FieldPath flavor_path = spec_path.Child("flavor");
  if (pool.flavor.empty()) {
    errors->Add(flavor_path, FieldErrorType::kRequired,
                "name the ResourceFlavor whose nodeLabels select this pool's nodes");
  } else if (!IsDnsSubdomain(pool.flavor)) {
    errors->Add(flavor_path, FieldErrorType::kInvalid,
                absl::StrCat("\"", pool.flavor,
                             "\" is not a valid ResourceFlavor name: use lower-case letters, "
                             "digits, '-' and '.', starting and ending with a letter or digit, at "
                             "most 253 characters"));
  }

  const bool known_model = IsKnownModel(pool.gpu);
  if (!known_model) {
    std::vector<std::string> names;
    for (GpuModel m : kAllGpuModels) names.push_back(GpuModelName(m));
    errors->Add(spec_path.Child("gpu"), FieldErrorType::kNotSupported,
                absl::StrCat("unknown GPU model; supported: ", absl::StrJoin(names, ", ")));
  }

  if (pool.gpus_per_node < 1 || pool.gpus_per_node > kMaxGpusPerNode) {
    errors->Add(spec_path.Child("gpusPerNode"), FieldErrorType::kInvalid,
                absl::StrCat("gpusPerNode is ", pool.gpus_per_node,
                             "; it must be between 1 and ", kMaxGpusPerNode,
                             " (the GPUs in one node)"));
  }
  if (pool.nodes < 0 || pool.nodes > kMaxNodesPerPool) {
    errors->Add(spec_path.Child("nodes"), FieldErrorType::kInvalid,
                absl::StrCat("nodes is ", pool.nodes, "; it must be between 0 and ",
                             kMaxNodesPerPool));
  }
  return known_model;
}

// migStrategy single: the device plugin takes one MIG device type per node.
void CheckSingleStrategyLayout(const std::vector<MigProfile>& layout,
                               const base::FieldPath& profiles_path, base::FieldErrors* errors) {
  using base::FieldErrorType;
  std::vector<absl::string_view> distinct;
  for (const MigProfile& p : layout) {
    if (std::find(distinct.begin(), distinct.end(), p.name) == distinct.end()) {
      distinct.push_back(p.name);
    }
  }
  if (distinct.size() > 1) {
    const MigProfile& first = layout.front();
    std::vector<absl::string_view> repeated(static_cast<size_t>(first.max_instances),
                                            first.name);
    errors->Add(
        profiles_path, FieldErrorType::kInvalid,
        absl::StrCat("migStrategy single advertises every MIG device as nvidia.com/gpu, and the "
                     "device plugin refuses a node with more than one MIG device type; the "
                     "layout has ",
                     absl::StrJoin(distinct, ", "),
                     ": use migStrategy: mixed, or repeat one profile, e.g. [",
                     absl::StrJoin(repeated, ", "), "]"));
  }
}

// The migProfiles of a pool with MIG (single or mixed): listed, known for
// the model, one type with single, and fitting one GPU.
void ValidateMigProfiles(const GpuNodePool& pool, bool known_model,
                         const base::FieldPath& profiles_path, base::FieldErrors* errors) {
  using base::FieldErrorType;
  if (pool.mig_profiles.empty()) {
    errors->Add(profiles_path, FieldErrorType::kRequired,
                absl::StrCat("migStrategy ", MigStrategyName(pool.mig_strategy),
                             " needs the layout of one GPU, e.g. [MIG3g, MIG2g, MIG1g, MIG1g]; "
                             "or set migStrategy: none for whole GPUs"));
    return;
  }
  if (pool.mig_profiles.size() > kMaxListedProfiles) {
    errors->Add(profiles_path, FieldErrorType::kTooMany,
                absl::StrCat("migProfiles lists ", pool.mig_profiles.size(),
                             " instances; one GPU holds at most ", kMaxMigInstancesPerGpu,
                             " MIG instances"));
    return;
  }
  if (!known_model) return;

  std::vector<MigProfile> layout;
  bool all_resolved = true;
  for (size_t i = 0; i < pool.mig_profiles.size(); ++i) {
    absl::StatusOr<MigProfile> p = ResolveMigProfile(pool.gpu, pool.mig_profiles[i]);
    if (!p.ok()) {
      errors->Add(profiles_path.Index(i), FieldErrorType::kNotSupported, p.status().message());
      all_resolved = false;
      continue;
    }
    layout.push_back(*p);
  }
  if (!all_resolved) return;

  if (pool.mig_strategy == MigStrategy::kSingle) {
    CheckSingleStrategyLayout(layout, profiles_path, errors);
  }
  absl::Status fit = CheckMigLayout(pool.gpu, layout);
  if (!fit.ok()) errors->Add(profiles_path, FieldErrorType::kInvalid, fit.message());
}

}  // namespace

void ValidateGpuNodePool(const GpuNodePool& pool, const base::FieldPath& spec_path,
                         base::FieldErrors* errors) {
  using base::FieldErrorType;
  const bool known_model = ValidatePoolHardware(pool, spec_path, errors);
  const base::FieldPath profiles_path = spec_path.Child("migProfiles");
  switch (pool.mig_strategy) {
    case MigStrategy::kNone:
      if (!pool.mig_profiles.empty()) {
        errors->Add(profiles_path, FieldErrorType::kForbidden,
                    "migStrategy none advertises whole GPUs as nvidia.com/gpu, so migProfiles "
                    "must be empty: remove migProfiles, or set migStrategy: mixed (or single) to "
                    "partition the GPUs");
      }
      return;
    case MigStrategy::kSingle:
    case MigStrategy::kMixed:
      break;
    default:
      errors->Add(spec_path.Child("migStrategy"), FieldErrorType::kNotSupported,
                  "unknown MIG strategy; supported: none, single, mixed");
      return;
  }
  ValidateMigProfiles(pool, known_model, profiles_path, errors);
}

absl::StatusOr<AdvertisedResources> Advertise(const GpuNodePool& pool) {
  base::FieldErrors errors;
  ValidateGpuNodePool(pool, base::FieldPath("spec"), &errors);
  if (!errors.empty()) return base::ToStatus(errors);

  AdvertisedResources out;
  switch (pool.mig_strategy) {
    case MigStrategy::kNone:
      out.per_node[std::string(kNvidiaGpuResource)] = pool.gpus_per_node;
      break;
    case MigStrategy::kSingle:
      out.per_node[std::string(kNvidiaGpuResource)] =
          static_cast<int64_t>(pool.mig_profiles.size()) * pool.gpus_per_node;
      break;
    case MigStrategy::kMixed:
      for (const std::string& spelling : pool.mig_profiles) {
        absl::StatusOr<MigProfile> p = ResolveMigProfile(pool.gpu, spelling);
        if (!p.ok()) return p.status();  // unreachable: validated above
        out.per_node[MigResourceName(*p)] += pool.gpus_per_node;
      }
      break;
  }
  for (const auto& [resource, count] : out.per_node) {
    int64_t total = 0;
    if (__builtin_mul_overflow(count, pool.nodes, &total)) {
      return absl::OutOfRangeError(absl::StrCat(resource, ": ", count, " per node x ", pool.nodes,
                                                " nodes overflows int64"));
    }
    out.total[resource] = total;
  }
  return out;
}

}  // namespace gangkeeper::model
