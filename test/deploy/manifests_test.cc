// Tests of what `kubectl apply -k` would send: deploy/ (the base) and its
// overlays cert-manager, self-managed, ha (with deploy/etcd), and the
// optional hardening restrict-webhook and client-auth, rendered offline by
// the real kubectl (render.h), then
//   1. every object checked against test/deploy/schema.yaml (schema.h),
//   2. the references between objects (selectors, ports, names, volumes),
//   3. the safety of the webhook registration (scope, failurePolicy with its
//      reason, timeouts, matchPolicy, the kinds the code manages),
//   4. the Deployment (the StatefulSet in ha): security context, probes, the
//      grace period against --shutdown-grace, flags against mounts and
//      `gangkeeper serve --help`; ha's per-replica volume and its etcd over
//      TLS with client certificates; the API server's files of client-auth,
//   5. the policies ConfigMap against policies/, and the example
//      AdmissionReview against the seed's Job.
// The RBAC rules are checked against real calls in rbac_test.cc.
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gangkeeper/quantity/quantity.h"
#include "gangkeeper/workload/workload.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/deploy/render.h"
#include "test/deploy/schema.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"
#include "test/testing/tls_client.h"
#include "test/testing/yaml_json.h"

namespace gangkeeper::deploy_test {
namespace {

using json = nlohmann::json;
using ::gangkeeper::testing::IsOk;
using ::testing::Contains;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr char kNamespace[] = "gangkeeper-system";

// ---- Renderings, made once ----------------------------------------------------

struct Renderings {
  absl::Status status;
  std::map<std::string, Rendering> by_name;  // deploy, base, and each overlay by its directory's name
  std::string self_managed_dir;              // the overlay in the copy
  testing::TempDir copy;                     // deploy/, policies/, webhook/ + certificates
};

const Renderings& All() {
  static Renderings* const r = [] {
    auto* out = new Renderings();
    const std::string src = SourceDir();
    const std::vector<std::pair<std::string, std::string>> dirs = {
        {"deploy", src + "/deploy"},
        {"base", src + "/deploy/base"},
        {"cert-manager", src + "/deploy/overlays/cert-manager"},
        {"ha", src + "/deploy/overlays/ha"},
        {"restrict-webhook", src + "/deploy/overlays/restrict-webhook"}};
    for (const auto& [name, dir] : dirs) {
      absl::StatusOr<Rendering> rendered = Kustomize(dir);
      if (!rendered.ok()) {
        out->status = rendered.status();
        return out;
      }
      out->by_name[name] = *std::move(rendered);
    }
    absl::StatusOr<std::string> overlay = PrepareSelfManaged(out->copy.path());
    if (!overlay.ok()) {
      out->status = overlay.status();
      return out;
    }
    out->self_managed_dir = *overlay;
    // client-auth builds on self-managed: both render from the copy.
    for (const std::string name : {"self-managed", "client-auth"}) {
      absl::StatusOr<Rendering> rendered = Kustomize(fs::path(*overlay).parent_path() / name);
      if (!rendered.ok()) {
        out->status = rendered.status();
        return out;
      }
      out->by_name[name] = *std::move(rendered);
    }
    return out;
  }();
  return *r;
}

// The renderings a cluster can be given (deploy/ itself and base/ lack the
// certificate; they are checked where that does not matter).
const std::vector<std::string> kInstallable = {"cert-manager", "self-managed", "ha", "restrict-webhook",
                                               "client-auth"};
const std::vector<std::string> kEvery = {"deploy",           "cert-manager", "self-managed", "ha",
                                         "restrict-webhook", "client-auth"};

class ManifestTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_THAT(All().status, IsOk()); }
  static const std::vector<json>& Objects(const std::string& name) { return All().by_name.at(name).objects; }
};

std::string Str(const json* v) { return v != nullptr && v->is_string() ? v->get<std::string>() : ""; }

// `labels` (a map) contains every pair of `selector` (a map), which is not empty.
bool Selects(const json* selector, const json* labels) {
  if (selector == nullptr || labels == nullptr || !selector->is_object() || selector->empty()) return false;
  for (const auto& [k, v] : selector->items()) {
    if (!labels->contains(k) || (*labels)[k] != v) return false;
  }
  return true;
}

std::set<std::string> Kinds(const std::vector<json>& objects) {
  std::set<std::string> out;
  for (const json& o : objects) out.insert(o.value("kind", ""));
  return out;
}

// gangkeeper's pods: the Deployment, or in ha the StatefulSet.
const json& TheDeployment(const std::vector<json>& objects) {
  static const json kNone;
  const json* d = Find(objects, "Deployment", "gangkeeper");
  if (d == nullptr) d = Find(objects, "StatefulSet", "gangkeeper");
  return d != nullptr ? *d : kNone;
}

// Every Deployment and StatefulSet (gangkeeper's, and etcd's in ha).
std::vector<const json*> Workloads(const std::vector<json>& objects) {
  std::vector<const json*> out = OfKind(objects, "Deployment");
  for (const json* s : OfKind(objects, "StatefulSet")) out.push_back(s);
  return out;
}

// The gangkeeper container's flags: "--name=value" -> {name: value}.
std::map<std::string, std::string> Flags(const json& deployment) {
  std::map<std::string, std::string> out;
  const json* args = At(deployment, "/spec/template/spec/containers/0/args");
  if (args == nullptr) return out;
  for (const json& a : *args) {
    const std::string s = a.get<std::string>();
    if (!absl::StartsWith(s, "--")) continue;
    const size_t eq = s.find('=');
    out[s.substr(2, eq == std::string::npos ? std::string::npos : eq - 2)] =
        eq == std::string::npos ? "true" : s.substr(eq + 1);
  }
  return out;
}

int PortOf(const std::string& address) {
  int port = 0;
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) return -1;
  return port;
}

// The container port a Service targetPort or probe port (name or number)
// points at; -1 when it names none.
int ContainerPort(const json& container, const json& port) {
  if (port.is_number_integer()) return port.get<int>();
  for (const json& p : container.value("ports", json::array())) {
    if (p.value("name", "") == port.get<std::string>()) return p.value("containerPort", -1);
  }
  return -1;
}

// The volume mounted at the longest mountPath that is a prefix of `path`.
std::string VolumeHolding(const json& container, const std::string& path, bool* read_only = nullptr) {
  std::string best, best_mount;
  for (const json& m : container.value("volumeMounts", json::array())) {
    const std::string mount = m.value("mountPath", "");
    if ((path == mount || absl::StartsWith(path, mount + "/")) && mount.size() > best_mount.size()) {
      best = m.value("name", "");
      best_mount = mount;
      if (read_only != nullptr) *read_only = m.value("readOnly", false);
    }
  }
  return best;
}

// The pod volume `name`, or a StatefulSet's claim template of that name
// (its metadata and spec).
const json* Volume(const json& deployment, const std::string& name) {
  for (const char* where : {"/spec/template/spec/volumes", "/spec/volumeClaimTemplates"}) {
    const json* volumes = At(deployment, where);
    if (volumes == nullptr) continue;
    for (const json& v : *volumes) {
      if (v.value("name", "") == name || Str(At(v, "/metadata/name")) == name) return &v;
    }
  }
  return nullptr;
}

// ---- 1. Rendering --------------------------------------------------------------

