// Tests for the Kubernetes REST client against FakeKubeApi: a real HTTPS
// server on 127.0.0.1 with certificates from `gangkeeper certs`. Every
// request the client sends is checked in the fake's call record (method,
// path, query, content type, body, bearer token). Retry backoffs are 10-50 ms;
// every wait is bounded in time and count.
#include "gangkeeper/kube/client.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/kube/config.h"
#include "gangkeeper/workload/workload.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/fake_kube_api.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::kube {
namespace {

using json = nlohmann::json;
using ::gangkeeper::testing::FakeKubeApi;
using ::gangkeeper::testing::FakeKubeOptions;
using ::gangkeeper::testing::GangkeeperBinary;
using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::RecordedCall;
using ::gangkeeper::testing::RunCommand;
using ::gangkeeper::testing::ScriptedFailure;
using ::gangkeeper::testing::StatusIs;
using ::gangkeeper::testing::TempDir;
using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kJobs[] = "/apis/batch/v1/namespaces/team-a/jobs";
constexpr char kMergeType[] = "application/merge-patch+json";
constexpr char kJsonPatchType[] = "application/json-patch+json";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Replaces the file atomically (write + rename), as the kubelet rotates
// projected service-account tokens.
void WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
  }
  std::filesystem::rename(tmp, path);
}

json Job(const std::string& name, json labels = json::object()) {
  return {{"metadata", {{"name", name}, {"labels", std::move(labels)}}},
          {"spec",
           {{"suspend", true},
            {"template",
             {{"metadata", {{"labels", {{"app", "train"}}}}},
              {"spec", {{"restartPolicy", "Never"}, {"containers", {{{"name", "w"}, {"image", "cuda:12"}}}}}}}}}}};
}

std::string JobPath(const std::string& name) { return ResourcePath(workload::InfoFor(workload::Kind::kJob), "team-a", name); }

std::vector<std::string> Names(const std::vector<json>& items) {
  std::vector<std::string> out;
  for (const json& i : items) out.push_back(i["metadata"]["name"].get<std::string>());
  return out;
}

class ClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new TempDir();
    other_certs_ = new TempDir();
    for (TempDir* d : {certs_, other_certs_}) {
      auto r = RunCommand({GangkeeperBinary(), "certs", "--out", d->path()}, absl::Seconds(60));
      ASSERT_THAT(r, IsOk());
      ASSERT_EQ(r->exit_code, 0) << r->err;
    }
  }
  static void TearDownTestSuite() {
    delete certs_;
    delete other_certs_;
    certs_ = other_certs_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(certs_, nullptr);
    FakeKubeOptions o;
    o.cert_file = certs_->File("tls.crt");
    o.key_file = certs_->File("tls.key");
    o.token = "fake-token";
    o.bookmark_interval = absl::Milliseconds(100);
    auto api = FakeKubeApi::Start(o);
    ASSERT_THAT(api, IsOk());
    fake_ = *std::move(api);
  }

  ClusterConfig Config() const {
    ClusterConfig c;
    c.host = "127.0.0.1";
    c.port = fake_->port();
    c.ca_pem = ReadAll(certs_->File("ca.crt"));
    c.token = "fake-token";
    c.source = "client_test";
    return c;
  }

  static ClientOptions Fast(int max_attempts = 4) {
    ClientOptions o;
    o.timeout = absl::Seconds(5);
    o.retry.max_attempts = max_attempts;
    o.retry.initial_backoff = absl::Milliseconds(10);
    o.retry.max_backoff = absl::Milliseconds(50);
    o.retry.max_total = absl::Seconds(20);
    return o;
  }

  std::unique_ptr<Client> NewClient(ClusterConfig config, ClientOptions options) {
    auto c = Client::Create(std::move(config), std::move(options));
    EXPECT_THAT(c, IsOk());
    return c.ok() ? *std::move(c) : nullptr;
  }
  std::unique_ptr<Client> NewClient(ClientOptions options = Fast()) { return NewClient(Config(), options); }

  json MustCreate(const std::string& collection, json obj) {
    auto r = fake_->Create(collection, std::move(obj));
    EXPECT_THAT(r, IsOk());
    return r.ok() ? *r : json();
  }

  std::vector<RecordedCall> CallsWith(const std::string& method) const {
    std::vector<RecordedCall> out;
    for (const RecordedCall& c : fake_->Calls()) {
      if (c.method == method) out.push_back(c);
    }
    return out;
  }

  // Waits (bounded) until `pred` holds.
  template <typename Pred>
  static bool WaitFor(Pred pred, absl::Duration timeout = absl::Seconds(5)) {
    base::Stopwatch sw;
    while (!pred()) {
      if (sw.Elapsed() > timeout) return false;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return true;
  }

  static TempDir* certs_;
  static TempDir* other_certs_;
  std::unique_ptr<FakeKubeApi> fake_;
};

TempDir* ClientTest::certs_ = nullptr;
TempDir* ClientTest::other_certs_ = nullptr;

// ---------------------------------------------------------------- ResourcePath

