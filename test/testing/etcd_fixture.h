// gangkeeper tests: a real etcd and a client for the tests of the etcd
// journal (test/store) and the replicas (test/replica), and a leader term
// made by hand (the leader key created anew, and its fence), without an
// elector.
#pragma once

#include <memory>
#include <string>

#include "gangkeeper/base/clock.h"
#include "gangkeeper/store/etcd/client.h"
#include "gtest/gtest.h"
#include "test/testing/etcd_process.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::testing {

class EtcdFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    auto etcd = testing::EtcdProcess::Start();
    ASSERT_THAT(etcd.status(), testing::IsOk());
    etcd_ = *std::move(etcd);
    etcd::ClientOptions o;
    o.endpoints = {etcd_->endpoint()};
    auto c = etcd::Client::Create(o);
    ASSERT_THAT(c.status(), testing::IsOk());
    client_ = *std::move(c);
  }

  // A new term: the leader key (re)created; its fence.
  etcd::Compare NewTerm() {
    const std::string key = prefix_ + "leader";
    EXPECT_THAT(client_->Delete(key).status(), testing::IsOk());
    absl::StatusOr<int64_t> rev = client_->Put(key, "replica");
    EXPECT_THAT(rev.status(), testing::IsOk());
    return etcd::Compare::CreateRevision(key, rev.ok() ? *rev : 0);
  }

  const std::string prefix_ = "/gk/";
  std::unique_ptr<testing::EtcdProcess> etcd_;
  std::unique_ptr<etcd::Client> client_;
  base::SimulatedClock clock_{absl::FromUnixSeconds(1'700'000'000)};
};

}  // namespace gangkeeper::testing
