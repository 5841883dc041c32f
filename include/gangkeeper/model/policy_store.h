// gangkeeper: the one owner of "which quota objects are in effect".
//
// The policies a node runs with are the policy files (--policies) with the
// overlay of changes made through the HTTP API (overlay.h) applied on top.
// PolicyStore holds both halves, combines them in one place (ApplyOverlay),
// validates the result as a whole (ValidatePolicySet: the rules and
// messages of `gangkeeper check-policies` and of POST /v1/apply), and
// publishes it as an immutable EffectiveSet with a version that grows
// by one with every publication. Readers keep the shared_ptr they got.
//
// Two answers to "did the policies change?": within this process, a
// comparison of versions (a new version is a new publication, even of the
// same content); across restarts and replicas, a comparison of digests
// (policy_digest.h: the identity of the content). Every set the store
// hands out is sealed with its digest, computed once when it is composed.
//
// PolicyEditor is the interface through which the API makes an overlay
// change durable (api::LocalPolicyEditor with one replica,
// replica::EtcdPolicyEditor with several); it lives here, beside the store
// whose overlay it writes, so that neither implementation depends on the
// other's module.
//
// PolicyStore is thread-safe; EffectiveSet is immutable once published.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/objects.h"
#include "gangkeeper/model/overlay.h"
#include "gangkeeper/model/policy_digest.h"

namespace gangkeeper::model {

// The cluster's namespaces: name -> labels (kube::NamespaceWatcher).
using ClusterNamespaces = std::map<std::string, Labels>;

// Kueue's objects as read from the cluster (--policy-source cluster;
// kube::KueueObjectWatcher): every ResourceFlavor, ClusterQueue,
// LocalQueue, Cohort and WorkloadPriorityClass that decoded, each with its
// source "the cluster (clusterqueues/NAME)". A ClusterQueue whose object
// could not be decoded is in `cluster_queues` too, as a stand-in with no
// quota and ClusterQueue::inactive_reason set (so its workloads say why
// they wait); other undecodable objects are left out (the watcher logs
// them).
struct ClusterKueueObjects {
  PolicySet objects;  // only the five Kueue kinds are read
};

// The five Kueue kinds of `set` (ResourceFlavors, ClusterQueues with their
// inactive_reason, LocalQueues, Cohorts, WorkloadPriorityClasses) as
// ClusterKueueObjects; nothing else of `set` (GPUNodePools,
// PriorityClasses, Namespaces, the Configuration) is copied.
ClusterKueueObjects KueueObjectsOf(const PolicySet& set);

// The inverse: replaces the five Kueue kinds of `*set` by `cluster`'s,
// leaving everything else of `*set` as it was.
void SetKueueObjects(const ClusterKueueObjects& cluster, PolicySet* set);

// Decodes one object read from the cluster (JSON, as the API server
// serves it: status and server-set metadata are ignored) into
// `cluster->objects`, with the rules and messages of the policy files;
// `source` names it in diagnostics ("the cluster (clusterqueues/NAME)").
// A ClusterQueue that does not decode is added as an inactive stand-in
// named `name` whose reason is the decoder's first error; any other kind is
// left out. Problems go to `problems` (may be null). False when the object
// was refused.
bool DecodeClusterObject(absl::string_view json, absl::string_view source, absl::string_view kind,
                         absl::string_view name, ClusterKueueObjects* cluster, Diagnostics* problems);

// Lays `cluster`'s Kueue objects over `files` in place of the files' own
// (GPUNodePools, PriorityClasses, Namespaces and the Configuration stay the
// files'), then keeps what ValidatePolicySet refuses from stopping the
// rest: a ClusterQueue with an error becomes an inactive stand-in whose
// reason is the error (with the field and the fix), any other object with
// an error (a LocalQueue of a missing ClusterQueue, a Cohort on a cycle, a
// GPUNodePool of a missing flavor) is left out. Every such problem goes to
// `problems` (may be null). The result validates without errors.
PolicySet WithClusterObjects(const PolicySet& files, const ClusterKueueObjects& cluster, Diagnostics* problems);

// One combination of the files and an overlay.
struct EffectiveSet {
  // 0 for a candidate (PolicyStore::Compose); from 1 up, one more for every
  // set the store published.
  uint64_t version = 0;
  // The policy files, their Namespace objects replaced by the cluster's
  // namespaces once those are known (SetClusterNamespaces); never null.
  std::shared_ptr<const PolicySet> files;
  std::shared_ptr<const PolicyOverlay> overlay;  // the API's changes; null: none
  std::shared_ptr<const PolicySet> policies;     // files with overlay; never null

  // The overlay's generation (0 without one).
  uint64_t generation() const { return overlay == nullptr ? 0 : overlay->generation; }
  // The identity of `policies`' content (sealed: not computed again).
  PolicyDigest digest() const { return DigestOf(*policies); }
};

class PolicyStore {
 public:
  // Publishes `files` (null: no policy files) without an overlay as version
  // 1. The files are taken as valid: LoadPolicies validated them.
  explicit PolicyStore(std::shared_ptr<const PolicySet> files);
  PolicyStore(const PolicyStore&) = delete;
  PolicyStore& operator=(const PolicyStore&) = delete;

  // The set published last; never null.
  std::shared_ptr<const EffectiveSet> current() const;