TEST(ResourcePathTest, CoreBatchCustomAndAllNamespaces) {
  using workload::InfoFor;
  using workload::Kind;
  EXPECT_EQ(ResourcePath(InfoFor(Kind::kPod), "team-a"), "/api/v1/namespaces/team-a/pods");
  EXPECT_EQ(ResourcePath(InfoFor(Kind::kPod), "team-a", "worker-0"), "/api/v1/namespaces/team-a/pods/worker-0");
  EXPECT_EQ(ResourcePath(InfoFor(Kind::kJob), "team-a"), "/apis/batch/v1/namespaces/team-a/jobs");
  EXPECT_EQ(ResourcePath(InfoFor(Kind::kJob), "team-a", "train"), "/apis/batch/v1/namespaces/team-a/jobs/train");
  EXPECT_EQ(ResourcePath(InfoFor(Kind::kPyTorchJob), "ml", "bert"),
            "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs/bert");
  EXPECT_EQ(ResourcePath(InfoFor(Kind::kJob), ""), "/apis/batch/v1/jobs");
  EXPECT_EQ(ResourcePath(InfoFor(Kind::kPod), ""), "/api/v1/pods");
  EXPECT_EQ(ResourcePath(InfoFor(Kind::kPyTorchJob), ""), "/apis/kubeflow.org/v1/pytorchjobs");
}

TEST_F(ClientTest, ResourcePathsReachTheServer) {
  using workload::InfoFor;
  using workload::Kind;
  MustCreate("/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs",
             {{"metadata", {{"name", "bert"}}}, {"spec", {{"runPolicy", {{"suspend", true}}}}}});
  MustCreate("/api/v1/namespaces/team-a/pods", {{"metadata", {{"name", "p"}}}, {"spec", {{"containers", json::array()}}}});
  MustCreate(kJobs, Job("a"));
  MustCreate("/apis/batch/v1/namespaces/team-b/jobs", Job("b"));
  auto client = NewClient();
  ASSERT_NE(client, nullptr);

  auto pt = client->Get(ResourcePath(InfoFor(Kind::kPyTorchJob), "ml", "bert"));
  ASSERT_THAT(pt, IsOk());
  EXPECT_EQ((*pt)["kind"], "PyTorchJob");
  EXPECT_EQ((*pt)["apiVersion"], "kubeflow.org/v1");
  auto pod = client->Get(ResourcePath(InfoFor(Kind::kPod), "team-a", "p"));
  ASSERT_THAT(pod, IsOk());
  EXPECT_EQ((*pod)["kind"], "Pod");
  auto all = client->List(ResourcePath(InfoFor(Kind::kJob), ""));
  ASSERT_THAT(all, IsOk());
  EXPECT_THAT(Names(all->items), ElementsAre("a", "b"));
  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2].path, "/apis/batch/v1/jobs");
}

// ---------------------------------------------------------------- Get

TEST_F(ClientTest, GetReturnsTheObject) {
  const json created = MustCreate(kJobs, Job("train", {{"team", "a"}}));
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto got = client->Get(JobPath("train"));
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ((*got)["metadata"]["name"], "train");
  EXPECT_EQ((*got)["metadata"]["uid"], created["metadata"]["uid"]);
  EXPECT_EQ((*got)["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"]);
  EXPECT_EQ((*got)["kind"], "Job");
  EXPECT_EQ((*got)["apiVersion"], "batch/v1");
  EXPECT_EQ((*got)["spec"]["suspend"], true);

  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].method, "GET");
  EXPECT_EQ(calls[0].path, "/apis/batch/v1/namespaces/team-a/jobs/train");
  EXPECT_EQ(calls[0].query, "");
  EXPECT_EQ(calls[0].body, "");
  EXPECT_EQ(calls[0].authorization, "Bearer fake-token");
  EXPECT_EQ(calls[0].status, 200);
  EXPECT_EQ(client->attempts(), 1u);
}

TEST_F(ClientTest, NotFoundIsFinalAndCarriesTheServersMessage) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto got = client->Get(JobPath("ghost"));
  EXPECT_THAT(got, StatusIs(absl::StatusCode::kNotFound, "jobs.batch \"ghost\" not found"));
  EXPECT_THAT(got, StatusIs(absl::StatusCode::kNotFound, "GET /apis/batch/v1/namespaces/team-a/jobs/ghost"));
  EXPECT_EQ(HttpCode(got.status()), 404);
  EXPECT_EQ(fake_->Calls().size(), 1u);
  EXPECT_EQ(client->attempts(), 1u);
}

TEST_F(ClientTest, OtherClientErrorsAreFinal) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  // 403
  fake_->Fail({.method = "GET", .path_contains = "/jobs/x", .status = 403, .times = -1});
  auto forbidden = client->Get(JobPath("x"));
  EXPECT_THAT(forbidden, StatusIs(absl::StatusCode::kPermissionDenied, "scripted failure 403"));
  EXPECT_EQ(HttpCode(forbidden.status()), 403);
  // 400: a label selector the server cannot parse.
  ListOptions bad;
  bad.label_selector = "team in (a";
  auto list = client->List(kJobs, bad);
  EXPECT_THAT(list, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(HttpCode(list.status()), 400);
  EXPECT_EQ(fake_->Calls().size(), 2u);
}

TEST_F(ClientTest, ConcurrentCallsFromManyThreads) {
  MustCreate(kJobs, Job("train"));
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        if (client->Get(JobPath("train")).ok()) ++ok;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 40);
  EXPECT_EQ(fake_->Calls().size(), 40u);
}

TEST_F(ClientTest, BasePathPrefixesEveryRequest) {
  ClusterConfig c = Config();
  c.base_path = "/k8s/clusters/c-1";
  auto client = NewClient(c, Fast());
  ASSERT_NE(client, nullptr);
  auto got = client->Get(JobPath("train"));
  // The fake serves no prefix: the request must have carried it to get 404.
  EXPECT_THAT(got, StatusIs(absl::StatusCode::kNotFound, "could not find the requested resource"));
  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].path, "/k8s/clusters/c-1/apis/batch/v1/namespaces/team-a/jobs/train");
}