TEST_F(ManifestTest, EveryKustomizationRendersOfflineWithTheExpectedObjects) {
  const std::set<std::string> base = {"Namespace",   "ServiceAccount", "ClusterRole",
                                      "ClusterRoleBinding", "ConfigMap", "Service",
                                      "Deployment",  "NetworkPolicy",  "PersistentVolumeClaim",
                                      "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"};
  EXPECT_EQ(Kinds(Objects("deploy")), base);
  EXPECT_EQ(Objects("deploy"), Objects("base")) << "deploy/ renders deploy/base";

  std::set<std::string> cert_manager = base;
  cert_manager.insert({"Issuer", "Certificate"});
  EXPECT_EQ(Kinds(Objects("cert-manager")), cert_manager);
  EXPECT_EQ(OfKind(Objects("cert-manager"), "Certificate").size(), 2u);

  std::set<std::string> self_managed = base;
  self_managed.insert("Secret");
  EXPECT_EQ(Kinds(Objects("self-managed")), self_managed);

  // ha: a StatefulSet with a claim per replica instead of the Deployment
  // and its claim; etcd's StatefulSet, Service, budget, policy and
  // certificates.
  std::set<std::string> ha = cert_manager;
  ha.erase("PersistentVolumeClaim");
  ha.erase("Deployment");
  ha.insert({"StatefulSet", "PodDisruptionBudget"});
  EXPECT_EQ(Kinds(Objects("ha")), ha);
  EXPECT_EQ(OfKind(Objects("ha"), "StatefulSet").size(), 2u) << "gangkeeper and its etcd";
  EXPECT_EQ(OfKind(Objects("ha"), "Certificate").size(), 5u) << "webhook CA and serving; etcd CA, member, client";

  // The hardening overlays add nothing but their patch.
  EXPECT_EQ(Kinds(Objects("restrict-webhook")), cert_manager);
  EXPECT_EQ(Kinds(Objects("client-auth")), self_managed);

  // One of each name per kind: nothing rendered twice.
  for (const std::string& r : kEvery) {
    std::set<std::string> seen;
    for (const json& o : Objects(r)) {
      EXPECT_TRUE(seen.insert(o.value("kind", "") + "/" + Str(At(o, "/metadata/name"))).second)
          << r << ": " << o.value("kind", "") << " " << Str(At(o, "/metadata/name")) << " twice";
    }
  }
}

TEST_F(ManifestTest, NoRenderingCarriesATokenOrAPrivateCaKey) {
  for (const std::string& r : kEvery) {
    SCOPED_TRACE(r);
    for (const json* s : OfKind(Objects(r), "Secret")) {
      EXPECT_NE(Str(At(*s, "/metadata/name")), "gangkeeper-tokens") << "tokens are made by hand, never from git";
      EXPECT_FALSE(s->contains("data") && (*s)["data"].contains("ca.key")) << "the CA key stays with make-certs.sh";
    }
  }
}

// ---- 2. Schema -------------------------------------------------------------------

const Schema& TheSchema() {
  static const Schema* const s = [] {
    absl::StatusOr<Schema> loaded = Schema::Load(SourceDir() + "/test/deploy/schema.yaml");
    EXPECT_THAT(loaded, IsOk());
    return loaded.ok() ? new Schema(*std::move(loaded)) : nullptr;
  }();
  return *s;
}

TEST_F(ManifestTest, EveryRenderedObjectFitsTheSchema) {
  for (const std::string& r : kEvery) {
    SCOPED_TRACE(r);
    for (const json& o : Objects(r)) {
      std::vector<std::string> problems = TheSchema().Validate(o);
      if (r == "deploy") {
        // The base keeps the CA_BUNDLE placeholder, which is not base64: the
        // API server refuses the base alone. Nothing else may be wrong.
        std::erase_if(problems, [](const std::string& p) {
          return absl::StrContains(p, ".clientConfig.caBundle: want base64, got \"CA_BUNDLE\"");
        });
      }
      if (r == "restrict-webhook") {
        // Likewise the control plane's range, until the operator sets it:
        // an unedited apply changes nothing.
        std::erase_if(problems, [](const std::string& p) {
          return absl::StrContains(p, ".ipBlock.cidr: want cidr, got \"CONTROL_PLANE_CIDR\"");
        });
      }
      EXPECT_TRUE(problems.empty()) << absl::StrJoin(problems, "\n");
    }
  }
}

TEST_F(ManifestTest, TheBasesCaBundlePlaceholderIsRefusedAsBase64) {
  int placeholders = 0;
  for (const json& o : Objects("deploy")) {
    for (const std::string& p : TheSchema().Validate(o)) placeholders += absl::StrContains(p, "caBundle");
  }
  EXPECT_EQ(placeholders, 3) << "one per webhook (mutate, validate, observe)";
}

TEST(SchemaTest, FindsMissingWrongAndUnknownFields) {
  const json d = json::parse(R"({
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "x", "namespace": "ns", "lables": {"a": "b"}},
    "spec": {"replicas": "2", "selector": {"matchLabels": {"a": "b"}},
      "template": {"metadata": {"labels": {"a": "b"}},
        "spec": {"containers": [{"name": "c",
          "securityContext": {"readOnlyRootFileSystem": true},
          "resources": {"requests": {"cpu": "lots"}}}]}}}})");
  std::vector<std::string> problems = TheSchema().Validate(d);
  EXPECT_THAT(problems, Contains(HasSubstr("spec.replicas: want int")));
  EXPECT_THAT(problems, Contains(HasSubstr("spec.template.spec.containers[0].image: required")));
  EXPECT_THAT(problems, Contains(HasSubstr("containers[0].securityContext.readOnlyRootFileSystem: unknown field")));
  EXPECT_THAT(problems, Contains(HasSubstr("containers[0].resources.requests.cpu: want quantity")));
  EXPECT_THAT(problems, Contains(HasSubstr("metadata.lables: unknown field")));
  EXPECT_EQ(problems.size(), 5u) << absl::StrJoin(problems, "\n");

  const json cluster_scoped = json::parse(R"({
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
    "metadata": {"name": "r", "namespace": "ns"},
    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["escalate"]}]})");
  problems = TheSchema().Validate(cluster_scoped);
  EXPECT_THAT(problems, Contains(HasSubstr("metadata.namespace: set on a cluster-scoped kind")));
  EXPECT_THAT(problems, Contains(HasSubstr("rules[0].verbs[0]: \"escalate\" is not one of")));

  EXPECT_THAT(TheSchema().Validate(json::parse(R"({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}})")),
              Contains(HasSubstr("no schema for kind \"Pod\"")));
  EXPECT_THAT(TheSchema().Validate(json::parse(
                  R"({"apiVersion": "apps/v1beta1", "kind": "Namespace", "metadata": {"name": "Not_A_Name"}})")),
              ::testing::AllOf(Contains(HasSubstr("apiVersion: want v1")),
                               Contains(HasSubstr("metadata.name: want name"))));
  const json validating = json::parse(R"({
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": "v"},
    "webhooks": [{"name": "w", "admissionReviewVersions": ["v1"], "sideEffects": "Some",
      "reinvocationPolicy": "IfNeeded",
      "clientConfig": {"service": {"name": "s", "namespace": "n"}}, "rules": []}]})");
  problems = TheSchema().Validate(validating);
  EXPECT_THAT(problems, Contains(HasSubstr("webhooks[0].sideEffects: \"Some\" is not one of")));
  EXPECT_THAT(problems, Contains(HasSubstr("webhooks[0].reinvocationPolicy: not a field of this kind")));
}

// ---- 3. References between objects --------------------------------------------------