  // The current files with `overlay` (null: none), validated, not
  // published (version 0). InvalidArgument with the problems' summary when
  // the combination has errors; `problems` (may be null) receives every
  // diagnostic, warnings too.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<const EffectiveSet>> Compose(
      std::shared_ptr<const PolicyOverlay> overlay, Diagnostics* problems) const;

  // Makes the files with `overlay` current: as Compose, then published with
  // the next version. The current set is returned unchanged (no new
  // version) when `overlay` is the one in effect (same generation; an older
  // generation is published: a recorded state can be older than what this
  // store last saw). On an error the current set stays.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<const EffectiveSet>> SetOverlay(
      std::shared_ptr<const PolicyOverlay> overlay, Diagnostics* problems);

  // Publishes the files with an overlay that is durable already (recovered
  // from the journal, fed from etcd, or just written by the API): it is in
  // effect whatever this store thinks of it, so it is published even when
  // the combination has errors (the policy files were edited while it was
  // recorded); they go to `problems` (may be null) for the caller to log.
  // Otherwise as SetOverlay: no new version for the overlay in effect.
  std::shared_ptr<const EffectiveSet> Adopt(std::shared_ptr<const PolicyOverlay> overlay, Diagnostics* problems);

  // Replaces the files (null: none), keeping the overlay; validated and
  // published like SetOverlay (always a new version). On an error the
  // current set stays.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<const EffectiveSet>> ReloadFiles(
      std::shared_ptr<const PolicySet> files, Diagnostics* problems);

  // Makes the cluster's namespaces the ones ClusterQueue namespaceSelectors
  // read, in place of the Namespace objects in the files (which stay for
  // --kube none); null goes back to the files'. Published like ReloadFiles;
  // the current set is returned unchanged (no new version) when the labels
  // are the ones in effect, so a resync of an unchanged cluster re-evaluates
  // nothing.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<const EffectiveSet>> SetClusterNamespaces(
      std::shared_ptr<const ClusterNamespaces> namespaces, Diagnostics* problems);

  // Makes Kueue's objects from the cluster the ones in effect, in place of
  // the Kueue objects of the files (WithClusterObjects: an invalid object
  // never stops the others; its problems go to `problems`, may be null);
  // null goes back to the files'. Published like SetClusterNamespaces: a
  // new version, unless the objects are the ones in effect (same pointer).
  [[nodiscard]] absl::StatusOr<std::shared_ptr<const EffectiveSet>> SetClusterObjects(
      std::shared_ptr<const ClusterKueueObjects> objects, Diagnostics* problems);

  // Held by a writer across publishing a set here and handing it to the
  // broker (the namespace watch; the one-node API editor, from its check
  // that nothing was published since it composed until it adopts what the
  // broker made durable), so the broker receives this node's sets in the
  // order they were published. Never taken by the store itself; take it
  // before any store call.
  absl::Mutex& publication() const ABSL_LOCK_RETURNED(publication_mu_) { return publication_mu_; }

 private:
  bool InEffect(const std::shared_ptr<const PolicyOverlay>& overlay) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static absl::StatusOr<std::shared_ptr<EffectiveSet>> Combine(std::shared_ptr<const PolicySet> files,
                                                                    std::shared_ptr<const PolicyOverlay> overlay,
                                                                    Diagnostics* problems,
                                                                    std::shared_ptr<EffectiveSet>* unchecked = nullptr);
  std::shared_ptr<const EffectiveSet> Publish(std::shared_ptr<EffectiveSet> next)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The files as read, and the cluster's namespaces laid over them.
  std::shared_ptr<const PolicySet> Base() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex publication_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::shared_ptr<const EffectiveSet> current_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const PolicySet> read_files_ ABSL_GUARDED_BY(mu_);  // never null
  std::shared_ptr<const ClusterNamespaces> cluster_namespaces_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const ClusterKueueObjects> cluster_objects_ ABSL_GUARDED_BY(mu_);
};

// Where the API's overlay changes are made durable. The API edits the
// overlay optimistically: Read what is in effect, build and validate the
// new overlay (PolicyStore::Compose), Write it only if nothing changed
// since the read.
class PolicyEditor {
 public:
  // What a change starts from.
  struct Current {
    std::shared_ptr<const PolicySet> policies;     // in effect; never null
    std::shared_ptr<const PolicyOverlay> overlay;  // the API's changes; may be null
    int64_t version = 0;                           // opaque: handed back to Write
    uint64_t store_version = 0;                    // opaque too (the one-node editor's)
  };

  virtual ~PolicyEditor() = default;

  [[nodiscard]] virtual absl::StatusOr<Current> Read() = 0;
  // Makes `overlay` the API's changes, `policies` (the files with it) the
  // set in effect, if nothing changed since `base` was read; durable when
  // it returns OK. Aborted: changed meanwhile (read again and redo the
  // change). InvalidArgument: the policies cannot form a quota tree.
  // Anything else: not written (or not known to be), retry later.
  [[nodiscard]] virtual absl::Status Write(const Current& base, std::shared_ptr<const PolicyOverlay> overlay,
                                           std::shared_ptr<const PolicySet> policies, const std::string& actor,
                                           const std::string& what) = 0;
};

}  // namespace gangkeeper::model
