// gangkeeper benchmarks: hostile connections held against a listener while
// run.sh's paced client measures a well-behaved client's latency (issue
// #22: "10,000 idle TLS connections held open ... 1,000 slowloris
// connections do not delay it").
//
// Opens --idle TLS connections that complete the handshake and then send
// nothing, and --slow connections that complete the handshake and then send
// a request header one byte every --slow-interval seconds (slowloris). A slow
// connection the server cuts is opened again, so the attack keeps its size;
// an idle one is left closed (the server's idle timeout or its connection cap
// chose it). Connections come from several loopback source addresses
// (127.0.0.2, 127.0.0.3, ...: --per-source each), the way many pods would
// reach the webhook, so that the per-source cap alone does not refuse them.
//
// Usage: gangkeeper_idle_load --port P --ca CA.crt --idle N --slow M --seconds S
//          [--per-source 900] [--slow-interval 5]
// Prints "READY idle=… slow=… failed=…" once every connection was tried
// (run.sh starts its measurement then), then after S seconds one line:
//   RESULT idle_open=… idle_closed=… slow_open=… slow_cut=… connect_failed=…
//          header_bytes_sent=…
// Loopback only; every loop is bounded by --seconds.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace gangkeeper::bench {
namespace {

using Clock = std::chrono::steady_clock;

// SIGTERM/SIGINT end the hold early; the RESULT line is still printed.
volatile std::sig_atomic_t g_stop = 0;
void StopHolding(int) { g_stop = 1; }

struct HoldArgs {
  int port = 0;
  std::string ca;
  int idle = 10000;
  int slow = 1000;
  double seconds = 30;
  int per_source = 900;
  double slow_interval = 5;
};

bool ParseHoldArgs(int argc, char** argv, HoldArgs* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--port") a->port = std::atoi(v);
    else if (k == "--ca") a->ca = v;
    else if (k == "--idle") a->idle = std::atoi(v);
    else if (k == "--slow") a->slow = std::atoi(v);
    else if (k == "--seconds") a->seconds = std::atof(v);
    else if (k == "--per-source") a->per_source = std::atoi(v);
    else if (k == "--slow-interval") a->slow_interval = std::atof(v);
    else return false;
  }
  return a->port > 0 && !a->ca.empty() && a->idle >= 0 && a->slow >= 0 && a->per_source > 0 && a->seconds > 0;
}

// One held connection: a socket and its TLS session.
struct Held {
  int fd = -1;
  SSL* ssl = nullptr;
  size_t sent = 0;  // slowloris: header bytes sent so far
  Clock::time_point next_byte;
};

void CloseHeld(Held* h) {
  if (h->ssl != nullptr) SSL_free(h->ssl);
  if (h->fd >= 0) close(h->fd);
  h->ssl = nullptr;
  h->fd = -1;
}

// The n-th source address: 127.0.(n / 250).(n % 250 + 2).
std::string SourceAddress(int n) {
  return "127.0." + std::to_string(n / 250) + "." + std::to_string(n % 250 + 2);
}