TEST_F(ClientTest, PooledConnectionClosedByTheServerIsReplacedTransparently) {
  MustCreate(kJobs, Job("train"));
  auto client = NewClient(Fast(/*max_attempts=*/1));
  ASSERT_NE(client, nullptr);
  ASSERT_THAT(client->Get(JobPath("train")), IsOk());
  // The fake closes idle keep-alive connections after 1 s.
  absl::SleepFor(absl::Milliseconds(1500));
  EXPECT_THAT(client->Get(JobPath("train")), IsOk());
  EXPECT_EQ(fake_->Calls().size(), 2u);
}

// ---------------------------------------------------------------- auth

TEST_F(ClientTest, WrongTokenIsUnauthenticated) {
  ClusterConfig c = Config();
  c.token = "stolen-token";
  auto client = NewClient(c, Fast());
  ASSERT_NE(client, nullptr);
  auto got = client->Get(JobPath("train"));
  EXPECT_THAT(got, StatusIs(absl::StatusCode::kUnauthenticated, "Unauthorized"));
  EXPECT_EQ(HttpCode(got.status()), 401);
  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 1u);  // not retried
  EXPECT_EQ(calls[0].authorization, "Bearer stolen-token");
  EXPECT_EQ(calls[0].status, 401);
}

TEST_F(ClientTest, TokenFileIsReReadWhenTheTokenRotates) {
  MustCreate(kJobs, Job("train"));
  TempDir dir;
  const std::string token_file = dir.File("token");
  WriteFileAtomically(token_file, "bound-token-one\n");
  fake_->set_token("bound-token-one");
  ClusterConfig c = Config();
  c.token = "";
  c.token_file = token_file;
  auto client = NewClient(c, Fast());
  ASSERT_NE(client, nullptr);
  ASSERT_THAT(client->Get(JobPath("train")), IsOk());

  // The server moves on to a new token before the file does: refused.
  fake_->set_token("bound-token-number-two");
  EXPECT_THAT(client->Get(JobPath("train")), StatusIs(absl::StatusCode::kUnauthenticated));
  // The kubelet rotates the file: the same client picks it up.
  WriteFileAtomically(token_file, "bound-token-number-two\n");
  EXPECT_THAT(client->Get(JobPath("train")), IsOk());

  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].authorization, "Bearer bound-token-one");  // trailing newline stripped
  EXPECT_EQ(calls[1].authorization, "Bearer bound-token-one");
  EXPECT_EQ(calls[2].authorization, "Bearer bound-token-number-two");
}

// ---------------------------------------------------------------- TLS

