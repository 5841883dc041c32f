// gangkeeper store/etcd: the etcd v3 JSON-gateway client (see client.h):
// endpoint parsing, option checks and Create(). The client is in pieces by
// concern, all private to src/store/etcd/:
//   gateway.{h,cc}    the gateway's JSON: base64, int64-as-string, errors
//   transport.{h,cc}  endpoints, a connection pool (httpc) per endpoint, one
//                     JSON POST (JsonPost), failover
//   http_client.h     HttpEtcdClient, the Client on a Transport
//   kv.cc, lease.cc   its calls
//   watch.{h,cc}      streamed watches on their own connection and thread
#include "gangkeeper/store/etcd/client.h"

#include <signal.h>

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gangkeeper/base/status_macros.h"
#include "gangkeeper/httpc/pool.h"
#include "src/store/etcd/http_client.h"
#include "src/store/etcd/transport.h"
#include "src/store/etcd/watch.h"

namespace gangkeeper::etcd {

absl::StatusOr<std::unique_ptr<Watch>> HttpEtcdClient::StartWatch(
    const std::string& key, const WatchOptions& options,
    std::function<void(const std::vector<WatchEvent>& events, int64_t revision)> on_events,
    std::function<void(const absl::Status& why)> on_end) {
  return StartHttpWatch(*transport_, key, options, std::move(on_events), std::move(on_end));
}

absl::StatusOr<std::vector<std::string>> ParseEndpoints(absl::string_view url) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd URL \"", absl::CHexEscape(url), "\": ", why, " (want etcd://host:port[,host:port...])"));
  };
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "etcd://")) return bad("scheme: must be etcd://");
  if (rest.empty()) return bad("no endpoint after etcd://");
  std::vector<std::string> out;
  int n = 0;
  for (absl::string_view part : absl::StrSplit(rest, ',')) {
    ++n;
    const std::string what = absl::StrCat("endpoint ", n, " \"", absl::CHexEscape(part), "\"");
    if (part.empty()) return bad(absl::StrCat("endpoint ", n, ": empty"));
    absl::StatusOr<Endpoint> ep = SplitHostPort(part, what);
    if (!ep.ok()) return bad(ep.status().message());
    if (std::find(out.begin(), out.end(), part) != out.end()) return bad(absl::StrCat(what, ": given twice"));
    out.emplace_back(part);
  }
  return out;
}

std::string PrefixEnd(absl::string_view prefix) {
  std::string end(prefix);
  // Drop trailing 0xff bytes (they cannot be incremented), then increment
  // the last byte. Nothing left: every key from `prefix` on ("\0", as in
  // etcd's clientv3).
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) return std::string(1, '\0');
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

absl::StatusOr<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  if (options.endpoints.empty()) return absl::InvalidArgumentError("etcd client: endpoints: none given");
  std::vector<Endpoint> endpoints;
  for (size_t i = 0; i < options.endpoints.size(); ++i) {
    GK_ASSIGN_OR_RETURN(
        Endpoint ep, SplitHostPort(options.endpoints[i], absl::StrCat("etcd client: endpoints[", i, "] \"",
                                                                      absl::CHexEscape(options.endpoints[i]), "\"")));
    endpoints.push_back(std::move(ep));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd client: timeout: ", absl::FormatDuration(options.timeout), " is not positive"));
  }
  if (options.max_attempts < 1) {
    return absl::InvalidArgumentError(absl::StrCat("etcd client: max_attempts: ", options.max_attempts, " is under 1"));
  }
  if (options.backoff < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("etcd client: backoff: negative");
  }
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError("etcd client: cert_file and key_file: give both or neither");
  }
  if (!options.cert_file.empty() && options.ca_file.empty()) {
    return absl::InvalidArgumentError("etcd client: cert_file: a client certificate needs TLS (set ca_file)");
  }
  if (!options.ca_file.empty()) GK_RETURN_IF_ERROR(httpc::CheckPemFile(options.ca_file, "etcd client: ca_file", false));
  if (!options.cert_file.empty()) {
    GK_RETURN_IF_ERROR(httpc::CheckPemFile(options.cert_file, "etcd client: cert_file", false));
    GK_RETURN_IF_ERROR(httpc::CheckPemFile(options.key_file, "etcd client: key_file", true));
  }
  if (!options.ca_file.empty()) {
    // OpenSSL writes to the socket with write(), not send(MSG_NOSIGNAL): a
    // write after etcd hung up raises SIGPIPE, whose default action ends the
    // process. Ignored unless the program installed its own handler.
    struct sigaction current {};
    if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
  }
  GK_ASSIGN_OR_RETURN(std::unique_ptr<Transport> transport, Transport::Create(std::move(options), std::move(endpoints)));
  return std::unique_ptr<Client>(new HttpEtcdClient(std::move(transport)));
}

}  // namespace gangkeeper::etcd
