// gangkeeper: tests for Kubernetes identities on the API (--api-auth
// kubernetes|both): TokenReview and SubjectAccessReview answers from an
// in-process reviewer, the caches on a simulated clock, the 503 when the
// API server cannot answer, and what each RBAC shape sees of the routes.
#include "gangkeeper/api/kube_auth.h"

#include <openssl/sha.h>

#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/api/api.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/broker/broker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/policies.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::api {
namespace {

using ::gangkeeper::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using nlohmann::json;

// Two teams, each with a ClusterQueue taking its namespace.
constexpr char kKubeAuthPolicies[] = R"(
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: h100}
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
metadata: {name: gpu, namespace: team-b}
spec: {clusterQueue: team-b-gpu}
)";

// An RBAC rule in the reviewer's table: `group` (a Kubernetes group of
// the user) may do `verb` on `resource` in `ns` ("" = any namespace and
// cluster-wide) or on non-resource `path`.
struct KubeAuthRule {
  std::string group, verb, resource, ns, path;
};

// IdentityReviews in memory: tokens name users, a rule table decides, and
// `down` makes every review fail like an unreachable API server.
class TableReviews : public IdentityReviews {
 public:
  absl::StatusOr<TokenVerdict> ReviewToken(const std::string& token) override {
    absl::MutexLock lock(&mu_);
    ++token_calls_;
    if (down_) return absl::UnavailableError("connect to 127.0.0.1:6443: connection refused");
    TokenVerdict v;
    auto it = users_.find(token);
    if (it == users_.end()) {
      v.error = "token lookup failed";
      return v;
    }
    v.authenticated = true;
    v.user = it->second;
    return v;
  }

  absl::StatusOr<AccessVerdict> ReviewAccess(const KubeUser& user, const AccessAttributes& a) override {
    absl::MutexLock lock(&mu_);
    ++access_calls_;
    asked_.push_back(a);
    if (down_) return absl::UnavailableError("POST subjectaccessreviews: 503 Service Unavailable");
    for (const KubeAuthRule& r : rules_) {
      bool member = false;
      for (const std::string& g : user.groups) member = member || g == r.group;
      if (!member || r.verb != a.verb) continue;
      if (!a.path.empty() ? r.path == a.path
                          : (r.resource == a.resource && (r.ns.empty() || r.ns == a.namespace_name))) {
        return AccessVerdict{true, "rule"};
      }
    }
    return AccessVerdict{false, ""};
  }

  void AddUser(const std::string& token, const std::string& name, std::vector<std::string> groups) {
    absl::MutexLock lock(&mu_);
    users_[token] = KubeUser{name, "uid-" + name, std::move(groups), {}};
  }
  void AddRule(KubeAuthRule r) {
    absl::MutexLock lock(&mu_);
    rules_.push_back(std::move(r));
  }
  void set_down(bool down) {
    absl::MutexLock lock(&mu_);
    down_ = down;
  }
  int token_calls() {
    absl::MutexLock lock(&mu_);
    return token_calls_;
  }
  int access_calls() {
    absl::MutexLock lock(&mu_);
    return access_calls_;
  }
  std::vector<AccessAttributes> asked() {
    absl::MutexLock lock(&mu_);
    return asked_;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, KubeUser> users_ ABSL_GUARDED_BY(mu_);
  std::vector<KubeAuthRule> rules_ ABSL_GUARDED_BY(mu_);
  bool down_ ABSL_GUARDED_BY(mu_) = false;
  int token_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int access_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<AccessAttributes> asked_ ABSL_GUARDED_BY(mu_);
};

struct KubeReply {
  int status = 0;
  json body;
};

std::vector<std::string> KubeAuthNames(const json& body) {
  std::vector<std::string> out;
  for (const json& i : body.at("items")) {
    if (i.contains("metadata")) {  // a Kueue object
      out.push_back(i["metadata"].value("name", ""));
      continue;
    }
    out.push_back(i.contains("namespace") ? absl::StrCat(i.at("namespace").get<std::string>(), "/",
                                                         i.at("name").get<std::string>())
                                          : i.at("name").get<std::string>());
  }
  return out;
}

workload::Workload KubeAuthJob(const std::string& ns, const std::string& name) {
  workload::Workload w;
  w.namespace_name = ns;
  w.name = name;
  w.uid = "uid-" + name;
  w.queue_name = "gpu";
  workload::PodSet ps;
  ps.name = "main";
  ps.count = 1;
  ps.requests["nvidia.com/gpu"] = quantity::Quantity::FromUnits(1);
  w.pod_sets.push_back(ps);
  return w;
}

std::string KubeAuthSha256(const std::string& s) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d);
  std::string out;
  for (unsigned char b : d) absl::StrAppend(&out, absl::Hex(b, absl::kZeroPad2));
  return out;
}

class KubeAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.File("tokens.yaml"))
        << absl::StrCat("- {name: platform, sha256: ", KubeAuthSha256("static-admin"), ", role: admin}\n");
    auto tokens = TokenStore::Load(dir_.File("tokens.yaml"));
    ASSERT_THAT(tokens, IsOk());
    tokens_ = *std::move(tokens);

    broker::BrokerOptions options;
    options.ack_timeout = absl::Seconds(10);
    auto b = broker::Broker::Create(testing::PoliciesFrom(kKubeAuthPolicies), options, nullptr, nullptr, &clock_);
    ASSERT_THAT(b.status(), IsOk());
    broker_ = *std::move(b);
    broker_->Start();
    for (const auto& [ns, name] : {std::pair{"team-a", "train"}, std::pair{"team-b", "infer"}}) {
      ASSERT_THAT(broker_->SubmitAndWait(broker::Event::Add(KubeAuthJob(ns, name))), IsOk());
    }
    ASSERT_TRUE(broker_->Flush(absl::Seconds(10)));

    // The ClusterRoles and the team Role of deploy/rbac-api-roles.yaml.
    reviews_.AddUser("viewer-token", "dana", {"system:authenticated", "viewers"});
    reviews_.AddUser("lead-token", "bob", {"system:authenticated", "team-b-admins"});
    reviews_.AddUser("auditor-token", "carol", {"system:authenticated", "auditors"});
    reviews_.AddUser("nobody-token", "eve", {"system:authenticated"});
    reviews_.AddUser("admin-token", "alice", {"system:authenticated", "admins"});
    for (const char* r : {"clusterqueues", "localqueues", "workloads", "resourceflavors", "cohorts",
                          "workloadpriorityclasses", "gpunodepools", "priorityclasses"}) {
      reviews_.AddRule({"viewers", "list", r, "", ""});
      for (const char* verb : {"list", "get", "update", "patch", "delete", "create"}) {
        reviews_.AddRule({"admins", verb, r, "", ""});
      }
    }
    reviews_.AddRule({"viewers", "get", "", "", "/metrics"});
    reviews_.AddRule({"admins", "get", "", "", "/v1/audit"});
    reviews_.AddRule({"auditors", "get", "", "", "/v1/audit"});
    for (const char* verb : {"list", "get", "update", "patch", "delete", "create"}) {
      reviews_.AddRule({"team-b-admins", verb, "localqueues", "team-b", ""});
    }
    reviews_.AddRule({"team-b-admins", "list", "workloads", "team-b", ""});
    Use(AuthMode::kKubernetes, KubeAuthOptions{});
  }

  void Use(AuthMode mode, KubeAuthOptions o) {
    o.clock = &clock_;
    kube_ = std::make_unique<KubeAuthenticator>(&reviews_, mode == AuthMode::kBoth ? tokens_.get() : nullptr, o);
    routes_ = Routes(broker_.get(), broker_.get(), kube_.get(), &clock_);
    routes_.push_back(MetricsRoute(&registry_, kube_.get(), &clock_));
  }

  KubeReply Send(const std::string& method, const std::string& path, const std::string& token,
                 const std::string& body = "", std::vector<std::pair<std::string, std::string>> query = {}) {
    server::HttpRequest req;
    req.method = method;
    req.path = path;
    req.body = body;
    req.query = std::move(query);
    if (!token.empty()) req.headers.emplace_back("authorization", absl::StrCat("Bearer ", token));
    req.remote_addr = "10.1.2.3";
    const server::Route* route = nullptr;
    for (const server::Route& r : routes_) {
      if (r.method == method && !r.prefix && r.path == path) route = &r;
    }
    for (const server::Route& r : routes_) {
      if (route == nullptr && r.method == method && r.prefix && absl::StartsWith(path, r.path)) route = &r;
    }
    KubeReply reply;
    if (route == nullptr) {
      ADD_FAILURE() << "no route for " << path;
      return reply;
    }
    server::HttpResponse raw = route->handler(req);
    reply.status = raw.status;
    if (raw.content_type == "application/json") reply.body = json::parse(raw.body, nullptr, false);
    return reply;
  }
  KubeReply Get(const std::string& path, const std::string& token,
                std::vector<std::pair<std::string, std::string>> query = {}) {
    return Send("GET", path, token, "", std::move(query));
  }

  static std::string Message(const KubeReply& r) {
    return r.body.is_object() && r.body.contains("error") ? r.body["error"].value("message", "") : "";
  }

  testing::TempDir dir_;
  base::SimulatedClock clock_{absl::FromUnixSeconds(1'750'000'000)};
  std::unique_ptr<TokenStore> tokens_;
  std::shared_ptr<broker::Broker> broker_;
  TableReviews reviews_;
  std::unique_ptr<KubeAuthenticator> kube_;
  metrics::Registry registry_;
  std::vector<server::Route> routes_;
};

TEST_F(KubeAuthTest, UnknownOrMissingTokenIs401) {
  KubeReply r = Get("/v1/clusterqueues", "not-a-token");
  EXPECT_EQ(r.status, 401);
  EXPECT_THAT(Message(r), HasSubstr("does not know this bearer token"));
  EXPECT_EQ(Get("/v1/clusterqueues", "").status, 401);
  // The static token is not known in `kubernetes` mode.
  EXPECT_EQ(Get("/v1/clusterqueues", "static-admin").status, 401);
}

TEST_F(KubeAuthTest, ViewerReadsEverythingAndChangesNothing) {
  KubeReply r = Get("/v1/clusterqueues", "viewer-token");
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_THAT(KubeAuthNames(r.body), UnorderedElementsAre("team-a-gpu", "team-b-gpu"));
  r = Get("/v1/workloads", "viewer-token");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(KubeAuthNames(r.body), UnorderedElementsAre("team-a/train", "team-b/infer"));
  EXPECT_EQ(Get("/metrics", "viewer-token").status, 200);
  r = Send("DELETE", "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/localqueues/gpu", "viewer-token");
  EXPECT_EQ(r.status, 403);
  EXPECT_THAT(Message(r), HasSubstr("user \"dana\" may not delete LocalQueue"));
  EXPECT_EQ(Get("/v1/audit", "viewer-token").status, 403);
}

TEST_F(KubeAuthTest, NamespacedRoleSeesItsTeamLikeATeamAdmin) {
  KubeReply r = Get("/v1/clusterqueues", "lead-token");
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_THAT(KubeAuthNames(r.body), UnorderedElementsAre("team-b-gpu"));
  r = Get("/v1/workloads", "lead-token");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(KubeAuthNames(r.body), UnorderedElementsAre("team-b/infer"));
  r = Get("/apis/kueue.x-k8s.io/v1beta1/resourceflavors", "lead-token");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(KubeAuthNames(r.body), UnorderedElementsAre("h100"));
  EXPECT_EQ(Get("/v1/clusterqueues/team-b-gpu/status", "lead-token").status, 200);
  // Another team's objects: 403 whether or not they exist.
  EXPECT_EQ(Get("/v1/clusterqueues/team-a-gpu/status", "lead-token").status, 403);
  EXPECT_EQ(Get("/v1/clusterqueues/no-such-queue/status", "lead-token").status, 403);
  EXPECT_EQ(Get("/v1/workloads/team-a/train", "lead-token").status, 403);
  EXPECT_EQ(Get("/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/localqueues", "lead-token").status, 403);
  // Its own LocalQueue may go; another team's may not.
  EXPECT_EQ(Send("DELETE", "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-a/localqueues/gpu", "lead-token").status,
            403);
  r = Send("DELETE", "/apis/kueue.x-k8s.io/v1beta1/namespaces/team-b/localqueues/gpu", "lead-token");
  EXPECT_EQ(r.status, 200) << r.body.dump();
  // The audit log of its namespace only.
  EXPECT_EQ(Get("/v1/audit", "lead-token").status, 403);
}

TEST_F(KubeAuthTest, UserWithoutBindingsSeesNothing) {
  KubeReply r = Get("/v1/clusterqueues", "nobody-token");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(r.body.at("items"), IsEmpty());
  EXPECT_EQ(Get("/v1/workloads/team-a/train", "nobody-token").status, 403);
  EXPECT_EQ(Get("/v1/audit", "nobody-token").status, 403);
  EXPECT_EQ(Get("/metrics", "nobody-token").status, 403);
}

TEST_F(KubeAuthTest, AuditorReadsTheAuditPathOnly) {
  // No audit log in this fixture: past authorization, the route says so.
  EXPECT_EQ(Get("/v1/audit", "auditor-token").status, 503);
  EXPECT_THAT(Message(Get("/v1/audit", "auditor-token")), HasSubstr("no audit log"));
  EXPECT_EQ(Get("/v1/workloads/team-a/train", "auditor-token").status, 403);
  bool asked_path = false;
  for (const AccessAttributes& a : reviews_.asked()) asked_path = asked_path || (a.path == "/v1/audit" && a.verb == "get");
  EXPECT_TRUE(asked_path);
}

TEST_F(KubeAuthTest, AdminWritesThroughUpdateAndPatch) {
  const std::string flavor = R"({"apiVersion":"kueue.x-k8s.io/v1beta1","kind":"ResourceFlavor",
      "metadata":{"name":"l40s"},"spec":{}})";
  EXPECT_EQ(Send("PUT", "/apis/kueue.x-k8s.io/v1beta1/resourceflavors/l40s", "viewer-token", flavor).status, 403);
  KubeReply r = Send("PUT", "/apis/kueue.x-k8s.io/v1beta1/resourceflavors/l40s", "admin-token", flavor);
  EXPECT_EQ(r.status / 100, 2) << r.body.dump();
  bool asked_update = false;
  for (const AccessAttributes& a : reviews_.asked()) {
    asked_update = asked_update || (a.verb == "update" && a.group == "kueue.x-k8s.io" &&
                                    a.resource == "resourceflavors" && a.namespace_name.empty() && a.name == "l40s");
  }
  EXPECT_TRUE(asked_update);
  r = Send("POST", "/v1/apply", "admin-token", flavor);
  EXPECT_EQ(r.status / 100, 2) << r.body.dump();
  bool asked_patch = false;
  for (const AccessAttributes& a : reviews_.asked()) {
    asked_patch = asked_patch || (a.verb == "patch" && a.resource == "resourceflavors" && a.name == "l40s");
  }
  EXPECT_TRUE(asked_patch);
}