TEST_F(ClientTest, ServerCertificateNotSignedByTheCaIsRefused) {
  ClusterConfig c = Config();
  c.ca_pem = ReadAll(other_certs_->File("ca.crt"));
  ASSERT_NE(c.ca_pem, Config().ca_pem);
  auto client = NewClient(c, Fast(/*max_attempts=*/2));
  ASSERT_NE(client, nullptr);
  auto got = client->Get(JobPath("train"));
  EXPECT_THAT(got, StatusIs(absl::StatusCode::kUnavailable, "certificate"));
  EXPECT_EQ(HttpCode(got.status()), 0);
  // Nothing, not even the token, reached the handler.
  EXPECT_TRUE(fake_->Calls().empty());
  EXPECT_THAT(client->Patch(JobPath("train"), PatchType::kMerge, {{"spec", {{"suspend", false}}}}),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_TRUE(fake_->Calls().empty());
}

TEST_F(ClientTest, TlsServerNameIsTheNameVerified) {
  MustCreate(kJobs, Job("train"));
  ClusterConfig good = Config();
  good.tls_server_name = "localhost";  // in the certificate; connect to 127.0.0.1 anyway
  auto client = NewClient(good, Fast());
  ASSERT_NE(client, nullptr);
  EXPECT_THAT(client->Get(JobPath("train")), IsOk());
  ASSERT_EQ(fake_->Calls().size(), 1u);

  ClusterConfig bad = Config();
  bad.tls_server_name = "kubernetes.example.com";  // not in the certificate
  auto wrong = NewClient(bad, Fast(/*max_attempts=*/1));
  ASSERT_NE(wrong, nullptr);
  EXPECT_THAT(wrong->Get(JobPath("train")), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(fake_->Calls().size(), 1u);
}

TEST_F(ClientTest, CreateRefusesAConfigurationWithoutAUsableCa) {
  ClusterConfig c = Config();
  c.ca_pem = "";
  EXPECT_THAT(Client::Create(c), StatusIs(absl::StatusCode::kInvalidArgument, "no CA"));
  c.ca_pem = "this is not a certificate";
  EXPECT_THAT(Client::Create(c), StatusIs(absl::StatusCode::kInvalidArgument, "not a PEM certificate"));
  c.ca_pem = ReadAll(certs_->File("tls.key"));  // PEM, but a key
  EXPECT_THAT(Client::Create(c), StatusIs(absl::StatusCode::kInvalidArgument, "not a PEM certificate"));
  c = Config();
  c.host = "";
  EXPECT_THAT(Client::Create(c), StatusIs(absl::StatusCode::kInvalidArgument, "host"));
  // A client certificate must come with a PEM key.
  c = Config();
  c.client_cert_pem = ReadAll(certs_->File("tls.crt"));
  c.client_key_pem = "not a key";
  EXPECT_THAT(Client::Create(c), StatusIs(absl::StatusCode::kInvalidArgument, "not PEM"));
  c.client_key_pem = ReadAll(certs_->File("tls.key"));
  auto with_cert = Client::Create(c, Fast());
  ASSERT_THAT(with_cert, IsOk());
  MustCreate(kJobs, Job("train"));
  EXPECT_THAT((*with_cert)->Get(JobPath("train")), IsOk());
}

// ---------------------------------------------------------------- List

TEST_F(ClientTest, ListFollowsEveryPageWithTheSelector) {
  std::vector<std::string> want;
  for (int i = 0; i < 7; ++i) {
    MustCreate(kJobs, Job(absl::StrCat("mine-", i), {{"team", "a"}}));
    want.push_back(absl::StrCat("mine-", i));
  }
  for (int i = 0; i < 3; ++i) MustCreate(kJobs, Job(absl::StrCat("other-", i), {{"team", "b"}}));
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  ListOptions o;
  o.label_selector = "team=a";
  o.limit = 3;
  auto list = client->List(kJobs, o);
  ASSERT_THAT(list, IsOk());
  EXPECT_EQ(Names(list->items), want);
  EXPECT_EQ(list->resource_version, std::to_string(fake_->resource_version()));

  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 3u);  // 3 + 3 + 1
  for (const RecordedCall& c : calls) {
    EXPECT_EQ(c.method, "GET");
    EXPECT_EQ(c.path, kJobs);
    EXPECT_EQ(c.body, "");
    EXPECT_EQ(c.status, 200);
    EXPECT_THAT(c.query, HasSubstr("labelSelector=team%3Da"));
    EXPECT_THAT(c.query, HasSubstr("limit=3"));
  }
  EXPECT_EQ(calls[0].query, "labelSelector=team%3Da&limit=3");
  EXPECT_THAT(calls[1].query, HasSubstr("&continue=fake-continue-"));
  EXPECT_THAT(calls[2].query, HasSubstr("&continue=fake-continue-"));
  EXPECT_NE(calls[1].query, calls[2].query);
}

TEST_F(ClientTest, ListWithoutLimitIsOneRequestAndFieldSelectorIsEscaped) {
  for (int i = 0; i < 3; ++i) MustCreate(kJobs, Job(absl::StrCat("j", i)));
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  ListOptions o;
  o.field_selector = "metadata.name!=j1";
  o.limit = 0;
  auto list = client->List(kJobs, o);
  ASSERT_THAT(list, IsOk());
  EXPECT_THAT(Names(list->items), ElementsAre("j0", "j2"));
  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].query, "fieldSelector=metadata.name%21%3Dj1");
  // An empty collection is an empty list with a resourceVersion.
  auto empty = client->List("/apis/batch/v1/namespaces/nobody/jobs");
  ASSERT_THAT(empty, IsOk());
  EXPECT_TRUE(empty->items.empty());
  EXPECT_EQ(empty->resource_version, std::to_string(fake_->resource_version()));
}

TEST_F(ClientTest, ExpiredContinueTokenRestartsTheList) {
  for (int i = 0; i < 5; ++i) MustCreate(kJobs, Job(absl::StrCat("train-", i)));
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  // Hold the first two page requests for a while so that the history can be
  // compacted after page one was answered and before page two is served.
  fake_->Fail({.method = "GET",
               .path_contains = kJobs,
               .non_watch_only = true,
               .status = 0,
               .delay = absl::Milliseconds(400),
               .times = 2});
  std::thread compactor([&] {
    const bool first_page_done = WaitFor([&] { return !fake_->Calls().empty(); });
    EXPECT_TRUE(first_page_done);
    // A job appears while the list is in progress; then the snapshot behind
    // the continue token is gone.
    EXPECT_THAT(fake_->Create(kJobs, Job("train-late")), IsOk());
    fake_->CompactHistory();
  });
  ListOptions o;
  o.limit = 2;
  auto list = client->List(kJobs, o);
  compactor.join();
  ASSERT_THAT(list, IsOk());
  // Every item exactly once, including the one created during the list, and
  // the resourceVersion of the restarted (complete) snapshot.
  EXPECT_THAT(Names(list->items), ElementsAre("train-0", "train-1", "train-2", "train-3", "train-4", "train-late"));
  EXPECT_EQ(list->resource_version, std::to_string(fake_->resource_version()));

  const auto calls = fake_->Calls();
  ASSERT_GE(calls.size(), 5u);
  EXPECT_EQ(calls[0].query, "limit=2");
  EXPECT_EQ(calls[0].status, 200);
  EXPECT_THAT(calls[1].query, HasSubstr("continue="));
  EXPECT_EQ(calls[1].status, 410);
  EXPECT_EQ(calls[2].query, "limit=2");  // from the first page again
  EXPECT_EQ(calls[2].status, 200);
  EXPECT_EQ(calls.size(), 5u);  // 2 + 2 + 2 items after the restart
}

TEST_F(ClientTest, ListOfAnUnservedResourceIsNotFound) {
  fake_->set_served("kubeflow.org/v1/pytorchjobs", false);
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto list = client->List("/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs");
  EXPECT_THAT(list, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(HttpCode(list.status()), 404);
  EXPECT_EQ(fake_->Calls().size(), 1u);
}

// ---------------------------------------------------------------- retries

TEST_F(ClientTest, ServerErrorsAreRetriedUntilSuccess) {
  MustCreate(kJobs, Job("train"));
  fake_->Fail({.method = "GET", .path_contains = "/jobs/train", .status = 500, .times = 2});
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto got = client->Get(JobPath("train"));
  ASSERT_THAT(got, IsOk());
  EXPECT_EQ((*got)["metadata"]["name"], "train");
  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].status, 500);
  EXPECT_EQ(calls[1].status, 500);
  EXPECT_EQ(calls[2].status, 200);
  for (const RecordedCall& c : calls) EXPECT_EQ(c.path, "/apis/batch/v1/namespaces/team-a/jobs/train");
  EXPECT_EQ(client->attempts(), 3u);
}

