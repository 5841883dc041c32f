// gangkeeper benchmarks: a paced (open-loop) HTTPS load client for the
// webhook latency target of DESIGN §10 ("p99 under 5 ms at 70% of the
// maximum rate"). wrk keeps every connection busy (closed loop), so it
// measures the maximum rate, not the latency at a given rate.
//
// Each of C keep-alive TLS connections sends the same POST on a fixed
// schedule. The connections are driven by --threads event loops (epoll,
// non-blocking OpenSSL; default 1) that sleep until the next due request but
// never for less than --tick-us (default 500 µs), so the client costs about
// what wrk costs per request and leaves the server the CPU that "70 % of the
// maximum rate" assumes. Measured on the 2-core bench machine at 28,000
// req/s (/mutate): a thread per connection with blocking reads cost about
// 32 µs per request; two loops with a timer per due request 24–27 µs and
// 0.7 context switches per request; one loop with the 500 µs tick 17.6 µs
// and 0.23 (wrk: 16 µs). On a machine whose cores the client shares with
// the server, the client's own cost shows as the server's latency. A request
// that falls due between two wake-ups goes out at the next one, up to a tick
// late; that lateness is counted in its latency (below). The schedule:
// request k of connection i is due at start + (k + i/C) * C/R, so the
// connections together offer R requests per second, evenly spread. When an
// answer comes late the next request goes out at once, and its latency is
// still counted from the time it was due (no coordinated omission): a
// stalled server shows in the percentiles instead of slowing the client.
// Requests due during the first --warmup seconds are sent but not counted.
//
// --dispatch pool: the requests fall due on one schedule (request k at
// start + k/R) and each goes to an idle connection, oldest due first; when
// every connection is busy it waits, and the wait counts in its latency.
// This is how the API server calls a webhook: its HTTP client takes an idle
// keep-alive connection (or opens another) for each call, and never queues
// a call behind another on a busy connection. The default, --dispatch
// connection, is stricter: one slow answer delays every request due after
// it on its connection, however many others are idle.
//
// Usage: gangkeeper_paced_load --port P --ca CA.crt --body FILE [--path /validate]
//          --rate R --connections C --seconds S [--warmup W] [--expect TEXT]
//          [--threads T] [--tick-us U] [--dispatch connection|pool]
// Prints one line:
//   RESULT offered_rps=… achieved_rps=… requests=… errors=… late_1ms=…
//          reconnects=… p50_us=… p90_us=… p99_us=… p999_us=… max_us=…
//          svc_p50_us=… svc_p99_us=…
// p*_us: due time to the end of the answer; svc_*: send to the end of the
// answer; reconnects: connections closed by the server (or failed) and
// opened again; late_1ms: counted requests sent more than 1 ms after they were
// due (the server, or the client itself, fell behind); errors: failed requests
// and answers without --expect (default "\"allowed\":true") or not 200.
#include <sys/epoll.h>
#include <fcntl.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "test/testing/tls_client.h"

namespace gangkeeper::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  int port = 0;
  std::string ca;
  std::string body_file;
  std::string path = "/validate";
  std::string expect = R"("allowed":true)";
  double rate = 1000;
  int connections = 32;
  double seconds = 10;
  double warmup = 1;
  int threads = 1;
  double tick_us = 500;
  // "connection": each connection has its own schedule; "pool": one
  // schedule, each due request taken by an idle connection (see below).
  std::string dispatch = "connection";
};

