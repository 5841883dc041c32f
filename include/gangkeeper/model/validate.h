// gangkeeper: checks across policy objects, and capacity against GPU pools.
//
// ValidatePolicySet() reports, as Diagnostics naming object, field and fix:
// references to missing flavors, a resource in two resource groups, flavors
// that do not cover a group's resources, limits without a cohort,
// lendingLimit above nominal, LocalQueues of missing ClusterQueues, cohort
// cycles, several globalDefault PriorityClasses, MIG pools whose layout does
// not fit their GPU; and as warnings: nominal quota above what the flavor's
// GPUNodePools advertise, and MIG resources no pool of the flavor advertises.
// Pure function; thread-compatible.
#pragma once

#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/objects.h"

namespace gangkeeper::model {

void ValidatePolicySet(const PolicySet& policies, Diagnostics* diagnostics);

}  // namespace gangkeeper::model