TEST_F(ClientTest, TooManyRequestsWaitsForRetryAfter) {
  MustCreate(kJobs, Job("train"));
  fake_->Fail({.method = "GET", .status = 429, .retry_after = "1", .times = 1});
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  base::Stopwatch sw;
  auto got = client->Get(JobPath("train"));
  const absl::Duration took = sw.Elapsed();
  ASSERT_THAT(got, IsOk());
  EXPECT_GE(took, absl::Milliseconds(900));
  EXPECT_LT(took, absl::Seconds(5));
  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].status, 429);
  EXPECT_EQ(calls[1].status, 200);
}

TEST_F(ClientTest, PersistentTooManyRequestsIsResourceExhaustedWithThePlainTextMessage) {
  fake_->Fail({.method = "GET", .status = 429, .retry_after = "0", .times = -1});
  auto client = NewClient(Fast(/*max_attempts=*/2));
  ASSERT_NE(client, nullptr);
  auto got = client->Get(JobPath("train"));
  EXPECT_THAT(got, StatusIs(absl::StatusCode::kResourceExhausted, "Too many requests"));
  EXPECT_EQ(HttpCode(got.status()), 429);
  EXPECT_EQ(fake_->Calls().size(), 2u);
}

TEST_F(ClientTest, PersistentUnavailableGivesUpAfterMaxAttempts) {
  MustCreate(kJobs, Job("train"));
  fake_->Fail({.status = 503, .times = -1});
  auto client = NewClient(Fast(/*max_attempts=*/3));
  ASSERT_NE(client, nullptr);
  auto got = client->Get(JobPath("train"));
  EXPECT_THAT(got, StatusIs(absl::StatusCode::kUnavailable, "scripted failure 503"));
  EXPECT_EQ(HttpCode(got.status()), 503);
  EXPECT_EQ(fake_->Calls().size(), 3u);
  EXPECT_EQ(client->attempts(), 3u);
}

TEST_F(ClientTest, ConflictIsRetried) {
  MustCreate(kJobs, Job("train"));
  fake_->Fail({.method = "PATCH", .status = 409, .times = 1});
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  const json patch = {{"spec", {{"suspend", false}}}};
  auto patched = client->Patch(JobPath("train"), PatchType::kMerge, patch);
  ASSERT_THAT(patched, IsOk());
  EXPECT_EQ((*patched)["spec"]["suspend"], false);
  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].status, 409);
  EXPECT_EQ(calls[1].status, 200);
  EXPECT_EQ(json::parse(calls[1].body), patch);  // the same request again
}

TEST_F(ClientTest, MaxTotalStopsRetryingEarly) {
  fake_->Fail({.status = 503, .retry_after = "1", .times = -1});
  ClientOptions o = Fast(/*max_attempts=*/8);
  o.retry.max_total = absl::Milliseconds(300);
  auto client = NewClient(o);
  ASSERT_NE(client, nullptr);
  base::Stopwatch sw;
  auto got = client->Get(JobPath("train"));
  // Waiting the 1 s the server asked for would pass max_total: give up now.
  EXPECT_LT(sw.Elapsed(), absl::Milliseconds(900));
  EXPECT_THAT(got, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(HttpCode(got.status()), 503);
  EXPECT_EQ(fake_->Calls().size(), 1u);
}

TEST_F(ClientTest, ConnectionRefusedIsUnavailableWithoutHttpCode) {
  int dead_port = 0;
  {
    FakeKubeOptions o;
    o.cert_file = certs_->File("tls.crt");
    o.key_file = certs_->File("tls.key");
    auto gone = FakeKubeApi::Start(o);
    ASSERT_THAT(gone, IsOk());
    dead_port = (*gone)->port();
  }
  ClusterConfig c = Config();
  c.port = dead_port;
  auto client = NewClient(c, Fast(/*max_attempts=*/2));
  ASSERT_NE(client, nullptr);
  auto got = client->Get(JobPath("train"));
  EXPECT_THAT(got, StatusIs(absl::StatusCode::kUnavailable, "GET /apis/batch/v1/namespaces/team-a/jobs/train"));
  EXPECT_EQ(HttpCode(got.status()), 0);
  EXPECT_EQ(client->attempts(), 2u);
}

TEST_F(ClientTest, SlowAnswerIsDeadlineExceeded) {
  fake_->Fail({.method = "GET", .status = 0, .delay = absl::Seconds(2), .times = 1});
  ClientOptions o = Fast(/*max_attempts=*/1);
  o.timeout = absl::Milliseconds(300);
  auto client = NewClient(o);
  ASSERT_NE(client, nullptr);
  base::Stopwatch sw;
  auto got = client->Get(JobPath("train"));
  EXPECT_LT(sw.Elapsed(), absl::Milliseconds(1500));
  EXPECT_THAT(got, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(HttpCode(got.status()), 0);
}

// ---------------------------------------------------------------- Patch

TEST_F(ClientTest, MergePatchSendsMergePatchJson) {
  MustCreate(kJobs, Job("train"));
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  const json patch = {{"spec", {{"suspend", false}}}, {"metadata", {{"labels", {{"gangkeeper.io/admitted", "true"}}}}}};
  auto patched = client->Patch(JobPath("train"), PatchType::kMerge, patch);
  ASSERT_THAT(patched, IsOk());
  EXPECT_EQ((*patched)["spec"]["suspend"], false);
  EXPECT_EQ((*patched)["metadata"]["labels"]["gangkeeper.io/admitted"], "true");
  auto stored = fake_->Get(JobPath("train"));
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ((*stored)["spec"]["suspend"], false);

  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].method, "PATCH");
  EXPECT_EQ(calls[0].path, "/apis/batch/v1/namespaces/team-a/jobs/train");
  EXPECT_EQ(calls[0].query, "");
  EXPECT_EQ(calls[0].content_type, kMergeType);
  EXPECT_EQ(json::parse(calls[0].body), patch);
  EXPECT_EQ(calls[0].authorization, "Bearer fake-token");
}