bool ParseArgs(int argc, char **argv, Args *a) {
  std::map<std::string, std::string> kv;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key.rfind("--", 0) != 0) return false;
    kv[key.substr(2)] = argv[i + 1];
  }
  if (argc % 2 == 0) return false;
  for (const auto &[k, v] : kv) {
    if (k == "port") {
      a->port = std::atoi(v.c_str());
    } else if (k == "ca") {
      a->ca = v;
    } else if (k == "body") {
      a->body_file = v;
    } else if (k == "path") {
      a->path = v;
    } else if (k == "expect") {
      a->expect = v;
    } else if (k == "rate") {
      a->rate = std::atof(v.c_str());
    } else if (k == "connections") {
      a->connections = std::atoi(v.c_str());
    } else if (k == "seconds") {
      a->seconds = std::atof(v.c_str());
    } else if (k == "warmup") {
      a->warmup = std::atof(v.c_str());
    } else if (k == "threads") {
      a->threads = std::atoi(v.c_str());
    } else if (k == "tick-us") {
      a->tick_us = std::atof(v.c_str());
    } else if (k == "dispatch") {
      a->dispatch = v;
    } else {
      std::fprintf(stderr, "unknown flag --%s\n", k.c_str());
      return false;
    }
  }
  return a->port > 0 && !a->ca.empty() && !a->body_file.empty() && a->rate > 0 && a->connections > 0 &&
         a->seconds > 0 && a->warmup >= 0 && a->threads > 0 && a->tick_us >= 0 &&
         (a->dispatch == "connection" || a->dispatch == "pool");
}

double Percentile(const std::vector<double> &sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i = std::min(sorted.size() - 1, static_cast<size_t>(p * static_cast<double>(sorted.size())));
  return sorted[i];
}

struct PerConnection {
  std::vector<double> due_us;      // due -> answered
  std::vector<double> service_us;  // sent -> answered
  int64_t errors = 0;
  int64_t late = 0;
  int64_t reconnects = 0;
};

// One event loop's connections: each sends request k when it is due (or at
// once when the answer to k-1 came after k was due), reads the answer
// without blocking, and records it.
class Loop {
 public:
  Loop(const Args &a, const testing::TlsClientOptions &options, const std::string &request, Clock::time_point start,
       Clock::time_point counted_from, Clock::time_point end, std::chrono::duration<double> interval,
       int loop_index, int loops)
      : a_(a),
        options_(options),
        request_(request),
        start_(start),
        counted_from_(counted_from),
        end_(end),
        interval_(interval),
        tick_ns_(static_cast<int64_t>(a.tick_us * 1000)),
        pool_(a.dispatch == "pool"),
        pool_interval_(static_cast<double>(loops) / a.rate),
        pool_phase_(static_cast<double>(loop_index) / static_cast<double>(loops)),
        epoll_(epoll_create1(EPOLL_CLOEXEC)) {}
  ~Loop() { close(epoll_); }

  void Add(int index, std::unique_ptr<testing::TlsConnection> conn, PerConnection *result) {
    auto c = std::make_unique<Conn>();
    c->index = index;
    c->phase = static_cast<double>(index) / static_cast<double>(a_.connections);
    c->result = result;
    c->due = DueOf(*c, 0);
    Attach(c.get(), std::move(conn));
    conns_.push_back(std::move(c));
  }

  void Run() {
    std::vector<epoll_event> events(64);
    for (;;) {
      const Clock::time_point now = Clock::now();
      bool left = false;
      bool connecting = false;
      Clock::time_point next = Clock::time_point::max();
      if (pool_) {
        // The requests due by now go to idle connections, oldest first;
        // those left wait (their latency counts from when they were due).
        // The scan starts after the connection that took the last one, so
        // that the requests spread over the connections (each reaches the
        // server's requests-per-connection limit no sooner than it must).
        bool idle = false;
        for (size_t n = 0; n < conns_.size(); ++n) {
          const size_t i = (pool_scan_ + n) % conns_.size();
          Conn &c = *conns_[i];
          if (c.assigned) continue;
          const Clock::time_point due = PoolDue();
          if (due >= end_ || due > now) {
            idle = true;
            break;
          }
          c.assigned = true;
          c.due = due;
          ++pool_next_;
          pool_scan_ = i + 1;
        }
        if (PoolDue() < end_) {
          left = true;
          if (idle) next = PoolDue();
        }
      }
      for (auto &c : conns_) {
        if (c->done || (pool_ && !c->assigned)) continue;
        left = true;
        if (c->in_flight) {
          // No answer within the client's I/O timeout: an error, and a new
          // connection for the next request (the run always ends).
          if (now - c->sent > absl::ToChronoNanoseconds(options_.io_timeout)) Fail(*c);
          continue;
        }
        if (c->due <= now) {
          Send(*c);
          if (c->connecting.valid()) connecting = true;
          if (!c->in_flight) continue;  // finished, waiting for its connection, or could not send
        } else {
          next = std::min(next, c->due);
        }
      }
      if (!left) return;
      // Until the next due request (or a second when every one is in flight),
      // but never a timer shorter than the tick: each timer wake-up costs a
      // context switch, and with one per due request the client cost half
      // as much again as wrk per request. Requests that fall due meanwhile
      // go out at the next wake-up (an answer, or the tick), up to a tick
      // late, and that lateness counts in their latency.
      timespec wait{1, 0};
      if (connecting) next = std::min(next, Clock::now());  // look again after a tick
      if (next != Clock::time_point::max()) {
        const auto ns = std::max<int64_t>(
            tick_ns_, std::chrono::duration_cast<std::chrono::nanoseconds>(next - Clock::now()).count());
        wait.tv_sec = static_cast<time_t>(ns / 1000000000);
        wait.tv_nsec = static_cast<long>(ns % 1000000000);
      }
      const int n = epoll_pwait2(epoll_, events.data(), static_cast<int>(events.size()), &wait, nullptr);
      for (int i = 0; i < n; ++i) {
        Conn *c = conns_[static_cast<size_t>(events[static_cast<size_t>(i)].data.u64)].get();
        if (c->in_flight) {
          Receive(*c);
        } else {
          Drain(*c);
        }
      }
      // An answer can also be whole in OpenSSL's buffer already.
      for (auto &c : conns_) {
        if (c->in_flight && c->tls != nullptr && SSL_pending(c->tls->ssl()) > 0) Receive(*c);
      }
    }
  }

