// gangkeeper replica: the intake (see intake.h).
#include "gangkeeper/replica/intake.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/log.h"
#include "gangkeeper/broker/durable.h"
#include "gangkeeper/store/codec.h"
#include "gangkeeper/store/etcd_journal.h"
#include "gangkeeper/store/state_codec.h"
#include "src/replica/watch_loop.h"

namespace gangkeeper::replica {
namespace {

// One event. Version 3 adds the key's kind (version 1 is still read); 2 is
// taken by the batch.
constexpr uint8_t kIntakeVersion = 3;
constexpr uint8_t kIntakeVersionWithoutKind = 1;
constexpr uint8_t kIntakeBatchVersion = 2;  // a put's events
// Below etcd's default request limit (1.5 MiB) with room for the key.
constexpr size_t kIntakeBatchBytes = 1 << 20;
constexpr int kDeleteOpsPerTxn = 100;  // etcd refuses more than --max-txn-ops (128)

// The number of events an intake key says its put holds (after the last
// '.'; keys written before puts carried batches hold one).
int EventsInKey(absl::string_view key) {
  const size_t dot = key.rfind('.');
  const size_t slash = key.rfind('/');
  int n = 1;
  if (dot == absl::string_view::npos || (slash != absl::string_view::npos && dot < slash) ||
      !absl::SimpleAtoi(key.substr(dot + 1), &n) || n < 1 || n > kIntakeBatchMax) {
    return 1;
  }
  return n;
}

}  // namespace

std::string IntakePrefix(const std::string& prefix) { return prefix + "intake/"; }

broker::Event ToBrokerEvent(IntakeEvent e) {
  broker::Event out;
  switch (e.type) {
    case IntakeEvent::Type::kRegister: out = broker::Event::Add(std::move(e.workload)); break;
    case IntakeEvent::Type::kUpdate: out = broker::Event::Update(std::move(e.workload)); break;
    case IntakeEvent::Type::kRemove: out = broker::Event::Remove(std::move(e.key), std::move(e.uid)); break;
    case IntakeEvent::Type::kFinish: out = broker::Event::Finish(std::move(e.key), std::move(e.uid)); break;
    case IntakeEvent::Type::kPolicies:
      out = broker::Event::Policies(std::move(e.policies), std::move(e.overlay), std::move(e.actor), std::move(e.what));
      break;
    case IntakeEvent::Type::kReview: out = broker::Event::Flush(); break;  // legacy: see IntakeFeeder
  }
  out.intake_revision = e.revision;
  return out;
}

std::string EncodeIntake(const IntakeEvent& e) {
  std::string out;
  store::Encoder enc(&out);
  enc.PutU8(kIntakeVersion);
  enc.PutU8(static_cast<uint8_t>(e.type));
  const bool with_workload =
      e.type == IntakeEvent::Type::kRegister || e.type == IntakeEvent::Type::kUpdate;
  const broker::WorkloadKey key = with_workload ? broker::KeyOf(e.workload) : e.key;
  enc.PutString(key.namespace_name);
  enc.PutString(key.name);
  enc.PutU8(static_cast<uint8_t>(key.kind));
  enc.PutBool(key.pod_group);
  enc.PutString(with_workload ? e.workload.uid : e.uid);
  if (with_workload) {
    broker::WorkloadInfo info;
    info.key = key;
    info.workload = std::make_shared<const workload::Workload>(e.workload);
    enc.PutString(store::EncodeWorkloadInfo(info));
  }
  if (e.type == IntakeEvent::Type::kReview) {
    enc.PutString(e.actor);
    enc.PutString(e.what);
  }
  return out;
}

absl::StatusOr<IntakeEvent> DecodeIntake(absl::string_view data) {
  store::Decoder d(data, "intake event");
  uint8_t version = 0;
  uint64_t type = 0;
  IntakeEvent e;
  if (!d.GetU8(&version)) return d.status();
  if (version != kIntakeVersion && version != kIntakeVersionWithoutKind) {
    return absl::DataLossError(absl::StrCat("intake event: version ", version, " (this gangkeeper reads ",
                                            kIntakeVersionWithoutKind, " and ", kIntakeVersion,
                                            "; upgrade every replica)"));
  }
  if (!d.GetBounded(static_cast<uint64_t>(IntakeEvent::Type::kReview), &type) ||
      !d.GetString(&e.key.namespace_name) || !d.GetString(&e.key.name)) {
    return d.status();
  }
  if (version == kIntakeVersion) {
    uint64_t kind = 0;
    if (!d.GetBounded(static_cast<uint64_t>(workload::kLastKind), &kind) || !d.GetBool(&e.key.pod_group)) {
      return d.status();
    }
    e.key.kind = static_cast<workload::Kind>(kind);
  }
  if (!d.GetString(&e.uid)) return d.status();
  e.type = static_cast<IntakeEvent::Type>(type);
  if (e.type == IntakeEvent::Type::kPolicies) {
    return absl::DataLossError("intake event: a policy change (those have their own key)");
  }
  if (e.type == IntakeEvent::Type::kReview && (!d.GetString(&e.actor) || !d.GetString(&e.what))) {
    return d.status();
  }
  if (e.type == IntakeEvent::Type::kRegister || e.type == IntakeEvent::Type::kUpdate) {
    std::string image;
    if (!d.GetString(&image)) return d.status();
    absl::StatusOr<broker::WorkloadInfo> info = store::DecodeWorkloadInfo(image);
    if (!info.ok()) return info.status();
    if (info->workload == nullptr) return absl::DataLossError("intake event: a registration without its workload");
    e.workload = *info->workload;
    e.key = broker::KeyOf(e.workload);
  }
  if (!d.done()) return absl::DataLossError(absl::StrCat("intake event: ", d.remaining(), " byte(s) left over"));
  return e;
}

std::string EncodeIntakeBatch(const std::vector<std::string>& events) {
  std::string out;
  store::Encoder enc(&out);
  enc.PutU8(kIntakeBatchVersion);
  enc.PutVarint(events.size());
  for (const std::string& e : events) enc.PutString(e);
  return out;
}

absl::StatusOr<std::vector<IntakeEvent>> DecodeIntakeValue(absl::string_view data) {
  std::vector<IntakeEvent> out;
  if (!data.empty() && (static_cast<uint8_t>(data[0]) == kIntakeVersion ||
                        static_cast<uint8_t>(data[0]) == kIntakeVersionWithoutKind)) {
    absl::StatusOr<IntakeEvent> one = DecodeIntake(data);
    if (!one.ok()) return one.status();
    out.push_back(*std::move(one));
    return out;
  }
  store::Decoder d(data, "intake batch");
  uint8_t version = 0;
  uint64_t n = 0;
  if (!d.GetU8(&version)) return d.status();
  if (version != kIntakeBatchVersion) {
    return absl::DataLossError(absl::StrCat("intake: version ", version, " (this gangkeeper reads ", kIntakeVersion,
                                            " and ", kIntakeBatchVersion, "; upgrade every replica)"));
  }
  if (!d.GetBounded(kIntakeBatchMax, &n)) return d.status();
  if (n == 0) return absl::DataLossError("intake batch: no events");
  for (uint64_t i = 0; i < n; ++i) {
    std::string one;
    if (!d.GetString(&one)) return d.status();
    absl::StatusOr<IntakeEvent> e = DecodeIntake(one);
    if (!e.ok()) return absl::DataLossError(absl::StrCat("intake batch: event ", i, ": ", e.status().message()));
    out.push_back(*std::move(e));
  }
  if (!d.done()) return absl::DataLossError(absl::StrCat("intake batch: ", d.remaining(), " byte(s) left over"));
  return out;
}

// --- IntakeRegistry.

// A change waiting for its put.
struct IntakeRegistry::Waiter {
  std::string event;  // EncodeIntake
  bool done = false;
  absl::Status result;
};

IntakeRegistry::IntakeRegistry(etcd::Client* client, std::string prefix, std::string replica_id,
                               const broker::SnapshotSource* view, const base::Clock* clock)
    : client_(client),
      prefix_(std::move(prefix)),
      replica_id_(std::move(replica_id)),
      // A replica started again under the same id must not reuse a key the
      // leader has not applied yet: keys carry the start time.
      session_(absl::StrCat(absl::ToUnixNanos(clock->Now()))),
      view_(view) {}

absl::Status IntakeRegistry::Put(const IntakeEvent& e) {
  Waiter me;
  me.event = EncodeIntake(e);
  absl::MutexLock lock(&mu_);
  queue_.push_back(&me);
  while (true) {
    // Wait until a put took this change, or none is in flight.
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return me.done || !writing_; };
    mu_.Await(absl::Condition(&ready));
    if (me.done) return me.result;
    // This thread writes the next put: every change queued so far (up to
    // the limits), this one among them unless the queue is long.
    writing_ = true;
    std::vector<Waiter*> batch;
    std::vector<std::string> events;
    size_t bytes = 0;
    size_t taken = 0;
    for (; taken < queue_.size() && batch.size() < static_cast<size_t>(kIntakeBatchMax); ++taken) {
      const size_t size = queue_[taken]->event.size();
      if (!batch.empty() && bytes + size > kIntakeBatchBytes) break;
      bytes += size;
      batch.push_back(queue_[taken]);
      events.push_back(queue_[taken]->event);
    }
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(taken));
    const uint64_t n = counter_.fetch_add(1) + 1;
    mu_.Unlock();
    // The key ends in the number of events, so the clean-up knows from the
    // key alone whether all of them are applied.
    const std::string key = absl::StrCat(IntakePrefix(prefix_), replica_id_, "/", session_, "-",
                                         absl::StrFormat("%020d", n), ".", batch.size());
    absl::StatusOr<int64_t> put = client_->Put(key, EncodeIntakeBatch(events));
    absl::Status result = absl::OkStatus();
    if (!put.ok()) {
      // A put whose answer was lost may still have happened: the leader then
      // applies it, and the retry the webhook asks for applies again, which
      // changes nothing (the same object).
      result = absl::UnavailableError(
          absl::StrCat("could not record the change in etcd (", put.status().message(), ")"));
    }
    events_.fetch_add(batch.size());
    mu_.Lock();
    for (Waiter* w : batch) {
      w->result = result;
      w->done = true;
    }
    writing_ = false;
  }
}