TEST_F(ManifestTest, SelectorsPortsAndNamesPointAtWhatIsRendered) {
  for (const std::string& r : kEvery) {
    SCOPED_TRACE(r);
    const std::vector<json>& objects = Objects(r);
    const json& d = TheDeployment(objects);
    ASSERT_TRUE(d.is_object());
    const json* pod_labels = At(d, "/spec/template/metadata/labels");
    const json& container = d["spec"]["template"]["spec"]["containers"][0];
    EXPECT_TRUE(Selects(At(d, "/spec/selector/matchLabels"), pod_labels));

    // Every namespaced object lives in gangkeeper's namespace, which is rendered.
    ASSERT_NE(Find(objects, "Namespace", kNamespace), nullptr);
    for (const json& o : objects) {
      if (At(o, "/metadata/namespace") != nullptr) {
        EXPECT_EQ(Str(At(o, "/metadata/namespace")), kNamespace);
      }
    }

    const json* svc = Find(objects, "Service", "gangkeeper");
    ASSERT_NE(svc, nullptr);
    // Every Service leads to the ports of the pods it selects.
    for (const json* service : OfKind(objects, "Service")) {
      SCOPED_TRACE(Str(At(*service, "/metadata/name")));
      const json* selected = nullptr;
      for (const json* w : Workloads(objects)) {
        if (Selects(At(*service, "/spec/selector"), At(*w, "/spec/template/metadata/labels"))) selected = w;
      }
      ASSERT_NE(selected, nullptr) << "selects no pods";
      for (const json& p : (*service)["spec"]["ports"]) {
        EXPECT_GT(ContainerPort((*selected)["spec"]["template"]["spec"]["containers"][0], p["targetPort"]), 0)
            << p.dump();
      }
    }
    // A StatefulSet's governing Service is rendered, headless, and selects it.
    for (const json* set : OfKind(objects, "StatefulSet")) {
      const json* governing = Find(objects, "Service", Str(At(*set, "/spec/serviceName")));
      ASSERT_NE(governing, nullptr) << Str(At(*set, "/spec/serviceName"));
      EXPECT_EQ(Str(At(*governing, "/spec/clusterIP")), "None");
      EXPECT_TRUE(Selects(At(*governing, "/spec/selector"), At(*set, "/spec/template/metadata/labels")));
    }
    // Certificates name a rendered Issuer.
    for (const json* c : OfKind(objects, "Certificate")) {
      EXPECT_NE(Find(objects, "Issuer", Str(At(*c, "/spec/issuerRef/name"))), nullptr) << c->dump();
    }

    const json* sa = Find(objects, "ServiceAccount", Str(At(d, "/spec/template/spec/serviceAccountName")));
    ASSERT_NE(sa, nullptr) << "the Deployment's serviceAccountName";
    const json* binding = Find(objects, "ClusterRoleBinding", "gangkeeper");
    ASSERT_NE(binding, nullptr);
    EXPECT_NE(Find(objects, "ClusterRole", Str(At(*binding, "/roleRef/name"))), nullptr);
    ASSERT_EQ((*binding)["subjects"].size(), 1u);
    EXPECT_EQ((*binding)["subjects"][0]["name"], (*sa)["metadata"]["name"]);
    EXPECT_EQ((*binding)["subjects"][0]["namespace"], kNamespace);

    const json* netpol = Find(objects, "NetworkPolicy", "gangkeeper");
    ASSERT_NE(netpol, nullptr);
    EXPECT_TRUE(Selects(At(*netpol, "/spec/podSelector/matchLabels"), pod_labels));
    for (const json* pdb : OfKind(objects, "PodDisruptionBudget")) {
      int selected = 0;
      for (const json* w : Workloads(objects)) {
        selected += Selects(At(*pdb, "/spec/selector/matchLabels"), At(*w, "/spec/template/metadata/labels"));
      }
      EXPECT_EQ(selected, 1) << Str(At(*pdb, "/metadata/name")) << ": the pods of one workload";
    }

    // Volumes: what they name exists, or comes from elsewhere on purpose.
    for (const json* w : Workloads(objects)) {
      for (const json& v : (*w)["spec"]["template"]["spec"]["volumes"]) {
        SCOPED_TRACE(v.dump());
        int sources = 0;
        for (const char* s : {"secret", "configMap", "persistentVolumeClaim", "emptyDir"}) sources += v.contains(s);
        EXPECT_EQ(sources, 1) << "one source per volume (and only types the restricted profile allows)";
        if (v.contains("configMap")) {
          EXPECT_NE(Find(objects, "ConfigMap", v["configMap"]["name"].get<std::string>()), nullptr);
        }
        if (v.contains("persistentVolumeClaim")) {
          const std::string claim = v["persistentVolumeClaim"]["claimName"];
          EXPECT_NE(Find(objects, "PersistentVolumeClaim", claim), nullptr);
        }
        if (v.contains("secret")) {
          const std::string secret = v["secret"]["secretName"];
          if (secret == "gangkeeper-tokens") continue;  // made by the platform engineer (README)
          if (r == "deploy") continue;                   // the overlays bring the certificate
          bool from_cert_manager = false;
          for (const json* c : OfKind(objects, "Certificate")) {
            from_cert_manager |= Str(At(*c, "/spec/secretName")) == secret;
          }
          const bool rendered = Find(objects, "Secret", secret) != nullptr;
          EXPECT_TRUE(rendered != from_cert_manager)
              << secret << ": from exactly one of the overlay's Secret or a Certificate";
        }
      }
      // Every mount names a volume or a claim template.
      for (const json& m : (*w)["spec"]["template"]["spec"]["containers"][0].value("volumeMounts", json::array())) {
        EXPECT_NE(Volume(*w, m["name"].get<std::string>()), nullptr) << m.dump();
      }
    }
    // The Service the webhooks call is this one, and its port 443 reaches
    // the webhook listener.
    const int webhook_port = PortOf(Flags(d).at("webhook-addr"));
    for (const char* kind : {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}) {
      for (const json* config : OfKind(objects, kind)) {
        for (const json& hook : (*config)["webhooks"]) {
          const json& service = hook["clientConfig"]["service"];
          EXPECT_EQ(service["name"], (*svc)["metadata"]["name"]);
          EXPECT_EQ(service["namespace"], kNamespace);
          const int port = service.value("port", 443);
          bool reaches = false;
          for (const json& p : (*svc)["spec"]["ports"]) {
            reaches |= p["port"] == port && ContainerPort(container, p["targetPort"]) == webhook_port;
          }
          EXPECT_TRUE(reaches) << hook["name"] << ": Service port " << port << " must lead to " << webhook_port;
        }
      }
    }
  }
}

TEST_F(ManifestTest, TheBaseLeavesTheServingCertificateToAnOverlay) {
  EXPECT_EQ(Find(Objects("deploy"), "Secret", "gangkeeper-tls"), nullptr);
  EXPECT_TRUE(OfKind(Objects("deploy"), "Certificate").empty());
}

// ---- 4. Webhook registration safety ----------------------------------------------------

struct WebhookRule {
  std::string failure_policy, side_effects, path;
};
// Every webhook gangkeeper registers, and why each fails the way it does
// (the YAML says it next to failurePolicy; a new webhook must be added here).
const std::map<std::string, WebhookRule> kWebhooks = {
    // Skipped, a queued job would start unsuspended and bypass its quota.
    {"mutate.gangkeeper.io", {"Fail", "None", "/mutate"}},
    // Ignored, a queued job could be un-suspended while gangkeeper is down.
    {"validate.gangkeeper.io", {"Fail", "NoneOnDryRun", "/validate"}},
    // Never denies; the reconciler's watch sees deletions and completions.
    {"observe.gangkeeper.io", {"Ignore", "NoneOnDryRun", "/validate"}},
};

// The operations a webhook has on group/resource (any version).
std::set<std::string> Operations(const json& hook, const std::string& group, const std::string& resource,
                                 const std::string& version) {
  std::set<std::string> out;
  for (const json& rule : hook["rules"]) {
    const bool group_ok = std::find(rule["apiGroups"].begin(), rule["apiGroups"].end(), group) != rule["apiGroups"].end();
    const bool resource_ok =
        std::find(rule["resources"].begin(), rule["resources"].end(), resource) != rule["resources"].end();
    const bool version_ok =
        std::find(rule["apiVersions"].begin(), rule["apiVersions"].end(), version) != rule["apiVersions"].end();
    if (group_ok && resource_ok && version_ok) {
      for (const json& op : rule["operations"]) out.insert(op.get<std::string>());
    }
  }
  return out;
}

