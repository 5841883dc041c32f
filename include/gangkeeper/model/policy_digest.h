// gangkeeper: the identity of a policy set's content.
//
// A PolicyDigest is the SHA-256 of a set's canonical encoding, the
// EncodeManifests() text (encode.h): the same for the same content on every
// replica and across restarts, different when anything the encoding holds
// differs. What it holds decides what counts as "the same": the objects as
// the decoder understood them, sorted by kind and name, after Kueue's
// defaulting. So the order of the files and of the objects in them,
// whitespace, comments, YAML or JSON, a field spelled out with its default
// value, and the metadata the decoder drops (annotations, uid, ...) do not
// change the digest; any field the model holds does (a quota, a label, an
// apiVersion, an overlay object's resourceVersion). Where the objects came
// from (SourceRefs) does not.
//
// "Did the policies change?" is a comparison of digests: the broker compares
// the recorded set's with the one it is given at start-up, and the durable
// state records the digest with the policies (src/store/FORMAT.md §4).
//
// The digest is computed once per set: Seal() computes it and stamps it on
// the shared, immutable set (the policy store seals every set it publishes;
// the store's decoder seals recorded sets with their recorded digest).
// DigestOf() reads the stamp, and computes the digest of a set nobody
// sealed (sets built by hand). A stamp never outlives its content: a copy
// or a move of a PolicySet starts unsealed, since the copy may be changed.
//
// Value types and pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gangkeeper::model {

struct PolicySet;  // objects.h

class PolicyDigest {
 public:
  static constexpr size_t kSize = 32;  // SHA-256

  // Unknown: what an unsealed set holds (never what DigestOf returns).
  PolicyDigest() = default;
  // The digest of `canonical`, an EncodeManifests() text.
  static PolicyDigest OfManifests(absl::string_view canonical);
  // A recorded digest: exactly kSize bytes, else InvalidArgument.
  static absl::StatusOr<PolicyDigest> FromBytes(absl::string_view bytes);

  bool known() const { return !bytes_.empty(); }
  // kSize bytes (empty when unknown).
  const std::string& bytes() const { return bytes_; }
  // Lower-case hex, for logs and messages ("unknown" when unknown).
  std::string Hex() const;

  friend bool operator==(const PolicyDigest& a, const PolicyDigest& b) { return a.bytes_ == b.bytes_; }
  friend bool operator!=(const PolicyDigest& a, const PolicyDigest& b) { return !(a == b); }

 private:
  std::string bytes_;
};

// The stamp a sealed PolicySet carries (PolicySet::sealed). Copying or
// moving one gives an unknown digest: only Seal stamps.
class SealedDigest {
 public:
  SealedDigest() = default;
  SealedDigest(const SealedDigest&) noexcept {}
  SealedDigest(SealedDigest&&) noexcept {}
  SealedDigest& operator=(const SealedDigest&) noexcept {
    digest_ = PolicyDigest();
    return *this;
  }
  SealedDigest& operator=(SealedDigest&&) noexcept {
    digest_ = PolicyDigest();
    return *this;
  }

  const PolicyDigest& digest() const { return digest_; }

 private:
  friend class PolicySealer;
  PolicyDigest digest_;
};

// `set`, immutable from now on, stamped with the digest of its content.
std::shared_ptr<const PolicySet> Seal(PolicySet set);
// `set` stamped with `recorded`, taken as its digest without computing it
// (the store's decoder: the digest was recorded with the set). `recorded`
// must be known.
std::shared_ptr<const PolicySet> Seal(PolicySet set, PolicyDigest recorded);
// `set` itself when it is sealed already (or null), else a sealed copy.
std::shared_ptr<const PolicySet> Sealed(std::shared_ptr<const PolicySet> set);

// The digest of `set`'s content: its stamp when sealed, else computed.
PolicyDigest DigestOf(const PolicySet& set);

}  // namespace gangkeeper::model
