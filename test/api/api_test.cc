// gangkeeper: tests for the API's visibility routes against a real Broker:
// what each role sees of ClusterQueues and workloads, the filters, pending
// reasons and queue positions, assignments, and the error responses.
#include "gangkeeper/api/api.h"

#include <openssl/sha.h>

#include <array>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gangkeeper/audit/audit.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/metrics/registry.h"
#include "gangkeeper/model/manifest.h"
#include "gangkeeper/model/policy_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/policies.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::api {
namespace {

using ::gangkeeper::quantity::Quantity;
using ::gangkeeper::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using nlohmann::json;

// Two ClusterQueues, each taking one team's namespace through a
// LocalQueue; team-b's is in a cohort of its own.
constexpr char kPolicies[] = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
spec:
  nodeLabels: {gpu: a100}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: h100}
spec:
  nodeLabels: {gpu: h100}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a-gpu}
spec:
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: team-a}}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: a100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-b-gpu}
spec:
  cohort: team-b-pool
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: team-b}}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: gpu, namespace: team-a}
spec: {clusterQueue: team-a-gpu}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: batch, namespace: team-a}
spec: {clusterQueue: team-a-gpu}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: gpu, namespace: team-b}
spec: {clusterQueue: team-b-gpu}
)";

std::shared_ptr<const model::PolicySet> Policies(const std::string& yaml) { return testing::PoliciesFrom(yaml); }

// A launcher (no GPU) and `pods` workers of `gpus` GPUs each.
workload::Workload Gang(const std::string& ns, const std::string& name, const std::string& queue, int64_t pods,
                        int64_t gpus) {
  workload::Workload w;
  w.namespace_name = ns;
  w.name = name;
  w.uid = "uid-" + name;
  w.queue_name = queue;
  for (const char* set : {"launcher", "worker"}) {
    workload::PodSet ps;
    ps.name = set;
    ps.count = std::string(set) == "launcher" ? 1 : pods;
    ps.requests["nvidia.com/gpu"] = Quantity::FromUnits(std::string(set) == "launcher" ? 0 : gpus);
    w.pod_sets.push_back(ps);
  }
  return w;
}

std::string Sha256Hex(const std::string& s) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d);
  std::string out;
  for (unsigned char b : d) absl::StrAppend(&out, absl::Hex(b, absl::kZeroPad2));
  return out;
}

struct Reply {
  int status = 0;
  json body;
  server::HttpResponse raw;
  std::string Header(const std::string& name) const {
    for (const auto& [k, v] : raw.headers) {
      if (absl::EqualsIgnoreCase(k, name)) return v;
    }
    return "";
  }
};

