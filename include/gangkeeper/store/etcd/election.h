// gangkeeper store/etcd: lease-based leader election with fencing (DESIGN
// §9, issue #10).
//
// The leader is whoever holds `key`: a key created (compare: absent) with
// the value `identity` under a lease of `ttl`, kept alive every `renew`.
// A term is identified by the key's create revision; every write a leader
// makes is a transaction that also compares that revision (Fence()), so a
// replica that lost the key can never write again, whatever its clock says.
//
// Stepping down happens before etcd can expire the lease: a leader whose
// last successful keep-alive was *sent* more than `ttl - renew` ago
// considers itself no longer leading (Leading() false, on_lost called),
// so a partitioned leader stops actuating while etcd still holds its key.
// A follower checks the key every `retry` and campaigns when it is gone.
// Resign() revokes the lease: the key goes at once and another replica
// takes over without waiting for the TTL.
//
// Callbacks run on the elector's thread, one at a time, in order
// (elected, lost, elected, ...); they may block briefly (stopping a
// broker) but must not call back into the Elector except Leading()/Fence().
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/store/etcd/client.h"

namespace gangkeeper::etcd {

struct ElectionOptions {
  std::string key = "/gangkeeper/leader";
  std::string identity;  // this replica, e.g. "host:pid"; shown as the leader
  absl::Duration ttl = absl::Seconds(10);
  absl::Duration renew = absl::Seconds(3);
  absl::Duration retry = absl::Milliseconds(500);  // a follower's check period
};

// One leadership term.
struct Term {
  int64_t lease = 0;
  int64_t revision = 0;  // the create revision of the leader key
  std::string identity;
};

struct ElectionCallbacks {
  std::function<void(const Term&)> on_elected;
  std::function<void(const Term&, const absl::Status& why)> on_lost;
};

class Elector {
 public:
  // Starts campaigning on a thread of its own. `client` and `clock` (both
  // required: the node passes its own clock) must outlive the Elector.
  // InvalidArgument on bad options (ttl < 2 s, renew >= ttl / 2 is refused:
  // a keep-alive must get two chances).
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Elector>> Start(Client* client, ElectionOptions options,
                                                                    ElectionCallbacks callbacks,
                                                                    const base::Clock* clock);
  virtual ~Elector() = default;  // resigns if leading, stops the thread

  // The term while this replica surely leads (see above); nullopt otherwise.
  virtual std::optional<Term> Leading() const = 0;
  // The compare every leader write carries: the leader key still has this
  // term's create revision.
  virtual Compare Fence(const Term& term) const = 0;
  // The current leader's identity as etcd last showed it ("" when none).
  virtual std::string LeaderIdentity() const = 0;
  // Gives up leadership (revokes the lease) and stops campaigning.
  virtual void Resign() = 0;
  // Tests: stop (true) or resume (false) sending keep-alives, as a network
  // partition between this replica and etcd would.
  virtual void PauseKeepAlives(bool paused) = 0;
};

}  // namespace gangkeeper::etcd
