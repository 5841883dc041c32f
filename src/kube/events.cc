// gangkeeper: EventRecorder (see events.h).
#include "gangkeeper/kube/events.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/base/log.h"
#include "nlohmann/json.hpp"

namespace gangkeeper::kube {
namespace {

using json = nlohmann::json;

constexpr size_t kNoteLimit = 1024;  // events.k8s.io/v1 refuses longer notes

// RFC 3339 with microseconds (a MicroTime; core/v1 timestamps take it too).
std::string EventMicroTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone());
}

std::string EventNote(const std::string& note) {
  if (note.size() <= kNoteLimit) return note;
  return note.substr(0, kNoteLimit - 3) + "...";
}

json EventRegarding(const ObjectRef& o) {
  return {{"apiVersion", o.api_version}, {"kind", o.kind}, {"namespace", o.namespace_name},
          {"name", o.name},             {"uid", o.uid}};
}

std::string EventsPath(bool core_v1, const std::string& ns) {
  return core_v1 ? absl::StrCat("/api/v1/namespaces/", QueryEscape(ns), "/events")
                 : absl::StrCat("/apis/events.k8s.io/v1/namespaces/", QueryEscape(ns), "/events");
}

}  // namespace

EventRecorder::EventRecorder(Client* client, EventRecorderOptions options)
    : client_(client), options_(std::move(options)) {
  GK_CHECK_MSG(options_.clock != nullptr, "EventRecorderOptions::clock is required");
  tokens_ = options_.burst;
  refilled_ = options_.clock->Now();
}

EventRecorder::~EventRecorder() { Stop(); }

void EventRecorder::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void EventRecorder::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
    queue_.clear();
  }
  if (thread_.joinable()) {
    client_->Shutdown();
    thread_.join();
  }
}

void EventRecorder::Record(ClusterEvent e) {
  absl::MutexLock lock(&mu_);
  if (stop_) return;
  if (queue_.size() >= options_.queue_limit) {
    ++stats_.dropped_full;
    return;
  }
  queue_.push_back(std::move(e));
  ++stats_.recorded;
}

EventRecorderStats EventRecorder::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

bool EventRecorder::TakeToken() {
  for (int i = 0; i < 1000; ++i) {  // bounded: each turn waits for a token's worth of time
    const absl::Time now = options_.clock->Now();
    tokens_ = std::min<double>(options_.burst,
                               tokens_ + absl::ToDoubleSeconds(now - refilled_) * options_.writes_per_second);
    refilled_ = now;
    if (tokens_ >= 1) {
      tokens_ -= 1;
      return true;
    }
    // Wait (real time) for a token's worth, then look at the clock again.
    const absl::Duration wait = std::min(absl::Seconds(1), absl::Seconds((1 - tokens_) /
                                                                         std::max(options_.writes_per_second, 1e-3)));
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stop_), wait)) return false;
  }
  return true;  // a clock that stands still must not stop the writer for good
}

void EventRecorder::Run() {
  for (;;) {
    ClusterEvent e;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      e = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!TakeToken()) return;
    Write(e);
  }
}

void EventRecorder::Remember(const std::string& key, Series s) {
  auto old = series_.find(key);
  if (old != series_.end()) {
    auto [from, to] = series_by_age_.equal_range(old->second.last);
    for (auto it = from; it != to; ++it) {
      if (it->second == key) {
        series_by_age_.erase(it);
        break;
      }
    }
  }
  series_by_age_.emplace(s.last, key);
  series_[key] = std::move(s);
  while (series_.size() > options_.series_limit && !series_by_age_.empty()) {
    series_.erase(series_by_age_.begin()->second);
    series_by_age_.erase(series_by_age_.begin());
  }
}

void EventRecorder::Write(const ClusterEvent& e) {
  const absl::Time now = options_.clock->Now();
  const std::string key = absl::StrCat(e.regarding.uid, "\x1f", e.reason, "\x1f", e.note);
  auto known = series_.find(key);
  if (known != series_.end() && now - known->second.last < options_.series_window) {
    Series s = known->second;
    ++s.count;
    s.last = now;
    const json patch = s.core_v1 ? json{{"count", s.count}, {"lastTimestamp", EventMicroTime(now)}}
                                 : json{{"series", {{"count", s.count}, {"lastObservedTime", EventMicroTime(now)}}}};
    absl::StatusOr<json> r = client_->Patch(
        absl::StrCat(EventsPath(s.core_v1, e.regarding.namespace_name), "/", s.name), PatchType::kMerge, patch);
    if (r.ok()) {
      Remember(key, std::move(s));
      absl::MutexLock lock(&mu_);
      ++stats_.series_updates;
      return;
    }
    if (HttpCode(r.status()) != 404) {  // gone (its TTL ended): a new one below
      absl::MutexLock lock(&mu_);
      ++stats_.failed;
      return;
    }
  }
  if (Create(e, key, now)) return;
  absl::MutexLock lock(&mu_);
  ++stats_.failed;
}

bool EventRecorder::Create(const ClusterEvent& e, const std::string& key, absl::Time now) {
  std::shared_ptr<spdlog::logger> log = base::GetLogger("kube");
  const std::string name = absl::StrFormat("%s.%016x", e.regarding.name.substr(0, 200),
                                           static_cast<uint64_t>(absl::ToUnixNanos(now)) + next_name_++);
  for (int attempt = 0; attempt < 2; ++attempt) {
    json body;
    if (core_v1_) {
      body = {{"apiVersion", "v1"},
              {"kind", "Event"},
              {"metadata", {{"name", name}, {"namespace", e.regarding.namespace_name}}},
              {"involvedObject", EventRegarding(e.regarding)},
              {"reason", e.reason},
              {"message", EventNote(e.note)},
              {"type", e.warning ? "Warning" : "Normal"},
              {"action", e.action},
              {"count", 1},
              {"firstTimestamp", EventMicroTime(now)},
              {"lastTimestamp", EventMicroTime(now)},
              {"source", {{"component", options_.controller}}},
              {"reportingComponent", options_.controller},
              {"reportingInstance", options_.instance}};
    } else {
      body = {{"apiVersion", "events.k8s.io/v1"},
              {"kind", "Event"},
              {"metadata", {{"name", name}, {"namespace", e.regarding.namespace_name}}},
              {"eventTime", EventMicroTime(now)},
              {"reportingController", options_.controller},
              {"reportingInstance", options_.instance},
              {"action", e.action},
              {"reason", e.reason},
              {"note", EventNote(e.note)},
              {"type", e.warning ? "Warning" : "Normal"},
              {"regarding", EventRegarding(e.regarding)}};
    }
    absl::StatusOr<json> r = client_->Post(EventsPath(core_v1_, e.regarding.namespace_name), body.dump());
    if (r.ok()) {
      Remember(key, Series{name, 1, now, core_v1_});
      absl::MutexLock lock(&mu_);
      ++stats_.created;
      stats_.core_v1 = core_v1_;
      return true;
    }
    // The group is not served ("could not find the requested resource"), as
    // opposed to a namespace that is gone (404 too, naming the namespace).
    if (HttpCode(r.status()) == 404 && !core_v1_ &&
        absl::StrContains(r.status().message(), "could not find the requested resource")) {
      log->info("events: events.k8s.io/v1 is not served ({}); writing core/v1 Events", r.status().message());
      core_v1_ = true;
      continue;
    }
    log->warn("events: {} {} on {}/{} not written: {}", e.reason, e.regarding.kind, e.regarding.namespace_name,
              e.regarding.name, r.status().message());
    return false;
  }
  return false;
}

}  // namespace gangkeeper::kube