TEST_F(ClientTest, JsonPatchWithUidTestSendsJsonPatchJson) {
  const json created = MustCreate(kJobs, Job("train"));
  const std::string uid = created["metadata"]["uid"];
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  const json patch = json::array({{{"op", "test"}, {"path", "/metadata/uid"}, {"value", uid}},
                                  {{"op", "replace"}, {"path", "/spec/suspend"}, {"value", false}}});
  auto patched = client->Patch(JobPath("train"), PatchType::kJson, patch);
  ASSERT_THAT(patched, IsOk());
  EXPECT_EQ((*patched)["spec"]["suspend"], false);
  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].method, "PATCH");
  EXPECT_EQ(calls[0].path, "/apis/batch/v1/namespaces/team-a/jobs/train");
  EXPECT_EQ(calls[0].content_type, kJsonPatchType);
  EXPECT_EQ(json::parse(calls[0].body), patch);
}

TEST_F(ClientTest, FailedJsonPatchTestIsFailedPreconditionAndNotRetried) {
  MustCreate(kJobs, Job("train"));
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  const json patch = json::array({{{"op", "test"}, {"path", "/metadata/uid"}, {"value", "someone-elses-uid"}},
                                  {{"op", "replace"}, {"path", "/spec/suspend"}, {"value", false}}});
  auto patched = client->Patch(JobPath("train"), PatchType::kJson, patch);
  EXPECT_THAT(patched, StatusIs(absl::StatusCode::kFailedPrecondition, "PATCH /apis/batch/v1/namespaces/team-a/jobs/train"));
  EXPECT_EQ(HttpCode(patched.status()), 422);
  EXPECT_EQ(fake_->Calls().size(), 1u);
  auto stored = fake_->Get(JobPath("train"));
  ASSERT_THAT(stored, IsOk());
  EXPECT_EQ((*stored)["spec"]["suspend"], true);  // untouched
}

TEST_F(ClientTest, StatusSubresourcePatch) {
  json job = Job("train");
  job["status"] = {{"startTime", "2025-01-01T00:00:00Z"}, {"active", 0}};
  MustCreate(kJobs, job);
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  const json patch = {{"status", {{"startTime", nullptr}}}};
  auto patched = client->Patch(JobPath("train") + "/status", PatchType::kMerge, patch);
  ASSERT_THAT(patched, IsOk());
  EXPECT_FALSE((*patched)["status"].contains("startTime"));
  auto stored = fake_->Get(JobPath("train"));
  ASSERT_THAT(stored, IsOk());
  EXPECT_FALSE((*stored)["status"].contains("startTime"));
  EXPECT_EQ((*stored)["status"]["active"], 0);
  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].method, "PATCH");
  EXPECT_EQ(calls[0].path, "/apis/batch/v1/namespaces/team-a/jobs/train/status");
  EXPECT_EQ(calls[0].content_type, kMergeType);
  EXPECT_EQ(json::parse(calls[0].body), patch);
}

TEST_F(ClientTest, PatchOfAMissingObjectIsNotFound) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto patched = client->Patch(JobPath("ghost"), PatchType::kMerge, {{"spec", {{"suspend", false}}}});
  EXPECT_THAT(patched, StatusIs(absl::StatusCode::kNotFound, "\"ghost\" not found"));
  EXPECT_EQ(fake_->Calls().size(), 1u);
}

// ---------------------------------------------------------------- Delete

TEST_F(ClientTest, DeleteWithTheRightUidDeletes) {
  const json created = MustCreate(kJobs, Job("train"));
  const std::string uid = created["metadata"]["uid"];
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto deleted = client->Delete(JobPath("train"), uid, "Background");
  ASSERT_THAT(deleted, IsOk());
  EXPECT_EQ((*deleted)["metadata"]["name"], "train");
  EXPECT_THAT(fake_->Get(JobPath("train")), StatusIs(absl::StatusCode::kNotFound));

  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].method, "DELETE");
  EXPECT_EQ(calls[0].path, "/apis/batch/v1/namespaces/team-a/jobs/train");
  EXPECT_EQ(calls[0].query, "");
  EXPECT_EQ(calls[0].content_type, "application/json");
  const json body = json::parse(calls[0].body);
  EXPECT_EQ(body, (json{{"kind", "DeleteOptions"},
                        {"apiVersion", "v1"},
                        {"preconditions", {{"uid", uid}}},
                        {"propagationPolicy", "Background"}}));
}

