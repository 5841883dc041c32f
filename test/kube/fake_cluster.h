// Tests of the kube module's watchers and writers: a FakeKubeApi (a real
// HTTPS server on loopback) with certificates from `gangkeeper certs`, and
// clients for it with a short retry budget.
#pragma once

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "gangkeeper/kube/client.h"
#include "gangkeeper/kube/config.h"
#include "gtest/gtest.h"
#include "test/testing/fake_kube_api.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::kube {

class FakeClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new ::gangkeeper::testing::TempDir();
    auto r = ::gangkeeper::testing::RunCommand({::gangkeeper::testing::GangkeeperBinary(), "certs", "--out",
                                                certs_->path()},
                                               absl::Seconds(60));
    ASSERT_THAT(r, ::gangkeeper::testing::IsOk());
    ASSERT_EQ(r->exit_code, 0) << r->err;
  }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(certs_, nullptr);
    ::gangkeeper::testing::FakeKubeOptions o;
    o.cert_file = certs_->File("tls.crt");
    o.key_file = certs_->File("tls.key");
    o.token = "fake-token";
    o.bookmark_interval = absl::Milliseconds(100);
    auto api = ::gangkeeper::testing::FakeKubeApi::Start(o);
    ASSERT_THAT(api, ::gangkeeper::testing::IsOk());
    fake_ = *std::move(api);
    client_ = NewFakeClusterClient();
    ASSERT_NE(client_, nullptr);
  }

  // A client of the fake: two attempts per call, quick backoff.
  std::unique_ptr<Client> NewFakeClusterClient() {
    ClusterConfig c;
    c.host = "127.0.0.1";
    c.port = fake_->port();
    std::ifstream in(certs_->File("ca.crt"), std::ios::binary);
    std::ostringstream ca;
    ca << in.rdbuf();
    c.ca_pem = ca.str();
    c.token = "fake-token";
    c.source = "fake_cluster";
    ClientOptions co;
    co.timeout = absl::Seconds(5);
    co.retry.max_attempts = 2;
    co.retry.initial_backoff = absl::Milliseconds(10);
    co.retry.max_backoff = absl::Milliseconds(20);
    auto client = Client::Create(std::move(c), co);
    EXPECT_THAT(client, ::gangkeeper::testing::IsOk());
    return client.ok() ? *std::move(client) : nullptr;
  }

  static inline ::gangkeeper::testing::TempDir* certs_ = nullptr;
  std::unique_ptr<::gangkeeper::testing::FakeKubeApi> fake_;
  std::unique_ptr<Client> client_;  // a client of fake_ for the code under test
};

}  // namespace gangkeeper::kube