absl::Status IntakeRegistry::Register(const workload::Workload& w, const std::string& /*cluster_queue*/) {
  return Put({.type = IntakeEvent::Type::kRegister, .workload = w});
}

absl::Status IntakeRegistry::Update(const workload::Workload& w) {
  // Refused at once when the local view already shows it admitted; the
  // leader checks again against its own state.
  if (std::optional<broker::WorkloadRecord> r = view_->snapshot()->Record(broker::KeyOf(w));
      r.has_value() && r->state == broker::WorkloadState::kAdmitted) {
    return absl::FailedPreconditionError("the workload is admitted: its pod sets can no longer change");
  }
  return Put({.type = IntakeEvent::Type::kUpdate, .workload = w});
}

absl::Status IntakeRegistry::Remove(const broker::WorkloadKey& key, const std::string& uid) {
  return Put({.type = IntakeEvent::Type::kRemove, .key = key, .uid = uid});
}

absl::Status IntakeRegistry::Finish(const broker::WorkloadKey& key, const std::string& uid) {
  return Put({.type = IntakeEvent::Type::kFinish, .key = key, .uid = uid});
}

std::optional<broker::WorkloadRecord> IntakeRegistry::Find(const broker::WorkloadKey& key) const {
  return view_->snapshot()->Record(key);
}

