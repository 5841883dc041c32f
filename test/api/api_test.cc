// gangkeeper: tests for the API's visibility routes against a real Broker:
// what each role sees of ClusterQueues and workloads, the filters, pending
// reasons and queue positions, assignments, and the error responses.
#include "gangkeeper/api/api.h"

#include <openssl/sha.h>

#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gangkeeper/model/manifest.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
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

// Two ClusterQueues, each used by one team's namespace through a LocalQueue.
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
  namespaceSelector: {}
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
  namespaceSelector: {}
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

std::shared_ptr<const model::PolicySet> Policies(const std::string& yaml) {
  auto p = std::make_shared<model::PolicySet>();
  model::Diagnostics d;
  model::DecodeManifests(yaml, "test.yaml", p.get(), &d);
  return p;
}

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
                        "- {name: audit, sha256: ", Sha256Hex("audit-secret"), ", role: auditor}\n");
    auto tokens = TokenStore::Load(dir_.File("tokens.yaml"));
    ASSERT_THAT(tokens, IsOk());
    tokens_ = *std::move(tokens);
    ASSERT_EQ(tokens_->size(), 4u);

    broker::BrokerOptions options;
    options.ack_timeout = absl::Seconds(10);
    auto b = broker::Broker::Create(Policies(kPolicies), options, nullptr, nullptr, &clock_);
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

    routes_ = Routes(broker_.get(), tokens_.get(), &clock_);
  }

  void Register(const workload::Workload& w) {
    ASSERT_THAT(broker_->Register(w, ""), IsOk()) << w.name;
    clock_.AdvanceTime(absl::Seconds(1));  // queue order: creation time
  }

  // Dispatches like the server: an exact GET route, else a prefix route.
  Reply Call(const std::string& path, const std::string& token,
             std::vector<std::pair<std::string, std::string>> query = {}, const std::string& addr = "10.1.2.3") {
    server::HttpRequest req;
    req.method = "GET";
    req.path = path;
    req.query = std::move(query);
    if (!token.empty()) req.headers.emplace_back("authorization", absl::StrCat("Bearer ", token));
    req.remote_addr = addr;
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
    EXPECT_EQ(reply.raw.content_type, "application/json") << path;
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

TEST_F(ApiTest, TooManyFailuresAre429WithRetryAfterForThatAddressOnly) {
  for (int i = 0; i < TokenStore::kMaxFailuresPerMinute; ++i) {
    ASSERT_EQ(Call("/v1/workloads", absl::StrCat("guess-", i), {}, "203.0.113.9").status, 401) << i;
  }
  Reply blocked = Call("/v1/workloads", "admin-secret", {}, "203.0.113.9");
  ExpectError(blocked, 429, "TooManyRequests", "too many failed authentications");
  EXPECT_EQ(blocked.Header("Retry-After"), "60");
  EXPECT_EQ(Call("/v1/workloads", "admin-secret", {}, "203.0.113.10").status, 200);
  // The limiter uses the API's clock: a minute later the address may try again.
  clock_.AdvanceTime(absl::Minutes(1) + absl::Seconds(1));
  EXPECT_EQ(Call("/v1/workloads", "admin-secret", {}, "203.0.113.9").status, 200);
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
  ASSERT_THAT(broker_->Finish({"team-a", "train"}, ""), IsOk());
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
  ExpectError(Call("/v1/workloads/deployment/team-a/train", "admin-secret"), 400, "BadRequest",
              "\"deployment\" is not a kind gangkeeper manages");
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
