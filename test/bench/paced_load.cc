// gangkeeper benchmarks: a paced (open-loop) HTTPS load client for the
// webhook latency target of DESIGN §10 ("p99 under 5 ms at 70% of the
// maximum rate"). wrk keeps every connection busy (closed loop), so it
// measures the maximum rate, not the latency at a given rate.
//
// Each of C keep-alive TLS connections (its own thread, blocking I/O via
// test/testing/tls_client.h) sends the same POST on a fixed schedule:
// request k of connection i is due at start + (k + i/C) * C/R, so the
// connections together offer R requests per second, evenly spread. When an
// answer comes late the next request goes out at once, and its latency is
// still counted from the time it was due (no coordinated omission): a
// stalled server shows in the percentiles instead of slowing the client.
// Requests due during the first --warmup seconds are sent but not counted.
//
// Usage: gangkeeper_paced_load --port P --ca CA.crt --body FILE [--path /validate]
//          --rate R --connections C --seconds S [--warmup W] [--expect TEXT]
// Prints one line:
//   RESULT offered_rps=… achieved_rps=… requests=… errors=… late_1ms=…
//          reconnects=… p50_us=… p90_us=… p99_us=… p999_us=… max_us=…
//          svc_p50_us=… svc_p99_us=…
// p*_us: due time to the end of the answer; svc_*: send to the end of the
// answer; reconnects: connections closed by the server (or failed) and
// opened again; late_1ms: counted requests sent more than 1 ms after they were
// due (the server, or the client itself, fell behind); errors: failed requests
// and answers without --expect (default "\"allowed\":true") or not 200.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
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
    } else {
      std::fprintf(stderr, "unknown flag --%s\n", k.c_str());
      return false;
    }
  }
  return a->port > 0 && !a->ca.empty() && !a->body_file.empty() && a->rate > 0 && a->connections > 0 &&
         a->seconds > 0 && a->warmup >= 0;
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

int Main(int argc, char **argv) {
  Args a;
  if (!ParseArgs(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: gangkeeper_paced_load --port P --ca CA.crt --body FILE [--path "
                 "/validate] --rate R\n"
                 "         --connections C --seconds S [--warmup W] [--expect TEXT]\n");
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
  std::vector<std::thread> threads;
  for (int i = 0; i < a.connections; ++i) {
    threads.emplace_back([&, i] {
      PerConnection &r = results[static_cast<size_t>(i)];
      std::unique_ptr<testing::TlsConnection> &conn = conns[static_cast<size_t>(i)];
      const double phase = static_cast<double>(i) / static_cast<double>(a.connections);
      for (int64_t k = 0;; ++k) {
        const Clock::time_point due =
            start + std::chrono::duration_cast<Clock::duration>(interval * (static_cast<double>(k) + phase));
        if (due >= end) break;
        std::this_thread::sleep_until(due);
        const bool counted = due >= counted_from;
        if (conn == nullptr) {
          auto c = testing::TlsConnection::Connect(a.port, options);
          if (!c.ok()) {
            if (counted) ++r.errors;
            continue;
          }
          conn = *std::move(c);
        }
        const Clock::time_point sent = Clock::now();
        auto reply = conn->Request("POST", a.path, body);
        const Clock::time_point done = Clock::now();
        bool ok = reply.ok() && reply->status == 200 && reply->body.find(a.expect) != std::string::npos;
        // A server that ends keep-alive ("Connection: close") costs a new
        // handshake on the next request; count those.
        if (!reply.ok() || absl::StrContains(absl::AsciiStrToLower(reply->headers), "connection: close")) {
          conn.reset();
          ++r.reconnects;
        }
        if (!counted) continue;
        if (!ok) {
          ++r.errors;
          continue;
        }
        if (sent - due > std::chrono::milliseconds(1)) ++r.late;
        r.due_us.push_back(std::chrono::duration<double, std::micro>(done - due).count());
        r.service_us.push_back(std::chrono::duration<double, std::micro>(done - sent).count());
      }
    });
  }
  for (std::thread &t : threads) t.join();
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
