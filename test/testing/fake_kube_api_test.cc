// Tests for FakeKubeApi with a real HTTPS client (cpp-httplib SSLClient
// verifying the CA from `gangkeeper certs`), loopback only. Every wait is
// bounded in count and time.
#include "test/testing/fake_kube_api.h"

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gangkeeper/base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::testing {
namespace {

using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kJobs[] = "/apis/batch/v1/namespaces/team-a/jobs";
constexpr char kPods[] = "/api/v1/namespaces/team-a/pods";
constexpr char kPyTorchJobs[] = "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs";
constexpr char kMerge[] = "application/merge-patch+json";
constexpr char kJsonPatch[] = "application/json-patch+json";
constexpr char kStrategic[] = "application/strategic-merge-patch+json";

json Job(const std::string& name, json labels = json::object(), bool suspend = true) {
  return {{"metadata", {{"name", name}, {"labels", labels}}},
          {"spec",
           {{"suspend", suspend},
            {"template",
             {{"metadata", {{"labels", {{"app", "train"}}}}},
              {"spec", {{"restartPolicy", "Never"}, {"containers", {{{"name", "w"}, {"image", "cuda:12"}}}}}}}}}}};
}

json Pod(const std::string& name, bool gated) {
  json p = {{"metadata", {{"name", name}}},
            {"spec", {{"containers", {{{"name", "w"}, {"image", "cuda:12"}}}}, {"nodeSelector", {{"zone", "a"}}}}}};
  if (gated) p["spec"]["schedulingGates"] = {{{"name", "gangkeeper.io/admission"}}};
  return p;
}

std::vector<std::string> Names(const json& items) {
  std::vector<std::string> out;
  for (const json& i : items) out.push_back(i["metadata"]["name"].get<std::string>());
  return out;
}

// Reads a watch stream on its own thread and splits it into events.
class WatchReader {
 public:
  WatchReader(int port, const std::string& ca, const std::string& path, const httplib::Params& params) {
    cli_ = std::make_unique<httplib::SSLClient>("127.0.0.1", port);
    cli_->set_ca_cert_path(ca.c_str());
    cli_->enable_server_certificate_verification(true);
    cli_->set_bearer_token_auth("fake-token");
    cli_->set_read_timeout(10, 0);
    thread_ = std::thread([this, path, params] {
      std::string buffer;
      auto result = cli_->Get(
          path, params, httplib::Headers{},
          [this](const httplib::Response& r) {
            std::lock_guard<std::mutex> lock(mu_);
            status_ = r.status;
            content_encoding_ = r.get_header_value("Content-Encoding");
            return true;
          },
          [this, &buffer](const char* data, size_t n) {
            buffer.append(data, n);
            size_t nl;
            while ((nl = buffer.find('\n')) != std::string::npos) {
              json e = json::parse(buffer.substr(0, nl), nullptr, false);
              buffer.erase(0, nl + 1);
              std::lock_guard<std::mutex> lock(mu_);
              events_.push_back(e);
              cv_.notify_all();
            }
            return true;
          },
          nullptr);
      std::lock_guard<std::mutex> lock(mu_);
      clean_end_ = static_cast<bool>(result) && buffer.empty();
      ended_ = true;
      cv_.notify_all();
    });
  }
  ~WatchReader() {
    cli_->stop();
    thread_.join();
  }

  // Waits (at most `timeout`) until `n` events arrived; returns them all.
  std::vector<json> WaitForEvents(size_t n, absl::Duration timeout = absl::Seconds(5)) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout), [&] { return events_.size() >= n || ended_; });
    return events_;
  }
  bool WaitForEnd(absl::Duration timeout = absl::Seconds(5)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout), [&] { return ended_; });
  }
  int status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }
  bool clean_end() {
    std::lock_guard<std::mutex> lock(mu_);
    return clean_end_;
  }
  std::string content_encoding() {
    std::lock_guard<std::mutex> lock(mu_);
    return content_encoding_;
  }

 private:
  std::unique_ptr<httplib::SSLClient> cli_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<json> events_;
  int status_ = 0;
  bool ended_ = false;
  bool clean_end_ = false;
  std::string content_encoding_;
};

class FakeKubeApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new TempDir();
    auto r = RunCommand({GangkeeperBinary(), "certs", "--out", certs_->path()}, absl::Seconds(60));
    ASSERT_THAT(r, IsOk());
    ASSERT_EQ(r->exit_code, 0) << r->err;
  }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  void SetUp() override {
    FakeKubeOptions o;
    o.cert_file = certs_->File("tls.crt");
    o.key_file = certs_->File("tls.key");
    o.bookmark_interval = absl::Milliseconds(200);
    auto api = FakeKubeApi::Start(o);
    ASSERT_THAT(api, IsOk());
    api_ = *std::move(api);
    cli_ = NewClient("fake-token");
  }

  std::unique_ptr<httplib::SSLClient> NewClient(const std::string& token) {
    auto c = std::make_unique<httplib::SSLClient>("127.0.0.1", api_->port());
    c->set_ca_cert_path(ca().c_str());
    c->enable_server_certificate_verification(true);
    if (!token.empty()) c->set_bearer_token_auth(token.c_str());
    c->set_read_timeout(10, 0);
    return c;
  }
  std::string ca() const { return certs_->File("ca.crt"); }

  json MustCreate(const std::string& collection, json obj) {
    auto r = api_->Create(collection, std::move(obj));
    EXPECT_THAT(r, IsOk());
    return r.ok() ? *r : json();
  }

  // PATCH and return (status, parsed body).
  std::pair<int, json> Patch(const std::string& path, const json& body, const std::string& content_type) {
    auto r = cli_->Patch(path.c_str(), body.dump(), content_type.c_str());
    if (!r) return {-1, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }
  std::pair<int, json> GetJson(const std::string& path) {
    auto r = cli_->Get(path.c_str());
    if (!r) return {-1, json()};
    return {r->status, json::parse(r->body, nullptr, false)};
  }

  std::unique_ptr<WatchReader> Watch(const std::string& path, httplib::Params params) {
    params.emplace("watch", "true");
    return std::make_unique<WatchReader>(api_->port(), ca(), path, params);
  }

  static TempDir* certs_;
  std::unique_ptr<FakeKubeApi> api_;
  std::unique_ptr<httplib::SSLClient> cli_;
};

TempDir* FakeKubeApiTest::certs_ = nullptr;

TEST_F(FakeKubeApiTest, RequiresTheBearerToken) {
  for (const std::string& token : {std::string(), std::string("wrong")}) {
    SCOPED_TRACE(token);
    auto r = NewClient(token)->Get(kJobs);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401);
    json s = json::parse(r->body, nullptr, false);
    EXPECT_EQ(s["kind"], "Status");
    EXPECT_EQ(s["reason"], "Unauthorized");
    EXPECT_EQ(s["code"], 401);
  }
  EXPECT_EQ(GetJson(kJobs).first, 200);
  api_->set_token("");
  EXPECT_EQ(NewClient("")->Get(kJobs)->status, 200);
}

TEST_F(FakeKubeApiTest, UnservedResourcesAre404) {
  EXPECT_EQ(GetJson(kPyTorchJobs).first, 200);
  api_->set_served("kubeflow.org/v1/pytorchjobs", false);
  auto [code, body] = GetJson(kPyTorchJobs);
  EXPECT_EQ(code, 404);
  EXPECT_EQ(body["reason"], "NotFound");
  EXPECT_EQ(GetJson("/apis/example.com/v1/namespaces/team-a/widgets").first, 404);
  EXPECT_EQ(GetJson("/apis/batch/v1/namespaces/team-a/jobs/x/scale").first, 404);
}

TEST_F(FakeKubeApiTest, CreateThenGetAndList) {
  json created = MustCreate(kJobs, Job("llm"));
  EXPECT_EQ(created["kind"], "Job");
  EXPECT_EQ(created["metadata"]["namespace"], "team-a");
  EXPECT_EQ(created["metadata"]["uid"].get<std::string>().size(), 36u);
  EXPECT_EQ(created["metadata"]["generation"], 1);
  EXPECT_EQ(created["metadata"]["resourceVersion"], std::to_string(api_->resource_version()));
  EXPECT_THAT(api_->Create(kJobs, Job("llm")), StatusIs(absl::StatusCode::kAlreadyExists));

  auto [code, got] = GetJson(std::string(kJobs) + "/llm");
  EXPECT_EQ(code, 200);
  EXPECT_EQ(got, created);
  auto [missing_code, missing] = GetJson(std::string(kJobs) + "/nope");
  EXPECT_EQ(missing_code, 404);
  EXPECT_EQ(missing["reason"], "NotFound");
  EXPECT_EQ(missing["message"], "jobs.batch \"nope\" not found");

  MustCreate("/apis/batch/v1/namespaces/team-b/jobs", Job("other"));
  auto [list_code, list] = GetJson("/apis/batch/v1/jobs");
  EXPECT_EQ(list_code, 200);
  EXPECT_EQ(list["kind"], "JobList");
  EXPECT_EQ(list["apiVersion"], "batch/v1");
  EXPECT_EQ(list["metadata"]["resourceVersion"], std::to_string(api_->resource_version()));
  EXPECT_THAT(Names(list["items"]), ElementsAre("llm", "other"));
  EXPECT_FALSE(list["items"][0].contains("kind")) << "typed lists omit kind on items";
  EXPECT_THAT(Names(GetJson(kJobs).second["items"]), ElementsAre("llm"));

  // Custom resources are unstructured: their list items keep kind/apiVersion.
  MustCreate(kPyTorchJobs, {{"metadata", {{"name", "pt"}}}, {"spec", json::object()}});
  json pt_list = GetJson(kPyTorchJobs).second;
  EXPECT_EQ(pt_list["kind"], "PyTorchJobList");
  EXPECT_EQ(pt_list["items"][0]["kind"], "PyTorchJob");
  EXPECT_EQ(api_->List("/apis/kubeflow.org/v1/pytorchjobs").size(), 1u);
}