 private:
  struct Conn {
    int index = 0;
    double phase = 0;
    PerConnection *result = nullptr;
    std::unique_ptr<testing::TlsConnection> tls;
    int64_t k = 0;
    Clock::time_point due, sent;
    bool assigned = false;  // pool dispatch: holds a due request
    bool in_flight = false;
    bool done = false;
    std::string in;  // the answer so far
    // A new connection being opened (and its handshake made) on a thread of
    // its own, so that the loop's other connections keep their schedule.
    std::future<absl::StatusOr<std::unique_ptr<testing::TlsConnection>>> connecting;
  };

  // Pool dispatch: when the loop's next request is due.
  Clock::time_point PoolDue() const {
    return start_ + std::chrono::duration_cast<Clock::duration>(pool_interval_ *
                                                                (static_cast<double>(pool_next_) + pool_phase_));
  }

  Clock::time_point DueOf(const Conn &c, int64_t k) const {
    return start_ + std::chrono::duration_cast<Clock::duration>(interval_ * (static_cast<double>(k) + c.phase));
  }

  void Attach(Conn *c, std::unique_ptr<testing::TlsConnection> tls) {
    c->tls = std::move(tls);
    const int fd = c->tls->fd();
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    // One read per answer rather than one for each TLS record's header and
    // one for its body.
    SSL_set_read_ahead(c->tls->ssl(), 1);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = static_cast<uint64_t>(conns_.size());
    for (size_t i = 0; i < conns_.size(); ++i) {
      if (conns_[i].get() == c) ev.data.u64 = i;
    }
    epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev);
  }

  void Detach(Conn &c) {
    if (c.tls == nullptr) return;
    epoll_ctl(epoll_, EPOLL_CTL_DEL, c.tls->fd(), nullptr);
    c.tls.reset();
  }

  // Sends request k of `c` (it is due). A connection the server closed is
  // opened again first, off the loop (the server ends keep-alive after a
  // number of requests): the request waits for it, and its latency, still
  // counted from when it was due, includes the handshake; the loop's other
  // connections go on meanwhile.
  void Send(Conn &c) {
    if (c.due >= end_) {
      c.done = true;
      Detach(c);
      return;
    }
    const bool counted = c.due >= counted_from_;
    if (c.tls == nullptr) {
      if (!c.connecting.valid()) {
        c.connecting = std::async(std::launch::async, [port = a_.port, options = options_] {
          return testing::TlsConnection::Connect(port, options);
        });
      }
      if (c.connecting.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;  // not yet
      absl::StatusOr<std::unique_ptr<testing::TlsConnection>> fresh = c.connecting.get();
      if (!fresh.ok()) {
        if (counted) ++c.result->errors;
        Next(c);
        return;
      }
      Attach(&c, *std::move(fresh));
    }
    c.sent = Clock::now();
    size_t off = 0;
    while (off < request_.size()) {  // a 5 KB request fits the socket buffer; wait if it does not
      const int w = SSL_write(c.tls->ssl(), request_.data() + off, static_cast<int>(request_.size() - off));
      if (w > 0) {
        off += static_cast<size_t>(w);
        continue;
      }
      const int err = SSL_get_error(c.tls->ssl(), w);
      if (err == SSL_ERROR_WANT_WRITE || err == SSL_ERROR_WANT_READ) {
        std::this_thread::yield();
        continue;
      }
      ERR_clear_error();
      Fail(c);
      return;
    }
    c.in.clear();
    c.in_flight = true;
  }

  // Reads what has come of the answer; records it once whole. Reading
  // stops as soon as the answer is whole (a read that would only say
  // "nothing more" costs a syscall per request).
  void Receive(Conn &c) {
    char buf[16384];
    size_t head_end = std::string::npos, length = 0;
    std::string head;
    for (;;) {
      const int r = SSL_read(c.tls->ssl(), buf, sizeof(buf));
      if (r <= 0) {
        const int err = SSL_get_error(c.tls->ssl(), r);
        if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return;  // more to come
        ERR_clear_error();
        Fail(c);  // closed or failed mid-answer
        return;
      }
      c.in.append(buf, static_cast<size_t>(r));
      if (head_end == std::string::npos) {
        head_end = c.in.find("\r\n\r\n");
        if (head_end == std::string::npos) continue;
        head = absl::AsciiStrToLower(c.in.substr(0, head_end));
        if (const size_t at = head.find("content-length:"); at != std::string::npos) {
          length = static_cast<size_t>(std::strtoull(head.c_str() + at + 15, nullptr, 10));
        }
      }
      if (c.in.size() >= head_end + 4 + length) break;  // whole
    }
    const Clock::time_point answered = Clock::now();
    const bool ok = c.in.rfind("HTTP/1.1 200", 0) == 0 && c.in.find(a_.expect, head_end) != std::string::npos;
    const bool counted = c.due >= counted_from_;
    // A server that ends keep-alive ("Connection: close") costs a new
    // handshake on the next request; count those.
    if (absl::StrContains(head, "connection: close")) {
      Detach(c);
      ++c.result->reconnects;
    }
    if (counted) {
      if (!ok) {
        ++c.result->errors;
      } else {
        if (c.sent - c.due > std::chrono::milliseconds(1)) ++c.result->late;
        c.result->due_us.push_back(std::chrono::duration<double, std::micro>(answered - c.due).count());
        c.result->service_us.push_back(std::chrono::duration<double, std::micro>(answered - c.sent).count());
      }
    }
    c.in_flight = false;
    Next(c);
  }

  // Readable with nothing asked: the server closed the connection (or sent
  // what no request asked for, which is dropped); the next request opens a
  // new one.
  void Drain(Conn &c) {
    if (c.tls == nullptr) return;
    char buf[4096];
    for (;;) {
      const int r = SSL_read(c.tls->ssl(), buf, sizeof(buf));
      if (r > 0) continue;
      const int err = SSL_get_error(c.tls->ssl(), r);
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return;
      ERR_clear_error();
      Detach(c);
      ++c.result->reconnects;
      return;
    }
  }

  void Fail(Conn &c) {
    if (c.due >= counted_from_) ++c.result->errors;
    Detach(c);
    ++c.result->reconnects;
    c.in_flight = false;
    Next(c);
  }

  void Next(Conn &c) {
    if (pool_) {
      c.assigned = false;  // idle: takes the next due request
      return;
    }
    ++c.k;
    c.due = DueOf(c, c.k);
    if (c.due >= end_) {
      c.done = true;
      Detach(c);
    }
  }

  const Args &a_;
  const testing::TlsClientOptions &options_;
  const std::string &request_;
  const Clock::time_point start_, counted_from_, end_;
  const std::chrono::duration<double> interval_;
  const int64_t tick_ns_;
  const bool pool_;
  const std::chrono::duration<double> pool_interval_;
  const double pool_phase_;
  int64_t pool_next_ = 0;  // the loop's next request to hand out
  size_t pool_scan_ = 0;
  const int epoll_;
  std::vector<std::unique_ptr<Conn>> conns_;
};