TEST_F(ClientTest, DeleteWithAWrongUidIsAFinalConflict) {
  MustCreate(kJobs, Job("train"));
  auto client = NewClient(Fast(/*max_attempts=*/3));
  ASSERT_NE(client, nullptr);
  auto deleted = client->Delete(JobPath("train"), "0000-not-the-uid", "Foreground");
  EXPECT_THAT(deleted, StatusIs(absl::StatusCode::kAborted, "Precondition failed"));
  EXPECT_EQ(HttpCode(deleted.status()), 409);
  EXPECT_THAT(fake_->Get(JobPath("train")), IsOk());  // still there
  // A failed uid precondition names another object: asking again cannot
  // help, so it is not retried (other 409s are).
  const auto calls = CallsWith("DELETE");
  ASSERT_EQ(calls.size(), 1u);
  for (const RecordedCall& c : calls) {
    EXPECT_EQ(c.status, 409);
    EXPECT_EQ(json::parse(c.body)["preconditions"]["uid"], "0000-not-the-uid");
    EXPECT_EQ(json::parse(c.body)["propagationPolicy"], "Foreground");
  }
}

TEST_F(ClientTest, DeleteWithoutPreconditionsSendsBareOptions) {
  MustCreate(kJobs, Job("train"));
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  ASSERT_THAT(client->Delete(JobPath("train"), "", ""), IsOk());
  EXPECT_THAT(fake_->Get(JobPath("train")), StatusIs(absl::StatusCode::kNotFound));
  // Again: already gone.
  auto again = client->Delete(JobPath("train"), "", "");
  EXPECT_THAT(again, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(HttpCode(again.status()), 404);
  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(json::parse(calls[0].body), (json{{"kind", "DeleteOptions"}, {"apiVersion", "v1"}}));
  EXPECT_EQ(calls[0].content_type, "application/json");
}

// ---------------------------------------------------------------- Watch

TEST_F(ClientTest, WatchFromNowListsThenFollowsChanges) {
  MustCreate(kJobs, Job("a"));
  MustCreate(kJobs, Job("b"));
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  WatchOptions o;
  o.allow_bookmarks = false;
  o.timeout_seconds = 5;
  std::vector<std::string> seen;
  std::vector<std::string> rvs;
  absl::Status s = client->Watch(kJobs, o, [&](const WatchEvent& e) {
    seen.push_back(absl::StrCat(e.type, " ", e.object["metadata"]["name"].get<std::string>()));
    rvs.push_back(e.object["metadata"]["resourceVersion"].get<std::string>());
    if (seen.size() == 2) {
      // The initial objects are in: now a controller changes things.
      auto a = fake_->Get(JobPath("a"));
      EXPECT_THAT(a, IsOk());
      if (a.ok()) {
        (*a)["metadata"]["labels"]["phase"] = "running";
        EXPECT_THAT(fake_->Replace(JobPath("a"), *a), IsOk());
      }
      EXPECT_THAT(fake_->Delete(JobPath("b")), IsOk());
    }
    return e.type != "DELETED";
  });
  EXPECT_THAT(s, IsOk());
  EXPECT_THAT(seen, ElementsAre("ADDED a", "ADDED b", "MODIFIED a", "DELETED b"));
  EXPECT_EQ(rvs.back(), std::to_string(fake_->resource_version()));

  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].method, "GET");
  EXPECT_EQ(calls[0].path, kJobs);
  EXPECT_EQ(calls[0].query, "watch=true&timeoutSeconds=5");
  EXPECT_EQ(calls[0].body, "");
  EXPECT_EQ(calls[0].authorization, "Bearer fake-token");
}

TEST_F(ClientTest, WatchFromAResourceVersionSendsOnlyLaterChangesWithSelector) {
  const json a = MustCreate(kJobs, Job("a", {{"team", "x"}}));
  MustCreate(kJobs, Job("b", {{"team", "y"}}));
  const std::string from = a["metadata"]["resourceVersion"];
  MustCreate(kJobs, Job("c", {{"team", "x"}}));
  MustCreate(kJobs, Job("d", {{"team", "y"}}));
  MustCreate(kJobs, Job("e", {{"team", "x"}}));
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  WatchOptions o;
  o.resource_version = from;
  o.label_selector = "team=x";
  o.allow_bookmarks = false;
  o.timeout_seconds = 5;
  std::vector<std::string> seen;
  absl::Status s = client->Watch(kJobs, o, [&](const WatchEvent& e) {
    seen.push_back(absl::StrCat(e.type, " ", e.object["metadata"]["name"].get<std::string>()));
    return seen.size() < 2;
  });
  EXPECT_THAT(s, IsOk());
  EXPECT_THAT(seen, ElementsAre("ADDED c", "ADDED e"));
  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].query,
            absl::StrCat("watch=true&timeoutSeconds=5&resourceVersion=", from, "&labelSelector=team%3Dx"));
}

TEST_F(ClientTest, BookmarksArriveWhenAllowed) {
  MustCreate(kJobs, Job("a"));
  const std::string rv = std::to_string(fake_->resource_version());
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  WatchOptions o;
  o.resource_version = rv;
  o.allow_bookmarks = true;
  o.timeout_seconds = 5;
  std::vector<WatchEvent> events;
  base::Stopwatch sw;
  absl::Status s = client->Watch(kJobs, o, [&](const WatchEvent& e) {
    events.push_back(e);
    return e.type != "BOOKMARK";
  });
  EXPECT_THAT(s, IsOk());
  EXPECT_LT(sw.Elapsed(), absl::Seconds(4));  // ended by the bookmark, not by timeoutSeconds
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, "BOOKMARK");
  EXPECT_EQ(events[0].object["metadata"]["resourceVersion"], rv);
  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].query,
            absl::StrCat("watch=true&timeoutSeconds=5&allowWatchBookmarks=true&resourceVersion=", rv));
}