// Names of the items of a list reply ("ns/name" for workloads).
std::vector<std::string> Names(const json& body) {
  std::vector<std::string> out;
  for (const json& i : body.at("items")) {
    out.push_back(i.contains("namespace") ? absl::StrCat(i.at("namespace").get<std::string>(), "/",
                                                         i.at("name").get<std::string>())
                                          : i.at("name").get<std::string>());
  }
  return out;
}

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.File("tokens.yaml"))
        << absl::StrCat("- {name: platform, sha256: ", Sha256Hex("admin-secret"), ", role: admin}\n",
                        "- {name: dashboards, sha256: ", Sha256Hex("viewer-secret"), ", role: viewer}\n",
                        "- {name: team-b-lead, sha256: ", Sha256Hex("lead-secret"),
                        ", role: team-admin, namespaces: [team-b]}\n",
                        "- {name: audit, sha256: ", Sha256Hex("audit-secret"), ", role: auditor}\n",
                        "- {name: team-a-lead, sha256: ", Sha256Hex("other-lead-secret"),
                        ", role: team-admin, namespaces: [team-a]}\n",
                        "- {name: prometheus, sha256: ", Sha256Hex("metrics-secret"), ", role: metrics}\n");
    auto tokens = TokenStore::Load(dir_.File("tokens.yaml"));
    ASSERT_THAT(tokens, IsOk());
    tokens_ = *std::move(tokens);
    ASSERT_EQ(tokens_->size(), 6u);

    broker::BrokerOptions options;
    options.ack_timeout = absl::Seconds(10);
    auto b = broker::Broker::Create(Policies(PolicyText()), options, nullptr, nullptr, &clock_);
    ASSERT_THAT(b.status(), IsOk());
    broker_ = *std::move(b);
    broker_->Start();

    // team-a-gpu (8 a100): "train" takes all 8; "next" (4) and "last" (1)
    // wait, in that order, in two LocalQueues.
    Register(Gang("team-a", "train", "gpu", 4, 2));
    Register(Gang("team-a", "next", "gpu", 1, 4));
    Register(Gang("team-a", "last", "batch", 1, 1));
    Register(Gang("team-a", "later", "gpu", 1, 2));
    // team-b-gpu (4 h100): "infer" takes 2; "wait" needs 4.
    Register(Gang("team-b", "infer", "gpu", 2, 1));
    Register(Gang("team-b", "wait", "gpu", 2, 2));
    ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));

    routes_ = Routes(broker_.get(), broker_.get(), tokens_.get(), &clock_);
  }

  virtual std::string PolicyText() const { return kPolicies; }

  void Register(const workload::Workload& w) {
    ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(w)), IsOk()) << w.name;
    clock_.AdvanceTime(absl::Seconds(1));  // queue order: creation time
  }

  // Dispatches like the server: an exact GET route, else a prefix route.
  Reply Call(const std::string& path, const std::string& token,
             std::vector<std::pair<std::string, std::string>> query = {}, const std::string& addr = "10.1.2.3") {
    return Send("GET", path, token, "", std::move(query), addr);
  }

  // `method` `path` with `body`, dispatched like the server.
  Reply Send(const std::string& method, const std::string& path, const std::string& token, const std::string& body,
             std::vector<std::pair<std::string, std::string>> query = {}, const std::string& addr = "10.1.2.3") {
    server::HttpRequest req;
    req.method = method;
    req.path = path;
    req.body = body;
    req.query = std::move(query);
    if (!token.empty()) req.headers.emplace_back("authorization", absl::StrCat("Bearer ", token));
    req.remote_addr = addr;
    return Dispatch(req);
  }

  Reply Dispatch(const server::HttpRequest& req) {
    const std::string& path = req.path;
    const server::Route* route = nullptr;
    for (const server::Route& r : routes_) {
      if (r.method == req.method && !r.prefix && r.path == path) route = &r;
    }
    for (const server::Route& r : routes_) {
      if (route == nullptr && r.method == req.method && r.prefix && absl::StartsWith(path, r.path)) route = &r;
    }
    Reply reply;
    if (route == nullptr) {
      ADD_FAILURE() << "no route for " << path;
      return reply;
    }
    EXPECT_EQ(route->listener, server::Listener::kApi);
    reply.raw = route->handler(req);
    reply.status = reply.raw.status;
    if (reply.raw.content_type != "application/json") {  // /metrics, /v1/audit/export
      EXPECT_EQ(reply.status, 200) << path << ": " << reply.raw.body;
      return reply;
    }
    reply.body = json::parse(reply.raw.body, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(reply.body.is_discarded()) << path << ": " << reply.raw.body;
    return reply;
  }

  // The workload named `ns/name` in a list reply.
  static json Item(const json& body, const std::string& ns, const std::string& name) {
    for (const json& i : body.at("items")) {
      if (i.value("namespace", "") == ns && i.value("name", "") == name) return i;
    }
    ADD_FAILURE() << ns << "/" << name << " is not listed";
    return json::object();
  }

  static json Resource(const json& queue, const std::string& flavor) {
    for (const json& r : queue.at("resources")) {
      if (r.at("flavor") == flavor && r.at("resource") == "nvidia.com/gpu") return r;
    }
    ADD_FAILURE() << "no " << flavor << "/nvidia.com/gpu in " << queue.dump();
    return json::object();
  }

  static void ExpectError(const Reply& r, int status, const std::string& code, const std::string& message_part) {
    EXPECT_EQ(r.status, status) << r.raw.body;
    ASSERT_TRUE(r.body.contains("error")) << r.raw.body;
    EXPECT_EQ(r.body["error"].value("code", ""), code) << r.raw.body;
    EXPECT_THAT(r.body["error"].value("message", ""), HasSubstr(message_part)) << r.raw.body;
  }

  testing::TempDir dir_;
  base::SimulatedClock clock_{absl::FromUnixSeconds(1'700'000'000)};
  std::unique_ptr<TokenStore> tokens_;
  std::unique_ptr<broker::Broker> broker_;
  std::vector<server::Route> routes_;
};

TEST_F(ApiTest, RoutesAreOnTheApiListener) {
  std::set<std::string> routes;
  for (const server::Route& r : routes_) {
    EXPECT_EQ(r.listener, server::Listener::kApi) << r.path;
    EXPECT_TRUE(r.handler) << r.path;
    routes.insert(absl::StrCat(r.method, " ", r.path, r.prefix ? "*" : ""));
  }
  EXPECT_THAT(routes, UnorderedElementsAre("GET /v1/audit", "GET /v1/audit/export", "GET /v1/audit/head",
                                           "GET /v1/clusterqueues",
                                           "GET /v1/clusterqueues/*", "GET /v1/workloads", "GET /v1/workloads/*",
                                           "POST /v1/apply", "GET /apis/kueue.x-k8s.io/*", "PUT /apis/kueue.x-k8s.io/*",
                                           "DELETE /apis/kueue.x-k8s.io/*", "GET /apis/scheduling.k8s.io/*",
                                           "PUT /apis/scheduling.k8s.io/*", "DELETE /apis/scheduling.k8s.io/*",
                                           "GET /apis/gangkeeper.io/*", "PUT /apis/gangkeeper.io/*",
                                           "DELETE /apis/gangkeeper.io/*"));
}

TEST_F(ApiTest, WithoutAValidTokenEveryRouteIs401WithWwwAuthenticate) {
  for (const char* path : {"/v1/clusterqueues", "/v1/clusterqueues/team-a-gpu/status", "/v1/workloads",
                           "/v1/workloads/team-a/train", "/v1/clusterqueues/bad-path"}) {
    Reply none = Call(path, "");
    ExpectError(none, 401, "Unauthorized", "Authorization: Bearer TOKEN");
    EXPECT_EQ(none.Header("WWW-Authenticate"), "Bearer") << path;
    EXPECT_FALSE(absl::StrContains(none.raw.body, "train")) << path;
    Reply wrong = Call(path, "admin-secret-but-wrong", {}, "10.9.9.9");
    ExpectError(wrong, 401, "Unauthorized", "not known");
    EXPECT_EQ(wrong.Header("WWW-Authenticate"), "Bearer") << path;
  }
}

TEST_F(ApiTest, TooManyFailuresAre429ForInvalidTokensOnlyAndValidTokensStillPass) {
  for (int i = 0; i < 3 * TokenStore::kMaxFailuresPerMinute; ++i) {
    const int status = Call("/v1/workloads", absl::StrCat("guess-", i), {}, "203.0.113.9").status;
    ASSERT_EQ(status, i < TokenStore::kMaxFailuresPerMinute ? 401 : 429) << i;
  }
  Reply blocked = Call("/v1/workloads", "guess-again", {}, "203.0.113.9");
  ExpectError(blocked, 429, "TooManyRequests", "too many failed authentications");
  EXPECT_EQ(blocked.Header("Retry-After"), "60");
  // Everyone behind that address with a valid token is served.
  EXPECT_EQ(Call("/v1/workloads", "admin-secret", {}, "203.0.113.9").status, 200);
  EXPECT_EQ(Call("/v1/workloads", "lead-secret", {}, "203.0.113.9").status, 200);
  EXPECT_EQ(Call("/v1/workloads", "guess-x", {}, "203.0.113.10").status, 401);
  // The limiter uses the API's clock: a minute later invalid tokens get 401 again.
  clock_.AdvanceTime(absl::Minutes(1) + absl::Seconds(1));
  EXPECT_EQ(Call("/v1/workloads", "guess-y", {}, "203.0.113.9").status, 401);
}

TEST_F(ApiTest, AdminAndViewerSeeEverything) {
  for (const char* token : {"admin-secret", "viewer-secret"}) {
    Reply queues = Call("/v1/clusterqueues", token);
    ASSERT_EQ(queues.status, 200) << queues.raw.body;
    EXPECT_THAT(Names(queues.body), ElementsAre("team-a-gpu", "team-b-gpu")) << token;
    Reply all = Call("/v1/workloads", token);
    ASSERT_EQ(all.status, 200) << all.raw.body;
    // Sorted by namespace, then name.
    EXPECT_THAT(Names(all.body), ElementsAre("team-a/last", "team-a/later", "team-a/next", "team-a/train",
                                             "team-b/infer", "team-b/wait"))
        << token;
    EXPECT_EQ(Call("/v1/clusterqueues/team-a-gpu/status", token).status, 200) << token;
    EXPECT_EQ(Call("/v1/clusterqueues/team-b-gpu/status", token).status, 200) << token;
    EXPECT_EQ(Call("/v1/workloads/team-b/wait", token).status, 200) << token;
    EXPECT_EQ(Call("/v1/workloads/team-a/train", token).status, 200) << token;
  }
}

TEST_F(ApiTest, TeamAdminSeesOnlyItsNamespacesAndTheirQueues) {
  const std::string lead = "lead-secret";
  Reply queues = Call("/v1/clusterqueues", lead);
  ASSERT_EQ(queues.status, 200) << queues.raw.body;
  EXPECT_THAT(Names(queues.body), ElementsAre("team-b-gpu"));

  Reply all = Call("/v1/workloads", lead);
  ASSERT_EQ(all.status, 200) << all.raw.body;
  EXPECT_THAT(Names(all.body), ElementsAre("team-b/infer", "team-b/wait"));
  // Another team's queue as a filter shows nothing of that team.
  Reply other_cq = Call("/v1/workloads", lead, {{"clusterQueue", "team-a-gpu"}});
  ASSERT_EQ(other_cq.status, 200) << other_cq.raw.body;
  EXPECT_THAT(Names(other_cq.body), IsEmpty());

  EXPECT_EQ(Call("/v1/clusterqueues/team-b-gpu/status", lead).status, 200);
  EXPECT_EQ(Call("/v1/workloads/team-b/infer", lead).status, 200);
  EXPECT_EQ(Call("/v1/workloads", lead, {{"namespace", "team-b"}}).status, 200);

  const std::string who = "token \"team-b-lead\" (role team-admin) may not";
  Reply cq = Call("/v1/clusterqueues/team-a-gpu/status", lead);
  ExpectError(cq, 403, "Forbidden", who);
  EXPECT_THAT(cq.body["error"]["message"].get<std::string>(), HasSubstr("team-a-gpu"));
  Reply ns = Call("/v1/workloads", lead, {{"namespace", "team-a"}});
  ExpectError(ns, 403, "Forbidden", who);
  EXPECT_THAT(ns.body["error"]["message"].get<std::string>(), HasSubstr("team-a"));
  Reply one = Call("/v1/workloads/team-a/train", lead);
  ExpectError(one, 403, "Forbidden", who);
  EXPECT_FALSE(absl::StrContains(one.raw.body, "a100")) << one.raw.body;
  // Even a workload that does not exist: no hint whether it does.
  ExpectError(Call("/v1/workloads/team-a/no-such", lead), 403, "Forbidden", who);
}

TEST_F(ApiTest, AuditorMayNotReadQueuesOrWorkloads) {
  const std::string who = "token \"audit\" (role auditor) may not";
  ExpectError(Call("/v1/clusterqueues", "audit-secret"), 403, "Forbidden", who);
  ExpectError(Call("/v1/clusterqueues/team-a-gpu/status", "audit-secret"), 403, "Forbidden", who);
  ExpectError(Call("/v1/workloads", "audit-secret"), 403, "Forbidden", who);
  ExpectError(Call("/v1/workloads", "audit-secret", {{"namespace", "team-a"}}), 403, "Forbidden", who);
  ExpectError(Call("/v1/workloads/team-a/train", "audit-secret"), 403, "Forbidden", who);
}

TEST_F(ApiTest, WorkloadsFilterByNamespaceClusterQueueAndState) {
  const std::string admin = "admin-secret";
  auto names = [&](std::vector<std::pair<std::string, std::string>> q) {
    Reply r = Call("/v1/workloads", admin, std::move(q));
    EXPECT_EQ(r.status, 200) << r.raw.body;
    return r.status == 200 ? Names(r.body) : std::vector<std::string>{};
  };
  EXPECT_THAT(names({{"namespace", "team-b"}}), ElementsAre("team-b/infer", "team-b/wait"));
  EXPECT_THAT(names({{"clusterQueue", "team-a-gpu"}}),
              ElementsAre("team-a/last", "team-a/later", "team-a/next", "team-a/train"));
  EXPECT_THAT(names({{"state", "pending"}}),
              ElementsAre("team-a/last", "team-a/later", "team-a/next", "team-b/wait"));
  EXPECT_THAT(names({{"state", "admitted"}}), ElementsAre("team-a/train", "team-b/infer"));
  EXPECT_THAT(names({{"state", "all"}}), ::testing::SizeIs(6));
  EXPECT_THAT(names({{"state", "finished"}}), IsEmpty());
  EXPECT_THAT(names({{"namespace", "team-a"}, {"state", "pending"}, {"clusterQueue", "team-a-gpu"}}),
              ElementsAre("team-a/last", "team-a/later", "team-a/next"));
  EXPECT_THAT(names({{"namespace", "team-b"}, {"clusterQueue", "team-a-gpu"}}), IsEmpty());
  EXPECT_THAT(names({{"namespace", "nobody"}}), IsEmpty());
  EXPECT_THAT(names({{"clusterQueue", "no-such-queue"}}), IsEmpty());

  for (const char* bad : {"Pending", "running", "reserved", "x"}) {
    Reply r = Call("/v1/workloads", admin, {{"state", bad}});
    ExpectError(r, 400, "BadRequest", absl::StrCat("state=", bad));
    EXPECT_EQ(r.body["error"].value("field", ""), "state") << bad;
  }
}

TEST_F(ApiTest, PendingWorkloadsCarryTheReasonInNumbersAndTheirPositions) {
  Reply r = Call("/v1/workloads", "viewer-secret", {{"state", "pending"}});
  ASSERT_EQ(r.status, 200) << r.raw.body;

  // team-a-gpu's queue: next (LocalQueue gpu), last (batch), later (gpu).
  json next = Item(r.body, "team-a", "next");
  EXPECT_EQ(next["state"], "pending");
  EXPECT_EQ(next["phase"], "pending") << next.dump();
  EXPECT_EQ(next["clusterQueue"], "team-a-gpu");
  EXPECT_EQ(next["localQueue"], "gpu");
  EXPECT_FALSE(next.contains("assignment")) << next.dump();
  EXPECT_FALSE(next.contains("admitted")) << next.dump();
  const json& reason = next["reason"];
  EXPECT_EQ(reason["code"], "WaitingForQuota") << reason.dump();
  EXPECT_THAT(reason["message"].get<std::string>(), HasSubstr("waiting for 4 nvidia.com/gpu in team-a-gpu/a100"));
  EXPECT_EQ(reason["podSet"], "worker");
  EXPECT_EQ(reason["flavor"], "a100");
  EXPECT_EQ(reason["resource"], "nvidia.com/gpu");
  EXPECT_EQ(reason["requested"], "4");
  EXPECT_EQ(reason["available"], "0");
  EXPECT_EQ(reason["nominal"], "8");
  EXPECT_EQ(reason["used"], "8");
  EXPECT_EQ(reason["usedBy"], 1);
  EXPECT_EQ(next["position"], json({{"clusterQueue", 1}, {"localQueue", 1}}));

  json last = Item(r.body, "team-a", "last");
  EXPECT_EQ(last["localQueue"], "batch");
  EXPECT_EQ(last["reason"]["requested"], "1");
  EXPECT_EQ(last["position"], json({{"clusterQueue", 2}, {"localQueue", 1}}));
  json later = Item(r.body, "team-a", "later");
  EXPECT_EQ(later["position"], json({{"clusterQueue", 3}, {"localQueue", 2}}));

  // team-b-gpu: 2 of 4 used by infer; wait needs 4.
  json wait = Item(r.body, "team-b", "wait");
  EXPECT_EQ(wait["reason"]["code"], "WaitingForQuota");
  EXPECT_EQ(wait["reason"]["flavor"], "h100");
  EXPECT_EQ(wait["reason"]["requested"], "4");
  EXPECT_EQ(wait["reason"]["available"], "2");
  EXPECT_EQ(wait["reason"]["nominal"], "4");
  EXPECT_EQ(wait["reason"]["used"], "2");
  EXPECT_EQ(wait["reason"]["usedBy"], 1);
  EXPECT_EQ(wait["position"], json({{"clusterQueue", 1}, {"localQueue", 1}}));

  // The single-workload route says the same, and matches the broker.
  std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
  for (const char* name : {"next", "last", "later"}) {
    Reply one = Call(absl::StrCat("/v1/workloads/team-a/", name), "viewer-secret");
    ASSERT_EQ(one.status, 200) << one.raw.body;
    EXPECT_EQ(one.body["position"], Item(r.body, "team-a", name)["position"]) << name;
    EXPECT_EQ(one.body["reason"], Item(r.body, "team-a", name)["reason"]) << name;
    std::optional<broker::QueuePosition> pos = snap->Position({"team-a", name});
    ASSERT_TRUE(pos.has_value()) << name;
    EXPECT_EQ(one.body["position"]["clusterQueue"], pos->cluster_queue) << name;
    EXPECT_EQ(one.body["position"]["localQueue"], pos->local_queue) << name;
  }
}

TEST_F(ApiTest, AdmittedWorkloadsCarryTheirAssignment) {
  Reply r = Call("/v1/workloads/team-a/train", "admin-secret");
  ASSERT_EQ(r.status, 200) << r.raw.body;
  const json& w = r.body;
  EXPECT_EQ(w["namespace"], "team-a");
  EXPECT_EQ(w["name"], "train");
  EXPECT_EQ(w["uid"], "uid-train");
  EXPECT_EQ(w["state"], "admitted");
  EXPECT_EQ(w["clusterQueue"], "team-a-gpu");
  EXPECT_EQ(w["localQueue"], "gpu");
  EXPECT_EQ(w["phase"], "running");  // no actuator: released at once
  EXPECT_EQ(w["admissions"], 1);
  EXPECT_FALSE(w.contains("reason")) << w.dump();
  EXPECT_FALSE(w.contains("position")) << w.dump();
  EXPECT_THAT(w["admitted"].get<std::string>(), ::testing::StartsWith("2023-11-14T22:13:2"));
  ASSERT_EQ(w["podSets"].size(), 2u) << w.dump();
  EXPECT_EQ(w["podSets"][1]["name"], "worker");
  EXPECT_EQ(w["podSets"][1]["count"], 4);
  EXPECT_EQ(w["podSets"][1]["requests"]["nvidia.com/gpu"], "2");

  const json& a = w["assignment"];
  EXPECT_EQ(a["clusterQueue"], "team-a-gpu") << a.dump();
  ASSERT_EQ(a["podSets"].size(), 2u) << a.dump();
  EXPECT_EQ(a["podSets"][1]["name"], "worker");
  EXPECT_EQ(a["podSets"][1]["count"], 4);
  EXPECT_EQ(a["podSets"][1]["flavors"], json({{"nvidia.com/gpu", "a100"}}));
  EXPECT_EQ(a["podSets"][1]["usage"]["nvidia.com/gpu"], "8");

  Reply b = Call("/v1/workloads", "admin-secret", {{"namespace", "team-b"}, {"state", "admitted"}});
  ASSERT_EQ(b.status, 200) << b.raw.body;
  json infer = Item(b.body, "team-b", "infer");
  EXPECT_EQ(infer["assignment"]["clusterQueue"], "team-b-gpu");
  EXPECT_EQ(infer["assignment"]["podSets"][1]["flavors"]["nvidia.com/gpu"], "h100");
  EXPECT_EQ(infer["assignment"]["podSets"][1]["usage"]["nvidia.com/gpu"], "2");
}

TEST_F(ApiTest, ClusterQueueStatusMatchesTheBroker) {
  std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
  struct Want {
    const char* cq;
    const char* flavor;
    const char* nominal;
    const char* usage;
    const char* available;
    int64_t pending;
    int64_t admitted;
  };
  for (const Want& want : {Want{"team-a-gpu", "a100", "8", "8", "0", 3, 1},
                           Want{"team-b-gpu", "h100", "4", "2", "2", 1, 1}}) {
    Reply r = Call(absl::StrCat("/v1/clusterqueues/", want.cq, "/status"), "viewer-secret");
    ASSERT_EQ(r.status, 200) << r.raw.body;
    EXPECT_EQ(r.body["name"], want.cq);
    EXPECT_EQ(r.body["active"], true);
    EXPECT_EQ(r.body["pending"], want.pending) << want.cq;
    EXPECT_EQ(r.body["admitted"], want.admitted) << want.cq;
    json res = Resource(r.body, want.flavor);
    EXPECT_EQ(res["nominal"], want.nominal) << want.cq;
    EXPECT_EQ(res["usage"], want.usage) << want.cq;
    EXPECT_EQ(res["available"], want.available) << want.cq;
    EXPECT_EQ(res["borrowed"], "0") << want.cq;
    // The broker's snapshot says the same.
    const broker::ClusterQueueView* v = snap->FindClusterQueue(want.cq);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(r.body["pending"], v->status.pending);
    EXPECT_EQ(r.body["admitted"], v->status.admitted);
    const broker::FlavorResourceStatus& s = v->status.resources.at({want.flavor, "nvidia.com/gpu"});
    EXPECT_EQ(res["nominal"], s.nominal.Format());
    EXPECT_EQ(res["usage"], s.usage.Format());
    EXPECT_EQ(res["available"], s.available.Format());
    EXPECT_EQ(r.body["resources"].size(), v->status.resources.size());
    // The list route carries the same object.
    Reply list = Call("/v1/clusterqueues", "viewer-secret");
    ASSERT_EQ(list.status, 200);
    bool found = false;
    for (const json& q : list.body["items"]) {
      if (q["name"] == want.cq) {
        found = true;
        EXPECT_EQ(q, r.body);
      }
    }
    EXPECT_TRUE(found) << want.cq;
  }
}

TEST_F(ApiTest, StatusFollowsTheBrokerAfterAFinish) {
  ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Finish({"team-a", "train"}, "")), IsOk());
  ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  // next (4) and last (1) and later (2) now fit in 8.
  Reply r = Call("/v1/clusterqueues/team-a-gpu/status", "admin-secret");
  ASSERT_EQ(r.status, 200) << r.raw.body;
  EXPECT_EQ(r.body["pending"], 0);
  EXPECT_EQ(r.body["admitted"], 3);
  EXPECT_EQ(Resource(r.body, "a100")["usage"], "7");
  Reply w = Call("/v1/workloads", "admin-secret", {{"clusterQueue", "team-a-gpu"}, {"state", "admitted"}});
  ASSERT_EQ(w.status, 200);
  EXPECT_THAT(Names(w.body), ElementsAre("team-a/last", "team-a/later", "team-a/next"));
  // The finished workload is still shown (the broker keeps the most recent).
  Reply gone = Call("/v1/workloads/team-a/train", "admin-secret");
  ASSERT_EQ(gone.status, 200) << gone.raw.body;
  EXPECT_EQ(gone.body["state"], "finished");
  EXPECT_EQ(gone.body["ref"], "job.batch/team-a/train");
  Reply finished = Call("/v1/workloads", "admin-secret", {{"state", "finished"}});
  ASSERT_EQ(finished.status, 200);
  EXPECT_THAT(Names(finished.body), ElementsAre("team-a/train"));
  ExpectError(Call("/v1/workloads/team-a/never", "admin-secret"), 404, "NotFound", "team-a/never");
}