TEST_F(KubeAuthTest, ApiServerDownIs503NeverAllowed) {
  reviews_.set_down(true);
  KubeReply r = Get("/v1/clusterqueues", "viewer-token");
  EXPECT_EQ(r.status, 503);
  EXPECT_THAT(Message(r), HasSubstr("could not check the bearer token"));
  // Authenticated while it was up; the access review fails later: 503, not
  // a 403 or a partial list.
  reviews_.set_down(false);
  EXPECT_EQ(Get("/v1/workloads/team-b/infer", "lead-token").status, 200);
  reviews_.set_down(true);
  r = Get("/v1/clusterqueues", "lead-token");
  EXPECT_EQ(r.status, 503);
  EXPECT_THAT(Message(r), HasSubstr("could not authorize"));
  // Failures are not cached: up again, answered at once.
  reviews_.set_down(false);
  EXPECT_EQ(Get("/v1/clusterqueues", "viewer-token").status, 200);
}

TEST_F(KubeAuthTest, AnswersAreCachedUntilTheirTtl) {
  ASSERT_EQ(Get("/v1/clusterqueues", "viewer-token").status, 200);
  const int tokens = reviews_.token_calls();
  const int access = reviews_.access_calls();
  EXPECT_EQ(tokens, 1);
  ASSERT_EQ(Get("/v1/clusterqueues", "viewer-token").status, 200);
  EXPECT_EQ(reviews_.token_calls(), tokens);
  EXPECT_EQ(reviews_.access_calls(), access);
  clock_.AdvanceTime(absl::Seconds(11));  // allowed answers live 10 s
  ASSERT_EQ(Get("/v1/clusterqueues", "viewer-token").status, 200);
  EXPECT_EQ(reviews_.token_calls(), tokens + 1);
  EXPECT_GT(reviews_.access_calls(), access);

  // A denial is kept 5 s: a new binding shows after that.
  EXPECT_EQ(Get("/metrics", "lead-token").status, 403);
  reviews_.AddRule({"team-b-admins", "get", "", "", "/metrics"});
  clock_.AdvanceTime(absl::Seconds(4));
  EXPECT_EQ(Get("/metrics", "lead-token").status, 403);
  clock_.AdvanceTime(absl::Seconds(2));
  EXPECT_EQ(Get("/metrics", "lead-token").status, 200);

  // An unknown token is remembered 5 s too.
  const int before = reviews_.token_calls();
  EXPECT_EQ(Get("/v1/clusterqueues", "later-token").status, 401);
  reviews_.AddUser("later-token", "frank", {"viewers"});
  EXPECT_EQ(Get("/v1/clusterqueues", "later-token").status, 401);
  EXPECT_EQ(reviews_.token_calls(), before + 1);
  clock_.AdvanceTime(absl::Seconds(6));
  EXPECT_EQ(Get("/v1/clusterqueues", "later-token").status, 200);
}

