// gangkeeper store/etcd: watches (see watch.h).
//
// /v3/watch answers {"result":{...}} objects, one per line, and never ends
// the response by itself: not after a cancel (a compacted start revision
// gives "created" and then "canceled" + "compact_revision"), nor after an
// error object {"error":{"grpc_code":..,"message":..}} (etcd stopping).
#include "src/store/etcd/watch.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "gangkeeper/base/check.h"
#include "gangkeeper/httpc/line_reader.h"
#include "src/store/etcd/gateway.h"

namespace gangkeeper::etcd {
namespace {

// A watch stream is quiet while nothing changes. etcd sends progress
// notifications every 10 minutes by default
// (--experimental-watch-progress-notify-interval), so a stream silent for
// longer than this is taken for dead: the watch ends with Unavailable and
// the caller resumes from its last revision.
constexpr absl::Duration kWatchIdleTimeout = absl::Minutes(11);
// The longest watch line (one etcd response) kept while waiting for its end.
constexpr size_t kMaxWatchLineBytes = size_t{64} << 20;

// One watch: one streamed POST on its own connection and thread.
class HttpWatch final : public Watch {
 public:
  HttpWatch(std::string what, std::unique_ptr<Connection> conn, EventsFn on_events, EndFn on_end)
      : what_(std::move(what)), conn_(std::move(conn)), on_events_(std::move(on_events)), on_end_(std::move(on_end)) {}

  ~HttpWatch() override {
    // Joining from the watch's own thread would wait for itself.
    GK_CHECK_MSG(std::this_thread::get_id() != thread_.get_id(),
                 "an etcd Watch was destroyed from inside its own callback");
    Cancel();
    StopUntilDone();
    if (thread_.joinable()) thread_.join();
  }

  void Cancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    // Cuts a stream in flight at once (a shutdown of its socket), without
    // waiting for the read timeout.
    conn_->Stop();
    // After Cancel() returns no callback runs, unless Cancel() came from a
    // callback (which then is the one running).
    if (std::this_thread::get_id() != thread_.get_id()) {
      mu_.Await(absl::Condition(
          +[](bool* delivering) { return !*delivering; }, &delivering_));
    }
  }

  void Begin(std::string path, std::string body) {
    thread_ = std::thread([this, path = std::move(path), body = std::move(body)] { Run(path, body); });
  }

  // Waits up to `timeout` for etcd's "created". OK: the watch is the
  // caller's from now on. Otherwise the watch is abandoned (no callback
  // will run) and the status says why.
  absl::Status AwaitCreated(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(this, &HttpWatch::Started), timeout);
    if (state_ == State::kCreated) {
      released_ = true;
      return absl::OkStatus();
    }
    if (state_ == State::kStarting) {
      state_ = State::kFailed;
      start_status_ = absl::DeadlineExceededError(
          absl::StrCat(what_, ": etcd did not confirm the watch within ", absl::FormatDuration(timeout)));
    }
    cancelled_ = true;
    conn_->Stop();
    return start_status_;
  }

  // The start failed in a way another endpoint or a later attempt may not
  // see (etcd unreachable or unavailable).
  bool StartRetryable() {
    absl::MutexLock lock(&mu_);
    return start_retryable_;
  }

 private:
  enum class State { kStarting, kCreated, kFailed };