TEST_F(ApiTest, UnknownThingsAre404) {
  ExpectError(Call("/v1/clusterqueues/no-such-queue/status", "admin-secret"), 404, "NotFound",
              "ClusterQueue \"no-such-queue\" does not exist");
  ExpectError(Call("/v1/workloads/team-a/no-such", "admin-secret"), 404, "NotFound",
              "workload team-a/no-such is not tracked");
  ExpectError(Call("/v1/workloads/team-b/wait-not", "lead-secret"), 404, "NotFound", "team-b/wait-not");
}

TEST_F(ApiTest, MalformedPathsAre404WithAHint) {
  for (const char* path : {"/v1/clusterqueues/team-a-gpu", "/v1/clusterqueues/", "/v1/clusterqueues//status",
                           "/v1/clusterqueues/team-a-gpu/status/", "/v1/clusterqueues/a/b/status",
                           "/v1/clusterqueues/team-a-gpu/usage"}) {
    ExpectError(Call(path, "admin-secret"), 404, "NotFound", "use /v1/clusterqueues/NAME/status");
  }
  for (const char* path : {"/v1/workloads/", "/v1/workloads/team-a", "/v1/workloads/team-a/",
                           "/v1/workloads//train", "/v1/workloads/job/team-a/train/status",
                           "/v1/workloads/job//train"}) {
    ExpectError(Call(path, "admin-secret"), 404, "NotFound", "use /v1/workloads/[KIND/]NAMESPACE/NAME");
  }
  // Three parts name a kind; one gangkeeper does not manage is a 400 naming it.
  ExpectError(Call("/v1/workloads/daemonset/team-a/train", "admin-secret"), 400, "BadRequest",
              "\"daemonset\" is not a kind gangkeeper manages");
}

}  // namespace
}  // namespace gangkeeper::api

