// Tests for the API server configuration: kubeconfig files (contexts,
// clusters, users, files relative to the kubeconfig, server URLs, refusals
// naming the field) and the in-cluster service-account configuration.
// Only temporary files; the environment is restored after each test.
#include "gangkeeper/kube/config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::kube {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::gangkeeper::testing::TempDir;
using ::testing::HasSubstr;

constexpr char kCaPem[] = "-----BEGIN CERTIFICATE-----\nMIIBfakeCA\n-----END CERTIFICATE-----\n";
constexpr char kCertPem[] = "-----BEGIN CERTIFICATE-----\nMIIBfakeClient\n-----END CERTIFICATE-----\n";
constexpr char kKeyPem[] = "-----BEGIN PRIVATE KEY-----\nMIGHfakeKey\n-----END PRIVATE KEY-----\n";

void WriteFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

std::string B64(const std::string& s) { return absl::Base64Escape(s); }

// A one-context kubeconfig; `cluster_extra` and `user_extra` are YAML lines
// (indented by six spaces) added to the cluster and user maps.
std::string Kubeconfig(const std::string& server, const std::string& cluster_extra, const std::string& user_extra,
                       const std::string& context_extra = "") {
  return absl::StrCat(
      "apiVersion: v1\n"
      "kind: Config\n"
      "current-context: main\n"
      "clusters:\n"
      "  - name: prod\n"
      "    cluster:\n"
      "      server: ",
      server, "\n", cluster_extra,
      "contexts:\n"
      "  - name: main\n"
      "    context:\n"
      "      cluster: prod\n"
      "      user: admin\n",
      context_extra,
      "users:\n"
      "  - name: admin\n"
      "    user:\n",
      user_extra.empty() ? "      token: abc\n" : user_extra);
}

std::string CaData() { return absl::StrCat("      certificate-authority-data: ", B64(kCaPem), "\n"); }

class KubeconfigTest : public ::testing::Test {
 protected:
  // Writes `text` as DIR/kube/config and loads it.
  absl::StatusOr<ClusterConfig> Load(const std::string& text, const std::string& context = "") {
    path_ = dir_.File("kube/config");
    WriteFile(path_, text);
    return LoadKubeconfig(path_, context);
  }

  TempDir dir_;
  std::string path_;
};

TEST_F(KubeconfigTest, CertificateAuthorityDataAndToken) {
  auto c = Load(Kubeconfig("https://10.1.2.3:6443", CaData(), "      token: sekret-token\n",
                           "      namespace: team-a\n"));
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->host, "10.1.2.3");
  EXPECT_EQ(c->port, 6443);
  EXPECT_EQ(c->base_path, "");
  EXPECT_EQ(c->ca_pem, kCaPem);
  EXPECT_EQ(c->token, "sekret-token");
  EXPECT_EQ(c->token_file, "");
  EXPECT_EQ(c->client_cert_pem, "");
  EXPECT_EQ(c->client_key_pem, "");
  EXPECT_EQ(c->tls_server_name, "");
  EXPECT_EQ(c->namespace_name, "team-a");
  EXPECT_THAT(c->source, HasSubstr(path_));
  EXPECT_THAT(c->source, HasSubstr("main"));
}

TEST_F(KubeconfigTest, RelativeFilesAreRelativeToTheKubeconfigDirectory) {
  WriteFile(dir_.File("kube/pki/ca.crt"), kCaPem);
  WriteFile(dir_.File("kube/pki/client.crt"), kCertPem);
  WriteFile(dir_.File("kube/pki/client.key"), kKeyPem);
  WriteFile(dir_.File("kube/token"), "file-token\n");
  // The working directory holds none of these files, so a name resolved
  // against it would fail to load.
  ASSERT_NE(std::filesystem::current_path(), std::filesystem::path(dir_.File("kube")));
  auto c = Load(Kubeconfig("https://api.example.com:6443",
                           "      certificate-authority: pki/ca.crt\n"
                           "      tls-server-name: kubernetes.default.svc\n",
                           "      client-certificate: pki/client.crt\n"
                           "      client-key: pki/client.key\n"
                           "      tokenFile: token\n"));
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->ca_pem, kCaPem);
  EXPECT_EQ(c->client_cert_pem, kCertPem);
  EXPECT_EQ(c->client_key_pem, kKeyPem);
  EXPECT_EQ(std::filesystem::path(c->token_file), std::filesystem::path(dir_.File("kube/token")));
  EXPECT_TRUE(std::filesystem::path(c->token_file).is_absolute()) << c->token_file;
  EXPECT_EQ(c->tls_server_name, "kubernetes.default.svc");
  EXPECT_EQ(c->host, "api.example.com");
}