  bool Started() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return state_ != State::kStarting; }
  bool ReleasedOrCancelled() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return released_ || cancelled_; }
  bool Done() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_; }

  bool IsCancelled() {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }

  // stop() finds nothing to cut while the thread is between requests (not
  // yet sending): repeat it until the thread is done. The first one
  // normally ends the stream; the bound only guards against a thread stuck
  // in the library.
  void StopUntilDone() {
    for (int i = 0; i < 200; ++i) {
      absl::MutexLock lock(&mu_);
      if (done_) return;
      conn_->Stop();
      mu_.AwaitWithTimeout(absl::Condition(this, &HttpWatch::Done), absl::Milliseconds(50));
    }
  }

  // Runs a user callback unless the watch was cancelled; false when it was
  // (or became so during the callback).
  template <typename F>
  bool Deliver(F&& f) {
    {
      absl::MutexLock lock(&mu_);
      // StartWatch() hands the watch over right after "created": callbacks
      // begin only once the caller holds the Watch.
      mu_.Await(absl::Condition(this, &HttpWatch::ReleasedOrCancelled));
      if (cancelled_) return false;
      delivering_ = true;
    }
    f();
    absl::MutexLock lock(&mu_);
    delivering_ = false;
    return !cancelled_;
  }

  void Fail(absl::Status why, bool retryable) {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kStarting) return;
    state_ = State::kFailed;
    start_status_ = std::move(why);
    start_retryable_ = retryable;
  }

  // Handles one etcd response; false ends the stream with end_ set.
  bool HandleLine(absl::string_view line) {
    Json j = Json::parse(line.begin(), line.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      end_ = NotGateway(what_, "a watch line is not a JSON object");
      return false;
    }
    if (const Json* error = GetObject(j, "error")) {
      int64_t code = 0;
      std::string message;
      if (!ParseGatewayError(*error, &code, &message)) code = 2;
      end_ = GatewayError(what_, code, message);
      end_retryable_ = code == kGrpcUnavailable;
      return false;
    }
    const Json* result = GetObject(j, "result");
    if (result == nullptr) {
      end_ = NotGateway(what_, "a watch line has neither result nor error");
      return false;
    }
    int64_t revision = 0, compact_revision = 0;
    bool created = false, canceled = false;
    const Json* header = GetObject(*result, "header");
    if ((header != nullptr && !GetInt64(*header, "revision", &revision)) ||
        !GetInt64(*result, "compact_revision", &compact_revision) || !GetBool(*result, "created", &created) ||
        !GetBool(*result, "canceled", &canceled)) {
      end_ = NotGateway(what_, "a watch response field has the wrong type");
      return false;
    }
    if (compact_revision > 0) {
      end_ = absl::OutOfRangeError(absl::StrCat(what_, ": the start revision is compacted (etcd kept revisions from ",
                                                compact_revision, " on); read the current state and watch again"));
      return false;
    }
    if (canceled) {
      const std::string reason = GetString(*result, "cancel_reason");
      if (!created_) {
        // Refused at creation ("created" and "canceled" together): e.g. an
        // empty key range.
        end_ = absl::InvalidArgumentError(absl::StrCat(what_, ": etcd refused the watch: ", reason));
      } else {
        end_ = absl::UnavailableError(
            absl::StrCat(what_, ": etcd canceled the watch", reason.empty() ? "" : ": ", reason));
        end_retryable_ = true;
      }
      return false;
    }
    if (created) {
      if (!created_) {
        created_ = true;
        absl::MutexLock lock(&mu_);
        if (state_ != State::kStarting) return false;  // StartWatch() gave up
        state_ = State::kCreated;
        return true;
      }
      return true;
    }
    if (!created_) {
      end_ = NotGateway(what_, "the first watch response is not \"created\"");
      return false;
    }
    std::vector<WatchEvent> events;
    if (result->contains("events")) {
      const Json* list = GetArray(*result, "events");
      if (list == nullptr) {
        end_ = NotGateway(what_, "events is not a list");
        return false;
      }
      events.reserve(list->size());
      for (const Json& e : *list) {
        WatchEvent ev;
        const std::string type = GetString(e, "type");
        if (type == "DELETE") {
          ev.type = WatchEvent::Type::kDelete;
        } else if (!type.empty() && type != "PUT") {
          end_ = NotGateway(what_, absl::StrCat("an event of type ", type));
          return false;
        }
        const Json* kv = GetObject(e, "kv");
        if (kv == nullptr) {
          end_ = NotGateway(what_, "an event without kv");
          return false;
        }
        if (absl::Status s = DecodeKv(what_, *kv, &ev.kv); !s.ok()) {
          end_ = std::move(s);
          return false;
        }
        events.push_back(std::move(ev));
      }
    }
    return Deliver([&] { on_events_(events, revision); });
  }

  void Run(const std::string& path, const std::string& body) {
    int http_status = 0;
    httpc::LineReader lines(kMaxWatchLineBytes);
    std::string error_body;
    bool stopped = false;  // a handler ended the stream (end_ says why)
    httpc::Response r;
    if (IsCancelled()) {
      r.failure = httpc::Failure::kCanceled;
      r.error = "Canceled";
    } else {
      r = conn_->Stream(
          JsonPost(path, body),
          [&](int status, const httpc::Headers&) {
            http_status = status;
            return !IsCancelled();
          },
          [&](absl::string_view data) {
            if (http_status != 200) {
              if (error_body.size() < 65536) error_body.append(data.data(), data.size());
              return true;
            }
            switch (lines.Feed(data, [&](absl::string_view line) { return HandleLine(line); })) {
              case httpc::LineReader::Result::kStopped:
                stopped = true;
                return false;
              case httpc::LineReader::Result::kTooLong:
                end_ = absl::ResourceExhaustedError(
                    absl::StrCat(what_, ": a watch response over ", kMaxWatchLineBytes >> 20, " MiB"));
                stopped = true;
                return false;
              case httpc::LineReader::Result::kMore:
                break;
            }
            return !IsCancelled();
          });
    }

    if (!created_) {
      absl::Status why = end_;
      bool retryable = end_retryable_;
      if (why.ok()) {
        if (http_status != 0 && http_status != 200) {
          Json j = Json::parse(error_body, nullptr, false);
          int64_t code = 0;
          std::string message;
          if (ParseGatewayError(j, &code, &message)) {
            why = GatewayError(what_, code, message);
            retryable = code == kGrpcUnavailable;
          } else {
            why = absl::UnavailableError(absl::StrCat(what_, ": HTTP ", http_status));
            retryable = http_status >= 500;
          }
        } else {
          why = absl::UnavailableError(absl::StrCat(what_, ": ", r.error));
          retryable = true;
        }
      }
      Fail(std::move(why), retryable);
    } else if (!stopped || !end_.ok()) {
      absl::Status why = end_;
      if (why.ok()) {
        why = absl::UnavailableError(
            absl::StrCat(what_, ": the stream ended: ",
                         r.failure == httpc::Failure::kNone ? "etcd closed it" : r.error));
      }
      Deliver([&] { on_end_(why); });
    }
    absl::MutexLock lock(&mu_);
    done_ = true;
  }

  const std::string what_;
  // The connection never changes; its stop() is thread-safe.
  const std::unique_ptr<Connection> conn_;
  const EventsFn on_events_;
  const EndFn on_end_;
  std::thread thread_;

  // Only the watch thread touches these.
  bool created_ = false;
  absl::Status end_;
  bool end_retryable_ = false;

  absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kStarting;
  absl::Status start_status_ ABSL_GUARDED_BY(mu_);
  bool start_retryable_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  bool delivering_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Watch>> StartHttpWatch(Transport& transport, const std::string& key,
                                                      const WatchOptions& options, EventsFn on_events, EndFn on_end) {
  const std::string what = absl::StrCat("etcd watch ", Quote(key));
  Json create = {{"key", B64(key)}};
  if (!options.range_end.empty()) create["range_end"] = B64(options.range_end);
  if (options.start_revision > 0) create["start_revision"] = absl::StrCat(options.start_revision);
  if (options.progress_notify) create["progress_notify"] = true;
  const std::string body = Dump(Json{{"create_request", std::move(create)}});

  absl::Status last;
  const size_t first = transport.preferred();
  const int attempts = std::max(1, transport.options().max_attempts);
  for (int attempt = 0; attempt < attempts; ++attempt) {
    const size_t idx = (first + attempt) % transport.endpoints().size();
    transport.BackoffBefore(attempt);
    auto watch = std::make_unique<HttpWatch>(absl::StrCat(what, " at ", transport.endpoints()[idx].name),
                                             transport.NewConnection(idx, kWatchIdleTimeout), on_events, on_end);
    watch->Begin("/v3/watch", body);
    absl::Status s = watch->AwaitCreated(transport.options().timeout);
    if (s.ok()) {
      transport.set_preferred(idx);
      return watch;
    }
    const bool retryable = watch->StartRetryable() || s.code() == absl::StatusCode::kDeadlineExceeded;
    watch.reset();
    if (!retryable) return s;
    last = std::move(s);
  }
  return transport.NoEndpoint(what, attempts, last);
}

}  // namespace gangkeeper::etcd
