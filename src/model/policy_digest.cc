// gangkeeper: the identity of a policy set's content (see policy_digest.h).
#include "gangkeeper/model/policy_digest.h"

#include <openssl/evp.h>

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/model/encode.h"
#include "gangkeeper/model/objects.h"

namespace gangkeeper::model {

// The one writer of SealedDigest (a friend of it).
class PolicySealer {
 public:
  static std::shared_ptr<const PolicySet> Stamp(PolicySet set, PolicyDigest digest) {
    auto out = std::make_shared<PolicySet>(std::move(set));
    out->sealed.digest_ = std::move(digest);
    return out;
  }
};

PolicyDigest PolicyDigest::OfManifests(absl::string_view canonical) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  GK_CHECK(EVP_Digest(canonical.data(), canonical.size(), md, &n, EVP_sha256(), nullptr) == 1 && n == kSize);
  PolicyDigest out;
  out.bytes_.assign(reinterpret_cast<const char*>(md), n);
  return out;
}

absl::StatusOr<PolicyDigest> PolicyDigest::FromBytes(absl::string_view bytes) {
  if (bytes.size() != kSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("a policy digest is ", kSize, " bytes, not ", bytes.size()));
  }
  PolicyDigest out;
  out.bytes_ = std::string(bytes);
  return out;
}

std::string PolicyDigest::Hex() const { return known() ? absl::BytesToHexString(bytes_) : "unknown"; }

std::shared_ptr<const PolicySet> Seal(PolicySet set) {
  PolicyDigest digest = PolicyDigest::OfManifests(EncodeManifests(set));
  return PolicySealer::Stamp(std::move(set), std::move(digest));
}

std::shared_ptr<const PolicySet> Seal(PolicySet set, PolicyDigest recorded) {
  GK_CHECK(recorded.known());
  return PolicySealer::Stamp(std::move(set), std::move(recorded));
}

std::shared_ptr<const PolicySet> Sealed(std::shared_ptr<const PolicySet> set) {
  if (set == nullptr || set->sealed.digest().known()) return set;
  return Seal(*set);
}

PolicyDigest DigestOf(const PolicySet& set) {
  if (set.sealed.digest().known()) return set.sealed.digest();
  return PolicyDigest::OfManifests(EncodeManifests(set));
}

}  // namespace gangkeeper::model
