// gangkeeper audit: an event as one line of JSON and back (FORMAT.md §4),
// and the events the log writes about itself (see audit.h, log_event.h).
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gangkeeper/audit/audit.h"
#include "nlohmann/json.hpp"
#include "src/audit/event_time.h"
#include "src/audit/log_event.h"

namespace gangkeeper::audit {

using nlohmann::json;

std::string EncodeEvent(const Event& e, bool with_seq) {
  // Fields in DESIGN §8's order.
  nlohmann::ordered_json j = {{"time", Rfc3339Micros(e.time)}, {"actor", e.actor}};
  if (e.actor_claimed) j["actorClaimed"] = true;
  j["action"] = e.action;
  j["object"] = {{"kind", e.kind}, {"namespace", e.namespace_name}, {"name", e.name}, {"uid", e.uid}};
  j["clusterQueue"] = e.cluster_queue;
  j["reason"] = e.reason;
  nlohmann::ordered_json details =
      e.details.empty() ? nlohmann::ordered_json::object() : nlohmann::ordered_json::parse(e.details, nullptr, false);
  j["details"] = details.is_discarded() ? nlohmann::ordered_json(e.details) : details;
  if (e.journal_record != 0) j["journal"] = e.journal_record;
  if (e.stream_revision != 0) j["stream"] = e.stream_revision;
  if (with_seq) {
    nlohmann::ordered_json numbered = {{"seq", e.seq}};
    numbered.update(j);
    j = std::move(numbered);
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<Event> DecodeEvent(absl::string_view text, uint64_t seq) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(absl::StrCat("audit event ", seq, " is not a JSON object"));
  }
  auto str = [&](const json& o, const char* k) {
    auto it = o.find(k);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  Event e;
  e.seq = seq;  // the record number is the truth
  std::string err;
  if (!absl::ParseTime("%Y-%m-%d%ET%H:%M:%E*SZ", str(j, "time"), absl::UTCTimeZone(), &e.time, &err)) {
    return absl::DataLossError(absl::StrCat("audit event ", seq, ": time: ", err));
  }
  e.actor = str(j, "actor");
  if (auto c = j.find("actorClaimed"); c != j.end() && c->is_boolean()) e.actor_claimed = c->get<bool>();
  e.action = str(j, "action");
  if (auto o = j.find("object"); o != j.end() && o->is_object()) {
    e.kind = str(*o, "kind");
    e.namespace_name = str(*o, "namespace");
    e.name = str(*o, "name");
    e.uid = str(*o, "uid");
  }
  e.cluster_queue = str(j, "clusterQueue");
  e.reason = str(j, "reason");
  if (auto d = j.find("details"); d != j.end()) e.details = d->dump();
  if (auto r = j.find("journal"); r != j.end() && r->is_number_unsigned()) e.journal_record = r->get<uint64_t>();
  if (auto r = j.find("stream"); r != j.end() && r->is_number_unsigned()) e.stream_revision = r->get<uint64_t>();
  return e;
}

Event LogEvent(absl::Time now, const char* action, const char* reason, const nlohmann::json& details) {
  Event e;
  e.time = now;
  e.actor = "gangkeeper";
  e.action = action;
  e.kind = "AuditLog";
  e.reason = reason;
  e.details = details.dump(-1, ' ', false, json::error_handler_t::replace);
  return e;
}

}  // namespace gangkeeper::audit