namespace gangkeeper::api {
namespace {

// Issue #19: a Job and a PyTorchJob of one name are two workloads; the
// path without a kind is ambiguous then, and says which to use.
TEST_F(ApiTest, TwoKindsOfOneNameAreNamedByKind) {
  workload::Workload pt = Gang("team-a", "train", "gpu", 1, 1);
  pt.kind = workload::Kind::kPyTorchJob;
  pt.uid = "uid-pytorch-train";
  Register(pt);
  ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));
  ExpectError(Call("/v1/workloads/team-a/train", "admin-secret"), 409, "Conflict",
              "job.batch/team-a/train, pytorchjob.kubeflow.org/team-a/train");
  Reply job = Call("/v1/workloads/job/team-a/train", "admin-secret");
  ASSERT_EQ(job.status, 200) << job.raw.body;
  EXPECT_EQ(job.body["kind"], "Job");
  EXPECT_EQ(job.body["uid"], "uid-train");
  Reply torch = Call("/v1/workloads/pytorchjob.kubeflow.org/team-a/train", "admin-secret");
  ASSERT_EQ(torch.status, 200) << torch.raw.body;
  EXPECT_EQ(torch.body["kind"], "PyTorchJob");
  EXPECT_EQ(torch.body["apiGroup"], "kubeflow.org");
  EXPECT_EQ(torch.body["ref"], "pytorchjob.kubeflow.org/team-a/train");
  EXPECT_EQ(torch.body["state"], "pending");
  // Both are listed, each with its kind.
  Reply list = Call("/v1/workloads", "admin-secret", {{"namespace", "team-a"}});
  int trains = 0;
  for (const json& w : list.body["items"]) trains += w["name"] == "train";
  EXPECT_EQ(trains, 2);
}

}  // namespace
}  // namespace gangkeeper::api

