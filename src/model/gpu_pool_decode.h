// gangkeeper: decoding `gangkeeper.io/v1alpha1 GPUNodePool` manifests from JSON.
//
// The policy loader turns each YAML or JSON document into an nlohmann::json value and, for kind
// GPUNodePool, calls DecodeAndValidateGpuNodePool (or DecodeGpuNodePool, then
// ValidateGpuNodePool from gangkeeper/model/gpu_pool.h when decoding left no errors). Nothing
// here throws: wrong shapes and types become field errors. Pure functions; thread-safe.
#pragma once

#include "absl/strings/string_view.h"
#include "gangkeeper/base/field_path.h"
#include "gangkeeper/model/gpu_pool.h"
#include "nlohmann/json_fwd.hpp"

namespace gangkeeper::model {

// Decodes a whole manifest (apiVersion, kind, metadata.name, spec) into `*out`, which is reset
// first. Problems go to `errors` with paths under `root` (e.g. "spec.nodes"):
//   - apiVersion must be gangkeeper.io/v1alpha1 and kind GPUNodePool;
//   - metadata.name is required and must be a DNS-1123 subdomain;
//   - spec is required; spec.gpu, spec.gpusPerNode and spec.nodes are required, spec.flavor is
//     required (checked by ValidateGpuNodePool when present but empty); migStrategy defaults to
//     none and migProfiles to empty (JSON null counts as absent);
//   - integers may be JSON integers, whole-valued floats, or strings of decimal digits with an
//     optional '-' (YAML plain scalars arrive either way); anything else is kInvalid;
//   - unknown spec fields are kNotSupported, with a "did you mean" for near misses
//     (gpuPerNode -> gpusPerNode). Unknown top-level and metadata fields are ignored.
// Decoding does not check values against each other (layout fit, bounds): that is
// ValidateGpuNodePool, which callers run only when this left no errors, because a half-decoded
// pool gives misleading follow-up errors.
void DecodeGpuNodePool(const nlohmann::json& object, const base::FieldPath& root,
                       GpuNodePool* out, base::FieldErrors* errors);

// DecodeGpuNodePool, then, if it added no errors, ValidateGpuNodePool at `root.spec`.
void DecodeAndValidateGpuNodePool(const nlohmann::json& object, const base::FieldPath& root,
                                  GpuNodePool* out, base::FieldErrors* errors);

// A Kubernetes DNS-1123 subdomain (object names): 1-253 characters of [a-z0-9.-], every
// '.'-separated label starting and ending with [a-z0-9]. Shared with gpu_pool.cc.
bool IsDnsSubdomain(absl::string_view name);

}  // namespace gangkeeper::model
