// gangkeeper replica: the API's quota changes through etcd (see overlay.h).
#include "gangkeeper/replica/overlay.h"

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/model/encode.h"
#include "gangkeeper/model/manifest.h"
#include "nlohmann/json.hpp"
#include "src/replica/watch_loop.h"

namespace gangkeeper::replica {
namespace {

using json = nlohmann::json;

uint64_t GenerationOf(const std::shared_ptr<const model::PolicyOverlay>& overlay) {
  return overlay == nullptr ? 0 : overlay->generation;
}

}  // namespace

EffectivePolicies PolicyStoreFeed(model::PolicyStore* store) {
  return [store](const std::shared_ptr<const model::PolicyOverlay>& overlay)
             -> std::shared_ptr<const model::EffectiveSet> {
    model::Diagnostics problems;
    std::shared_ptr<const model::EffectiveSet> set = store->Adopt(overlay, &problems);
    if (problems.HasErrors()) {
      base::GetLogger("replica")->warn("overlay: generation {} applied with errors against this replica's files: {}",
                                       GenerationOf(overlay), problems.ErrorSummary());
    }
    return set;
  };
}

std::string OverlayKey(const std::string& prefix) { return prefix + "overlay"; }

std::string EncodeOverlay(const model::PolicyOverlay& overlay, const std::string& actor, const std::string& what) {
  json j;
  j["generation"] = overlay.generation;
  j["put"] = model::EncodeManifests(overlay.put);
  j["deleted"] = json::array();
  for (const std::string& id : overlay.deleted) j["deleted"].push_back(id);
  j["actor"] = actor;
  j["what"] = what;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<OverlayRecord> DecodeOverlay(absl::string_view data) {
  json j = json::parse(data.begin(), data.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError("overlay: not a JSON object");
  auto field = [&](const char* name, json::value_t type) -> const json* {
    auto it = j.find(name);
    if (it == j.end() || it->type() != type) return nullptr;
    return &*it;
  };
  const json* generation = field("generation", json::value_t::number_unsigned);
  const json* put = field("put", json::value_t::string);
  const json* deleted = field("deleted", json::value_t::array);
  if (generation == nullptr || put == nullptr || deleted == nullptr) {
    return absl::DataLossError("overlay: generation (a number), put (a string) and deleted (a list) are required");
  }
  auto overlay = std::make_shared<model::PolicyOverlay>();
  overlay->generation = generation->get<uint64_t>();
  model::Diagnostics diagnostics;
  model::DecodeManifests(put->get<std::string>(), "overlay.put", &overlay->put, &diagnostics);
  if (diagnostics.HasErrors()) return absl::DataLossError(absl::StrCat("overlay: ", diagnostics.ErrorSummary()));
  for (const json& id : *deleted) {
    if (!id.is_string()) return absl::DataLossError("overlay: deleted holds a value that is not a string");
    overlay->deleted.insert(id.get<std::string>());
  }
  OverlayRecord r;
  r.overlay = std::move(overlay);
  if (const json* actor = field("actor", json::value_t::string)) r.actor = actor->get<std::string>();
  if (const json* what = field("what", json::value_t::string)) r.what = what->get<std::string>();
  return r;
}

// --- EtcdPolicyEditor ----------------------------------------------------------

EtcdPolicyEditor::EtcdPolicyEditor(etcd::Client* client, const broker::SnapshotSource* view,
                                   model::PolicyStore* policies, EtcdPolicyEditorOptions options)
    : client_(client), view_(view), policies_(policies), options_(std::move(options)) {}

absl::StatusOr<model::PolicyEditor::Current> EtcdPolicyEditor::Read() {
  absl::StatusOr<etcd::RangeResult> r = client_->Range(OverlayKey(options_.prefix));
  if (!r.ok()) return r.status();
  Current c;
  if (r->kvs.empty()) {
    // Never changed through the API: what this replica shows (the files,
    // or an overlay recorded before the key existed).
    c.overlay = view_->snapshot()->overlay();
    c.version = 0;
  } else {
    absl::StatusOr<OverlayRecord> record = DecodeOverlay(r->kvs.front().value);
    if (!record.ok()) {
      return absl::DataLossError(absl::StrCat("etcd key ", OverlayKey(options_.prefix), ": ",
                                              record.status().message(),
                                              "; put a valid overlay there or delete the key"));
    }
    c.overlay = std::move(record->overlay);
    c.version = r->kvs.front().mod_revision;
  }
  // Durable in etcd: in effect (or about to be) whatever the files say now.
  c.policies = PolicyStoreFeed(policies_)(c.overlay)->policies;
  return c;
}

absl::Status EtcdPolicyEditor::Write(const Current& base, std::shared_ptr<const model::PolicyOverlay> overlay,
                                     std::shared_ptr<const model::PolicySet> /*policies*/, const std::string& actor,
                                     const std::string& what) {
  if (overlay == nullptr) return absl::InvalidArgumentError("overlay: null");
  const std::string key = OverlayKey(options_.prefix);
  const std::string value = EncodeOverlay(*overlay, actor, what);
  const etcd::Compare unchanged =
      base.version == 0 ? etcd::Compare::Absent(key) : etcd::Compare::ModRevision(key, base.version);
  absl::StatusOr<etcd::TxnResult> t = client_->Txn({unchanged}, {etcd::Op::Put(key, value)});
  if (!t.ok()) {
    if (!absl::StrContains(t.status().message(), "outcome unknown")) return t.status();
    // The answer was lost: the key holds our value only if the put ran.
    absl::StatusOr<etcd::RangeResult> back = client_->Range(key);
    if (!back.ok()) return absl::UnavailableError(absl::StrCat(t.status().message(), "; reading back: ",
                                                               back.status().message()));
    if (back->kvs.empty() || back->kvs.front().value != value) {
      return absl::AbortedError("the quota change did not land; the key changed meanwhile");
    }
  } else if (!t->succeeded) {
    return absl::AbortedError("another replica changed the quota objects since they were read");
  }
  // Durable. Wait (bounded) until this replica shows it: the leader applies
  // it, its journal record reaches this replica's view.
  const uint64_t want = overlay->generation;
  const base::Stopwatch waited;
  while (GenerationOf(view_->snapshot()->overlay()) < want) {
    if (waited.Elapsed() >= options_.view_wait) {
      base::GetLogger("replica")->warn(
          "overlay: generation {} is in etcd but this replica does not show it after {}; is there a leader?", want,
          absl::FormatDuration(options_.view_wait));
      break;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return absl::OkStatus();
}

// --- OverlayFeeder ---------------------------------------------------------------

OverlayFeeder::OverlayFeeder(etcd::Client* client, std::string prefix, broker::EventQueue* events,
                             const broker::SnapshotSource* view, EffectivePolicies effective)
    : client_(client), prefix_(std::move(prefix)), events_(events), effective_(std::move(effective)) {
  {
    absl::MutexLock lock(&mu_);
    stats_.generation = GenerationOf(view->snapshot()->overlay());
  }
  thread_ = std::thread([this] { Run(); });
}

OverlayFeeder::~OverlayFeeder() { Stop(); }

void OverlayFeeder::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

OverlayFeederStats OverlayFeeder::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void OverlayFeeder::Run() {
  internal::RunSessions(&stop_, "replica", "overlay: watching the API's quota changes in etcd",
                        [this] { return ReadAndWatch(); });
}

void OverlayFeeder::Feed(const etcd::KeyValue& kv) {
  absl::StatusOr<OverlayRecord> record = DecodeOverlay(kv.value);
  absl::MutexLock lock(&mu_);
  if (!record.ok()) {
    ++stats_.undecodable;
    base::GetLogger("replica")->error("overlay: {} at revision {} skipped: {}", kv.key, kv.mod_revision,
                                      record.status().message());
    return;
  }
  if (record->overlay->generation <= stats_.generation) return;  // in effect already
  std::shared_ptr<const model::EffectiveSet> set = effective_(record->overlay);
  if (set == nullptr) return;
  stats_.generation = record->overlay->generation;
  ++stats_.applied;
  // Revision 0: not an intake event.
  broker::Event e = broker::Event::Policies(set->policies, std::move(record->overlay), std::move(record->actor),
                                            std::move(record->what));
  e.policies_version = set->version;
  events_->Submit(std::move(e));
}

absl::Status OverlayFeeder::ReadAndWatch() {
  const std::string key = OverlayKey(prefix_);
  absl::StatusOr<etcd::RangeResult> r = client_->Range(key);
  if (!r.ok()) return r.status();
  if (!r->kvs.empty()) Feed(r->kvs.front());
  etcd::WatchOptions wo;
  wo.start_revision = r->revision + 1;
  return internal::WatchUntilEnd(
      client_, key, wo,
      [this](const std::vector<etcd::WatchEvent>& events, int64_t) {
        for (const etcd::WatchEvent& e : events) {
          if (e.type == etcd::WatchEvent::Type::kPut) Feed(e.kv);
        }
      },
      &stop_, absl::Seconds(1));
}

}  // namespace gangkeeper::replica
