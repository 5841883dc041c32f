// gangkeeper CLI: what the client subcommands (get, describe, apply, audit,
// stop, resume) share: the server selection flags, the API client and its
// error sentences. Private to src/cli.
//
// Server selection, kubectl-like: --server (GANGKEEPER_SERVER, default
// https://localhost:8443), --ca (GANGKEEPER_CA, default certs/dev/ca.crt),
// and a bearer token from --token (GANGKEEPER_TOKEN), else --token-file
// (GANGKEEPER_TOKEN_FILE), else, for a server on this machine, the
// development token ./run.sh writes to data/dev-token, else the token of
// the current context of --kubeconfig (KUBECONFIG, ~/.kube/config), as
// kubectl sends it, for a server started with --api-auth kubernetes|both.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gangkeeper/httpc/backoff.h"
#include "gangkeeper/httpc/pool.h"
#include "nlohmann/json.hpp"
#include "src/cli/flags.h"

namespace gangkeeper::cli {

// Where ./run.sh keeps the development admin token (relative to the
// repository root, where run.sh runs the server).
inline constexpr char kDevTokenFile[] = "data/dev-token";

struct ClientFlags {
  std::string server;
  std::string token;
  std::string token_file;
  std::string kubeconfig;  // "": KUBECONFIG, else ~/.kube/config
  std::string ca;
  std::string output = "table";
};

// --server, --token, --token-file, --ca; with `output_help` also
// -o/--output (its help names the formats the command takes).
void AddClientFlags(FlagSet& flags, ClientFlags* f, const std::string& output_help = "");

// gangkeeper's own API over the HTTP client layer: GET, POST and PUT with
// the bearer token, JSON answers. A call is tried up to 3 times within 10 s
// on connection errors, 429 and 5xx (and 409 for GET), waiting with full
// jitter and at least the answer's Retry-After. A failure's message is one
// sentence for a person: the API's own message in full (with its field),
// or what to check when the server cannot be reached.
class ApiClient {
 public:
  ApiClient(std::unique_ptr<httpc::Pool> pool, std::string server, std::string ca, std::string token)
      : pool_(std::move(pool)), server_(std::move(server)), ca_(std::move(ca)), token_(std::move(token)) {}

  absl::StatusOr<nlohmann::json> Get(const std::string& path) { return Call("GET", path, "", "", true); }
  absl::StatusOr<nlohmann::json> Post(const std::string& path, const std::string& body,
                                      const std::string& content_type) {
    return Call("POST", path, body, content_type, false);
  }
  absl::StatusOr<nlohmann::json> Put(const std::string& path, const nlohmann::json& body) {
    return Call("PUT", path, body.dump(), "application/json", false);
  }

 private:
  absl::StatusOr<nlohmann::json> Call(const std::string& method, const std::string& path, const std::string& body,
                                      const std::string& content_type, bool retry_conflict);

  const std::unique_ptr<httpc::Pool> pool_;
  const std::string server_;
  const std::string ca_;
  const std::string token_;
  httpc::Backoff backoff_{httpc::BackoffPolicy{}};
  httpc::Sleeper sleeper_;
};

// The sentence for an HTTP error answer: the API's {"error":{message,
// field}} in full, or the body when it is not that.
std::string ApiErrorSentence(int status, const std::string& body);

// A client for the API listener; prints the problem and returns null.
std::unique_ptr<ApiClient> Connect(const ClientFlags& f);

// GET `path`; prints the error and returns nullopt on failure.
std::optional<nlohmann::json> Fetch(ApiClient& client, const std::string& path);

// Prints "gangkeeper: MESSAGE" to stderr and returns `code`.
int Complain(int code, const std::string& message);

// A member as text: strings as they are, numbers and the rest as JSON, ""
// when absent or null.
std::string Field(const nlohmann::json& j, const char* key);

// A member by reference (null when absent, which iterates as empty), so
// that a range-for never runs over a destroyed temporary.
const nlohmann::json& Member(const nlohmann::json& j, const char* key);

// The API path of one quota object (or of its kind when name is empty):
// kind is a Kind (ClusterQueue) or a plural (clusterqueues).
std::optional<std::string> QuotaPath(const std::string& kind, const std::string& ns, const std::string& name);

// The plural a kind's name, plural or short name stands for
// ("cq" -> "clusterqueues"), as kubectl takes them; nullopt for others.
std::optional<std::string> ResourceKind(const std::string& word);  // client_commands.cc

}  // namespace gangkeeper::cli