TEST_F(KubeconfigTest, AbsoluteFilesAndClientCertificateData) {
  WriteFile(dir_.File("elsewhere/ca.pem"), kCaPem);
  auto c = Load(Kubeconfig("https://api.example.com",
                           absl::StrCat("      certificate-authority: ", dir_.File("elsewhere/ca.pem"), "\n"),
                           absl::StrCat("      client-certificate-data: ", B64(kCertPem), "\n",
                                        "      client-key-data: ", B64(kKeyPem), "\n")));
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->ca_pem, kCaPem);
  EXPECT_EQ(c->client_cert_pem, kCertPem);
  EXPECT_EQ(c->client_key_pem, kKeyPem);
  EXPECT_EQ(c->token, "");
}

TEST_F(KubeconfigTest, NamedContextOverridesCurrentContext) {
  const std::string text = absl::StrCat(
      "apiVersion: v1\nkind: Config\ncurrent-context: dev\n"
      "clusters:\n"
      "  - name: dev-cluster\n    cluster:\n      server: https://dev.example.com:6443\n",
      "      certificate-authority-data: ", B64("DEV CA"), "\n",
      "  - name: prod-cluster\n    cluster:\n      server: https://prod.example.com:7443\n",
      "      certificate-authority-data: ", B64("PROD CA"), "\n",
      "contexts:\n"
      "  - name: dev\n    context: {cluster: dev-cluster, user: dev-user, namespace: sandbox}\n"
      "  - name: prod\n    context: {cluster: prod-cluster, user: prod-user, namespace: gangkeeper}\n"
      "users:\n"
      "  - name: dev-user\n    user: {token: dev-token}\n"
      "  - name: prod-user\n    user: {token: prod-token}\n");
  auto current = Load(text);
  ASSERT_THAT(current, IsOk());
  EXPECT_EQ(current->host, "dev.example.com");
  EXPECT_EQ(current->port, 6443);
  EXPECT_EQ(current->ca_pem, "DEV CA");
  EXPECT_EQ(current->token, "dev-token");
  EXPECT_EQ(current->namespace_name, "sandbox");

  auto named = LoadKubeconfig(path_, "prod");
  ASSERT_THAT(named, IsOk());
  EXPECT_EQ(named->host, "prod.example.com");
  EXPECT_EQ(named->port, 7443);
  EXPECT_EQ(named->ca_pem, "PROD CA");
  EXPECT_EQ(named->token, "prod-token");
  EXPECT_EQ(named->namespace_name, "gangkeeper");
  EXPECT_THAT(named->source, HasSubstr("prod"));

  EXPECT_THAT(LoadKubeconfig(path_, "staging"), StatusIs(absl::StatusCode::kInvalidArgument,
                                                         "no context named \"staging\""));
}

struct ServerCase {
  std::string server;
  std::string host;
  int port;
  std::string base_path;
};

class ServerUrlTest : public KubeconfigTest, public ::testing::WithParamInterface<ServerCase> {};

TEST_P(ServerUrlTest, Parses) {
  const ServerCase& want = GetParam();
  auto c = Load(Kubeconfig(want.server, CaData(), ""));
  ASSERT_THAT(c, IsOk()) << want.server;
  EXPECT_EQ(c->host, want.host);
  EXPECT_EQ(c->port, want.port);
  EXPECT_EQ(c->base_path, want.base_path);
}

INSTANTIATE_TEST_SUITE_P(
    Servers, ServerUrlTest,
    ::testing::Values(ServerCase{"https://api.example.com:6443", "api.example.com", 6443, ""},
                      ServerCase{"https://api.example.com", "api.example.com", 443, ""},
                      ServerCase{"https://api.example.com/", "api.example.com", 443, ""},
                      ServerCase{"https://127.0.0.1:8443", "127.0.0.1", 8443, ""},
                      ServerCase{"https://[::1]:6443", "::1", 6443, ""},
                      ServerCase{"https://[fd00:10::1]", "fd00:10::1", 443, ""},
                      ServerCase{"https://rancher.example.com/k8s/clusters/c-abc", "rancher.example.com", 443,
                                 "/k8s/clusters/c-abc"},
                      ServerCase{"https://[::1]:9443/proxy/", "::1", 9443, "/proxy"}));

