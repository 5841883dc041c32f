// gangkeeper: the policy store (see policy_store.h).
#include "gangkeeper/model/policy_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "gangkeeper/model/validate.h"

namespace gangkeeper::model {
namespace {

// The files as the store keeps them: sealed (null: an empty set).
std::shared_ptr<const PolicySet> SealedFiles(std::shared_ptr<const PolicySet> files) {
  return files != nullptr ? Sealed(std::move(files)) : Seal(PolicySet());
}

}  // namespace

PolicyStore::PolicyStore(std::shared_ptr<const PolicySet> files) {
  auto first = std::make_shared<EffectiveSet>();
  first->files = SealedFiles(std::move(files));
  first->policies = first->files;
  absl::MutexLock lock(&mu_);
  read_files_ = first->files;
  Publish(std::move(first));
}

std::shared_ptr<const PolicySet> PolicyStore::Base() const {
  if (cluster_namespaces_ == nullptr && cluster_objects_ == nullptr) return read_files_;
  auto base = std::make_shared<PolicySet>(*read_files_);
  if (cluster_namespaces_ == nullptr) {
    *base = WithClusterObjects(*base, *cluster_objects_, nullptr);
    return base;
  }
  base->namespaces.clear();
  for (const auto& [name, labels] : *cluster_namespaces_) {
    Namespace& ns = base->namespaces[name];
    ns.meta.name = name;
    ns.meta.api_version = "v1";
    ns.meta.labels = labels;
    ns.meta.source.file = "the cluster";
  }
  if (cluster_objects_ != nullptr) *base = WithClusterObjects(*base, *cluster_objects_, nullptr);
  return base;
}

absl::StatusOr<std::shared_ptr<const EffectiveSet>> PolicyStore::SetClusterObjects(
    std::shared_ptr<const ClusterKueueObjects> objects, Diagnostics* problems) {
  absl::MutexLock lock(&mu_);
  if (objects == cluster_objects_) return current_;
  std::shared_ptr<const ClusterKueueObjects> before = std::exchange(cluster_objects_, std::move(objects));
  if (problems != nullptr && cluster_objects_ != nullptr) {
    (void)WithClusterObjects(*read_files_, *cluster_objects_, problems);
  }
  absl::StatusOr<std::shared_ptr<EffectiveSet>> next = Combine(Base(), current_->overlay, problems);
  if (!next.ok()) {
    cluster_objects_ = std::move(before);
    return next.status();
  }
  return Publish(*std::move(next));
}

absl::StatusOr<std::shared_ptr<const EffectiveSet>> PolicyStore::SetClusterNamespaces(
    std::shared_ptr<const ClusterNamespaces> namespaces, Diagnostics* problems) {
  absl::MutexLock lock(&mu_);
  const bool same = namespaces == nullptr ? cluster_namespaces_ == nullptr
                                          : cluster_namespaces_ != nullptr && *namespaces == *cluster_namespaces_;
  if (same) return current_;
  std::shared_ptr<const ClusterNamespaces> before = std::exchange(cluster_namespaces_, std::move(namespaces));
  absl::StatusOr<std::shared_ptr<EffectiveSet>> next = Combine(Base(), current_->overlay, problems);
  if (!next.ok()) {
    cluster_namespaces_ = std::move(before);
    return next.status();
  }
  return Publish(*std::move(next));
}

std::shared_ptr<const EffectiveSet> PolicyStore::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

absl::StatusOr<std::shared_ptr<EffectiveSet>> PolicyStore::Combine(std::shared_ptr<const PolicySet> files,
                                                                   std::shared_ptr<const PolicyOverlay> overlay,
                                                                   Diagnostics* problems,
                                                                   std::shared_ptr<EffectiveSet>* unchecked) {
  auto out = std::make_shared<EffectiveSet>();
  out->files = SealedFiles(std::move(files));
  out->overlay = std::move(overlay);
  // Sealed: every set the store hands out carries its digest, computed here
  // once.
  out->policies = out->overlay == nullptr ? out->files : Seal(ApplyOverlay(*out->files, *out->overlay));
  Diagnostics found;
  ValidatePolicySet(*out->policies, &found);
  const bool invalid = found.HasErrors();
  const std::string summary = invalid ? found.ErrorSummary() : std::string();
  if (problems != nullptr) {
    for (Diagnostic& d : found.items) problems->items.push_back(std::move(d));
  }
  if (invalid) {
    if (unchecked != nullptr) *unchecked = std::move(out);
    return absl::InvalidArgumentError(
        absl::StrCat("the policy files with the API's changes are not a valid quota tree: ", summary));
  }
  return out;
}

absl::StatusOr<std::shared_ptr<const EffectiveSet>> PolicyStore::Compose(
    std::shared_ptr<const PolicyOverlay> overlay, Diagnostics* problems) const {
  absl::StatusOr<std::shared_ptr<EffectiveSet>> next = Combine(current()->files, std::move(overlay), problems);
  if (!next.ok()) return next.status();
  return std::shared_ptr<const EffectiveSet>(*std::move(next));
}

absl::StatusOr<std::shared_ptr<const EffectiveSet>> PolicyStore::SetOverlay(
    std::shared_ptr<const PolicyOverlay> overlay, Diagnostics* problems) {
  absl::MutexLock lock(&mu_);
  if (InEffect(overlay)) return current_;
  absl::StatusOr<std::shared_ptr<EffectiveSet>> next = Combine(current_->files, std::move(overlay), problems);
  if (!next.ok()) return next.status();
  return Publish(*std::move(next));
}

std::shared_ptr<const EffectiveSet> PolicyStore::Adopt(std::shared_ptr<const PolicyOverlay> overlay,
                                                      Diagnostics* problems) {
  absl::MutexLock lock(&mu_);
  if (InEffect(overlay)) return current_;
  std::shared_ptr<EffectiveSet> unchecked;
  absl::StatusOr<std::shared_ptr<EffectiveSet>> next =
      Combine(current_->files, std::move(overlay), problems, &unchecked);
  return Publish(next.ok() ? *std::move(next) : std::move(unchecked));
}

bool PolicyStore::InEffect(const std::shared_ptr<const PolicyOverlay>& overlay) const {
  const uint64_t generation = overlay == nullptr ? 0 : overlay->generation;
  return generation == current_->generation() && (overlay == nullptr) == (current_->overlay == nullptr);
}

absl::StatusOr<std::shared_ptr<const EffectiveSet>> PolicyStore::ReloadFiles(
    std::shared_ptr<const PolicySet> files, Diagnostics* problems) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<const PolicySet> before = std::exchange(read_files_, SealedFiles(std::move(files)));
  absl::StatusOr<std::shared_ptr<EffectiveSet>> next = Combine(Base(), current_->overlay, problems);
  if (!next.ok()) {
    read_files_ = std::move(before);
    return next.status();
  }
  return Publish(*std::move(next));
}

std::shared_ptr<const EffectiveSet> PolicyStore::Publish(std::shared_ptr<EffectiveSet> next) {
  next->version = current_ == nullptr ? 1 : current_->version + 1;
  current_ = std::move(next);
  return current_;
}

}  // namespace gangkeeper::model
