// gangkeeper store/etcd: the Client on the v3 JSON gateway (client.h): its
// calls are in kv.cc (range, put, delete, txn, compaction), lease.cc and
// watch.cc, all through one Transport.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gangkeeper/store/etcd/client.h"
#include "src/store/etcd/transport.h"

namespace gangkeeper::etcd {

class HttpEtcdClient final : public Client {
 public:
  explicit HttpEtcdClient(std::unique_ptr<Transport> transport) : transport_(std::move(transport)) {}

  // --- Client: kv.cc
  absl::StatusOr<RangeResult> Range(const std::string& key, const RangeOptions& options) override;
  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value, int64_t lease) override;
  absl::StatusOr<std::pair<int64_t, int64_t>> Delete(const std::string& key, const std::string& range_end) override;
  absl::StatusOr<TxnResult> Txn(const std::vector<Compare>& compares, const std::vector<Op>& success,
                                const std::vector<Op>& failure) override;
  absl::Status Compact(int64_t revision) override;

  // --- Client: lease.cc
  absl::StatusOr<LeaseGrant> Grant(absl::Duration ttl) override;
  absl::StatusOr<int64_t> KeepAlive(int64_t lease) override;
  absl::Status Revoke(int64_t lease) override;
  absl::StatusOr<int64_t> TimeToLive(int64_t lease) override;

  // --- Client: watch.cc
  absl::StatusOr<std::unique_ptr<Watch>> StartWatch(
      const std::string& key, const WatchOptions& options,
      std::function<void(const std::vector<WatchEvent>& events, int64_t revision)> on_events,
      std::function<void(const absl::Status& why)> on_end) override;

 private:
  const std::unique_ptr<Transport> transport_;
};

}  // namespace gangkeeper::etcd
