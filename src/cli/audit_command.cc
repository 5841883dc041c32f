// gangkeeper CLI: `gangkeeper audit`, the audit events from the API, with
// filters and --follow (`audit verify DATA_DIR`, the offline check, is
// audit_verify.cc).
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/httpc/request.h"
#include "nlohmann/json.hpp"
#include "src/cli/client.h"
#include "src/cli/commands.h"
#include "src/cli/flags.h"
#include "src/cli/output.h"

namespace gangkeeper::cli {
namespace {

using nlohmann::json;

// Prints the audit events matching `query` (a query string without limit
// and cursor), page by page; with `follow`, keeps asking for new ones every
// second until `follow_for` (0: until interrupted).
int AuditPrint(ApiClient& client, const ClientFlags& f, const std::string& query, int64_t limit, bool follow,
          absl::Duration follow_for) {
  std::string cursor;
  int64_t printed = 0;
  bool header = f.output == "table";
  const absl::Time give_up = follow_for > absl::ZeroDuration() ? base::RealClock().Now() + follow_for : absl::InfiniteFuture();
  while (true) {
    const int64_t page = std::min<int64_t>(1000, limit - printed);
    if (page <= 0) return 0;
    std::optional<json> j = Fetch(client, absl::StrCat("/v1/audit?", query, query.empty() ? "" : "&", "limit=", page,
                                                       cursor.empty() ? "" : "&cursor=" + cursor));
    if (!j.has_value()) return 1;
    std::vector<std::vector<std::string>> rows;
    if (header) rows.push_back({"SEQ", "TIME", "ACTOR", "ACTION", "OBJECT", "CLUSTERQUEUE", "REASON"});
    header = false;
    for (const json& e : (*j)["items"]) {
      ++printed;
      cursor = Field(e, "seq");
      if (f.output == "json") {
        std::printf("%s\n", e.dump().c_str());
        continue;
      }
      if (f.output == "yaml") {
        std::printf("---\n%s", FormatYaml(e).c_str());
        continue;
      }
      const json& o = e.contains("object") ? e["object"] : json::object();
      std::string object = Field(o, "kind");
      if (!Field(o, "name").empty()) {
        absl::StrAppend(&object, " ", Field(o, "namespace"), Field(o, "namespace").empty() ? "" : "/", Field(o, "name"));
      }
      // A review's user is what its sender wrote (DESIGN §8).
      const auto claimed = e.find("actorClaimed");
      const bool is_claimed = claimed != e.end() && claimed->is_boolean() && claimed->get<bool>();
      const std::string actor = Field(e, "actor") + (is_claimed ? " (claimed)" : "");
      rows.push_back({Field(e, "seq"), Field(e, "time"), actor, Field(e, "action"), object, Field(e, "clusterQueue"), Field(e, "reason")});
    }
    if (!rows.empty()) PrintTable(rows);
    std::fflush(stdout);
    if (j->contains("next")) {
      cursor = Field(*j, "next");
      continue;
    }
    if (!follow || base::RealClock().Now() >= give_up) return 0;
    absl::SleepFor(absl::Seconds(1));
  }
}

}  // namespace

int RunAudit(const std::vector<std::string>& args) {
  ClientFlags f;
  std::string ns, name, kind, action, actor, cq, since, until;
  int limit = 1000;
  bool follow = false;
  absl::Duration follow_for = absl::ZeroDuration();
  FlagSet flags("audit", "Shows audit events from the API, oldest first: who changed quota, which workloads were "
                         "admitted, preempted or denied, and why.");
  flags.Synopsis("gangkeeper audit [filters] [--follow] [-o table|json|yaml]\n"
                 "       gangkeeper audit verify DATA_DIR [--audit-hmac-key FILE]    (offline)");
  AddClientFlags(flags, &f, "output format: table, json (one event per line) or yaml");
  flags.String("n,namespace", &ns, "namespace");
  flags.String("name", &name, "object name");
  flags.String("kind", &kind, "object kind (Workload, Job, PolicySet, ...)");
  flags.String("action", &action, "e.g. workload.admitted, workload.preempted, review.denied, quota.changed");
  flags.String("actor", &actor, "a Kubernetes user, a token name, or gangkeeper");
  flags.String("cluster-queue", &cq, "ClusterQueue");
  flags.String("since", &since, "events at or after this: an RFC 3339 time, or a duration ago (1h, 30m, 7d)");
  flags.String("until", &until, "events at or before this: an RFC 3339 time, or a duration ago");
  flags.Int("limit", &limit, "print at most this many events");
  flags.Bool("follow", &follow, "keep printing new events as they come");
  flags.Duration("follow-for", &follow_for, "with --follow, stop after this long (default: until interrupted)");
  flags.Examples(
      "  gangkeeper audit -n team-a --name train        the story of one job\n"
      "  gangkeeper audit --action quota.changed --since 7d\n"
      "  gangkeeper audit --follow -o json");
  std::vector<std::string> rest;
  if (std::optional<int> done = flags.ParseOrExit(args, &rest)) return *done;
  if (!rest.empty() || limit < 1 || (f.output != "table" && f.output != "json" && f.output != "yaml")) {
    std::fprintf(stderr, "gangkeeper: usage: gangkeeper audit [--namespace NS] [--name N] [--action A] [--actor U] "
                         "[--cluster-queue CQ] [--since T|1h] [--until T|1h] [--limit N] [--follow] [-o table|json|yaml]\n");
    return 2;
  }
  // "1h" means an hour ago ("7d" a week: days are not a Go duration unit).
  for (std::string* t : {&since, &until}) {
    if (t->empty()) continue;
    absl::Duration ago;
    std::string spelled = *t;
    int64_t days = 0;
    if (absl::EndsWith(spelled, "d") && absl::SimpleAtoi(absl::string_view(spelled).substr(0, spelled.size() - 1), &days)) {
      spelled = absl::StrCat(days * 24, "h");
    }
    if (absl::ParseDuration(spelled, &ago)) {
      if (ago < absl::ZeroDuration()) {
        std::fprintf(stderr, "gangkeeper: --since/--until %s: give a positive duration (how long ago)\n", t->c_str());
        return 2;
      }
      *t = absl::FormatTime("%Y-%m-%d%ET%H:%M:%E6SZ", base::RealClock().Now() - ago, absl::UTCTimeZone());
    }
  }
  std::string query;
  for (const auto& [key, value] : std::vector<std::pair<const char*, std::string>>{
           {"namespace", ns}, {"name", name}, {"kind", kind}, {"action", action}, {"actor", actor},
           {"clusterQueue", cq}, {"since", since}, {"until", until}}) {
    if (value.empty()) continue;
    absl::StrAppend(&query, query.empty() ? "" : "&", key, "=", httpc::QueryEscape(value));
  }
  std::unique_ptr<ApiClient> client = Connect(f);
  if (client == nullptr) return 2;
  return AuditPrint(*client, f, query, limit, follow, follow_for);
}


}  // namespace gangkeeper::cli