int Main(int argc, char **argv) {
  Args a;
  if (!ParseArgs(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: gangkeeper_paced_load --port P --ca CA.crt --body FILE [--path "
                 "/validate] --rate R\n"
                 "         --connections C --seconds S [--warmup W] [--expect TEXT] [--threads T] [--tick-us U]\n"
                 "         [--dispatch connection|pool]\n");
    return 2;
  }
  std::ifstream in(a.body_file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string body = ss.str();
  if (body.empty()) {
    std::fprintf(stderr, "empty or unreadable body file %s\n", a.body_file.c_str());
    return 2;
  }
  testing::TlsClientOptions options;
  options.ca_file = a.ca;

  // Connect (and handshake) every connection before the clock starts.
  std::vector<std::unique_ptr<testing::TlsConnection>> conns;
  for (int i = 0; i < a.connections; ++i) {
    auto c = testing::TlsConnection::Connect(a.port, options);
    if (!c.ok()) {
      std::fprintf(stderr, "connect: %s\n", std::string(c.status().message()).c_str());
      return 1;
    }
    conns.push_back(*std::move(c));
  }

  const auto interval = std::chrono::duration<double>(static_cast<double>(a.connections) / a.rate);
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(100);
  const Clock::time_point counted_from =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.warmup));
  const Clock::time_point end =
      counted_from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds));
  std::vector<PerConnection> results(static_cast<size_t>(a.connections));
  const std::string request = absl::StrCat("POST ", a.path, " HTTP/1.1\r\nHost: localhost\r\n",
                                           "Content-Type: application/json\r\nAccept: application/json, */*\r\n",
                                           "Content-Length: ", body.size(), "\r\n\r\n", body);
  const int threads = std::min(a.threads, a.connections);
  std::vector<std::thread> loops;
  for (int t = 0; t < threads; ++t) {
    loops.emplace_back([&, t] {
      Loop loop(a, options, request, start, counted_from, end, interval, t, threads);
      for (int i = t; i < a.connections; i += threads) {
        loop.Add(i, std::move(conns[static_cast<size_t>(i)]), &results[static_cast<size_t>(i)]);
      }
      loop.Run();
    });
  }
  for (std::thread &t : loops) t.join();
  // The last requests may finish after `end`; the window is the schedule's.
  std::vector<double> due_us;
  std::vector<double> service_us;
  int64_t errors = 0;
  int64_t late = 0;
  int64_t reconnects = 0;
  for (const PerConnection &r : results) {
    due_us.insert(due_us.end(), r.due_us.begin(), r.due_us.end());
    service_us.insert(service_us.end(), r.service_us.begin(), r.service_us.end());
    errors += r.errors;
    late += r.late;
    reconnects += r.reconnects;
  }
  std::sort(due_us.begin(), due_us.end());
  std::sort(service_us.begin(), service_us.end());
  std::printf(
      "RESULT offered_rps=%.1f achieved_rps=%.1f requests=%zu errors=%lld "
      "late_1ms=%lld reconnects=%lld p50_us=%.0f p90_us=%.0f "
      "p99_us=%.0f p999_us=%.0f max_us=%.0f svc_p50_us=%.0f svc_p99_us=%.0f\n",
      a.rate, static_cast<double>(due_us.size()) / a.seconds, due_us.size(), static_cast<long long>(errors),
      static_cast<long long>(late), static_cast<long long>(reconnects), Percentile(due_us, 0.50),
      Percentile(due_us, 0.90), Percentile(due_us, 0.99), Percentile(due_us, 0.999),
      due_us.empty() ? 0.0 : due_us.back(), Percentile(service_us, 0.50), Percentile(service_us, 0.99));
  return errors == 0 ? 0 : 3;
}

}  // namespace
}  // namespace gangkeeper::bench

int main(int argc, char **argv) { return gangkeeper::bench::Main(argc, argv); }