namespace gangkeeper::api {
namespace {

// Issue #20: a key written twice in a body is refused with both places,
// whatever the format and route; nothing of such a bundle is applied.
TEST_F(ApiTest, BodiesWithDuplicateKeysAre422NamingBothPlaces) {
  Reply put = Send("PUT", "/apis/kueue.x-k8s.io/v1beta1/resourceflavors/h100", "admin-secret", R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: h100}
spec:
  nodeLabels:
    gpu: h100
    gpu: a100
)");
  ExpectError(put, 422, "Invalid", "first at line 6, column 5, again at line 7, column 5");
  EXPECT_EQ(put.body["error"].value("field", ""), "spec.nodeLabels.gpu");

  const std::string cq_path = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-b-gpu";
  const std::string json_body =
      R"({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "team-b-gpu"},)"
      "\n"
      R"( "spec": {"namespaceSelector": {}, "namespaceSelector": {"matchLabels": {"a": "b"}}}})";
  Reply put_json = Send("PUT", cq_path, "admin-secret", json_body);
  ExpectError(put_json, 422, "Invalid", "first at line 2, column 11, again at line 2, column 36");
  EXPECT_EQ(put_json.body["error"].value("field", ""), "spec.namespaceSelector");

  const std::string bundle = R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: fresh, namespace: team-b}
spec: {clusterQueue: team-b-gpu}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: other, namespace: team-b, name: again}
spec: {clusterQueue: team-b-gpu}
)";
  Reply apply = Send("POST", "/v1/apply", "admin-secret", bundle);
  ExpectError(apply, 422, "Invalid", "request body#2: error: LocalQueue again: metadata.name: key \"name\" is written "
                                     "twice in the same map: first at line 8, column 12, again at line 8, column 44");
  EXPECT_EQ(Call("/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/localqueues/fresh", "admin-secret").status, 404);

  Reply apply_json = Send("POST", "/v1/apply", "admin-secret", R"([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}},
 {"apiVersion": "v1", "kind": "Namespace", "kind": "Namespace", "metadata": {"name": "y"}}])");
  ExpectError(apply_json, 422, "Invalid", "request body#2: error: Namespace y: kind: key \"kind\" is written twice");
  EXPECT_EQ(apply_json.body["error"].value("field", ""), "kind");
  // The server keeps serving.
  EXPECT_EQ(Call("/v1/clusterqueues", "admin-secret").status, 200);
}

// (The API here has no --policies base, so bundles bring their flavor.)
constexpr char kH100[] = R"(apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: h100}
---
)";

TEST_F(ApiTest, FractionalGpuQuotaIs422WithTheField) {
  json queue = Call("/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-b-gpu", "admin-secret").body;
  queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "0.5";
  json flavor = Call("/apis/kueue.x-k8s.io/v1beta1/resourceflavors/h100", "admin-secret").body;
  Reply put = Send("POST", "/v1/apply", "admin-secret", json::array({flavor, queue}).dump());
  ExpectError(put, 422, "Invalid",
              "nvidia.com/gpu is an extended resource and must be a whole number, not \"0.5\" (use \"1\" or \"0\")");
  EXPECT_EQ(put.body["error"].value("field", ""), "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota");
}

// Issue #20: a Namespace in a bundle is applied like every other object (its
// labels decide which ClusterQueues' namespaceSelectors match), never
// dropped; only an admin may change one.
TEST_F(ApiTest, NamespacesInAnApplyAreApplied) {
  const std::string bundle = std::string(kH100) + R"(apiVersion: v1
kind: Namespace
metadata:
  name: team-b
  labels: {tier: gold}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: gold}
spec:
  namespaceSelector: {matchLabels: {tier: gold}}
  resourceGroups: [{coveredResources: [nvidia.com/gpu],
                    flavors: [{name: h100, resources: [{name: nvidia.com/gpu, nominalQuota: 2}]}]}]
)";
  ExpectError(Send("POST", "/v1/apply", "lead-secret", bundle), 403, "Forbidden", "Namespace");
  Reply apply = Send("POST", "/v1/apply", "admin-secret", bundle);
  ASSERT_EQ(apply.status, 200) << apply.raw.body;
  EXPECT_EQ(apply.body["applied"][0],
            json({{"kind", "Namespace"}, {"namespace", ""}, {"name", "team-b"}, {"action", "created"}}));
  EXPECT_EQ(apply.body["applied"][2]["name"], "gold");
  std::shared_ptr<const broker::Snapshot> snap = broker_->snapshot();
  const model::PolicySet& now = snap->policies();
  ASSERT_EQ(now.namespaces.count("team-b"), 1u);
  const model::ClusterQueue& gold = now.cluster_queues.at("gold");
  EXPECT_TRUE(gold.namespace_selector->Matches(now.NamespaceLabels("team-b")));
  EXPECT_FALSE(gold.namespace_selector->Matches(now.NamespaceLabels("team-a")));

  // Applied again with other labels: replaced, as the whole object.
  Reply again = Send("POST", "/v1/apply", "admin-secret",
                     "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-b, labels: {tier: x}}\n");
  ASSERT_EQ(again.status, 200) << again.raw.body;
  EXPECT_EQ(again.body["applied"][0]["action"], "configured");
  EXPECT_FALSE(gold.namespace_selector->Matches(broker_->snapshot()->policies().NamespaceLabels("team-b")));
}

// Issue #20: the rules of auth.h, every route against every role. Over
// kPolicies: team-b's Cohort as an object, a priority class of each kind,
// and a GPUNodePool for each flavor.
constexpr char kScopedExtras[] = R"(
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Cohort
metadata: {name: team-b-pool}
spec: {}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: batch}
value: 100
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: critical}
value: 1000
---
apiVersion: gangkeeper.io/v1alpha1
kind: GPUNodePool
metadata: {name: pool-a100}
spec: {flavor: a100, gpu: A100-80GB, gpusPerNode: 8, nodes: 1, migStrategy: none}
---
apiVersion: gangkeeper.io/v1alpha1
kind: GPUNodePool
metadata: {name: pool-h100}
spec: {flavor: h100, gpu: H100-80GB, gpusPerNode: 8, nodes: 1, migStrategy: none}
)";

// A ClusterQueue no LocalQueue points at, for the writes.
constexpr char kSpareQueue[] =
    "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: role-check}\n"
    "spec: {namespaceSelector: {}, resourceGroups: [{coveredResources: [nvidia.com/gpu], flavors: "
    "[{name: h100, resources: [{name: nvidia.com/gpu, nominalQuota: 1}]}]}]}\n";

std::string LocalQueueYaml(const std::string& ns, const std::string& name, const std::string& cq) {
  return absl::StrCat("apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: ", name,
                      ", namespace: ", ns, "}\nspec: {clusterQueue: ", cq, "}\n");
}

// The callers, in the order of AuthzCase::want.
enum Who { kAdmin, kRightLead, kOtherLead, kViewer, kAuditor, kMetrics, kNoToken, kBadToken };
constexpr Who kEveryone[] = {kAdmin, kRightLead, kOtherLead, kViewer, kAuditor, kMetrics, kNoToken, kBadToken};
const char* TokenOf(Who w) {
  static const char* const kTokens[] = {"admin-secret", "lead-secret",    "other-lead-secret", "viewer-secret",
                                        "audit-secret", "metrics-secret", "",                  "not-a-token"};
  return kTokens[w];
}
const char* NameOf(Who w) {
  static const char* const kNames[] = {"admin",   "team-admin of team-b", "team-admin of team-a", "viewer",
                                       "auditor", "metrics",              "no token",             "a bad token"};
  return kNames[w];
}

struct AuthzCase {
  std::string name;
  std::string method, path;
  std::vector<std::pair<std::string, std::string>> query;
  std::string body;
  // The status for admin, team-b's admin, team-a's admin, viewer, auditor,
  // metrics; without a valid token it is always 401.
  std::array<int, 6> want;
  // For lists: the items each caller sees ("ns/name" or "name").
  std::map<Who, std::vector<std::string>> items;
};

// The names of a list's items: quota objects, workloads or audit events.
std::vector<std::string> ItemNames(const json& body) {
  std::vector<std::string> out;
  for (const json& i : body.at("items")) {
    const json& m = i.contains("metadata") ? i["metadata"] : i.contains("object") ? i["object"] : i;
    const std::string ns = m.value("namespace", "");
    out.push_back(ns.empty() ? m.value("name", "") : absl::StrCat(ns, "/", m.value("name", "")));
  }
  return out;
}

