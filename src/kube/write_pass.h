// gangkeeper: one pass's writes to Kueue's objects, through one gate.
//
// The Kueue status writer and the Workload publisher write only while this
// replica leads, and at most a budget of writes per pass. The lease is asked
// before every write, not only when a pass starts: a pass that outlives the
// lease (a slow API server) sends nothing more. Every write of a pass goes
// through its WritePass, so none can skip the question.
//
//   WritePass pass(client, options.leading, options.max_writes_per_pass);
//   absl::StatusOr<json> r = pass.Patch(path, PatchType::kMerge, body);
//   if (WritePass::Refused(r.status())) return false;  // nothing was sent
//
// Not thread-safe: one pass runs on one thread.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gangkeeper/kube/client.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::kube {

class WritePass {
 public:
  // `client` outlives the pass; an empty `leading` always leads.
  WritePass(Client* client, std::function<bool()> leading, int budget)
      : client_(client), leading_(std::move(leading)), budget_(budget) {}

  // Whether a write may go now: budget left and still leading (asks the
  // lease). For work that reads before it writes.
  bool MayWrite() {
    if (budget_ <= 0) return false;
    if (!leading_ || leading_()) return true;
    lost_lead_ = true;
    return false;
  }

  // The writes. Each asks MayWrite first; refused, it sends nothing and
  // answers a status Refused() recognizes. Sent, it spends one of the
  // budget, whatever the API server answers.
  absl::StatusOr<nlohmann::json> Patch(const std::string& path, PatchType type, const nlohmann::json& patch) {
    if (!Spend()) return RefusedStatus();
    return client_->Patch(path, type, patch);
  }
  absl::StatusOr<nlohmann::json> Post(const std::string& path, const std::string& body) {
    if (!Spend()) return RefusedStatus();
    return client_->Post(path, body);
  }
  absl::StatusOr<nlohmann::json> Delete(const std::string& path, const std::string& uid,
                                        const std::string& propagation_policy) {
    if (!Spend()) return RefusedStatus();
    return client_->Delete(path, uid, propagation_policy);
  }

  // A write this gate did not send (budget spent or lease lost).
  static bool Refused(const absl::Status& s) {
    return s.code() == absl::StatusCode::kResourceExhausted && s.message() == kRefused;
  }
  // A write (or MayWrite) found the lease lost during this pass.
  bool lost_lead() const { return lost_lead_; }

 private:
  static constexpr const char* kRefused = "write pass: budget spent or no longer leading";
  static absl::Status RefusedStatus() { return absl::ResourceExhaustedError(kRefused); }
  bool Spend() {
    if (!MayWrite()) return false;
    --budget_;
    return true;
  }

  Client* const client_;
  const std::function<bool()> leading_;
  int budget_;
  bool lost_lead_ = false;
};

}  // namespace gangkeeper::kube