TEST_F(ClientTest, WatchEndsWhenTheServerTimesItOut) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  WatchOptions o;
  o.allow_bookmarks = false;
  o.timeout_seconds = 1;
  int events = 0;
  base::Stopwatch sw;
  absl::Status s = client->Watch(kJobs, o, [&](const WatchEvent&) {
    ++events;
    return true;
  });
  EXPECT_THAT(s, IsOk());
  EXPECT_GE(sw.Elapsed(), absl::Milliseconds(900));
  EXPECT_LT(sw.Elapsed(), absl::Seconds(5));
  EXPECT_EQ(events, 0);
}

TEST_F(ClientTest, WatchFromACompactedResourceVersionIsOutOfRange) {
  const json a = MustCreate(kJobs, Job("a"));
  MustCreate(kJobs, Job("b"));
  fake_->CompactHistory();
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  WatchOptions o;
  o.resource_version = a["metadata"]["resourceVersion"];
  o.timeout_seconds = 5;
  int events = 0;
  absl::Status s = client->Watch(kJobs, o, [&](const WatchEvent&) {
    ++events;
    return true;
  });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kOutOfRange, "too old resource version"));
  EXPECT_EQ(HttpCode(s), 410);
  EXPECT_EQ(events, 0);  // the ERROR event is not passed on
  const auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 1u);  // not retried
  EXPECT_EQ(calls[0].status, 200);  // the server answered 200, then the ERROR event
}

TEST_F(ClientTest, WatchRetriesTheInitialRequestButNotClientErrors) {
  MustCreate(kJobs, Job("a"));
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  WatchOptions o;
  o.allow_bookmarks = false;
  o.timeout_seconds = 5;
  fake_->Fail({.watch_only = true, .status = 503, .times = 2});
  std::vector<std::string> seen;
  absl::Status s = client->Watch(kJobs, o, [&](const WatchEvent& e) {
    seen.push_back(e.type);
    return false;
  });
  EXPECT_THAT(s, IsOk());
  EXPECT_THAT(seen, ElementsAre("ADDED"));
  auto calls = fake_->Calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].status, 503);
  EXPECT_EQ(calls[1].status, 503);
  EXPECT_EQ(calls[2].status, 200);
  for (const RecordedCall& c : calls) EXPECT_EQ(c.query, "watch=true&timeoutSeconds=5");

  fake_->ClearCalls();
  fake_->Fail({.watch_only = true, .status = 403, .times = -1});
  s = client->Watch(kJobs, o, [&](const WatchEvent&) { return true; });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kPermissionDenied, "scripted failure 403"));
  EXPECT_EQ(HttpCode(s), 403);
  EXPECT_EQ(fake_->Calls().size(), 1u);
}

TEST_F(ClientTest, CloseWatchesEndsTheWatchPromptly) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  WatchOptions o;
  o.allow_bookmarks = false;
  o.timeout_seconds = 20;
  auto done = std::async(std::launch::async, [&] {
    return client->Watch(kJobs, o, [](const WatchEvent&) { return true; });
  });
  ASSERT_TRUE(WaitFor([&] { return fake_->open_watches() == 1; }));
  base::Stopwatch sw;
  fake_->CloseWatches();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_LT(sw.Elapsed(), absl::Seconds(2));
  const absl::Status s = done.get();
  EXPECT_THAT(s, AnyOf(IsOk(), StatusIs(absl::StatusCode::kUnavailable)));
  // The client is still usable.
  EXPECT_THAT(client->List(kJobs), IsOk());
}

TEST_F(ClientTest, ShutdownEndsABlockedWatchAndLaterCalls) {
  MustCreate(kJobs, Job("a"));
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  WatchOptions o;
  o.allow_bookmarks = false;
  o.timeout_seconds = 20;
  std::atomic<int> events{0};
  auto done = std::async(std::launch::async, [&] {
    return client->Watch(kJobs, o, [&](const WatchEvent&) {
      ++events;
      return true;
    });
  });
  ASSERT_TRUE(WaitFor([&] { return events.load() == 1; }));  // the stream is up
  base::Stopwatch sw;
  client->Shutdown();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_LT(sw.Elapsed(), absl::Seconds(2));
  EXPECT_THAT(done.get(), StatusIs(absl::StatusCode::kCancelled));

  const size_t calls_before = fake_->Calls().size();
  EXPECT_THAT(client->Get(JobPath("a")), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(client->List(kJobs), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(client->Patch(JobPath("a"), PatchType::kMerge, {{"spec", {{"suspend", false}}}}),
              StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(client->Delete(JobPath("a"), "", ""), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(client->Watch(kJobs, o, [](const WatchEvent&) { return true; }), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(fake_->Calls().size(), calls_before);  // nothing more was sent
}

TEST_F(ClientTest, ShutdownInterruptsARetryBackoff) {
  fake_->Fail({.method = "GET", .status = 503, .retry_after = "10", .times = -1});
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto done = std::async(std::launch::async, [&] { return client->Get(JobPath("a")); });
  ASSERT_TRUE(WaitFor([&] { return fake_->Calls().size() == 1; }));
  base::Stopwatch sw;
  client->Shutdown();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_LT(sw.Elapsed(), absl::Seconds(2));
  EXPECT_THAT(done.get(), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(fake_->Calls().size(), 1u);
}

}  // namespace
}  // namespace gangkeeper::kube
