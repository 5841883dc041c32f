// gangkeeper: in-cluster and kubeconfig configuration (see config.h).
#include "gangkeeper/kube/config.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace gangkeeper::kube {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(what, ": cannot read ", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// "https://host[:port][/prefix]", host possibly "[v6]".
absl::Status ParseServer(const std::string& server, const std::string& field, ClusterConfig* c) {
  absl::string_view rest = server;
  if (!absl::ConsumePrefix(&rest, "https://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": \"", server, "\" is not an https:// URL; gangkeeper talks to the API server over TLS only"));
  }
  absl::string_view authority = rest;
  if (size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    authority = rest.substr(0, slash);
    c->base_path = std::string(absl::StripSuffix(rest.substr(slash), "/"));
  }
  absl::string_view port_text;
  if (absl::ConsumePrefix(&authority, "[")) {
    size_t close = authority.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": \"", server, "\" has an unclosed [ in its host"));
    }
    c->host = std::string(authority.substr(0, close));
    absl::string_view after = authority.substr(close + 1);
    if (absl::ConsumePrefix(&after, ":")) port_text = after;
  } else if (size_t colon = authority.rfind(':'); colon != absl::string_view::npos) {
    c->host = std::string(authority.substr(0, colon));
    port_text = authority.substr(colon + 1);
  } else {
    c->host = std::string(authority);
  }
  if (c->host.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": \"", server, "\" has no host"));
  c->port = 443;
  if (!port_text.empty() && (!absl::SimpleAtoi(port_text, &c->port) || c->port <= 0 || c->port > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": \"", server, "\" has a bad port"));
  }
  return absl::OkStatus();
}

const YAML::Node FindNamed(const YAML::Node& list, const std::string& name) {
  if (!list || !list.IsSequence()) return YAML::Node();
  for (const YAML::Node& item : list) {
    if (item.IsMap() && item["name"] && item["name"].IsScalar() && item["name"].as<std::string>() == name) {
      return item;
    }
  }
  return YAML::Node();
}

std::string Scalar(const YAML::Node& map, const char* key) {
  if (!map || !map.IsMap()) return "";
  const YAML::Node v = map[key];
  return v && v.IsScalar() ? v.as<std::string>() : "";
}

// `data` (base64) or the file `file_field` names, relative to `dir`.
absl::StatusOr<std::string> DataOrFile(const YAML::Node& map, const char* data_field, const char* file_field,
                                       const std::string& where, const std::filesystem::path& dir) {
  if (std::string data = Scalar(map, data_field); !data.empty()) {
    std::string decoded;
    if (!absl::Base64Unescape(data, &decoded)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".", data_field, ": not valid base64"));
    }
    return decoded;
  }
  if (std::string file = Scalar(map, file_field); !file.empty()) {
    std::filesystem::path p(file);
    if (p.is_relative()) p = dir / p;
    return ReadFile(p.string(), absl::StrCat(where, ".", file_field));
  }
  return std::string();
}

