// gangkeeper: which resources Kubernetes counts in whole units only.
//
// Kubernetes' rule for extended resources (a domain-prefixed name outside
// kubernetes.io/, such as nvidia.com/gpu, nvidia.com/mig-1g.5gb or
// example.com/foo): they are integers, never overcommitted. The policy
// validator refuses fractional quotas for them and the admission path
// refuses fractional requests; both ask this header. Pure functions;
// thread-safe.
#pragma once

#include "absl/strings/string_view.h"

namespace gangkeeper::model {

// True for a name with a domain prefix ("example.com/foo") that is not
// native (no "kubernetes.io/" in it) and not a quota name ("requests.*"),
// as Kubernetes' IsExtendedResourceName decides. "cpu", "memory",
// "hugepages-2Mi" and "kubernetes.io/batch-cpu" are not extended.
bool IsExtendedResource(absl::string_view name);

}  // namespace gangkeeper::model
