// gangkeeper node: KueueSource and the API's writer to the cluster (see
// kueue_source.h).
#include "src/node/kueue_source.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/model/encode.h"
#include "gangkeeper/model/overlay.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::node {
namespace {

using nlohmann::json;

const kube::KueueResource* ResourceOfKind(const std::string& kind) {
  for (const kube::KueueResource& r : kube::KueueResources()) {
    if (r.kind == kind) return &r;
  }
  return nullptr;
}

// The path of `r` (a namespace only for a namespaced resource).
std::string PathOf(kube::KueueVersion version, const kube::KueueResource& r, const std::string& ns,
                   const std::string& name = "") {
  return kube::KueuePath(version, r.resource, r.namespaced ? ns : "", name);
}

class KubePolicyWriter final : public api::ClusterPolicyWriter {
 public:
  KubePolicyWriter(kube::Client* client, kube::KueueVersion version) : client_(client), version_(version) {}

  absl::StatusOr<std::map<std::string, std::string>> Write(const model::PolicyOverlay& change,
                                                           const std::string& actor) override {
    const model::PolicySet& put = change.put;
    if (!put.priority_classes.empty() || !put.gpu_node_pools.empty() || !put.namespaces.empty()) {
      return absl::FailedPreconditionError(
          "only ResourceFlavor, ClusterQueue, LocalQueue, Cohort and WorkloadPriorityClass are written to the "
          "cluster");
    }
    std::map<std::string, std::string> versions;
    std::vector<std::string> done;
    absl::Status s = absl::OkStatus();
    // Dependency order: what an object names is written before it.
    for (const auto& [name, o] : put.workload_priority_classes) {
      if (s.ok()) s = Put("WorkloadPriorityClass", "", name, Encode(o), &versions, &done);
    }
    for (const auto& [name, o] : put.flavors) {
      if (s.ok()) s = Put("ResourceFlavor", "", name, Encode(o), &versions, &done);
    }
    for (const auto& [name, o] : put.cohorts) {
      if (s.ok()) s = Put("Cohort", "", name, Encode(o), &versions, &done);
    }
    for (const auto& [name, o] : put.cluster_queues) {
      if (s.ok()) s = Put("ClusterQueue", "", name, Encode(o), &versions, &done);
    }
    for (const auto& [key, o] : put.local_queues) {
      if (s.ok()) s = Put("LocalQueue", key.first, key.second, Encode(o), &versions, &done);
    }
    // Deletions last, users before what they use.
    std::vector<std::string> deletions(change.deleted.begin(), change.deleted.end());
    auto rank = [](const std::string& id) {
      for (const auto& [prefix, r] : std::vector<std::pair<std::string, int>>{
               {"LocalQueue/", 0}, {"ClusterQueue/", 1}, {"Cohort/", 2}, {"ResourceFlavor/", 3}}) {
        if (id.rfind(prefix, 0) == 0) return r;
      }
      return 4;
    };
    std::stable_sort(deletions.begin(), deletions.end(),
                     [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
    for (const std::string& id : deletions) {
      if (s.ok()) s = Delete(id, &done);
    }
    if (!s.ok()) {
      return absl::Status(s.code(), done.empty() ? std::string(s.message())
                                                 : absl::StrCat(s.message(), " (written to the cluster before it: ",
                                                                absl::StrJoin(done, ", "), ")"));
    }
    base::GetLogger("kube")->info("kueue: {} wrote {} to the cluster", actor, absl::StrJoin(done, ", "));
    return versions;
  }

 private:
  template <typename T>
  json Encode(const T& object) {
    T copy = object;
    copy.meta.api_version = absl::StrCat(kube::kKueueGroup, "/", kube::KueueVersionName(version_));
    copy.meta.resource_version.clear();
    return model::EncodeObject(copy);
  }

  absl::Status Put(const std::string& kind, const std::string& ns, const std::string& name, json object,
                   std::map<std::string, std::string>* versions, std::vector<std::string>* done) {
    const kube::KueueResource* r = ResourceOfKind(kind);
    GK_CHECK_MSG(r != nullptr, "a Kueue kind without a resource");
    const std::string display = ns.empty() ? name : absl::StrCat(ns, "/", name);
    const std::string path = PathOf(version_, *r, ns, name);
    absl::StatusOr<json> existing = client_->Get(path);
    absl::StatusOr<json> written;
    std::string before;
    if (absl::IsNotFound(existing.status())) {
      written = client_->Post(PathOf(version_, *r, ns), object.dump(-1, ' ', false, json::error_handler_t::replace));
    } else if (!existing.ok()) {
      return Annotated(existing.status(), kind, display);
    } else {
      // The object as it is now carries what gangkeeper does not model
      // (annotations, finalizers, status): keep it, replace the rest.
      json merged = *existing;
      merged["spec"] = object.value("spec", json::object());
      for (const char* f : {"value", "description"}) {
        if (object.contains(f)) {
          merged[f] = object[f];
        } else {
          merged.erase(f);
        }
      }
      merged["apiVersion"] = object["apiVersion"];
      json labels = object["metadata"].value("labels", json::object());
      if (labels.empty()) {
        merged["metadata"].erase("labels");
      } else {
        merged["metadata"]["labels"] = labels;
      }
      before = merged["metadata"].value("resourceVersion", "");
      written = client_->Put(path, merged);
    }
    if (!written.ok()) return Annotated(written.status(), kind, display);
    const std::string after =
        written->contains("metadata") ? (*written)["metadata"].value("resourceVersion", "") : std::string();
    // A no-op replace keeps the resourceVersion: nothing to wait for.
    if (after != before) (*versions)[model::ObjectId(kind, ns, name)] = after;
    done->push_back(absl::StrCat(kind, " ", display));
    return absl::OkStatus();
  }

  absl::Status Delete(const std::string& id, std::vector<std::string>* done) {
    std::vector<std::string> parts = absl::StrSplit(id, absl::MaxSplits('/', 2));
    const kube::KueueResource* r = parts.size() == 3 ? ResourceOfKind(parts[0]) : nullptr;
    if (r == nullptr) return absl::FailedPreconditionError(absl::StrCat(id, " is not written to the cluster"));
    const std::string display = parts[1].empty() ? parts[2] : absl::StrCat(parts[1], "/", parts[2]);
    absl::StatusOr<json> deleted = client_->Delete(PathOf(version_, *r, parts[1], parts[2]), "", "");
    if (!deleted.ok() && !absl::IsNotFound(deleted.status())) {
      return Annotated(deleted.status(), parts[0], display);
    }
    done->push_back(absl::StrCat("deleted ", parts[0], " ", display));
    return absl::OkStatus();
  }

  static absl::Status Annotated(const absl::Status& s, const std::string& kind, const std::string& display) {
    return absl::Status(s.code(), absl::StrCat(kind, " ", display, ": ", s.message()));
  }

  kube::Client* const client_;
  const kube::KueueVersion version_;
};

}  // namespace

std::unique_ptr<api::ClusterPolicyWriter> NewKubePolicyWriter(kube::Client* client, kube::KueueVersion version) {
  return std::make_unique<KubePolicyWriter>(client, version);
}

absl::StatusOr<PolicySourceChoice> ChoosePolicySource(const std::string& flag, kube::Client* client) {
  if (!flag.empty() && flag != "files" && flag != "cluster") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--policy-source ", flag, ": use files (--policies and the API) or cluster (Kueue's objects in the cluster)"));
  }
  PolicySourceChoice c;
  if (flag == "files") {
    c.why = "--policy-source files";
    return c;
  }
  if (client == nullptr) {
    if (flag == "cluster") {
      return absl::InvalidArgumentError("--policy-source cluster needs a cluster: set --kube (it is none)");
    }
    c.why = "--kube none: no cluster to read Kueue's objects from";
    return c;
  }
  absl::StatusOr<kube::KueueVersion> version = kube::DiscoverKueue(*client);
  c.discovery = version;
  if (!version.ok()) {
    if (flag == "cluster") {
      return absl::InvalidArgumentError(absl::StrCat("--policy-source cluster: ", version.status().message()));
    }
    c.why = absl::StrCat(absl::IsNotFound(version.status()) ? "" : "cannot tell whether Kueue's CRDs are installed: ",
                         version.status().message());
    return c;
  }
  c.cluster = true;
  c.version = *version;
  c.why = absl::StrCat(flag.empty() ? "the API server serves " : "--policy-source cluster; the API server serves ",
                       kube::kKueueGroup, "/", kube::KueueVersionName(c.version));
  return c;
}

absl::StatusOr<std::unique_ptr<KueueSource>> KueueSource::Create(const kube::ClusterConfig& config, Options options) {
  GK_CHECK_MSG(options.clock != nullptr, "KueueSource::Options::clock is required");
  std::unique_ptr<KueueSource> k(new KueueSource());
  kube::ClientOptions co;
  co.clock = options.clock;
  absl::StatusOr<std::unique_ptr<kube::Client>> wc = kube::Client::Create(config, co);
  if (!wc.ok()) return wc.status();
  k->watch_client_ = *std::move(wc);
  // Writes answer an API call: a short retry budget.
  co.retry.max_attempts = 3;
  co.retry.max_total = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<kube::Client>> pc = kube::Client::Create(config, co);
  if (!pc.ok()) return pc.status();
  k->write_client_ = *std::move(pc);
  k->writer_ = NewKubePolicyWriter(k->write_client_.get(), options.version);
  KueueSource* self = k.get();
  options.watch.version = options.version;
  k->watcher_ = std::make_unique<kube::KueueObjectWatcher>(
      k->watch_client_.get(),
      [self](std::shared_ptr<const model::ClusterKueueObjects> objects) { self->OnChange(std::move(objects)); },
      options.watch);
  k->watcher_->Start();
  if (!k->watcher_->WaitSynced(options.sync_wait)) {
    base::GetLogger("kube")->warn("kueue: no list of Kueue's objects within {}; not ready until listed",
                                  absl::FormatDuration(options.sync_wait));
  }
  return k;
}

KueueSource::~KueueSource() { Stop(); }

void KueueSource::Seed(model::PolicyStore* store, const model::PolicySet* recorded) {
  std::shared_ptr<const model::ClusterKueueObjects> objects;
  if (watcher_->synced()) {
    objects = watcher_->current();
  } else if (recorded != nullptr) {
    // Refused ClusterQueues come with their inactive_reason.
    auto last = std::make_shared<model::ClusterKueueObjects>(model::KueueObjectsOf(*recorded));
    base::GetLogger("kube")->warn(
        "kueue: Kueue's objects are not listed yet; the {} ClusterQueue(s) and {} LocalQueue(s) last recorded stand "
        "for them until the first list",
        last->objects.cluster_queues.size(), last->objects.local_queues.size());
    objects = std::move(last);
  } else {
    return;
  }
  model::Diagnostics problems;
  absl::StatusOr<std::shared_ptr<const model::EffectiveSet>> set = store->SetClusterObjects(objects, &problems);
  if (!set.ok()) base::GetLogger("kube")->warn("kueue: objects not applied: {}", set.status().message());
}

void KueueSource::Connect(model::PolicyStore* store, broker::EventQueue* events) {
  {
    absl::MutexLock lock(&mu_);
    store_ = store;
    events_ = events;
  }
  // Objects that came between Seed and now.
  if (watcher_->synced()) OnChange(watcher_->current());
}

void KueueSource::OnChange(std::shared_ptr<const model::ClusterKueueObjects> objects) {
  absl::MutexLock lock(&mu_);
  if (store_ == nullptr) return;  // Seed applies them
  absl::MutexLock publication(&store_->publication());
  const uint64_t before = store_->current()->version;
  model::Diagnostics problems;
  absl::StatusOr<std::shared_ptr<const model::EffectiveSet>> set = store_->SetClusterObjects(objects, &problems);
  std::shared_ptr<spdlog::logger> log = base::GetLogger("kube");
  if (!set.ok()) {
    log->warn("kueue: objects not applied: {}", set.status().message());
    return;
  }
  for (const model::Diagnostic& d : problems.items) {
    if (d.severity == model::Diagnostic::Severity::kError) log->warn("kueue: refused: {}", d.ToString());
  }
  if ((*set)->version == before) return;
  const model::PolicySet& p = *(*set)->policies;
  log->info("kueue: objects changed in the cluster: {} ResourceFlavor, {} ClusterQueue, {} LocalQueue, {} Cohort, {} "
            "WorkloadPriorityClass",
            p.flavors.size(), p.cluster_queues.size(), p.local_queues.size(), p.cohorts.size(),
            p.workload_priority_classes.size());
  broker::Event e = broker::Event::Policies((*set)->policies, (*set)->overlay, "gangkeeper",
                                            "Kueue objects changed in the cluster");
  e.policies_version = (*set)->version;
  events_->Submit(std::move(e));
}

void KueueSource::Stop() {
  if (watcher_ != nullptr) watcher_->Stop();
}

}  // namespace gangkeeper::node