TEST_F(ManifestTest, WebhooksNeverInterceptTheControlPlaneOrThemselvesAndFailAsDeclared) {
  std::map<std::string, std::set<std::string>> managed;  // group -> resources the code manages
  for (const workload::KindInfo& k : workload::ManagedKinds()) {
    managed[std::string(k.group)].insert(std::string(k.resource));
    managed[std::string(k.group)].insert(absl::StrCat(k.resource, "/status"));
  }
  for (const std::string& r : kEvery) {
    SCOPED_TRACE(r);
    std::set<std::string> seen;
    for (const char* kind : {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}) {
      ASSERT_EQ(OfKind(Objects(r), kind).size(), 1u) << kind;
      for (const json& hook : (*OfKind(Objects(r), kind)[0])["webhooks"]) {
        const std::string name = hook["name"];
        SCOPED_TRACE(name);
        seen.insert(name);
        auto want = kWebhooks.find(name);
        ASSERT_NE(want, kWebhooks.end()) << "a webhook this test does not know: add it to kWebhooks with its reason";
        EXPECT_EQ(hook.value("failurePolicy", ""), want->second.failure_policy);
        EXPECT_EQ(hook.value("sideEffects", ""), want->second.side_effects);
        EXPECT_EQ(hook["clientConfig"]["service"].value("path", ""), want->second.path);
        EXPECT_EQ(hook.value("matchPolicy", ""), "Equivalent");
        EXPECT_EQ(hook["admissionReviewVersions"], json::array({"v1"}));
        ASSERT_TRUE(hook.contains("timeoutSeconds")) << "the default is the API server's 10 s";
        EXPECT_GE(hook["timeoutSeconds"].get<int>(), 1);
        EXPECT_LT(hook["timeoutSeconds"].get<int>(), 10);
        if (std::string(kind) == "MutatingWebhookConfiguration") {
          EXPECT_EQ(hook.value("reinvocationPolicy", ""), "IfNeeded");
        }

        // Never kube-system, kube-node-lease, kube-public or our own namespace.
        bool excludes = false;
        for (const json& e : hook["namespaceSelector"].value("matchExpressions", json::array())) {
          if (e["key"] != "kubernetes.io/metadata.name" || e["operator"] != "NotIn") continue;
          std::set<std::string> values(e["values"].begin(), e["values"].end());
          excludes = values.count("kube-system") && values.count("kube-node-lease") && values.count("kube-public") &&
                     values.count(kNamespace);
        }
        EXPECT_TRUE(excludes) << hook["namespaceSelector"].dump();
        // Only objects with the queue label the code reads.
        bool queue_label = false;
        for (const json& e : hook["objectSelector"].value("matchExpressions", json::array())) {
          queue_label |= e["key"] == std::string(workload::kQueueNameLabel) && e["operator"] == "Exists";
        }
        EXPECT_TRUE(queue_label) << hook["objectSelector"].dump();
        // Exact rules: no wildcards, namespaced, only what the code manages.
        for (const json& rule : hook["rules"]) {
          EXPECT_EQ(rule.value("scope", ""), "Namespaced");
          for (const char* field : {"apiGroups", "apiVersions", "resources", "operations"}) {
            for (const json& v : rule[field]) EXPECT_FALSE(absl::StrContains(v.get<std::string>(), "*")) << rule.dump();
          }
          for (const json& g : rule["apiGroups"]) {
            for (const json& res : rule["resources"]) {
              EXPECT_TRUE(managed[g.get<std::string>()].count(res.get<std::string>()))
                  << g << "/" << res << " is not a kind gangkeeper manages";
            }
          }
          EXPECT_FALSE(std::find(rule["operations"].begin(), rule["operations"].end(), "CONNECT") !=
                       rule["operations"].end());
        }
        // Every managed kind is covered, with the operations /validate
        // handles (src/admission/validate.cc).
        for (const workload::KindInfo& k : workload::ManagedKinds()) {
          const std::string g(k.group), res(k.resource), v(k.version);
          if (name == "mutate.gangkeeper.io") {
            EXPECT_EQ(Operations(hook, g, res, v), std::set<std::string>({"CREATE"})) << res;
          } else if (name == "validate.gangkeeper.io") {
            EXPECT_EQ(Operations(hook, g, res, v), std::set<std::string>({"CREATE", "UPDATE"})) << res;
            EXPECT_TRUE(Operations(hook, g, res + "/status", v).empty()) << res;
          } else {
            EXPECT_EQ(Operations(hook, g, res, v), std::set<std::string>({"DELETE"})) << res;
            EXPECT_EQ(Operations(hook, g, res + "/status", v), std::set<std::string>({"UPDATE"})) << res;
          }
        }
      }
    }
    EXPECT_EQ(seen.size(), kWebhooks.size());
  }
}

TEST(WebhookSourceTest, FailurePolicyAndTimeoutCarryTheirReason) {
  for (const char* file : {"webhook/mutating.yaml", "webhook/validating.yaml"}) {
    SCOPED_TRACE(file);
    const std::string text = ReadFile(SourceDir() + "/" + file);
    ASSERT_FALSE(text.empty());
    std::vector<std::string> lines = absl::StrSplit(text, '\n');
    int webhooks = 0, policies = 0, timeouts = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& line = lines[i];
      webhooks += absl::StartsWith(line, "- name:");
      const std::string trimmed(absl::StripLeadingAsciiWhitespace(line));
      const bool policy = absl::StartsWith(trimmed, "failurePolicy:");
      const bool timeout = absl::StartsWith(trimmed, "timeoutSeconds:");
      if (!policy && !timeout) continue;
      policies += policy;
      timeouts += timeout;
      // The reason: a comment on the line, or on the line just above.
      const size_t hash = line.find('#');
      const bool inline_reason = hash != std::string::npos && line.size() > hash + 10;
      const bool above = i > 0 && absl::StartsWith(absl::StripLeadingAsciiWhitespace(lines[i - 1]), "#");
      EXPECT_TRUE(inline_reason || above) << "no reason next to: " << line;
    }
    EXPECT_GT(webhooks, 0);
    EXPECT_EQ(policies, webhooks) << "failurePolicy set explicitly on every webhook";
    EXPECT_EQ(timeouts, webhooks) << "timeoutSeconds set explicitly on every webhook";
  }
}

TEST_F(ManifestTest, CertManagerInjectsItsCaIntoBothConfigurations) {
  for (const std::string overlay : {"cert-manager", "ha"}) {
  SCOPED_TRACE(overlay);
  const std::vector<json>& objects = Objects(overlay);
  for (const char* kind : {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}) {
    const json& config = *OfKind(objects, kind)[0];
    const std::string from = Str(At(config, "/metadata/annotations/cert-manager.io~1inject-ca-from"));
    ASSERT_TRUE(absl::StrContains(from, "/")) << kind;
    const std::vector<std::string> ns_name = absl::StrSplit(from, '/');
    EXPECT_EQ(ns_name[0], kNamespace);
    const json* cert = Find(objects, "Certificate", ns_name[1]);
    ASSERT_NE(cert, nullptr) << from;
    for (const json& hook : config["webhooks"]) EXPECT_FALSE(hook["clientConfig"].contains("caBundle")) << kind;
    // The injected CA is the one that signed the mounted serving certificate.
    EXPECT_EQ(Str(At(*cert, "/spec/secretName")), "gangkeeper-tls");
    const json* dns = At(*cert, "/spec/dnsNames");
    ASSERT_NE(dns, nullptr);
    EXPECT_THAT(*dns, Contains(json("gangkeeper.gangkeeper-system.svc")));
    const json* issuer = Find(objects, "Issuer", Str(At(*cert, "/spec/issuerRef/name")));
    ASSERT_NE(issuer, nullptr);
    // A CA issuer (renewals keep the CA), whose key comes from the CA Certificate.
    const std::string ca_secret = Str(At(*issuer, "/spec/ca/secretName"));
    bool made = false;
    for (const json* c : OfKind(objects, "Certificate")) {
      made |= Str(At(*c, "/spec/secretName")) == ca_secret && At(*c, "/spec/isCA") != nullptr && (*c)["spec"]["isCA"] == true;
    }
    EXPECT_TRUE(made) << ca_secret;
  }
  }
}