absl::StatusOr<ClusterConfig> ParseKubeconfig(const YAML::Node& root, const std::string& path,
                                              const std::string& context_name) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::string ctx_name = context_name.empty() ? Scalar(root, "current-context") : context_name;
  if (ctx_name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": current-context is empty; set it or name a context"));
  }
  const YAML::Node ctx = FindNamed(root["contexts"], ctx_name)["context"];
  if (!ctx || !ctx.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": contexts: no context named \"", ctx_name, "\""));
  }
  ClusterConfig c;
  c.source = absl::StrCat(path, " (context ", ctx_name, ")");
  c.namespace_name = Scalar(ctx, "namespace");
  const std::string cluster_name = Scalar(ctx, "cluster");
  const YAML::Node cluster = FindNamed(root["clusters"], cluster_name)["cluster"];
  if (!cluster || !cluster.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": clusters: no cluster named \"", cluster_name, "\" (context ", ctx_name, ")"));
  }
  const std::string where_cluster = absl::StrCat("clusters[", cluster_name, "].cluster");
  if (Scalar(cluster, "insecure-skip-tls-verify") == "true") {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", where_cluster,
        ".insecure-skip-tls-verify: gangkeeper always verifies the API server; give certificate-authority-data"));
  }
  if (absl::Status s = ParseServer(Scalar(cluster, "server"), absl::StrCat(path, ": ", where_cluster, ".server"), &c);
      !s.ok()) {
    return s;
  }
  c.tls_server_name = Scalar(cluster, "tls-server-name");
  absl::StatusOr<std::string> ca =
      DataOrFile(cluster, "certificate-authority-data", "certificate-authority", where_cluster, dir);
  if (!ca.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", ca.status().message()));
  c.ca_pem = *std::move(ca);
  if (c.ca_pem.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", where_cluster,
        ": no certificate-authority or certificate-authority-data; gangkeeper needs the CA to verify the server"));
  }

  const std::string user_name = Scalar(ctx, "user");
  const YAML::Node user = FindNamed(root["users"], user_name)["user"];
  if (!user_name.empty() && (!user || !user.IsMap())) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": users: no user named \"", user_name, "\""));
  }
  if (user && user.IsMap()) {
    const std::string where_user = absl::StrCat("users[", user_name, "].user");
    if (user["exec"] || user["auth-provider"]) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": ", where_user,
          ": exec and auth-provider plugins are not supported; use a token, tokenFile or a client certificate"));
    }
    c.token = Scalar(user, "token");
    if (std::string file = Scalar(user, "tokenFile"); !file.empty()) {
      std::filesystem::path p(file);
      if (p.is_relative()) p = dir / p;
      c.token_file = p.string();
    }
    absl::StatusOr<std::string> cert =
        DataOrFile(user, "client-certificate-data", "client-certificate", where_user, dir);
    if (!cert.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", cert.status().message()));
    absl::StatusOr<std::string> key = DataOrFile(user, "client-key-data", "client-key", where_user, dir);
    if (!key.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", key.status().message()));
    c.client_cert_pem = *std::move(cert);
    c.client_key_pem = *std::move(key);
    if (c.client_cert_pem.empty() != c.client_key_pem.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", where_user, ": a client certificate needs both the certificate and the key"));
    }
  }
  return c;
}

}  // namespace

absl::StatusOr<ClusterConfig> InClusterConfig(const std::string& account_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return absl::FailedPreconditionError(
        "not running in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set; use --kube KUBECONFIG");
  }
  ClusterConfig c;
  c.host = host;
  if (!absl::SimpleAtoi(port, &c.port) || c.port <= 0 || c.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("KUBERNETES_SERVICE_PORT: \"", port, "\" is not a port"));
  }
  absl::StatusOr<std::string> ca = ReadFile(account_dir + "/ca.crt", "service account CA");
  if (!ca.ok()) return ca.status();
  c.ca_pem = *std::move(ca);
  c.token_file = account_dir + "/token";
  absl::StatusOr<std::string> token = ReadFile(c.token_file, "service account token");
  if (!token.ok()) return token.status();
  if (absl::StatusOr<std::string> ns = ReadFile(account_dir + "/namespace", "namespace"); ns.ok()) {
    c.namespace_name = std::string(absl::StripAsciiWhitespace(*ns));
  }
  c.source = absl::StrCat("in-cluster (", account_dir, ")");
  return c;
}

absl::StatusOr<ClusterConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  absl::StatusOr<std::string> text = ReadFile(path, "kubeconfig");
  if (!text.ok()) return text.status();
  YAML::Node root;
  try {  // yaml-cpp reports errors by exception; they stop here
    root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not YAML: ", e.what()));
  }
  if (!root.IsMap()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a kubeconfig (expected a map)"));
  try {
    return ParseKubeconfig(root, path, context);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what()));
  }
}

}  // namespace gangkeeper::kube