class AuthorizationTest : public ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    if (HasFatalFailure()) return;
    audit::AuditOptions options;
    options.dir = dir_.File("audit");
    options.clock = &clock_;
    auto log = audit::AuditLog::Open(options, nullptr);
    ASSERT_THAT(log, IsOk());
    audit_ = *std::move(log);
    std::vector<audit::Event> events;
    for (const char* ns : {"team-a", "team-b"}) {
      audit::Event e;
      e.time = clock_.Now();
      e.actor = "alice";
      e.action = "workload.pending";
      e.kind = "Job";
      e.namespace_name = ns;
      e.name = "train";
      events.push_back(e);
    }
    ASSERT_THAT(audit_->Append(events), IsOk());
    store_ = std::make_unique<model::PolicyStore>(Policies(PolicyText()));
    routes_ = Routes(broker_.get(), broker_.get(), tokens_.get(), &clock_, audit_.get(), store_.get());
    routes_.push_back(MetricsRoute(&registry_, tokens_.get(), &clock_));
  }

  std::string PolicyText() const override { return absl::StrCat(kPolicies, kScopedExtras); }

  metrics::Registry registry_;
  std::unique_ptr<audit::AuditLog> audit_;
  std::unique_ptr<model::PolicyStore> store_;  // the policy files
};

TEST_F(AuthorizationTest, EveryRouteAgainstEveryRole) {
  const std::string kueue = "/apis/kueue.x-k8s.io/v1beta1";
  const std::string lq_b = kueue + "/namespaces/team-b/localqueues/role-check";
  const std::string lq_a = kueue + "/namespaces/team-a/localqueues/role-check";
  const std::vector<std::string> all_workloads = {"team-a/last",  "team-a/later", "team-a/next",
                                                  "team-a/train", "team-b/infer", "team-b/wait"};
  const std::vector<std::string> a_workloads = {"team-a/last", "team-a/later", "team-a/next", "team-a/train"};
  const std::vector<std::string> b_workloads = {"team-b/infer", "team-b/wait"};
  using W = std::map<Who, std::vector<std::string>>;
  // Reads first; the writes after them put back what they change, so each
  // caller meets the same state.
  const std::vector<AuthzCase> cases = {
      {"ClusterQueue statuses are listed per caller", "GET", "/v1/clusterqueues", {}, "",
       {200, 200, 200, 200, 403, 403},
       W{{kAdmin, {"team-a-gpu", "team-b-gpu"}}, {kViewer, {"team-a-gpu", "team-b-gpu"}},
         {kRightLead, {"team-b-gpu"}}, {kOtherLead, {"team-a-gpu"}}}},
      {"a ClusterQueue's status", "GET", "/v1/clusterqueues/team-b-gpu/status", {}, "",
       {200, 200, 403, 200, 403, 403}, {}},
      {"a missing ClusterQueue's status is 403 to a team-admin", "GET", "/v1/clusterqueues/no-such/status", {}, "",
       {404, 403, 403, 404, 403, 403}, {}},
      {"workloads are listed per caller", "GET", "/v1/workloads", {}, "", {200, 200, 200, 200, 403, 403},
       W{{kAdmin, all_workloads}, {kViewer, all_workloads}, {kRightLead, b_workloads}, {kOtherLead, a_workloads}}},
      {"workloads of one namespace", "GET", "/v1/workloads", {{"namespace", "team-b"}}, "",
       {200, 200, 403, 200, 403, 403}, W{{kRightLead, b_workloads}}},
      {"a ClusterQueue as a filter only filters", "GET", "/v1/workloads", {{"clusterQueue", "team-b-gpu"}}, "",
       {200, 200, 200, 200, 403, 403}, W{{kRightLead, b_workloads}, {kOtherLead, {}}}},
      {"one workload", "GET", "/v1/workloads/team-b/infer", {}, "", {200, 200, 403, 200, 403, 403}, {}},
      {"one workload by kind", "GET", "/v1/workloads/job/team-b/infer", {}, "", {200, 200, 403, 200, 403, 403}, {}},
      {"a missing workload", "GET", "/v1/workloads/team-b/no-such", {}, "", {404, 404, 403, 404, 403, 403}, {}},
      {"the whole audit log", "GET", "/v1/audit", {}, "", {200, 403, 403, 403, 200, 403},
       W{{kAdmin, {"team-a/train", "team-b/train"}}, {kAuditor, {"team-a/train", "team-b/train"}}}},
      {"the audit log of one namespace", "GET", "/v1/audit", {{"namespace", "team-b"}}, "",
       {200, 200, 403, 403, 200, 403}, W{{kRightLead, {"team-b/train"}}}},
      {"the audit export", "GET", "/v1/audit/export", {}, "", {200, 403, 403, 403, 200, 403}, {}},
      {"the audit export of one namespace", "GET", "/v1/audit/export", {{"namespace", "team-b"}}, "",
       {200, 200, 403, 403, 200, 403}, {}},
      {"ResourceFlavors are listed per caller", "GET", kueue + "/resourceflavors", {}, "",
       {200, 200, 200, 200, 403, 403},
       W{{kAdmin, {"a100", "h100"}}, {kViewer, {"a100", "h100"}}, {kRightLead, {"h100"}}, {kOtherLead, {"a100"}}}},
      {"a ResourceFlavor", "GET", kueue + "/resourceflavors/h100", {}, "", {200, 200, 403, 200, 403, 403}, {}},
      {"a missing ResourceFlavor", "GET", kueue + "/resourceflavors/no-such", {}, "", {404, 403, 403, 404, 403, 403},
       {}},
      {"ClusterQueues are listed per caller", "GET", kueue + "/clusterqueues", {}, "", {200, 200, 200, 200, 403, 403},
       W{{kAdmin, {"team-a-gpu", "team-b-gpu"}}, {kRightLead, {"team-b-gpu"}}, {kOtherLead, {"team-a-gpu"}}}},
      {"a ClusterQueue", "GET", kueue + "/clusterqueues/team-b-gpu", {}, "", {200, 200, 403, 200, 403, 403}, {}},
      {"Cohorts are listed per caller", "GET", kueue + "/cohorts", {}, "", {200, 200, 200, 200, 403, 403},
       W{{kAdmin, {"team-b-pool"}}, {kRightLead, {"team-b-pool"}}, {kOtherLead, {}}}},
      {"a Cohort", "GET", kueue + "/cohorts/team-b-pool", {}, "", {200, 200, 403, 200, 403, 403}, {}},
      {"WorkloadPriorityClasses are everyone's", "GET", kueue + "/workloadpriorityclasses", {}, "",
       {200, 200, 200, 200, 403, 403}, W{{kRightLead, {"batch"}}, {kOtherLead, {"batch"}}}},
      {"a WorkloadPriorityClass", "GET", kueue + "/workloadpriorityclasses/batch", {}, "",
       {200, 200, 200, 200, 403, 403}, {}},
      {"PriorityClasses are everyone's", "GET", "/apis/scheduling.k8s.io/v1/priorityclasses", {}, "",
       {200, 200, 200, 200, 403, 403}, W{{kRightLead, {"critical"}}, {kOtherLead, {"critical"}}}},
      {"a PriorityClass", "GET", "/apis/scheduling.k8s.io/v1/priorityclasses/critical", {}, "",
       {200, 200, 200, 200, 403, 403}, {}},
      {"LocalQueues of every namespace are listed per caller", "GET", kueue + "/localqueues", {}, "",
       {200, 200, 200, 200, 403, 403},
       W{{kAdmin, {"team-a/batch", "team-a/gpu", "team-b/gpu"}}, {kRightLead, {"team-b/gpu"}},
         {kOtherLead, {"team-a/batch", "team-a/gpu"}}}},
      {"LocalQueues of one namespace", "GET", kueue + "/namespaces/team-b/localqueues", {}, "",
       {200, 200, 403, 200, 403, 403}, W{{kRightLead, {"team-b/gpu"}}}},
      {"a LocalQueue", "GET", kueue + "/namespaces/team-b/localqueues/gpu", {}, "", {200, 200, 403, 200, 403, 403},
       {}},
      {"a missing LocalQueue", "GET", kueue + "/namespaces/team-b/localqueues/no-such", {}, "",
       {404, 404, 403, 404, 403, 403}, {}},
      {"GPUNodePools are listed per caller", "GET", "/apis/gangkeeper.io/v1alpha1/gpunodepools", {}, "",
       {200, 200, 200, 200, 403, 403},
       W{{kAdmin, {"pool-a100", "pool-h100"}}, {kRightLead, {"pool-h100"}}, {kOtherLead, {"pool-a100"}}}},
      {"a GPUNodePool", "GET", "/apis/gangkeeper.io/v1alpha1/gpunodepools/pool-h100", {}, "",
       {200, 200, 403, 200, 403, 403}, {}},
      {"the metrics", "GET", "/metrics", {}, "", {200, 403, 403, 200, 403, 200}, {}},
      {"a LocalQueue created in team-b", "PUT", lq_b, {}, LocalQueueYaml("team-b", "role-check", "team-b-gpu"),
       {201, 201, 403, 403, 403, 403}, {}},
      {"and deleted", "DELETE", lq_b, {}, "", {200, 200, 403, 403, 403, 403}, {}},
      {"a LocalQueue created in team-a", "PUT", lq_a, {}, LocalQueueYaml("team-a", "role-check", "team-a-gpu"),
       {201, 403, 201, 403, 403, 403}, {}},
      {"and deleted", "DELETE", lq_a, {}, "", {200, 403, 200, 403, 403, 403}, {}},
      {"a ClusterQueue created", "PUT", kueue + "/clusterqueues/role-check", {}, kSpareQueue,
       {201, 403, 403, 403, 403, 403}, {}},
      {"and deleted", "DELETE", kueue + "/clusterqueues/role-check", {}, "", {200, 403, 403, 403, 403, 403}, {}},
      {"a missing ResourceFlavor deleted: the role is checked first", "DELETE", kueue + "/resourceflavors/no-such",
       {}, "", {404, 403, 403, 403, 403, 403}, {}},
      {"a bundle of a team-b LocalQueue", "POST", "/v1/apply", {}, LocalQueueYaml("team-b", "applied", "team-b-gpu"),
       {200, 200, 403, 403, 403, 403}, {}},
      {"and its LocalQueue deleted", "DELETE", kueue + "/namespaces/team-b/localqueues/applied", {}, "",
       {200, 200, 403, 403, 403, 403}, {}},
      {"a bundle of a LocalQueue and a WorkloadPriorityClass", "POST", "/v1/apply", {},
       LocalQueueYaml("team-b", "mixed", "team-b-gpu") +
           "---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: WorkloadPriorityClass\nmetadata: {name: mixed}\nvalue: 7\n",
       {200, 403, 403, 403, 403, 403}, {}},
      {"and its WorkloadPriorityClass deleted", "DELETE", kueue + "/workloadpriorityclasses/mixed", {}, "",
       {200, 403, 403, 403, 403, 403}, {}},
      {"and its LocalQueue deleted: not there after a refused bundle", "DELETE",
       kueue + "/namespaces/team-b/localqueues/mixed", {}, "", {200, 404, 403, 403, 403, 403}, {}},
  };
  for (Who who : kEveryone) {
    for (size_t i = 0; i < cases.size(); ++i) {
      const AuthzCase& c = cases[i];
      SCOPED_TRACE(absl::StrCat(c.name, ": ", c.method, " ", c.path, " as ", NameOf(who)));
      // Each call from its own address, so the limiter of failures stays out of it.
      Reply r = Send(c.method, c.path, TokenOf(who), c.body, c.query, absl::StrCat("10.7.", who, ".", i));
      const int want = who == kNoToken || who == kBadToken ? 401 : c.want[who];
      EXPECT_EQ(r.status, want) << r.raw.body;
      if (r.status >= 400) {
        ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << r.raw.body;
        EXPECT_TRUE(r.body["error"].contains("code") && r.body["error"].contains("message")) << r.raw.body;
        // A refusal never shows another team's objects.
        if (who == kRightLead) {
          EXPECT_FALSE(absl::StrContains(r.raw.body, "a100")) << r.raw.body;
        }
      }
      auto items = c.items.find(who);
      if (r.status == 200 && items != c.items.end()) {
        EXPECT_THAT(ItemNames(r.body), ::testing::UnorderedElementsAreArray(items->second)) << r.raw.body;
      }
    }
  }
}