TEST_F(ManifestTest, SelfManagedCarriesTheCaOfGangkeeperCertsEverywhere) {
  const std::vector<json>& objects = Objects("self-managed");
  const std::string cert_dir = All().copy.File("certs");
  const std::string ca_pem = ReadFile(cert_dir + "/ca.crt");
  ASSERT_THAT(ca_pem, HasSubstr("-----BEGIN CERTIFICATE-----"));
  int hooks = 0;
  for (const char* kind : {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}) {
    for (const json& hook : (*OfKind(objects, kind)[0])["webhooks"]) {
      ++hooks;
      std::string decoded;
      ASSERT_TRUE(absl::Base64Unescape(hook["clientConfig"].value("caBundle", ""), &decoded)) << hook["name"];
      EXPECT_EQ(decoded, ca_pem) << hook["name"];
    }
  }
  EXPECT_EQ(hooks, 3);
  const json* secret = Find(objects, "Secret", "gangkeeper-tls");
  ASSERT_NE(secret, nullptr);
  EXPECT_EQ((*secret)["type"], "kubernetes.io/tls");
  std::set<std::string> keys;
  for (const auto& [k, v] : (*secret)["data"].items()) keys.insert(k);
  EXPECT_EQ(keys, std::set<std::string>({"ca.crt", "tls.crt", "tls.key"}));
  std::string tls_crt;
  ASSERT_TRUE(absl::Base64Unescape((*secret)["data"]["tls.crt"].get<std::string>(), &tls_crt));
  EXPECT_EQ(tls_crt, ReadFile(cert_dir + "/tls.crt"));
}

// client-auth: the webhook asks for the client certificate make-certs.sh
// wrote for the API server, with the kubeconfig and AdmissionConfiguration
// that make the API server present it; the real binary accepts it and
// refuses a review without it.
TEST_F(ManifestTest, ClientAuthAcceptsTheApiServersCertificateFromMakeCertsAndNothingElse) {
  const json& d = TheDeployment(Objects("client-auth"));
  const std::map<std::string, std::string> flags = Flags(d);
  ASSERT_TRUE(flags.count("client-ca"));
  const json* v = Volume(d, VolumeHolding(d["spec"]["template"]["spec"]["containers"][0], flags.at("client-ca")));
  ASSERT_NE(v, nullptr);
  const json* secret = Find(Objects("client-auth"), "Secret", Str(At(*v, "/secret/secretName")));
  ASSERT_NE(secret, nullptr);
  EXPECT_TRUE((*secret)["data"].contains(fs::path(flags.at("client-ca")).filename().string()));

  // The API server's files: its kubeconfig picks the user by the webhook's
  // address, and both webhook plugins read it.
  const std::string certs = All().copy.File("certs");
  const std::string apiserver = certs + "/apiserver";
  const std::string on_node = "/etc/kubernetes/gangkeeper/";
  absl::StatusOr<std::vector<std::string>> kubeconfig = testing::YamlFileToJson(apiserver + "/webhook-kubeconfig.yaml");
  ASSERT_THAT(kubeconfig, IsOk());
  ASSERT_EQ(kubeconfig->size(), 1u);
  const json kc = json::parse((*kubeconfig)[0]);
  const json& validating = *OfKind(Objects("client-auth"), "ValidatingWebhookConfiguration")[0];
  const json& hook_service = validating["webhooks"][0]["clientConfig"]["service"];
  ASSERT_EQ(kc["users"].size(), 1u);
  EXPECT_EQ(kc["users"][0]["name"], absl::StrCat(hook_service["name"].get<std::string>(), ".",
                                                 hook_service["namespace"].get<std::string>(), ".svc:",
                                                 hook_service.value("port", 443)));
  EXPECT_EQ(kc["users"][0]["user"]["client-certificate"], on_node + "webhook-client.crt");
  EXPECT_EQ(kc["users"][0]["user"]["client-key"], on_node + "webhook-client.key");
  absl::StatusOr<std::vector<std::string>> admission = testing::YamlFileToJson(apiserver + "/admission-config.yaml");
  ASSERT_THAT(admission, IsOk());
  const json ac = json::parse((*admission)[0]);
  EXPECT_EQ(ac["kind"], "AdmissionConfiguration");
  std::set<std::string> plugins;
  for (const json& p : ac["plugins"]) {
    plugins.insert(p["name"].get<std::string>());
    EXPECT_EQ(p["configuration"]["kubeConfigFile"], on_node + "webhook-kubeconfig.yaml");
  }
  EXPECT_EQ(plugins, std::set<std::string>({"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"}));

  // gangkeeper serve with the overlay's --client-ca (the CA's certificate)
  // and the serving certificate of the same run.
  testing::TempDir run;
  absl::StatusOr<std::unique_ptr<testing::ServerProcess>> server = testing::ServerProcess::Start(
      {"--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0", "--tls-cert=" + certs + "/tls.crt",
       "--tls-key=" + certs + "/tls.key", "--client-ca=" + certs + "/ca.crt", "--data-dir=" + run.File("data"),
       "--policies=" + SourceDir() + "/policies", "--kube=none", "--drain-delay=0s"},
      run.path());
  ASSERT_THAT(server, IsOk());
  const std::string review = ReadFile(SourceDir() + "/deploy/examples/review-team-a-two-gpu-training.json");
  auto send = [&](const std::string& cert, const std::string& key) -> absl::StatusOr<testing::HttpReply> {
    testing::TlsClientOptions o;
    o.ca_file = certs + "/ca.crt";
    o.server_name = absl::StrCat(hook_service["name"].get<std::string>(), ".",
                                 hook_service["namespace"].get<std::string>(), ".svc");
    o.cert_file = cert;
    o.key_file = key;
    absl::StatusOr<std::unique_ptr<testing::TlsConnection>> c =
        testing::TlsConnection::Connect((*server)->webhook_port(), o);
    if (!c.ok()) return c.status();
    return (*c)->Request("POST", "/validate", review, "Content-Type: application/json\r\n");
  };
  absl::StatusOr<testing::HttpReply> as_apiserver =
      send(apiserver + "/webhook-client.crt", apiserver + "/webhook-client.key");
  ASSERT_THAT(as_apiserver, IsOk());
  EXPECT_EQ(as_apiserver->status, 200) << as_apiserver->body;
  EXPECT_THAT(as_apiserver->body, HasSubstr(R"("allowed":true)"));
  EXPECT_FALSE(send("", "").ok()) << "a review without a client certificate was answered";
  EXPECT_FALSE(send(certs + "/tls.crt", certs + "/tls.key").ok())
      << "the serving certificate (server auth only) was taken as a client";
}

// ---- 5. The Deployment -------------------------------------------------------------------

TEST_F(ManifestTest, ThePodRunsUnprivilegedWithAReadOnlyRoot) {
  for (const std::string& r : kEvery) {
    for (const json* w : Workloads(Objects(r))) {
      SCOPED_TRACE(r + " " + Str(At(*w, "/metadata/name")));
      const json& pod = (*w)["spec"]["template"]["spec"];
      EXPECT_EQ(pod["securityContext"].value("runAsNonRoot", false), true);
      ASSERT_TRUE(pod["securityContext"].contains("runAsUser"));
      EXPECT_GT(pod["securityContext"]["runAsUser"].get<int64_t>(), 0) << "numeric and not root";
      EXPECT_EQ(Str(At(pod, "/securityContext/seccompProfile/type")), "RuntimeDefault");
      EXPECT_FALSE(pod.value("hostNetwork", false));
      for (const json& c : pod["containers"]) {
        const json& sc = c["securityContext"];
        EXPECT_EQ(sc.value("allowPrivilegeEscalation", true), false);
        EXPECT_EQ(sc.value("readOnlyRootFilesystem", false), true);
        EXPECT_FALSE(sc.value("privileged", false));
        EXPECT_EQ(At(sc, "/capabilities/drop") != nullptr ? sc["capabilities"]["drop"] : json(), json::array({"ALL"}));
        EXPECT_FALSE(At(sc, "/capabilities/add") != nullptr);
        // Requests for scheduling, a memory limit; no CPU limit (throttling
        // would show up as webhook latency).
        const json& res = c["resources"];
        for (const char* k : {"cpu", "memory"}) EXPECT_TRUE(At(res, std::string("/requests/") + k) != nullptr) << k;
        ASSERT_TRUE(At(res, "/limits/memory") != nullptr);
        EXPECT_FALSE(At(res, "/limits/cpu") != nullptr);
        absl::StatusOr<quantity::Quantity> req = quantity::ParseQuantity(res["requests"]["memory"].get<std::string>());
        absl::StatusOr<quantity::Quantity> lim = quantity::ParseQuantity(res["limits"]["memory"].get<std::string>());
        ASSERT_THAT(req, IsOk());
        ASSERT_THAT(lim, IsOk());
        EXPECT_LE(*req, *lim);
        const std::string image = c["image"];
        EXPECT_TRUE(absl::StrContains(image, ":") && !absl::EndsWith(image, ":latest")) << image;
      }
    }
  }
  // base/ and overlays/ha each name gangkeeper's image (the Deployment and
  // the StatefulSet are in different kustomizations): the same one.
  EXPECT_EQ(TheDeployment(Objects("ha"))["spec"]["template"]["spec"]["containers"][0]["image"],
            TheDeployment(Objects("deploy"))["spec"]["template"]["spec"]["containers"][0]["image"]);
  // The namespace enforces the restricted Pod Security Standard, which the
  // checks above are the core of.
  const json* ns = Find(Objects("deploy"), "Namespace", kNamespace);
  ASSERT_NE(ns, nullptr);
  EXPECT_EQ((*ns)["metadata"]["labels"].value("pod-security.kubernetes.io/enforce", ""), "restricted");
}

