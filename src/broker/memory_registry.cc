// gangkeeper broker: the in-memory WorkloadRegistry (see registry.h), the
// stand-in the webhook uses until the broker (issue #5) takes its place.
#include <map>
#include <mutex>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gangkeeper/broker/registry.h"

namespace gangkeeper::broker {
namespace {

class InMemoryRegistry final : public WorkloadRegistry {
 public:
  absl::Status Register(const workload::Workload& w, const std::string& cluster_queue) override {
    std::lock_guard<std::mutex> lock(mu_);
    WorkloadKey key = KeyOf(w);
    auto it = records_.find(key);
    if (it != records_.end() && it->second.state != WorkloadState::kFinished) {
      if (!w.pod_group_name.empty()) {
        // Another member of a known pod group (a retried review of the
        // same pod is recognised by its name).
        if (members_[key].insert(w.name).second) ++it->second.pod_group_members;
      }
      return absl::OkStatus();
    }
    WorkloadRecord record;
    record.workload = w;
    record.cluster_queue = cluster_queue;
    record.pod_group_members = w.pod_group_name.empty() ? 0 : 1;
    if (!w.pod_group_name.empty()) members_[key] = {w.name};
    records_[key] = std::move(record);
    return absl::OkStatus();
  }

  absl::Status Update(const workload::Workload& w) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(KeyOf(w));
    if (it == records_.end()) return absl::NotFoundError(absl::StrCat("workload ", w.namespace_name, "/", w.name));
    if (it->second.state == WorkloadState::kAdmitted) {
      return absl::FailedPreconditionError("the workload is admitted; its pod sets cannot change");
    }
    it->second.workload.pod_sets = w.pod_sets;
    return absl::OkStatus();
  }

  absl::Status Remove(const WorkloadKey& key, const std::string& uid) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(key);
    if (it == records_.end() || (!uid.empty() && it->second.workload.uid != uid)) return absl::OkStatus();
    records_.erase(it);
    members_.erase(key);
    return absl::OkStatus();
  }

  absl::Status Finish(const WorkloadKey& key, const std::string& uid) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(key);
    if (it != records_.end() && (uid.empty() || it->second.workload.uid == uid)) it->second.state = WorkloadState::kFinished;
    return absl::OkStatus();
  }

  std::optional<WorkloadRecord> Find(const WorkloadKey& key) const override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(key);
    if (it == records_.end()) return std::nullopt;
    return it->second;
  }

  std::map<std::string, quantity::Quantity> AdmittedUsage(const std::string& cluster_queue) const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, quantity::Quantity> usage;
    for (const auto& [key, r] : records_) {
      if (r.cluster_queue != cluster_queue || r.state != WorkloadState::kAdmitted) continue;
      for (const workload::PodSet& ps : r.workload.pod_sets) {
        for (const auto& [res, q] : ps.requests) {
          absl::StatusOr<quantity::Quantity> all = q.MultiplyBy(ps.count);
          usage[res] = usage[res].SaturatingAdd(all.ok() ? *all : quantity::Quantity::Max());
        }
      }
    }
    return usage;
  }

  size_t UnconfirmedCount() const override {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& [key, r] : records_) n += r.workload.unconfirmed;
    return n;
  }

  int64_t PendingIn(const std::string& cluster_queue) const override {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t n = 0;
    for (const auto& [key, r] : records_) {
      if (r.cluster_queue == cluster_queue && r.state == WorkloadState::kPending) ++n;
    }
    return n;
  }

 private:
  mutable std::mutex mu_;
  std::map<WorkloadKey, WorkloadRecord> records_;
  std::map<WorkloadKey, std::set<std::string>> members_;  // pod group -> pod names
};

}  // namespace

const char* WorkloadStateName(WorkloadState state) {
  switch (state) {
    case WorkloadState::kPending: return "pending";
    case WorkloadState::kAdmitted: return "admitted";
    case WorkloadState::kFinished: return "finished";
  }
  return "pending";
}

WorkloadKey KeyOf(const workload::Workload& w) {
  if (!w.pod_group_name.empty()) return WorkloadKey{w.namespace_name, w.pod_group_name, workload::Kind::kPod, true};
  return WorkloadKey{w.namespace_name, w.name, w.kind, false};
}

InstanceKey InstanceOf(const workload::Workload& w) {
  WorkloadKey key = KeyOf(w);
  return InstanceKey{key, key.pod_group ? std::string() : w.uid};
}

InstanceKey InstanceOf(const WorkloadKey& key, const std::string& uid) {
  return InstanceKey{key, key.pod_group ? std::string() : uid};
}

std::string KindName(const WorkloadKey& key) {
  if (key.pod_group) return "PodGroup";
  return std::string(workload::InfoFor(key.kind).name);
}

std::string KindGroup(const WorkloadKey& key) {
  if (key.pod_group) return "";
  return std::string(workload::InfoFor(key.kind).group);
}

std::string KindRef(const WorkloadKey& key) {
  std::string out = absl::AsciiStrToLower(KindName(key));
  const std::string group = KindGroup(key);
  if (!group.empty()) absl::StrAppend(&out, ".", group);
  return out;
}

std::string KeyString(const WorkloadKey& key) {
  return absl::StrCat(KindRef(key), "/", key.namespace_name, "/", key.name);
}

std::optional<WorkloadKey> ParseKindRef(absl::string_view kind_ref, const std::string& ns, const std::string& name) {
  std::string ref = absl::AsciiStrToLower(kind_ref);
  std::string group;
  if (size_t dot = ref.find('.'); dot != std::string::npos) {
    group = ref.substr(dot + 1);
    ref.resize(dot);
  }
  if (ref == "podgroup" || ref == "podgroups") {
    if (!group.empty()) return std::nullopt;
    return WorkloadKey{ns, name, workload::Kind::kPod, true};
  }
  for (const workload::KindInfo& k : workload::ManagedKinds()) {
    const std::string kind = absl::AsciiStrToLower(k.name);
    if (ref != kind && ref != k.resource) continue;
    if (!group.empty() && group != k.group) continue;
    return WorkloadKey{ns, name, k.kind, false};
  }
  return std::nullopt;
}

std::optional<WorkloadKey> ParseKeyString(absl::string_view s) {
  std::vector<std::string> parts = absl::StrSplit(s, '/');
  if (parts.size() != 3 || parts[1].empty() || parts[2].empty()) return std::nullopt;
  return ParseKindRef(parts[0], parts[1], parts[2]);
}

std::unique_ptr<WorkloadRegistry> NewInMemoryRegistry() { return std::make_unique<InMemoryRegistry>(); }

}  // namespace gangkeeper::broker