// A team-admin may point its LocalQueue at any ClusterQueue (Kueue's
// rule), but sees only the queues that take its namespace's workloads.
TEST_F(AuthorizationTest, ALocalQueuePointedAtAnotherTeamsQueueShowsNothingOfIt) {
  const std::string path = "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/localqueues/sneaky";
  Reply put = Send("PUT", path, "lead-secret", LocalQueueYaml("team-b", "sneaky", "team-a-gpu"));
  ASSERT_EQ(put.status, 201) << put.raw.body;
  ExpectError(Call("/v1/clusterqueues/team-a-gpu/status", "lead-secret"), 403, "Forbidden", "team-a-gpu");
  ExpectError(Call("/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-a-gpu", "lead-secret"), 403, "Forbidden",
              "team-a-gpu");
  ExpectError(Call("/apis/kueue.x-k8s.io/v1beta1/resourceflavors/a100", "lead-secret"), 403, "Forbidden", "a100");
  Reply queues = Call("/v1/clusterqueues", "lead-secret");
  ASSERT_EQ(queues.status, 200);
  EXPECT_THAT(ItemNames(queues.body), ElementsAre("team-b-gpu"));
  // Its own LocalQueue it sees, of course.
  Reply mine = Call("/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/localqueues", "lead-secret");
  ASSERT_EQ(mine.status, 200);
  EXPECT_THAT(ItemNames(mine.body), UnorderedElementsAre("team-b/gpu", "team-b/sneaky"));
}