TEST_F(ManifestTest, GracePeriodOutlastsTheDrainAndProbesAskTheRightPaths) {
  for (const std::string& r : kEvery) {
    SCOPED_TRACE(r);
    const json& d = TheDeployment(Objects(r));
    const std::map<std::string, std::string> flags = Flags(d);
    // gangkeeper serve: drain, then in-flight requests for --shutdown-grace,
    // then its own hard stop 5 s later (src/cli/serve.cc). The kubelet's
    // SIGKILL must come after all of that.
    absl::Duration grace = absl::Seconds(25), drain = absl::ZeroDuration();
    if (flags.count("shutdown-grace")) {
      ASSERT_TRUE(absl::ParseDuration(flags.at("shutdown-grace"), &grace));
    }
    if (flags.count("drain-delay")) {
      ASSERT_TRUE(absl::ParseDuration(flags.at("drain-delay"), &drain));
    }
    const json* tgps = At(d, "/spec/template/spec/terminationGracePeriodSeconds");
    ASSERT_NE(tgps, nullptr);
    EXPECT_GT(absl::Seconds(tgps->get<int64_t>()), grace + drain + absl::Seconds(5));

    const json& c = d["spec"]["template"]["spec"]["containers"][0];
    const int api_port = PortOf(flags.at("api-addr"));
    const int webhook_port = PortOf(flags.at("webhook-addr"));
    const std::map<std::string, std::string> want = {
        {"readinessProbe", "/readyz"}, {"livenessProbe", "/healthz"}, {"startupProbe", "/healthz"}};
    for (const auto& [probe, path] : want) {
      SCOPED_TRACE(probe);
      ASSERT_TRUE(c.contains(probe));
      EXPECT_EQ(Str(At(c[probe], "/httpGet/path")), path);
      EXPECT_EQ(Str(At(c[probe], "/httpGet/scheme")), "HTTPS") << "both listeners speak TLS only";
      // Both listeners serve /healthz and /readyz; the API one needs no
      // client certificate (--client-ca applies to the webhook listener).
      EXPECT_EQ(ContainerPort(c, c[probe]["httpGet"]["port"]), api_port);
    }
    bool webhook = false, api = false;
    for (const json& p : c["ports"]) {
      webhook |= p["name"] == "webhook" && p["containerPort"] == webhook_port;
      api |= p["name"] == "api" && p["containerPort"] == api_port;
    }
    EXPECT_TRUE(webhook && api) << "container ports match --webhook-addr and --api-addr";
  }
}