int64_t IntakeRegistry::PendingIn(const std::string& cluster_queue) const { return view_->snapshot()->PendingIn(cluster_queue); }

size_t IntakeRegistry::UnconfirmedCount() const { return view_->snapshot()->unconfirmed_count(); }

std::map<std::string, quantity::Quantity> IntakeRegistry::AdmittedUsage(const std::string& cluster_queue) const {
  return view_->snapshot()->AdmittedUsage(cluster_queue);
}

// --- IntakeFeeder.

IntakeFeeder::IntakeFeeder(etcd::Client* client, std::string prefix, int64_t applied, broker::EventQueue* broker,
                           OnReview on_review)
    : client_(client), prefix_(std::move(prefix)), broker_(broker), on_review_(std::move(on_review)) {
  {
    absl::MutexLock lock(&mu_);
    last_ = applied;
    stats_.last_position = applied;
  }
  thread_ = std::thread([this] { Run(); });
}

IntakeFeeder::~IntakeFeeder() { Stop(); }

void IntakeFeeder::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

FeederStats IntakeFeeder::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void IntakeFeeder::Run() {
  internal::RunSessions(&stop_, "replica", "intake: watching etcd", [this] { return CatchUpAndWatch(); },
                        [this] {
                          absl::MutexLock lock(&mu_);
                          ++stats_.watch_restarts;
                        });
}

void IntakeFeeder::Feed(const etcd::KeyValue& kv) {
  absl::MutexLock lock(&mu_);
  // Every event of this put is applied already.
  if (IntakePosition(kv.mod_revision, kIntakeBatchMax - 1) <= last_) return;
  absl::StatusOr<std::vector<IntakeEvent>> events = DecodeIntakeValue(kv.value);
  if (!events.ok()) {
    ++stats_.undecodable;
    base::GetLogger("replica")->error("intake: {} skipped: {}", kv.key, events.status().message());
    last_ = std::max(last_, IntakePosition(kv.mod_revision, 0));
    stats_.last_position = last_;
    return;
  }
  for (size_t i = 0; i < events->size(); ++i) {
    const int64_t position = IntakePosition(kv.mod_revision, static_cast<int>(i));
    if (position <= last_) continue;  // applied before a take-over
    last_ = position;
    IntakeEvent& e = (*events)[i];
    e.revision = position;
    if (e.type == IntakeEvent::Type::kReview) {
      // From a replica older than the audit stream (a rolling upgrade).
      if (on_review_) {
        on_review_(e.what);
      } else {
        base::GetLogger("replica")->warn("intake: {}: a review's audit event from an older replica; dropped", kv.key);
      }
    }
    broker_->Submit(ToBrokerEvent(std::move(e)));
    ++stats_.submitted;
  }
  stats_.last_position = last_;
}