struct BadServerCase {
  std::string server;
  std::string message;
};

class BadServerUrlTest : public KubeconfigTest, public ::testing::WithParamInterface<BadServerCase> {};

TEST_P(BadServerUrlTest, IsRefusedNamingTheField) {
  auto c = Load(Kubeconfig(GetParam().server, CaData(), ""));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, "clusters[prod].cluster.server"));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(Servers, BadServerUrlTest,
                         ::testing::Values(BadServerCase{"http://api.example.com:8080", "not an https:// URL"},
                                           BadServerCase{"api.example.com:6443", "not an https:// URL"},
                                           BadServerCase{"\"\"", "not an https:// URL"},
                                           BadServerCase{"https://api.example.com:99999", "bad port"},
                                           BadServerCase{"https://api.example.com:http", "bad port"},
                                           BadServerCase{"https://[::1:6443", "unclosed ["},
                                           BadServerCase{"https://:6443", "no host"}));

TEST_F(KubeconfigTest, MissingContextClusterOrUserIsNamed) {
  // No current-context and none named.
  EXPECT_THAT(Load("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, "current-context"));

  std::string text = Kubeconfig("https://api.example.com", CaData(), "");
  EXPECT_THAT(Load(text, "nope"), StatusIs(absl::StatusCode::kInvalidArgument, "no context named \"nope\""));

  std::string no_cluster = text;
  no_cluster.replace(no_cluster.find("cluster: prod\n"), 14, "cluster: gone\n");
  auto c = Load(no_cluster);
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, "no cluster named \"gone\""));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, path_));

  std::string no_user = text;
  no_user.replace(no_user.find("user: admin\n"), 12, "user: ghost\n");
  EXPECT_THAT(Load(no_user), StatusIs(absl::StatusCode::kInvalidArgument, "no user named \"ghost\""));
}

TEST_F(KubeconfigTest, InsecureSkipTlsVerifyIsRefused) {
  auto c = Load(Kubeconfig("https://api.example.com", "      insecure-skip-tls-verify: true\n", ""));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, "clusters[prod].cluster.insecure-skip-tls-verify"));
  // Even with a CA next to it.
  c = Load(Kubeconfig("https://api.example.com", absl::StrCat(CaData(), "      insecure-skip-tls-verify: true\n"),
                      ""));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, "insecure-skip-tls-verify"));
  // false is what gangkeeper does anyway.
  c = Load(Kubeconfig("https://api.example.com", absl::StrCat(CaData(), "      insecure-skip-tls-verify: false\n"),
                      ""));
  EXPECT_THAT(c, IsOk());
}

TEST_F(KubeconfigTest, ExecAndAuthProviderPluginsAreRefused) {
  auto c = Load(Kubeconfig("https://api.example.com", CaData(),
                           "      exec:\n"
                           "        apiVersion: client.authentication.k8s.io/v1\n"
                           "        command: aws\n"
                           "        args: [eks, get-token]\n"));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, "users[admin].user"));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, "exec"));
  c = Load(Kubeconfig("https://api.example.com", CaData(),
                      "      auth-provider:\n"
                      "        name: oidc\n"));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, "auth-provider"));
}

TEST_F(KubeconfigTest, NoCertificateAuthorityIsRefused) {
  auto c = Load(Kubeconfig("https://api.example.com", "", ""));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, "clusters[prod].cluster"));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, "certificate-authority"));
  // A named CA file that is not there.
  c = Load(Kubeconfig("https://api.example.com", "      certificate-authority: missing-ca.crt\n", ""));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, "certificate-authority"));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, dir_.File("kube/missing-ca.crt")));
  // certificate-authority-data that is not base64.
  c = Load(Kubeconfig("https://api.example.com", "      certificate-authority-data: \"***not base64***\"\n", ""));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, "certificate-authority-data: not valid base64"));
}

TEST_F(KubeconfigTest, ClientCertificateWithoutKeyIsRefused) {
  auto c = Load(Kubeconfig("https://api.example.com", CaData(),
                           absl::StrCat("      client-certificate-data: ", B64(kCertPem), "\n")));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, "users[admin].user"));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, "both the certificate and the key"));
  c = Load(Kubeconfig("https://api.example.com", CaData(),
                      absl::StrCat("      client-key-data: ", B64(kKeyPem), "\n")));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, "both the certificate and the key"));
  // A key file that cannot be read.
  WriteFile(dir_.File("kube/client.crt"), kCertPem);
  c = Load(Kubeconfig("https://api.example.com", CaData(),
                      "      client-certificate: client.crt\n      client-key: client.key\n"));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument, "client-key"));
}