TEST_F(ManifestTest, FlagsExistAndPointIntoTheMountedVolumes) {
  absl::StatusOr<testing::CommandResult> help =
      testing::RunCommand({testing::GangkeeperBinary(), "serve", "--help"}, absl::Seconds(30));
  ASSERT_THAT(help, IsOk());
  ASSERT_EQ(help->exit_code, 0);
  for (const std::string& r : kEvery) {
    SCOPED_TRACE(r);
    const json& d = TheDeployment(Objects(r));
    const json& c = d["spec"]["template"]["spec"]["containers"][0];
    EXPECT_EQ(c["args"][0], "serve");
    const std::map<std::string, std::string> flags = Flags(d);
    for (const auto& [flag, value] : flags) {
      EXPECT_THAT(help->out, HasSubstr("  --" + flag + " ")) << "gangkeeper serve has no --" << flag;
    }
    auto volume_of = [&](const std::string& flag) -> const json* {
      if (!flags.count(flag)) return nullptr;
      return Volume(d, VolumeHolding(c, flags.at(flag)));
    };
    for (const char* flag : {"tls-cert", "tls-key"}) {
      const json* v = volume_of(flag);
      ASSERT_NE(v, nullptr) << flag;
      EXPECT_EQ(Str(At(*v, "/secret/secretName")), "gangkeeper-tls") << flag;
    }
    const json* tokens = volume_of("tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(Str(At(*tokens, "/secret/secretName")), "gangkeeper-tokens");
    const json* policies = volume_of("policies");
    ASSERT_NE(policies, nullptr);
    ASSERT_TRUE(policies->contains("configMap"));
    // --policies reads the ConfigMap's mount itself (its hidden "..data"
    // and timestamped copies are skipped: model fixtures_test).
    EXPECT_EQ(VolumeHolding(c, flags.at("policies")), "policies") << flags.at("policies");
    EXPECT_FALSE(absl::StrContains(flags.at("policies"), "..")) << flags.at("policies");
    bool data_ro = true;
    const std::string data_volume = VolumeHolding(c, flags.at("data-dir"), &data_ro);
    const json* data = Volume(d, data_volume);
    ASSERT_NE(data, nullptr) << "--data-dir must be on a volume";
    EXPECT_FALSE(data_ro);
    if (r == "ha") {
      // Each replica's own claim: its audit log survives the pod.
      EXPECT_EQ(Str(At(*data, "/metadata/name")), data_volume) << "a claim template";
      EXPECT_EQ(At(*data, "/spec/accessModes") != nullptr ? (*data)["spec"]["accessModes"] : json(),
                json::array({"ReadWriteOnce"}));
    } else {
      EXPECT_TRUE(data->contains("persistentVolumeClaim")) << "the journal must survive the pod";
    }
    // A directory below the mount, which gangkeeper creates 0700 for itself
    // (the mount's root belongs to root and may hold lost+found).
    for (const json& m : c["volumeMounts"]) {
      if (m["name"] == data_volume) {
        EXPECT_NE(flags.at("data-dir"), m["mountPath"].get<std::string>());
      }
    }
    EXPECT_EQ(flags.at("kube"), "in-cluster");
    EXPECT_EQ(At(d, "/spec/template/spec/automountServiceAccountToken") != nullptr
                  ? d["spec"]["template"]["spec"]["automountServiceAccountToken"]
                  : json(true),
              json(true));
    EXPECT_EQ(flags.at("controller-username"),
              absl::StrCat("system:serviceaccount:", kNamespace, ":",
                           Str(At(d, "/spec/template/spec/serviceAccountName"))));
  }
}

TEST_F(ManifestTest, OneReplicaOnTheFileStoreAndTheHaShapeForEtcd) {
  for (const std::string r : {"deploy", "cert-manager", "self-managed", "restrict-webhook", "client-auth"}) {
    SCOPED_TRACE(r);
    const json& d = TheDeployment(Objects(r));
    EXPECT_EQ(d.value("kind", ""), "Deployment");
    EXPECT_EQ(d["spec"].value("replicas", 1), 1) << "one journal, one LOCK, one ReadWriteOnce volume";
    EXPECT_EQ(Str(At(d, "/spec/strategy/type")), "Recreate");
    EXPECT_FALSE(Flags(d).count("store")) << "the default, file";
    const json* pvc = Find(Objects(r), "PersistentVolumeClaim", "gangkeeper-data");
    ASSERT_NE(pvc, nullptr);
    EXPECT_EQ((*pvc)["spec"]["accessModes"], json::array({"ReadWriteOnce"}));
    EXPECT_TRUE(OfKind(Objects(r), "PodDisruptionBudget").empty()) << "minAvailable 1 of 1 would block every drain";
  }
  const json& d = TheDeployment(Objects("ha"));
  EXPECT_EQ(d.value("kind", ""), "StatefulSet") << "a volume and a name per replica";
  EXPECT_EQ(d["spec"]["replicas"], 2);
  EXPECT_TRUE(absl::StartsWith(Flags(d).at("store"), "etcd://"));
  EXPECT_TRUE(OfKind(Objects("ha"), "PersistentVolumeClaim").empty()) << "no claim shared by the replicas";
  // Deleting or scaling the set keeps each replica's audit history.
  EXPECT_EQ(Str(At(d, "/spec/persistentVolumeClaimRetentionPolicy/whenDeleted")), "Retain");
  EXPECT_EQ(Str(At(d, "/spec/persistentVolumeClaimRetentionPolicy/whenScaled")), "Retain");
  // The replica's name is its pod's (stable with its claim).
  EXPECT_EQ(Flags(d).at("replica-id"), "$(POD_NAME)");
  bool pod_name = false;
  for (const json& e : d["spec"]["template"]["spec"]["containers"][0].value("env", json::array())) {
    pod_name |= e["name"] == "POD_NAME" && Str(At(e, "/valueFrom/fieldRef/fieldPath")) == "metadata.name";
  }
  EXPECT_TRUE(pod_name) << "--replica-id=$(POD_NAME) needs POD_NAME from metadata.name";
  const json* anti = At(d, "/spec/template/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution");
  ASSERT_NE(anti, nullptr);
  ASSERT_EQ(anti->size(), 1u);
  EXPECT_EQ((*anti)[0]["topologyKey"], "kubernetes.io/hostname");
  EXPECT_TRUE(Selects(At((*anti)[0], "/labelSelector/matchLabels"), At(d, "/spec/template/metadata/labels")));
  const json* pdb = Find(Objects("ha"), "PodDisruptionBudget", "gangkeeper");
  ASSERT_NE(pdb, nullptr);
  EXPECT_EQ((*pdb)["spec"]["minAvailable"], 1);
  const json* etcd_pdb = Find(Objects("ha"), "PodDisruptionBudget", "gangkeeper-etcd");
  ASSERT_NE(etcd_pdb, nullptr);
  EXPECT_EQ((*etcd_pdb)["spec"]["maxUnavailable"], 1) << "two of three members keep the quorum";
  // One pod at a time, the next when the updated one is ready.
  EXPECT_EQ(Str(At(d, "/spec/updateStrategy/type")), "RollingUpdate");
}

// The StatefulSet's pod is the Deployment's but for what several replicas
// on etcd need: nothing hardened in one is forgotten in the other.
TEST_F(ManifestTest, TheHaPodIsTheSingleReplicaPodPlusEtcdAffinityAndItsName) {
  json single = TheDeployment(Objects("cert-manager"))["spec"]["template"];
  json ha = TheDeployment(Objects("ha"))["spec"]["template"];
  ASSERT_TRUE(single.is_object() && ha.is_object());
  auto without = [](json& list, const std::function<bool(const json&)>& drop) {
    json kept = json::array();
    for (const json& e : list) {
      if (!drop(e)) kept.push_back(e);
    }
    list = kept;
  };
  // The data volume: a claim of the Deployment's, a claim template here.
  without(single["spec"]["volumes"], [](const json& v) { return v["name"] == "data"; });
  // Only in ha: anti-affinity, the etcd client Secret, POD_NAME, the flags
  // for etcd.
  ha["spec"].erase("affinity");
  without(ha["spec"]["volumes"], [](const json& v) { return v["name"] == "etcd-client"; });
  json& c = ha["spec"]["containers"][0];
  without(c["volumeMounts"], [](const json& m) { return m["name"] == "etcd-client"; });
  c.erase("env");
  without(c["args"], [](const json& a) {
    const std::string s = a.get<std::string>();
    return absl::StartsWith(s, "--store=") || absl::StartsWith(s, "--etcd-") || absl::StartsWith(s, "--replica-id=");
  });
  EXPECT_EQ(ha, single) << "differs beyond the etcd additions:\n" << json::diff(single, ha).dump(1);
}

// ha's etcd: TLS with client certificates on both ports, gangkeeper's
// flags pointing at files its Secret holds, endpoints that are the
// members' names in etcd's certificate.
TEST_F(ManifestTest, HaTalksTlsWithAClientCertificateToItsOwnEtcd) {
  const std::vector<json>& objects = Objects("ha");
  const json& d = TheDeployment(objects);
  const json& c = d["spec"]["template"]["spec"]["containers"][0];
  const std::map<std::string, std::string> flags = Flags(d);
  // --etcd-ca, --etcd-cert, --etcd-key: files of the client Certificate's
  // Secret (cert-manager writes ca.crt, tls.crt and tls.key).
  const std::map<std::string, std::string> want_files = {
      {"etcd-ca", "ca.crt"}, {"etcd-cert", "tls.crt"}, {"etcd-key", "tls.key"}};
  std::string client_secret;
  for (const auto& [flag, file] : want_files) {
    SCOPED_TRACE(flag);
    ASSERT_TRUE(flags.count(flag));
    const std::string volume = VolumeHolding(c, flags.at(flag));
    const json* v = Volume(d, volume);
    ASSERT_NE(v, nullptr);
    client_secret = Str(At(*v, "/secret/secretName"));
    EXPECT_EQ(fs::path(flags.at(flag)).filename(), file);
  }
  const json* client_cert = nullptr;
  for (const json* cert : OfKind(objects, "Certificate")) {
    if (Str(At(*cert, "/spec/secretName")) == client_secret) client_cert = cert;
  }
  ASSERT_NE(client_cert, nullptr) << client_secret << " comes from no Certificate";
  EXPECT_THAT((*client_cert)["spec"]["usages"], Contains(json("client auth")));
  EXPECT_FALSE(absl::StrContains((*client_cert)["spec"]["usages"].dump(), "server auth"));

  // The members: client-cert-auth on both ports, with files of the member
  // Certificate, issued by the same CA as gangkeeper's client certificate.
  const json* etcd = Find(objects, "StatefulSet", "gangkeeper-etcd");
  ASSERT_NE(etcd, nullptr);
  EXPECT_EQ((*etcd)["spec"]["replicas"], 3) << "a quorum that survives one loss";
  const json& member = (*etcd)["spec"]["template"]["spec"]["containers"][0];
  const std::map<std::string, std::string> etcd_flags = Flags(*etcd);
  EXPECT_EQ(etcd_flags.at("client-cert-auth"), "true");
  EXPECT_EQ(etcd_flags.at("peer-client-cert-auth"), "true");
  EXPECT_TRUE(absl::StartsWith(etcd_flags.at("listen-client-urls"), "https://"));
  EXPECT_TRUE(absl::StartsWith(etcd_flags.at("listen-peer-urls"), "https://"));
  std::string member_secret;
  for (const char* flag : {"trusted-ca-file", "cert-file", "key-file", "peer-trusted-ca-file", "peer-cert-file",
                           "peer-key-file"}) {
    const json* v = Volume(*etcd, VolumeHolding(member, etcd_flags.at(flag)));
    ASSERT_NE(v, nullptr) << flag;
    member_secret = Str(At(*v, "/secret/secretName"));
  }
  const json* member_cert = nullptr;
  for (const json* cert : OfKind(objects, "Certificate")) {
    if (Str(At(*cert, "/spec/secretName")) == member_secret) member_cert = cert;
  }
  ASSERT_NE(member_cert, nullptr) << member_secret;
  EXPECT_EQ(Str(At(*member_cert, "/spec/issuerRef/name")), Str(At(*client_cert, "/spec/issuerRef/name")));
  EXPECT_EQ(etcd_flags.at("peer-cert-allowed-cn"), Str(At(*member_cert, "/spec/commonName")))
      << "gangkeeper's certificate must not open the peer port";
  EXPECT_NE(Str(At(*client_cert, "/spec/commonName")), etcd_flags.at("peer-cert-allowed-cn"));

  // --store names every member, by the name etcd's certificate carries,
  // on the client port.
  const std::string store = flags.at("store");
  ASSERT_TRUE(absl::StartsWith(store, "etcd://"));
  const std::vector<std::string> endpoints = absl::StrSplit(store.substr(7), ',');
  EXPECT_EQ(endpoints.size(), 3u);
  const std::string domain = absl::StrCat(".", Str(At(*etcd, "/spec/serviceName")), ".", kNamespace, ".svc");
  std::set<std::string> members;
  for (const std::string& ep : endpoints) {
    SCOPED_TRACE(ep);
    EXPECT_EQ(PortOf(ep), ContainerPort(member, json("client")));
    const std::string host = ep.substr(0, ep.rfind(':'));
    ASSERT_TRUE(absl::EndsWith(host, domain));
    members.insert(host.substr(0, host.size() - domain.size()));
    EXPECT_THAT((*member_cert)["spec"]["dnsNames"], Contains(json("*" + domain))) << "etcd's certificate names it";
  }
  EXPECT_EQ(members, std::set<std::string>({"gangkeeper-etcd-0", "gangkeeper-etcd-1", "gangkeeper-etcd-2"}));
  // Only gangkeeper's pods (and the members) reach the client port.
  const json* netpol = Find(objects, "NetworkPolicy", "gangkeeper-etcd");
  ASSERT_NE(netpol, nullptr);
  for (const json& rule : (*netpol)["spec"]["ingress"]) {
    ASSERT_TRUE(rule.contains("from")) << "no port of etcd is open to everyone";
    for (const json& p : rule["ports"]) {
      if (p["port"] != 2379) continue;
      for (const json& from : rule["from"]) {
        EXPECT_TRUE(Selects(At(from, "/podSelector/matchLabels"), At(d, "/spec/template/metadata/labels")) ||
                    Selects(At(from, "/podSelector/matchLabels"), At(*etcd, "/spec/template/metadata/labels")))
            << from.dump();
        EXPECT_FALSE(from.contains("namespaceSelector")) << "gangkeeper's namespace only";
      }
    }
  }
}

TEST_F(ManifestTest, NetworkPolicyLetsTheApiServerReachTheWebhookAndPrometheusTheMetrics) {
  for (const std::string& r : kEvery) {
    SCOPED_TRACE(r);
    const json& d = TheDeployment(Objects(r));
    const std::map<std::string, std::string> flags = Flags(d);
    const json* netpol = Find(Objects(r), "NetworkPolicy", "gangkeeper");
    ASSERT_NE(netpol, nullptr);
    EXPECT_EQ((*netpol)["spec"]["policyTypes"], json::array({"Ingress"}));
    bool webhook_from_anywhere = false, metrics_from_prometheus = false;
    std::vector<std::string> webhook_from;  // the ranges of restrict-webhook
    for (const json& rule : (*netpol)["spec"]["ingress"]) {
      std::set<int> ports;
      for (const json& p : rule.value("ports", json::array())) ports.insert(p["port"].get<int>());
      if (!rule.contains("from") && ports.count(PortOf(flags.at("webhook-addr")))) webhook_from_anywhere = true;
      if (rule.contains("from") && ports.count(PortOf(flags.at("webhook-addr")))) {
        for (const json& f : rule["from"]) webhook_from.push_back(f.dump());
      }
      if (rule.contains("from") && ports.count(PortOf(flags.at("api-addr")))) {
        for (const json& f : rule["from"]) {
          metrics_from_prometheus |=
              f.contains("namespaceSelector") && f.contains("podSelector") &&
              absl::StrContains(f["podSelector"].dump(), "prometheus");
        }
      }
      for (int port : ports) {
        EXPECT_TRUE(port == PortOf(flags.at("webhook-addr")) || port == PortOf(flags.at("api-addr"))) << port;
      }
    }
    if (r == "restrict-webhook") {
      // Only from the control plane's range, a placeholder the API server
      // refuses until the operator sets it (schema test above).
      EXPECT_FALSE(webhook_from_anywhere);
      EXPECT_THAT(webhook_from, ::testing::ElementsAre(R"({"ipBlock":{"cidr":"CONTROL_PLANE_CIDR"}})"));
    } else {
      EXPECT_TRUE(webhook_from_anywhere) << "the API server's address differs per cluster (see networkpolicy.yaml)";
      EXPECT_TRUE(webhook_from.empty());
    }
    EXPECT_TRUE(metrics_from_prometheus);
  }
}

// ---- 6. Policies and the example review ----------------------------------------------------

std::set<std::string> YamlFilesIn(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".yaml") out.insert(e.path().filename().string());
  }
  return out;
}