// Connects from `source` and completes the TLS handshake (5 s bound).
bool OpenHeld(SSL_CTX* ctx, int port, const std::string& source, Held* h) {
  h->fd = socket(AF_INET, SOCK_STREAM, 0);
  if (h->fd < 0) return false;
  timeval tv{5, 0};
  setsockopt(h->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(h->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (bind(h->fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      connect(h->fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    CloseHeld(h);
    return false;
  }
  h->ssl = SSL_new(ctx);
  SSL_set_fd(h->ssl, h->fd);
  SSL_set_tlsext_host_name(h->ssl, "localhost");
  if (SSL_connect(h->ssl) != 1) {
    ERR_clear_error();
    CloseHeld(h);
    return false;
  }
  return true;
}

// True when the server closed `h` (EOF or an error is waiting to be read).
bool ClosedByPeer(const Held& h) {
  pollfd p{h.fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) return true;
  char b;
  return recv(h.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

int Run(const HoldArgs& a) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr || SSL_CTX_load_verify_locations(ctx, a.ca.c_str(), nullptr) != 1) {
    std::fprintf(stderr, "idle_load: cannot load the CA %s\n", a.ca.c_str());
    return 2;
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  const std::string header =
      "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nX-Slow: ";
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds));
  const auto interval =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.slow_interval));
  std::vector<Held> idle(a.idle), slow(a.slow);
  int failed = 0, source = 0, on_source = 0;
  auto next_source = [&] {
    if (++on_source > a.per_source) {
      on_source = 1;
      ++source;
    }
    return SourceAddress(source);
  };
  for (Held& h : idle) {
    if (g_stop != 0 || Clock::now() > deadline) break;
    if (!OpenHeld(ctx, a.port, next_source(), &h)) ++failed;
  }
  std::vector<std::string> slow_source(a.slow);
  for (size_t i = 0; i < slow.size() && g_stop == 0 && Clock::now() < deadline; ++i) {
    slow_source[i] = next_source();
    if (!OpenHeld(ctx, a.port, slow_source[i], &slow[i])) ++failed;
    slow[i].next_byte = Clock::now() + interval;
  }
  int opened_idle = 0, opened_slow = 0;
  for (const Held& h : idle) opened_idle += h.fd >= 0;
  for (const Held& h : slow) opened_slow += h.fd >= 0;
  std::printf("READY idle=%d slow=%d failed=%d seconds_to_open=%.1f\n", opened_idle, opened_slow, failed,
              std::chrono::duration<double>(Clock::now() - start).count());
  std::fflush(stdout);

  long slow_cut = 0, header_bytes = 0;
  while (g_stop == 0 && Clock::now() < deadline) {
    const auto now = Clock::now();
    for (size_t i = 0; i < slow.size(); ++i) {
      Held& h = slow[i];
      if (h.fd >= 0 && ClosedByPeer(h)) {
        CloseHeld(&h);
        ++slow_cut;
      }
      if (h.fd < 0) {  // cut (or never opened): the attack opens it again
        if (OpenHeld(ctx, a.port, slow_source[i], &h)) {
          h.sent = 0;
          h.next_byte = now + interval;
        } else {
          ++failed;
        }
        continue;
      }
      if (now < h.next_byte) continue;
      const char b = header[h.sent % header.size()];
      if (SSL_write(h.ssl, &b, 1) == 1) {
        ++h.sent;
        ++header_bytes;
      } else {
        ERR_clear_error();
        CloseHeld(&h);
        ++slow_cut;
      }
      h.next_byte = now + interval;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  int idle_open = 0, idle_closed = 0, slow_open = 0;
  for (Held& h : idle) {
    if (h.fd < 0) continue;
    (ClosedByPeer(h) ? idle_closed : idle_open)++;
    CloseHeld(&h);
  }
  for (Held& h : slow) {
    slow_open += h.fd >= 0 && !ClosedByPeer(h);
    CloseHeld(&h);
  }
  std::printf("RESULT idle_open=%d idle_closed=%d slow_open=%d slow_cut=%ld connect_failed=%d header_bytes_sent=%ld\n",
              idle_open, idle_closed, slow_open, slow_cut, failed, header_bytes);
  SSL_CTX_free(ctx);
  return 0;
}

}  // namespace
}  // namespace gangkeeper::bench

int main(int argc, char** argv) {
  gangkeeper::bench::HoldArgs args;
  if (!gangkeeper::bench::ParseHoldArgs(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: gangkeeper_idle_load --port P --ca CA.crt --idle N --slow M --seconds S "
                 "[--per-source 900] [--slow-interval 5]\n");
    return 2;
  }
  std::signal(SIGTERM, gangkeeper::bench::StopHolding);
  std::signal(SIGINT, gangkeeper::bench::StopHolding);
  std::signal(SIGPIPE, SIG_IGN);  // a write to a connection the server cut
  return gangkeeper::bench::Run(args);
}
