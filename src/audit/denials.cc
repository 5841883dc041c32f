// gangkeeper audit: DenialAggregator (see denials.h).
#include "gangkeeper/audit/denials.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gangkeeper/base/log.h"
#include "nlohmann/json.hpp"
#include "src/audit/event_time.h"

namespace gangkeeper::audit {
namespace {

using nlohmann::json;

std::string WindowKey(const Event& e, const std::string& source) {
  return absl::StrCat(source, "\x1f", e.kind, "\x1f", e.namespace_name, "\x1f", e.name, "\x1f", e.reason);
}

// `details` (a JSON object's text) with `more` fields.
std::string WithDetails(const std::string& details, const json& more) {
  json d = details.empty() ? json::object() : json::parse(details, nullptr, false);
  if (d.is_discarded() || !d.is_object()) d = json{{"text", details}};
  d.update(more);
  return d.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

DenialAggregator::DenialAggregator(DenialLimits limits, const base::Clock* clock, Sink sink)
    : limits_(limits), clock_(clock), sink_(std::move(sink)) {
  absl::MutexLock lock(&mu_);
  tokens_ = limits_.burst;
  refilled_ = summary_from_ = clock_->Now();
}

DenialAggregator::~DenialAggregator() { Stop(); }

absl::Status DenialAggregator::Record(Event denial, const std::string& source) {
  const absl::Time now = clock_->Now();
  std::vector<Event> ended;  // this key's window, over but not yet polled
  std::optional<Event> first;
  {
    absl::MutexLock lock(&mu_);
    ++stats_.denials;
    const std::string key = WindowKey(denial, source);
    auto it = windows_.find(key);
    if (it != windows_.end() && now < it->second.end) {
      Window& w = it->second;
      if (w.count++ == 0) w.first = now;
      w.last = now;
      w.latest = std::move(denial);
      ++stats_.aggregated;
      return absl::OkStatus();
    }
    if (it != windows_.end()) {
      if (it->second.count > 0) ended.push_back(AggregateLocked(it->second, now));
      windows_.erase(it);
    }
    tokens_ = std::min(limits_.burst, tokens_ + limits_.per_second * absl::ToDoubleSeconds(now - refilled_));
    refilled_ = now;
    if (tokens_ < 1) {
      ++stats_.suppressed;
      if (suppressed_since_++ == 0) summary_from_ = now;
      const bool named = suppressed_by_source_.contains(source) ||
                         suppressed_by_source_.size() < limits_.summary_sources;
      ++suppressed_by_source_[named ? source : "other"];
    } else {
      tokens_ -= 1;
      ++stats_.written;
      Window& w = windows_[key];
      w.end = now + limits_.window;
      w.source = source;
      denial.details = WithDetails(denial.details, {{"source", source}});
      first = std::move(denial);
    }
  }
  Write(ended);
  if (!first.has_value()) return absl::OkStatus();
  absl::Status s = sink_(*first);
  if (!s.ok()) {
    absl::MutexLock lock(&mu_);
    ++stats_.failed;
  }
  return s;
}

Event DenialAggregator::AggregateLocked(Window& w, absl::Time now) {
  Event e = std::move(w.latest);
  e.time = now;
  e.details = WithDetails(e.details, {{"source", w.source},
                                      {"count", w.count},
                                      {"first", Rfc3339Micros(w.first)},
                                      {"last", Rfc3339Micros(w.last)},
                                      {"aggregated", true}});
  ++stats_.aggregated_events;
  return e;
}

std::vector<Event> DenialAggregator::TakeDueLocked(absl::Time now, bool all) {
  std::vector<Event> out;
  for (auto it = windows_.begin(); it != windows_.end();) {
    if (!all && now < it->second.end) {
      ++it;
      continue;
    }
    if (it->second.count > 0) out.push_back(AggregateLocked(it->second, now));
    windows_.erase(it++);
  }
  if (suppressed_since_ > 0 && (all || now - summary_from_ >= limits_.summary_every)) {
    Event e;
    e.time = now;
    e.actor = "gangkeeper";
    e.action = kDenialsSuppressed;
    e.kind = "AdmissionReview";
    e.reason = "RateLimited";
    e.details = json{{"count", suppressed_since_},
                     {"since", Rfc3339Micros(summary_from_)},
                     {"until", Rfc3339Micros(now)},
                     {"sources", suppressed_by_source_},
                     {"perSecond", limits_.per_second},
                     {"burst", limits_.burst}}
                    .dump(-1, ' ', false, json::error_handler_t::replace);
    out.push_back(std::move(e));
    ++stats_.summaries;
    suppressed_since_ = 0;
    suppressed_by_source_.clear();
  }
  return out;
}

void DenialAggregator::Write(const std::vector<Event>& events) {
  for (const Event& e : events) {
    absl::Status s = sink_(e);
    if (s.ok()) continue;
    base::GetLogger("audit")->error("audit: a {} event of {}/{} was not recorded: {}", e.action, e.namespace_name,
                                    e.name, s.message());
    absl::MutexLock lock(&mu_);
    ++stats_.failed;
  }
}

void DenialAggregator::Poll() {
  const absl::Time now = clock_->Now();
  std::vector<Event> due;
  {
    absl::MutexLock lock(&mu_);
    due = TakeDueLocked(now, /*all=*/false);
  }
  Write(due);
}

void DenialAggregator::Start() {
  absl::MutexLock lock(&mu_);
  if (poller_.joinable() || stopping_) return;
  poller_ = std::thread([this] {
    mu_.Lock();
    while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Seconds(1))) {
      mu_.Unlock();
      Poll();
      mu_.Lock();
    }
    mu_.Unlock();
  });
}

void DenialAggregator::Stop() {
  std::thread poller;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    poller = std::move(poller_);
  }
  if (poller.joinable()) poller.join();
  std::vector<Event> rest;
  {
    absl::MutexLock lock(&mu_);
    rest = TakeDueLocked(clock_->Now(), /*all=*/true);
  }
  Write(rest);
}

DenialStats DenialAggregator::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace gangkeeper::audit