TEST_F(ManifestTest, ThePoliciesConfigMapHoldsEveryPolicyFileUnchanged) {
  const std::string dir = SourceDir() + "/policies";
  const std::set<std::string> files = YamlFilesIn(dir);
  ASSERT_FALSE(files.empty());
  for (const std::string& r : kEvery) {
    SCOPED_TRACE(r);
    const std::vector<const json*> maps = OfKind(Objects(r), "ConfigMap");
    ASSERT_EQ(maps.size(), 1u);
    EXPECT_TRUE(absl::StartsWith(Str(At(*maps[0], "/metadata/name")), "gangkeeper-policies-"))
        << "the hash suffix restarts gangkeeper when the policies change";
    std::set<std::string> keys;
    for (const auto& [k, v] : (*maps[0])["data"].items()) {
      keys.insert(k);
      EXPECT_EQ(v.get<std::string>(), ReadFile(dir + "/" + k)) << k;
    }
    EXPECT_EQ(keys, files) << "policies/Kustomization lists every policies/*.yaml";
  }
}

TEST(WebhookKustomizationTest, ListsEveryConfiguration) {
  const std::string text = ReadFile(SourceDir() + "/webhook/Kustomization");
  for (const std::string& f : YamlFilesIn(SourceDir() + "/webhook")) EXPECT_THAT(text, HasSubstr("- " + f + "\n"));
}

TEST(ExampleReviewTest, CarriesTheSeedsTwoWorkerJobAsTheApiServerWouldSendIt) {
  const json review =
      json::parse(ReadFile(SourceDir() + "/deploy/examples/review-team-a-two-gpu-training.json"), nullptr, false);
  ASSERT_TRUE(review.is_object());
  EXPECT_EQ(review["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(review["kind"], "AdmissionReview");
  const json& req = review["request"];
  EXPECT_EQ(req["operation"], "CREATE");
  EXPECT_EQ(req["kind"], json({{"group", "batch"}, {"version", "v1"}, {"kind", "Job"}}));
  EXPECT_EQ(req["resource"], json({{"group", "batch"}, {"version", "v1"}, {"resource", "jobs"}}));
  absl::StatusOr<std::vector<std::string>> docs = testing::YamlFileToJson(
      SourceDir() + "/test/fixtures/seed/seed000-L811-namespace-namespace-resourceflavor-clusterqueue.yaml");
  ASSERT_THAT(docs, IsOk());
  json seed_job;
  for (const std::string& d : *docs) {
    json j = json::parse(d);
    if (j["kind"] == "Job") seed_job = j;
  }
  ASSERT_TRUE(seed_job.is_object());
  // The API server fills uid and creationTimestamp before admission.
  json object = req["object"];
  EXPECT_TRUE(object["metadata"].contains("uid"));
  object["metadata"].erase("uid");
  object["metadata"].erase("creationTimestamp");
  EXPECT_EQ(object, seed_job);
  EXPECT_EQ(req["name"], seed_job["metadata"]["name"]);
  EXPECT_EQ(req["namespace"], seed_job["metadata"]["namespace"]);
  EXPECT_EQ(seed_job["spec"]["parallelism"], 2);
}

}  // namespace
}  // namespace gangkeeper::deploy_test