TEST_F(KubeAuthTest, CachesAreBounded) {
  KubeAuthOptions o;
  o.max_entries = 2;
  Use(AuthMode::kKubernetes, o);
  for (const char* token : {"viewer-token", "lead-token", "auditor-token", "nobody-token", "x", "y"}) {
    Get("/v1/clusterqueues", token);
  }
  EXPECT_LE(kube_->cached_tokens(), 2u);
  EXPECT_LE(kube_->cached_access(), 2u);
  // The least recently used went first: the first token is asked again.
  const int before = reviews_.token_calls();
  EXPECT_EQ(Get("/v1/clusterqueues", "viewer-token").status, 200);
  EXPECT_EQ(reviews_.token_calls(), before + 1);
}

TEST_F(KubeAuthTest, BothModePrefersTheTokensFile) {
  Use(AuthMode::kBoth, KubeAuthOptions{});
  KubeReply r = Get("/v1/clusterqueues", "static-admin");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(KubeAuthNames(r.body), UnorderedElementsAre("team-a-gpu", "team-b-gpu"));
  EXPECT_EQ(reviews_.token_calls(), 0);
  EXPECT_EQ(reviews_.access_calls(), 0);
  r = Get("/v1/clusterqueues", "lead-token");
  ASSERT_EQ(r.status, 200);
  EXPECT_THAT(KubeAuthNames(r.body), UnorderedElementsAre("team-b-gpu"));
  r = Get("/v1/clusterqueues", "neither");
  EXPECT_EQ(r.status, 401);
  EXPECT_THAT(Message(r), HasSubstr("neither in --tokens nor known"));
}

TEST(KubeAuthModeTest, ParsesTheFlag) {
  EXPECT_EQ(*ParseAuthMode("both"), AuthMode::kBoth);
  EXPECT_EQ(*ParseAuthMode("kubernetes"), AuthMode::kKubernetes);
  EXPECT_EQ(*ParseAuthMode("tokens"), AuthMode::kTokens);
  EXPECT_FALSE(ParseAuthMode("rbac").ok());
  const AccessAttributes a = KindAttributes("GPUNodePool", "list");
  EXPECT_EQ(a.group, "gangkeeper.io");
  EXPECT_EQ(a.resource, "gpunodepools");
}

}  // namespace
}  // namespace gangkeeper::api