TEST_F(KubeconfigTest, NotYamlOrNotAKubeconfig) {
  EXPECT_THAT(Load("clusters: [\n  - {name: x\n"), StatusIs(absl::StatusCode::kInvalidArgument, "not YAML"));
  EXPECT_THAT(Load("- just\n- a list\n"), StatusIs(absl::StatusCode::kInvalidArgument, "not a kubeconfig"));
  EXPECT_THAT(Load("just a string\n"), StatusIs(absl::StatusCode::kInvalidArgument));
  // contexts as a map instead of a list: the context is not found.
  EXPECT_THAT(Load("current-context: main\ncontexts: {main: {cluster: prod}}\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, "no context named \"main\""));
  EXPECT_THAT(LoadKubeconfig(dir_.File("does-not-exist")), StatusIs(absl::StatusCode::kNotFound, "kubeconfig"));
}

// ---- In-cluster ----

// Sets (or, with nullopt, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name); old != nullptr) old_ = old;
    if (value.has_value()) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

class InClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(dir_.File("sa/ca.crt"), kCaPem);
    WriteFile(dir_.File("sa/token"), "eyJhbGciOi.sa-token\n");
    WriteFile(dir_.File("sa/namespace"), "gangkeeper-system\n");
  }
  TempDir dir_;
};

TEST_F(InClusterTest, OutsideAPodIsFailedPrecondition) {
  ScopedEnv host("KUBERNETES_SERVICE_HOST", std::nullopt);
  ScopedEnv port("KUBERNETES_SERVICE_PORT", std::nullopt);
  EXPECT_THAT(InClusterConfig(dir_.File("sa")),
              StatusIs(absl::StatusCode::kFailedPrecondition, "KUBERNETES_SERVICE_HOST"));
  {
    ScopedEnv only_host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
    EXPECT_THAT(InClusterConfig(dir_.File("sa")), StatusIs(absl::StatusCode::kFailedPrecondition));
  }
  {
    ScopedEnv empty_host("KUBERNETES_SERVICE_HOST", "");
    ScopedEnv only_port("KUBERNETES_SERVICE_PORT", "443");
    EXPECT_THAT(InClusterConfig(dir_.File("sa")), StatusIs(absl::StatusCode::kFailedPrecondition));
  }
}

TEST_F(InClusterTest, ReadsTheServiceAccount) {
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "6443");
  auto c = InClusterConfig(dir_.File("sa"));
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->host, "10.96.0.1");
  EXPECT_EQ(c->port, 6443);
  EXPECT_EQ(c->base_path, "");
  EXPECT_EQ(c->ca_pem, kCaPem);
  // The token is read from the file on every change (bound tokens rotate),
  // never frozen into the configuration.
  EXPECT_EQ(c->token_file, dir_.File("sa/token"));
  EXPECT_EQ(c->namespace_name, "gangkeeper-system");
  EXPECT_THAT(c->source, HasSubstr(dir_.File("sa")));
}

TEST_F(InClusterTest, Ipv6ServiceHostIsKeptWithoutBrackets) {
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "fd00:10:96::1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  auto c = InClusterConfig(dir_.File("sa"));
  ASSERT_THAT(c, IsOk());
  EXPECT_EQ(c->host, "fd00:10:96::1");
  EXPECT_EQ(c->port, 443);
}

TEST_F(InClusterTest, BadPortOrMissingFilesAreErrors) {
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  {
    ScopedEnv port("KUBERNETES_SERVICE_PORT", "https");
    EXPECT_THAT(InClusterConfig(dir_.File("sa")),
                StatusIs(absl::StatusCode::kInvalidArgument, "KUBERNETES_SERVICE_PORT"));
  }
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  EXPECT_THAT(InClusterConfig(dir_.File("no-such-dir")), StatusIs(absl::StatusCode::kNotFound, "CA"));
  std::filesystem::remove(dir_.File("sa/token"));
  EXPECT_THAT(InClusterConfig(dir_.File("sa")), StatusIs(absl::StatusCode::kNotFound, "token"));
}

}  // namespace
}  // namespace gangkeeper::kube