absl::Status IntakeFeeder::CatchUpAndWatch() {
  const std::string from = IntakePrefix(prefix_);
  etcd::RangeOptions o;
  o.range_end = etcd::PrefixEnd(from);
  o.limit = 1000;
  std::vector<etcd::KeyValue> events;
  std::string start = from;
  int64_t revision = 0;
  for (int page = 0; page < (1 << 20); ++page) {
    absl::StatusOr<etcd::RangeResult> r = client_->Range(start, o);
    if (!r.ok()) return r.status();
    if (revision == 0) {
      revision = r->revision;
      o.revision = revision;  // every page at the first page's revision
    }
    int64_t after;
    {
      absl::MutexLock lock(&mu_);
      after = last_;
    }
    if (!r->kvs.empty()) start = r->kvs.back().key + std::string(1, '\0');  // before the keys move
    for (etcd::KeyValue& kv : r->kvs) {
      if (IntakePosition(kv.mod_revision, kIntakeBatchMax - 1) > after) events.push_back(std::move(kv));
    }
    if (!r->more || r->kvs.empty()) break;
  }
  std::sort(events.begin(), events.end(),
            [](const etcd::KeyValue& a, const etcd::KeyValue& b) { return a.mod_revision < b.mod_revision; });
  int64_t after_position;
  {
    absl::MutexLock lock(&mu_);
    after_position = last_;
  }
  base::GetLogger("replica")->info("intake: {} put(s) after position {} waiting at revision {}; applying them",
                                   events.size(), after_position, revision);
  for (const etcd::KeyValue& kv : events) Feed(kv);

  etcd::WatchOptions wo;
  wo.range_end = etcd::PrefixEnd(from);
  wo.start_revision = revision + 1;
  return internal::WatchUntilEnd(
      client_, from, wo,
      [this](const std::vector<etcd::WatchEvent>& got, int64_t) {
        for (const etcd::WatchEvent& e : got) {
          // Intake keys are written once: a put is a new event.
          if (e.type == etcd::WatchEvent::Type::kPut) Feed(e.kv);
        }
      },
      &stop_, absl::Seconds(2), [this] {
        DeleteApplied();
        return absl::OkStatus();
      });
}

void IntakeFeeder::DeleteApplied() {
  absl::StatusOr<etcd::RangeResult> cursor = client_->Range(store::IntakeAppliedKey(prefix_));
  int64_t applied = 0;
  if (!cursor.ok() || cursor->kvs.empty() || !absl::SimpleAtoi(cursor->kvs.front().value, &applied)) return;
  etcd::RangeOptions o;
  o.range_end = etcd::PrefixEnd(IntakePrefix(prefix_));
  o.limit = 500;
  o.keys_only = true;
  std::vector<etcd::Op> ops;
  uint64_t deleted = 0;
  auto flush = [&] {
    if (ops.empty()) return;
    absl::StatusOr<etcd::TxnResult> t = client_->Txn({}, ops);
    if (t.ok()) deleted += ops.size();
    ops.clear();
  };
  // Keys sort by replica and session, not by revision: applied ones may
  // come after pending ones, so every page is looked at (a bounded number
  // per call; the next call goes on).
  std::string start = IntakePrefix(prefix_);
  for (int page = 0; page < 20 && !stop_.HasBeenNotified(); ++page) {
    absl::StatusOr<etcd::RangeResult> keys = client_->Range(start, o);
    if (!keys.ok() || keys->kvs.empty()) break;
    for (const etcd::KeyValue& kv : keys->kvs) {
      if (IntakePosition(kv.mod_revision, EventsInKey(kv.key) - 1) > applied) continue;
      ops.push_back(etcd::Op::Delete(kv.key));
      if (ops.size() == kDeleteOpsPerTxn) flush();
    }
    if (!keys->more) break;
    start = keys->kvs.back().key + std::string(1, '\0');
  }
  flush();
  absl::MutexLock lock(&mu_);
  stats_.deleted += deleted;
}

}  // namespace gangkeeper::replica