TEST_F(FakeKubeApiTest, LabelAndFieldSelectorsFilterLists) {
  MustCreate(kJobs, Job("a", {{"queue", "gpu"}, {"tier", "1"}}));
  MustCreate(kJobs, Job("b", {{"queue", "cpu"}}));
  MustCreate(kJobs, Job("c", json::object()));
  struct Case {
    std::string name, param, selector;
    std::vector<std::string> want;
  };
  const Case cases[] = {
      {"equality", "labelSelector", "queue=gpu", {"a"}},
      {"double equals", "labelSelector", "queue==cpu", {"b"}},
      {"inequality matches objects without the label", "labelSelector", "queue!=gpu", {"b", "c"}},
      {"exists", "labelSelector", "queue", {"a", "b"}},
      {"does not exist", "labelSelector", "!queue", {"c"}},
      {"in", "labelSelector", "queue in (gpu,cpu)", {"a", "b"}},
      {"notin", "labelSelector", "queue notin (gpu)", {"b", "c"}},
      {"several requirements", "labelSelector", "queue in (gpu, cpu),tier=1", {"a"}},
      {"field name", "fieldSelector", "metadata.name=b", {"b"}},
      {"field name not equal", "fieldSelector", "metadata.name!=b", {"a", "c"}},
      {"field namespace", "fieldSelector", "metadata.namespace==team-b", {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = cli_->Get(kJobs, httplib::Params{{c.param, c.selector}}, httplib::Headers{});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(Names(json::parse(r->body)["items"]), c.want);
  }
  auto bad = cli_->Get(kJobs, httplib::Params{{"fieldSelector", "spec.suspend=true"}}, httplib::Headers{});
  EXPECT_EQ(bad->status, 400);
  bad = cli_->Get(kJobs, httplib::Params{{"labelSelector", "queue in (a"}}, httplib::Headers{});
  EXPECT_EQ(bad->status, 400);
}

TEST_F(FakeKubeApiTest, PaginatedListIsAConsistentSnapshot) {
  for (const char* n : {"j1", "j2", "j3", "j4", "j5"}) MustCreate(kJobs, Job(n));
  auto page1 = json::parse(cli_->Get(kJobs, httplib::Params{{"limit", "2"}}, httplib::Headers{})->body);
  EXPECT_THAT(Names(page1["items"]), ElementsAre("j1", "j2"));
  std::string rv = page1["metadata"]["resourceVersion"];
  std::string token = page1["metadata"]["continue"];
  ASSERT_FALSE(token.empty());
  EXPECT_EQ(page1["metadata"]["remainingItemCount"], 3);

  MustCreate(kJobs, Job("j0"));  // after the snapshot: not in later pages
  ASSERT_THAT(api_->Delete(std::string(kJobs) + "/j4"), IsOk());
  auto page2 =
      json::parse(cli_->Get(kJobs, httplib::Params{{"limit", "2"}, {"continue", token}}, httplib::Headers{})->body);
  EXPECT_THAT(Names(page2["items"]), ElementsAre("j3", "j4"));
  EXPECT_EQ(page2["metadata"]["resourceVersion"], rv);
  auto page3 = json::parse(cli_->Get(kJobs, httplib::Params{{"limit", "2"}, {"continue",
                                                                             page2["metadata"]["continue"]}},
                                     httplib::Headers{})
                               ->body);
  EXPECT_THAT(Names(page3["items"]), ElementsAre("j5"));
  EXPECT_FALSE(page3["metadata"].contains("continue"));
}

TEST_F(FakeKubeApiTest, ContinueTokenExpiresAfterCompaction) {
  for (const char* n : {"j1", "j2", "j3", "j4"}) MustCreate(kJobs, Job(n));
  auto page1 = json::parse(cli_->Get(kJobs, httplib::Params{{"limit", "2"}}, httplib::Headers{})->body);
  api_->CompactHistory();
  MustCreate(kJobs, Job("j9"));
  auto expired = cli_->Get(kJobs, httplib::Params{{"limit", "2"}, {"continue", page1["metadata"]["continue"]}},
                           httplib::Headers{});
  ASSERT_TRUE(expired);
  EXPECT_EQ(expired->status, 410);
  json status = json::parse(expired->body);
  EXPECT_EQ(status["reason"], "Expired");
  EXPECT_THAT(status["message"].get<std::string>(), HasSubstr("continue parameter is too old"));
  std::string fresh = status["metadata"]["continue"];
  ASSERT_FALSE(fresh.empty());
  // The fresh token continues (inconsistently) from the current state.
  auto rest = json::parse(
      cli_->Get(kJobs, httplib::Params{{"limit", "10"}, {"continue", fresh}}, httplib::Headers{})->body);
  EXPECT_THAT(Names(rest["items"]), ElementsAre("j3", "j4", "j9"));
  EXPECT_EQ(cli_->Get(kJobs, httplib::Params{{"continue", "garbage"}}, httplib::Headers{})->status, 400);
}

TEST_F(FakeKubeApiTest, WatchFromZeroListsThenFollows) {
  MustCreate(kJobs, Job("a"));
  MustCreate(kJobs, Job("b"));
  auto w = Watch(kJobs, {{"resourceVersion", "0"}});
  auto events = w->WaitForEvents(2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[0]["object"]["kind"], "Job");
  EXPECT_EQ(events[1]["object"]["metadata"]["name"], "b");
  EXPECT_EQ(w->status(), 200);
  EXPECT_EQ(w->content_encoding(), "") << "watch streams are never compressed";

  EXPECT_EQ(Patch(std::string(kJobs) + "/a", {{"metadata", {{"labels", {{"x", "y"}}}}}}, kMerge).first, 200);
  MustCreate(kJobs, Job("c"));
  ASSERT_THAT(api_->Delete(std::string(kJobs) + "/b"), IsOk());
  MustCreate("/apis/batch/v1/namespaces/team-b/jobs", Job("elsewhere"));  // other namespace: not seen
  events = w->WaitForEvents(5);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[2]["type"], "MODIFIED");
  EXPECT_EQ(events[2]["object"]["metadata"]["labels"]["x"], "y");
  EXPECT_EQ(events[3]["type"], "ADDED");
  EXPECT_EQ(events[4]["type"], "DELETED");
  EXPECT_EQ(events[4]["object"]["metadata"]["name"], "b");
  int64_t prev = 0;
  for (size_t i = 2; i < events.size(); ++i) {
    int64_t rv = std::stoll(events[i]["object"]["metadata"]["resourceVersion"].get<std::string>());
    EXPECT_GT(rv, prev);
    prev = rv;
  }
  EXPECT_EQ(api_->open_watches(), 1);
}

TEST_F(FakeKubeApiTest, WatchFromAResourceVersionSendsOnlyNewerEvents) {
  MustCreate(kJobs, Job("a"));
  std::string rv = std::to_string(api_->resource_version());
  MustCreate(kJobs, Job("b"));
  auto w = Watch("/apis/batch/v1/jobs", {{"resourceVersion", rv}});
  auto events = w->WaitForEvents(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "b");
}

TEST_F(FakeKubeApiTest, WatchSelectorTransitionsBecomeAddedAndDeleted) {
  MustCreate(kJobs, Job("a", {{"queue", "gpu"}}));
  auto w = Watch(kJobs, {{"resourceVersion", std::to_string(api_->resource_version())},
                         {"labelSelector", "queue=gpu"}});
  EXPECT_EQ(Patch(std::string(kJobs) + "/a", {{"metadata", {{"labels", {{"queue", "cpu"}}}}}}, kMerge).first, 200);
  EXPECT_EQ(Patch(std::string(kJobs) + "/a", {{"metadata", {{"labels", {{"queue", "gpu"}}}}}}, kMerge).first, 200);
  auto events = w->WaitForEvents(2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["type"], "DELETED");
  EXPECT_EQ(events[1]["type"], "ADDED");
}

TEST_F(FakeKubeApiTest, WatchFromACompactedResourceVersionIs200ThenError410) {
  MustCreate(kJobs, Job("a"));
  std::string old_rv = std::to_string(api_->resource_version());
  MustCreate(kJobs, Job("b"));
  api_->CompactHistory();
  auto w = Watch(kJobs, {{"resourceVersion", old_rv}});
  ASSERT_TRUE(w->WaitForEnd());
  EXPECT_EQ(w->status(), 200);
  auto events = w->WaitForEvents(1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "ERROR");
  EXPECT_EQ(events[0]["object"]["kind"], "Status");
  EXPECT_EQ(events[0]["object"]["code"], 410);
  EXPECT_EQ(events[0]["object"]["reason"], "Expired");
  EXPECT_THAT(events[0]["object"]["message"].get<std::string>(), HasSubstr("too old resource version: " + old_rv));
  EXPECT_TRUE(w->clean_end());
}

TEST_F(FakeKubeApiTest, BookmarksArrive) {
  MustCreate(kJobs, Job("a"));
  auto w = Watch(kJobs, {{"resourceVersion", std::to_string(api_->resource_version())},
                         {"allowWatchBookmarks", "true"}});
  auto events = w->WaitForEvents(2);
  ASSERT_GE(events.size(), 2u);
  for (const json& e : events) {
    EXPECT_EQ(e["type"], "BOOKMARK");
    EXPECT_EQ(e["object"]["kind"], "Job");
    EXPECT_EQ(e["object"]["apiVersion"], "batch/v1");
    EXPECT_EQ(e["object"]["metadata"]["resourceVersion"], std::to_string(api_->resource_version()));
  }
}

TEST_F(FakeKubeApiTest, CloseWatchesAndTimeoutEndStreams) {
  auto w = Watch(kJobs, {{"resourceVersion", "0"}});
  auto timed = Watch(kPods, {{"resourceVersion", "0"}, {"timeoutSeconds", "1"}});
  // Bounded wait until the first stream is open.
  for (int i = 0; i < 200 && api_->open_watches() < 2; ++i) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_EQ(api_->open_watches(), 2);
  base::Stopwatch sw;
  ASSERT_TRUE(timed->WaitForEnd(absl::Seconds(5)));
  EXPECT_GE(sw.Elapsed(), absl::Milliseconds(500));
  EXPECT_TRUE(timed->clean_end());
  api_->CloseWatches();
  ASSERT_TRUE(w->WaitForEnd(absl::Seconds(2)));
  EXPECT_TRUE(w->clean_end());
}

TEST_F(FakeKubeApiTest, StoppingWithAnOpenWatchIsPrompt) {
  auto w = Watch(kJobs, {{"resourceVersion", "0"}});
  for (int i = 0; i < 200 && api_->open_watches() < 1; ++i) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_EQ(api_->open_watches(), 1);
  base::Stopwatch sw;
  api_.reset();
  EXPECT_LT(sw.Elapsed(), absl::Seconds(3));
  EXPECT_TRUE(w->WaitForEnd(absl::Seconds(2)));
}

TEST_F(FakeKubeApiTest, MergePatchWithAnotherUidIs422) {
  MustCreate(kJobs, Job("a"));
  auto [code, body] = Patch(std::string(kJobs) + "/a", {{"metadata", {{"uid", "someone-else"}}}}, kMerge);
  EXPECT_EQ(code, 422);
  EXPECT_EQ(body["reason"], "Invalid");
  EXPECT_THAT(body["message"].get<std::string>(), HasSubstr("field is immutable"));
  EXPECT_EQ(body["details"]["causes"][0]["field"], "metadata.uid");
}

TEST_F(FakeKubeApiTest, JsonPatchTestOpGuardsTheUid) {
  json job = MustCreate(kJobs, Job("a"));
  std::string path = std::string(kJobs) + "/a";
  json wrong = json::array({{{"op", "test"}, {"path", "/metadata/uid"}, {"value", "other"}},
                            {{"op", "replace"}, {"path", "/spec/suspend"}, {"value", false}}});
  auto [code, body] = Patch(path, wrong, kJsonPatch);
  EXPECT_EQ(code, 422);
  EXPECT_EQ(body["reason"], "Invalid");
  EXPECT_EQ(api_->Get(path)->at("spec").at("suspend"), true);

  json right = wrong;
  right[0]["value"] = job["metadata"]["uid"];
  EXPECT_EQ(Patch(path, right, kJsonPatch).first, 200);
  EXPECT_EQ(api_->Get(path)->at("spec").at("suspend"), false);
  EXPECT_EQ(Patch(path, json::array({{{"op", "remove"}, {"path", "/spec/nothing"}}}), kJsonPatch).first, 422);
}

TEST_F(FakeKubeApiTest, PatchMediaTypes) {
  MustCreate(kPyTorchJobs, {{"metadata", {{"name", "pt"}}}, {"spec", {{"runPolicy", {{"suspend", true}}}}}});
  std::string path = std::string(kPyTorchJobs) + "/pt";
  json body = {{"spec", {{"runPolicy", {{"suspend", false}}}}}};
  auto [code, status] = Patch(path, body, kStrategic);
  EXPECT_EQ(code, 415);
  EXPECT_EQ(status["reason"], "UnsupportedMediaType");
  EXPECT_EQ(Patch(path, body, "application/json").first, 415);
  EXPECT_EQ(Patch(path, body, std::string(kMerge) + "; charset=utf-8").first, 200);
  MustCreate(kJobs, Job("a"));
  EXPECT_EQ(Patch(std::string(kJobs) + "/a", {{"metadata", {{"labels", {{"k", "v"}}}}}}, kStrategic).first, 200);
}

TEST_F(FakeKubeApiTest, JobTemplateIsMutableOnlyWhileSuspendedAndNeverStarted) {
  std::string path = std::string(kJobs) + "/a";
  MustCreate(kJobs, Job("a"));
  json scheduling = {{"spec", {{"template", {{"spec", {{"nodeSelector", {{"gpu", "a100"}}}}}}}}}};
  EXPECT_EQ(Patch(path, scheduling, kMerge).first, 200);
  json image = {{"spec", {{"template", {{"spec", {{"containers", {{{"name", "w"}, {"image", "other"}}}}}}}}}}};
  auto [image_code, image_body] = Patch(path, image, kMerge);
  EXPECT_EQ(image_code, 422) << "only scheduling fields of the template may change";
  EXPECT_EQ(image_body["details"]["causes"][0]["field"], "spec.template");
  // The old object decides: unsuspending and adding a node selector in one
  // patch is allowed (what a release does).
  json release = {{"spec", {{"suspend", false}, {"template", {{"spec", {{"nodeSelector", {{"zone", "b"}}}}}}}}}};
  EXPECT_EQ(Patch(path, release, kMerge).first, 200);

  // Started and running: the controller set startTime.
  json running = *api_->Get(path);
  running["spec"]["suspend"] = false;
  running["status"]["startTime"] = "2025-01-01T00:00:00Z";
  ASSERT_THAT(api_->Replace(path, running), IsOk());
  json suspend_and_restore = {{"spec", {{"suspend", true}, {"template", {{"spec", {{"nodeSelector", nullptr}}}}}}}};
  EXPECT_EQ(Patch(path, suspend_and_restore, kMerge).first, 422) << "suspend + template in one patch";
  EXPECT_EQ(Patch(path, {{"spec", {{"suspend", true}}}}, kMerge).first, 200);
  EXPECT_EQ(Patch(path, {{"spec", {{"template", {{"spec", {{"nodeSelector", nullptr}}}}}}}}, kMerge).first, 422)
      << "suspended but started";
  EXPECT_EQ(Patch(path + "/status", {{"status", {{"startTime", nullptr}}}}, kMerge).first, 200);
  EXPECT_EQ(Patch(path, {{"spec", {{"template", {{"spec", {{"nodeSelector", nullptr}}}}}}}}, kMerge).first, 200);
  EXPECT_FALSE(api_->Get(path)->at("spec").at("template").at("spec").contains("nodeSelector"));
}

TEST_F(FakeKubeApiTest, PodSchedulingGateRules) {
  std::string path = std::string(kPods) + "/p";
  json pod = MustCreate(kPods, Pod("p", /*gated=*/true));
  ASSERT_EQ(pod["spec"]["tolerations"].size(), 2u) << "default not-ready/unreachable tolerations";

  EXPECT_EQ(Patch(path, {{"spec", {{"nodeSelector", {{"gpu", "a100"}}}}}}, kMerge).first, 200) << "add key, gated";
  EXPECT_EQ(Patch(path, {{"spec", {{"nodeSelector", {{"zone", "b"}}}}}}, kMerge).first, 422) << "change key";
  json add_gate = json::array({{{"op", "add"}, {"path", "/spec/schedulingGates/-"}, {"value", {{"name", "x"}}}}});
  auto [gate_code, gate_body] = Patch(path, add_gate, kJsonPatch);
  EXPECT_EQ(gate_code, 422);
  EXPECT_EQ(gate_body["details"]["causes"][0]["field"], "spec.schedulingGates");
  json add_toleration = json::array({{{"op", "add"},
                                      {"path", "/spec/tolerations/-"},
                                      {"value", {{"key", "gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}}}});
  EXPECT_EQ(Patch(path, add_toleration, kJsonPatch).first, 200);
  json replace_tolerations = {{"spec", {{"tolerations", {{{"key", "only"}, {"operator", "Exists"}}}}}}};
  EXPECT_EQ(Patch(path, replace_tolerations, kStrategic).first, 422) << "strategic merge replaces the whole list";
  EXPECT_EQ(Patch(path, {{"spec", {{"containers", {{{"name", "w"}, {"image", "x"}, {"args", {"a"}}}}}}}}, kMerge).first,
            422)
      << "other spec fields are immutable";

  EXPECT_EQ(Patch(path, {{"spec", {{"schedulingGates", nullptr}}}}, kMerge).first, 200) << "remove gate";
  EXPECT_EQ(Patch(path, {{"spec", {{"nodeSelector", {{"more", "x"}}}}}}, kMerge).first, 422) << "ungated";
  json final_pod = *api_->Get(path);
  EXPECT_EQ(final_pod["spec"]["nodeSelector"], json({{"zone", "a"}, {"gpu", "a100"}}));
  EXPECT_EQ(final_pod["spec"]["tolerations"].size(), 3u);
}

TEST_F(FakeKubeApiTest, StatusSubresourceAndMainResourceTouchDisjointParts) {
  std::string path = std::string(kJobs) + "/a";
  MustCreate(kJobs, Job("a"));
  auto [code, body] = Patch(path + "/status", {{"status", {{"active", 1}}}, {"spec", {{"suspend", false}}}}, kMerge);
  EXPECT_EQ(code, 200);
  EXPECT_EQ(body["status"]["active"], 1);
  EXPECT_EQ(body["spec"]["suspend"], true);
  EXPECT_EQ(body["metadata"]["generation"], 1);

  std::tie(code, body) = Patch(path, {{"status", {{"active", 5}}}, {"spec", {{"parallelism", 2}}}}, kMerge);
  EXPECT_EQ(code, 200);
  EXPECT_EQ(body["status"]["active"], 1);
  EXPECT_EQ(body["spec"]["parallelism"], 2);
  EXPECT_EQ(body["metadata"]["generation"], 2);
}

TEST_F(FakeKubeApiTest, NoOpPatchKeepsTheResourceVersion) {
  std::string path = std::string(kJobs) + "/a";
  json job = MustCreate(kJobs, Job("a", {{"k", "v"}}));
  int64_t before = api_->resource_version();
  auto [code, body] = Patch(path, {{"metadata", {{"labels", {{"k", "v"}}}}}}, kMerge);
  EXPECT_EQ(code, 200);
  EXPECT_EQ(body["metadata"]["resourceVersion"], job["metadata"]["resourceVersion"]);
  EXPECT_EQ(api_->resource_version(), before);
  ASSERT_THAT(api_->Replace(path, job), IsOk());
  EXPECT_EQ(api_->resource_version(), before);
}

TEST_F(FakeKubeApiTest, ResourceVersionInAPatchIsAPrecondition) {
  std::string path = std::string(kJobs) + "/a";
  json job = MustCreate(kJobs, Job("a"));
  auto [code, body] = Patch(path, {{"metadata", {{"resourceVersion", "1"}, {"labels", {{"k", "v"}}}}}}, kMerge);
  EXPECT_EQ(code, 409);
  EXPECT_EQ(body["reason"], "Conflict");
  EXPECT_EQ(Patch(path, {{"metadata", {{"resourceVersion", job["metadata"]["resourceVersion"]}, {"labels", {{"k", "v"}}}}}},
                  kMerge)
                .first,
            200);
  EXPECT_EQ(Patch(path, {{"metadata", {{"name", "b"}}}}, kMerge).first, 422);
}

TEST_F(FakeKubeApiTest, DeletePreconditionsAndJobWarning) {
  json job = MustCreate(kJobs, Job("a"));
  std::string path = std::string(kJobs) + "/a";
  auto r = cli_->Delete(path.c_str(), json({{"preconditions", {{"uid", "other"}}}}).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 409);
  EXPECT_EQ(json::parse(r->body)["reason"], "Conflict");

  r = cli_->Delete(path.c_str(), json({{"preconditions", {{"uid", job["metadata"]["uid"]}}}}).dump(),
                   "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(r->get_header_value("Warning"), HasSubstr("child pods are preserved by default"));
  EXPECT_EQ(json::parse(r->body)["metadata"]["name"], "a");
  EXPECT_THAT(api_->Get(path), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(cli_->Delete(path.c_str())->status, 404);

  MustCreate(kJobs, Job("b"));
  r = cli_->Delete((std::string(kJobs) + "/b").c_str(), json({{"propagationPolicy", "Background"}}).dump(),
                   "application/json");
  EXPECT_EQ(r->status, 200);
  EXPECT_FALSE(r->has_header("Warning"));
}

TEST_F(FakeKubeApiTest, ScriptedThrottlingIsPlainTextWithRetryAfter) {
  api_->Fail({.method = "GET", .path_contains = "/jobs", .status = 429, .retry_after = "3", .times = 1});
  auto r = cli_->Get(kJobs);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(r->get_header_value("Retry-After"), "3");
  EXPECT_EQ(r->body, "Too many requests, please try again later.\n");
  EXPECT_THAT(r->get_header_value("Content-Type"), HasSubstr("text/plain"));
  EXPECT_EQ(cli_->Get(kJobs)->status, 200) << "times=1";

  api_->Fail({.watch_only = true, .status = 503, .retry_after = "1", .times = -1});
  EXPECT_EQ(cli_->Get(kJobs)->status, 200) << "not a watch";
  auto w = cli_->Get(kJobs, httplib::Params{{"watch", "true"}}, httplib::Headers{});
  EXPECT_EQ(w->status, 503);
  EXPECT_EQ(json::parse(w->body)["reason"], "ServiceUnavailable");
  api_->ClearFailures();
}

TEST_F(FakeKubeApiTest, ScriptedDelaySlowsAnAnswer) {
  api_->Fail({.method = "GET", .status = 0, .delay = absl::Milliseconds(300)});
  base::Stopwatch sw;
  auto r = cli_->Get(kJobs);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_GE(sw.Elapsed(), absl::Milliseconds(300));
}

TEST_F(FakeKubeApiTest, CallsAreRecorded) {
  MustCreate(kJobs, Job("a"));
  api_->ClearCalls();
  std::string path = std::string(kJobs) + "/a";
  Patch(path, {{"spec", {{"suspend", false}}}}, kMerge);
  cli_->Get((std::string(kJobs) + "?limit=5&labelSelector=a%3Db").c_str());
  auto calls = api_->Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].method, "PATCH");
  EXPECT_EQ(calls[0].path, path);
  EXPECT_EQ(calls[0].content_type, kMerge);
  EXPECT_EQ(json::parse(calls[0].body), json({{"spec", {{"suspend", false}}}}));
  EXPECT_EQ(calls[0].authorization, "Bearer fake-token");
  EXPECT_EQ(calls[0].status, 200);
  EXPECT_EQ(calls[1].method, "GET");
  EXPECT_EQ(calls[1].query, "limit=5&labelSelector=a%3Db");
  EXPECT_EQ(calls[1].status, 200);
}

TEST(FakeKubeApiCallbackTest, OnCallSeesEveryHandledRequestAndMayUseTheStore) {
  TempDir certs;
  auto made = RunCommand({GangkeeperBinary(), "certs", "--out", certs.path()}, absl::Seconds(60));
  ASSERT_THAT(made, IsOk());
  std::mutex mu;
  std::vector<std::pair<RecordedCall, absl::Time>> seen;
  FakeKubeApi* fake = nullptr;
  FakeKubeOptions o;
  o.cert_file = certs.File("tls.crt");
  o.key_file = certs.File("tls.key");
  o.on_call = [&](const RecordedCall& call, absl::Time received) {
    // The store may be used from the callback (no lock is held).
    if (call.method == "PATCH" && call.status == 200) {
      auto j = fake->Get(call.path);
      EXPECT_THAT(j, IsOk());
    }
    std::lock_guard<std::mutex> lock(mu);
    seen.emplace_back(call, received);
  };
  auto api = FakeKubeApi::Start(o);
  ASSERT_THAT(api, IsOk());
  fake = api->get();
  ASSERT_THAT((*api)->Create(kJobs, Job("a")), IsOk());
  httplib::SSLClient cli("127.0.0.1", (*api)->port());
  cli.set_ca_cert_path(certs.File("ca.crt").c_str());
  cli.enable_server_certificate_verification(true);
  cli.set_bearer_token_auth("fake-token");
  const absl::Time before = absl::Now();
  auto r = cli.Patch((std::string(kJobs) + "/a").c_str(), R"({"spec":{"suspend":false}})", kMerge);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  auto missing = cli.Get((std::string(kJobs) + "/missing").c_str());
  ASSERT_TRUE(missing);
  const absl::Time after = absl::Now();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(seen.size(), 2u);  // the callback ran before each answer was sent
  EXPECT_EQ(seen[0].first.method, "PATCH");
  EXPECT_EQ(seen[0].first.path, std::string(kJobs) + "/a");
  EXPECT_EQ(json::parse(seen[0].first.body), json({{"spec", {{"suspend", false}}}}));
  EXPECT_EQ(seen[0].first.status, 200);
  EXPECT_GE(seen[0].second, before);
  EXPECT_LE(seen[0].second, seen[1].second);
  EXPECT_LE(seen[1].second, after);
  EXPECT_EQ(seen[1].first.status, 404);
  EXPECT_EQ((*api)->Calls().size(), 2u);  // still recorded
}

}  // namespace
}  // namespace gangkeeper::testing