// POST /v1/apply honours metadata.resourceVersion like PUT: one stale
// object and nothing of the bundle is applied.
TEST_F(AuthorizationTest, ApplyWithAStaleResourceVersionIsAConflictAndChangesNothing) {
  const std::string cq_path = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-b-gpu";
  Reply put = Send("PUT", cq_path, "admin-secret", Call(cq_path, "admin-secret").raw.body);
  ASSERT_EQ(put.status, 200) << put.raw.body;
  const std::string version = put.body["metadata"].value("resourceVersion", "");
  ASSERT_FALSE(version.empty()) << put.raw.body;
  json current = put.body;
  // A bundle: a new LocalQueue, and the ClusterQueue at a version it is not at.
  json stale = current;
  stale["metadata"]["resourceVersion"] = version + "0";
  stale["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "2";
  const std::string bundle =
      absl::StrCat(LocalQueueYaml("team-b", "extra", "team-b-gpu"), "---\n", stale.dump(), "\n");
  Reply refused = Send("POST", "/v1/apply", "admin-secret", bundle);
  ExpectError(refused, 409, "Conflict", absl::StrCat("ClusterQueue \"team-b-gpu\" is at resourceVersion \"", version,
                                                     "\", not \"", version, "0\""));
  EXPECT_EQ(refused.body["error"].value("field", ""), "metadata.resourceVersion");
  EXPECT_THAT(refused.body["error"].value("message", ""), HasSubstr("nothing was applied"));
  // Nothing changed: no LocalQueue, the quota and the version as they were.
  EXPECT_EQ(Call("/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/localqueues/extra", "admin-secret").status, 404);
  Reply after = Call(cq_path, "admin-secret");
  ASSERT_EQ(after.status, 200);
  EXPECT_EQ(after.body, current);
  Reply status = Call("/v1/clusterqueues/team-b-gpu/status", "admin-secret");
  EXPECT_EQ(Resource(status.body, "h100")["nominal"], "4");
  // A version that is gone, too: the object does not exist.
  Reply missing = Send("POST", "/v1/apply", "admin-secret",
                       "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
                       "metadata: {name: gone, namespace: team-b, resourceVersion: \"3\"}\n"
                       "spec: {clusterQueue: team-b-gpu}\n");
  ExpectError(missing, 409, "Conflict", "LocalQueue \"team-b/gone\" does not exist");
  // At the current version (or without one) the bundle goes through.
  json fresh = current;
  fresh["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "2";
  Reply applied = Send("POST", "/v1/apply", "admin-secret",
                       absl::StrCat(LocalQueueYaml("team-b", "extra", "team-b-gpu"), "---\n", fresh.dump(), "\n"));
  ASSERT_EQ(applied.status, 200) << applied.raw.body;
  EXPECT_EQ(Resource(Call("/v1/clusterqueues/team-b-gpu/status", "admin-secret").body, "h100")["nominal"], "2");
  // The version moved on: the same bundle again is now stale.
  EXPECT_EQ(Send("POST", "/v1/apply", "admin-secret", fresh.dump()).status, 409);
}

// Every bad input names its field in {"error": {code, message, field}},
// and the API goes on answering.
TEST_F(AuthorizationTest, BadInputsNameTheFieldAndTheApiKeepsServing) {
  const std::string lq = "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/localqueues/gpu";
  struct Bad {
    std::string name, method, path;
    std::vector<std::pair<std::string, std::string>> query;
    std::string body;
    int want_status;
    std::string want_field;
  };
  const std::vector<Bad> bad = {
      {"a body that is not YAML", "PUT", lq, {}, "{not: [yaml", 422, "body"},
      {"a body of another kind", "PUT", lq, {},
       "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Cohort\nmetadata: {name: x}\n", 400, "kind"},
      {"a name that is not the path's", "PUT", lq, {}, LocalQueueYaml("team-b", "other", "team-b-gpu"), 400,
       "metadata.name"},
      {"a LocalQueue of a missing ClusterQueue", "PUT", lq, {}, LocalQueueYaml("team-b", "gpu", "no-such"), 422,
       "spec.clusterQueue"},
      {"a stale resourceVersion", "PUT", lq, {},
       "apiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\nmetadata: {name: gpu, namespace: team-b, "
       "resourceVersion: \"99\"}\nspec: {clusterQueue: team-b-gpu}\n",
       409, "metadata.resourceVersion"},
      {"an empty bundle", "POST", "/v1/apply", {}, "", 400, "items"},
      {"a bundle that is not YAML", "POST", "/v1/apply", {}, "- [", 422, "body"},
      {"an unknown state", "GET", "/v1/workloads", {{"state", "running"}}, "", 400, "state"},
      {"an unknown kind of workload", "GET", "/v1/workloads/daemonset/team-b/infer", {}, "", 400, "kind"},
      {"a time that is not RFC 3339", "GET", "/v1/audit", {{"since", "yesterday"}}, "", 400, "since"},
      {"a limit out of range", "GET", "/v1/audit", {{"limit", "0"}}, "", 400, "limit"},
      {"a cursor that is not a number", "GET", "/v1/audit/export", {{"cursor", "next"}}, "", 400, "cursor"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.name);
    Reply r = Send(b.method, b.path, "admin-secret", b.body, b.query);
    EXPECT_EQ(r.status, b.want_status) << r.raw.body;
    ASSERT_TRUE(r.body.is_object() && r.body.contains("error")) << r.raw.body;
    EXPECT_FALSE(r.body["error"].value("code", "").empty()) << r.raw.body;
    EXPECT_FALSE(r.body["error"].value("message", "").empty()) << r.raw.body;
    EXPECT_THAT(r.body["error"].value("field", ""), HasSubstr(b.want_field)) << r.raw.body;
    EXPECT_EQ(Call("/v1/clusterqueues/team-b-gpu/status", "admin-secret").status, 200);
  }
}

}  // namespace
}  // namespace gangkeeper::api

namespace gangkeeper::api {
namespace {

// Issue #25 item 6: Kueue's objects are served at v1beta2 beside v1beta1,
// by the same handlers; the answer is at the version of the path (v1beta2
// spells the cohort spec.cohortName, v1beta1 spec.cohort).
TEST_F(ApiTest, KueueObjectsAreServedAtV1beta2AndV1beta1) {
  Reply beta2 = Call("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/team-b-gpu", "admin-secret");
  ASSERT_EQ(beta2.status, 200) << beta2.raw.body;
  EXPECT_EQ(beta2.body["apiVersion"], "kueue.x-k8s.io/v1beta2");
  EXPECT_EQ(beta2.body["spec"].value("cohortName", ""), "team-b-pool");
  EXPECT_FALSE(beta2.body["spec"].contains("cohort"));
  Reply beta1 = Call("/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-b-gpu", "admin-secret");
  ASSERT_EQ(beta1.status, 200) << beta1.raw.body;
  EXPECT_EQ(beta1.body["apiVersion"], "kueue.x-k8s.io/v1beta1");
  EXPECT_EQ(beta1.body["spec"].value("cohort", ""), "team-b-pool");

  Reply list = Call("/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues", "admin-secret");
  ASSERT_EQ(list.status, 200) << list.raw.body;
  EXPECT_EQ(list.body["apiVersion"], "kueue.x-k8s.io/v1beta2");
  EXPECT_EQ(list.body["kind"], "LocalQueueList");
  ASSERT_EQ(list.body["items"].size(), 2u);
  for (const json& item : list.body["items"]) EXPECT_EQ(item["apiVersion"], "kueue.x-k8s.io/v1beta2");
  for (const char* path : {"/apis/kueue.x-k8s.io/v1beta2/resourceflavors", "/apis/kueue.x-k8s.io/v1beta2/cohorts",
                           "/apis/kueue.x-k8s.io/v1beta2/workloadpriorityclasses",
                           "/apis/kueue.x-k8s.io/v1beta2/resourceflavors/a100"}) {
    Reply r = Call(path, "admin-secret");
    EXPECT_EQ(r.status, 200) << path << ": " << r.raw.body;
    EXPECT_EQ(r.body["apiVersion"], "kueue.x-k8s.io/v1beta2") << path;
  }

  // PUT at v1beta2 with a v1beta2 body: created, answered at v1beta2, and
  // read back at v1beta1 in v1beta1's spelling. (The API here has no
  // --policies base: the flavor comes first.)
  Reply flavor = Send("PUT", "/apis/kueue.x-k8s.io/v1beta2/resourceflavors/h100", "admin-secret",
                      "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: h100}\n");
  ASSERT_EQ(flavor.status / 100, 2) << flavor.raw.body;
  EXPECT_EQ(flavor.body["apiVersion"], "kueue.x-k8s.io/v1beta2");
  Reply put = Send("PUT", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/team-c-gpu", "admin-secret",
                   R"(apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-c-gpu}
spec:
  cohortName: team-b-pool
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["nvidia.com/gpu"]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: 2}]
)");
  ASSERT_EQ(put.status, 201) << put.raw.body;
  EXPECT_EQ(put.body["apiVersion"], "kueue.x-k8s.io/v1beta2");
  EXPECT_EQ(put.body["spec"].value("cohortName", ""), "team-b-pool");
  Reply back = Call("/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-c-gpu", "admin-secret");
  ASSERT_EQ(back.status, 200) << back.raw.body;
  EXPECT_EQ(back.body["spec"].value("cohort", ""), "team-b-pool");
  EXPECT_EQ(Send("DELETE", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/team-c-gpu", "admin-secret", "").status, 200);
  EXPECT_EQ(Call("/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-c-gpu", "admin-secret").status, 404);
  // Versions Kueue does not serve for these kinds stay 404 with the hint.
  ExpectError(Call("/apis/kueue.x-k8s.io/v1alpha1/clusterqueues", "admin-secret"), 404, "NotFound",
              "/apis/kueue.x-k8s.io/v1beta2/");
}

}  // namespace
}  // namespace gangkeeper::api
