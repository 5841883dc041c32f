// gangkeeper: writing policy objects back out as Kubernetes manifests.
//
// The inverse of DecodeManifests (manifest.h). The journal and its snapshots
// store the whole PolicySet as EncodeManifests() text and read it back with
// DecodeManifests(); the HTTP API serves single objects in Kueue's own form
// with EncodeObject(). The output is the object after Kueue's defaulting:
// every field the model holds is written with its effective value
// (queueingStrategy, flavorFungibility, preemption, stopPolicy, fairSharing),
// except optional fields whose absence means something (namespaceSelector,
// borrowingLimit, lendingLimit, maxPriorityThreshold, tolerationSeconds),
// which are omitted when unset. Status and the metadata the decoder drops
// (annotations, uid, ...) are not written. Pure functions; thread-safe.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "gangkeeper/model/objects.h"
#include "nlohmann/json_fwd.hpp"

namespace gangkeeper::model {

// EncodeManifests' spelling of ClusterQueue::inactive_reason.
inline constexpr absl::string_view kInactiveReasonAnnotation = "gangkeeper.io/inactive-reason";

// One object as `{apiVersion, kind, metadata: {name, [namespace], [labels],
// [resourceVersion]}, spec: {...}}` (PriorityClass and WorkloadPriorityClass
// keep value/description at the top level, as Kubernetes does; Namespace has
// no spec).
//
// apiVersion is the object's recorded meta.api_version when the decoder
// accepts it for that kind, otherwise the kind's default
// (kueue.x-k8s.io/v1beta1, scheduling.k8s.io/v1, v1). The spelling follows
// the version: a v1beta2 ClusterQueue writes spec.cohortName, v1beta1
// spec.cohort; a v1alpha1 Cohort writes spec.parent, later ones
// spec.parentName. Quantities are quantity::Quantity::Format() strings, so
// they read back exactly; a fair-sharing weight is a quantity string when it
// is a whole number of milli-units and a JSON number otherwise (so that the
// double reads back bit for bit).
//
// The object's own name is written, not the PolicySet key it is stored under.
// Strings that are not valid UTF-8 (only hand-built objects can hold them:
// the decoder rejects them) stay as they are in the json value; serialize it
// with nlohmann::json::error_handler_t::replace, as EncodeManifests does, or
// dump() throws.
nlohmann::json EncodeObject(const ResourceFlavor& flavor);
nlohmann::json EncodeObject(const ClusterQueue& cluster_queue);
nlohmann::json EncodeObject(const LocalQueue& local_queue);
nlohmann::json EncodeObject(const Cohort& cohort);
nlohmann::json EncodeObject(const WorkloadPriorityClass& priority_class);
nlohmann::json EncodeObject(const PriorityClass& priority_class);
nlohmann::json EncodeObject(const Namespace& ns);
// `gangkeeper.io/v1alpha1 GPUNodePool`; metadata holds the name only (a pool
// records nothing else).
nlohmann::json EncodeObject(const GpuNodePool& pool);

// Every object of `policies` in one JSON document, a `v1 List` whose items
// come in dependency order — Namespace, PriorityClass, WorkloadPriorityClass,
// ResourceFlavor, GPUNodePool, Cohort, ClusterQueue, LocalQueue — and by name
// within a kind (LocalQueues by namespace, then name). Compact (one line),
// deterministic for equal inputs, and never throws: invalid UTF-8 becomes
// U+FFFD, as Kubernetes' own JSON decoding does.
//
// For every PolicySet that DecodeManifests can produce,
// DecodeManifests(EncodeManifests(p)) yields, without errors, a PolicySet
// equal to p in every field except the SourceRefs (which name the new text)
// and gpu_node_pool_sources; and EncodeManifests of that result is the same
// text. Hand-built sets round-trip too as long as each map key is its
// object's name, meta.api_version is set (an empty one reads back as the
// kind's default) and every field holds a value the decoder accepts (valid
// names, non-negative quantities, a zero or positive finite weight, a
// fungibility preference only with TryNextFlavor twice, ...).
//
// A ClusterQueue with an inactive_reason (the cluster source's stand-in for
// an invalid object) carries it as the annotation kInactiveReasonAnnotation,
// which DecodeManifests reads back: the journal's record of the policies,
// and so their digest (policy_digest.h), keeps which queues are refused and
// why across a restart and on every replica. EncodeObject does not write
// it (it is not part of Kueue's object).
std::string EncodeManifests(const PolicySet& policies);

}  // namespace gangkeeper::model
