// gangkeeper tests: a real etcd as a child process (see etcd_process.h).
#include "test/testing/etcd_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gangkeeper/base/clock.h"
#include "gangkeeper/base/status_macros.h"
#include "test/testing/process.h"

namespace gangkeeper::testing {
namespace {

constexpr char kDefaultEtcd[] = "/usr/bin/etcd";
constexpr absl::Duration kStartTimeout = absl::Seconds(20);
constexpr absl::Duration kPollInterval = absl::Milliseconds(20);
constexpr int kPortAttempts = 5;

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Tail(const std::string& text, size_t n = 4000) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

// Two distinct ports that were free a moment ago (the kernel's picks for
// port 0, both held until both are known). Another process may take one
// before etcd binds it; Start() retries then.
absl::StatusOr<std::pair<int, int>> FreePorts() {
  int fds[2] = {-1, -1};
  int ports[2] = {0, 0};
  absl::Status status;
  for (int i = 0; i < 2 && status.ok(); ++i) {
    fds[i] = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (fds[i] < 0 || ::bind(fds[i], reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::getsockname(fds[i], reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      status = absl::InternalError("etcd: cannot bind a socket to 127.0.0.1:0 to find a free port");
    }
    ports[i] = ntohs(addr.sin_port);
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  if (!status.ok()) return status;
  return std::make_pair(ports[0], ports[1]);
}

std::string MakeEtcdDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/gangkeeper-etcd-XXXXXX";
  char* made = ::mkdtemp(tmpl.data());
  return made != nullptr ? made : "";
}

// Forks and execs `args` with stdout and stderr appended to `log`. The
// test binary is multi-threaded, so between fork and exec the child makes
// only async-signal-safe calls: argv and every C string are built before
// the fork (a malloc in the child can deadlock on a lock another thread
// held at fork time).
pid_t SpawnEtcd(const std::vector<std::string>& args, const std::string& log) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const char* log_path = log.c_str();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  // Dies with the forking thread, so a crashed test leaves no etcd running.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  const int fd = ::open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (fd < 0) ::_exit(127);
  ::dup2(fd, 1);
  ::dup2(fd, 2);
  const int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, 0);
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

bool Healthy(int port, const EtcdTls* tls) {
  std::unique_ptr<httplib::ClientImpl> c;
  if (tls != nullptr) {
    // Only "is it up?": the client under test is what checks certificates.
    auto ssl = std::make_unique<httplib::SSLClient>("127.0.0.1", port, tls->client_cert_file, tls->client_key_file);
    ssl->enable_server_certificate_verification(false);
    c = std::move(ssl);
  } else {
    c = std::make_unique<httplib::ClientImpl>("127.0.0.1", port);
  }
  c->set_connection_timeout(0, 200000);
  c->set_read_timeout(0, 500000);
  httplib::Result r = c->Get("/health");
  return r && r->status == 200 && absl::StrContains(r->body, "\"true\"");
}

absl::Status Openssl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<CommandResult> r = RunCommand(argv, absl::Seconds(30));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return absl::InternalError(absl::StrCat("openssl ", args[0], ": ", r->err));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EtcdTls> MakeEtcdCerts(const std::string& dir) {
  auto file = [&](const std::string& name) { return dir + "/" + name; };
  const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  GK_RETURN_IF_ERROR(Openssl(with({"req", "-x509", "-days", "1", "-subj", "/CN=gangkeeper-etcd-test-ca", "-addext",
                                   "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
                                   "-keyout", file("ca.key"), "-out", file("ca.crt")},
                                  ec)));
  const std::pair<const char*, const char*> leaves[] = {
      {"server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n"},
      {"client", "extendedKeyUsage=clientAuth\n"},
  };
  for (const auto& [name, ext] : leaves) {
    const std::string base = file(name);
    {
      std::ofstream out(base + ".ext");
      out << ext;
    }
    GK_RETURN_IF_ERROR(Openssl(with({"req", "-new", "-subj", absl::StrCat("/CN=gangkeeper-etcd-test-", name),
                                     "-keyout", base + ".key", "-out", base + ".csr"},
                                    ec)));
    GK_RETURN_IF_ERROR(Openssl({"x509", "-req", "-days", "1", "-in", base + ".csr", "-CA", file("ca.crt"), "-CAkey",
                                file("ca.key"), "-CAcreateserial", "-extfile", base + ".ext", "-out", base + ".crt"}));
  }
  EtcdTls tls;
  tls.cert_file = file("server.crt");
  tls.key_file = file("server.key");
  tls.client_ca_file = file("ca.crt");
  tls.client_cert_file = file("client.crt");
  tls.client_key_file = file("client.key");
  return tls;
}

absl::StatusOr<std::unique_ptr<EtcdProcess>> EtcdProcess::Start(const std::string& data_dir) {
  return StartImpl(nullptr, data_dir);
}

absl::StatusOr<std::unique_ptr<EtcdProcess>> EtcdProcess::StartTls(const EtcdTls& tls, const std::string& data_dir) {
  return StartImpl(&tls, data_dir);
}

absl::StatusOr<std::unique_ptr<EtcdProcess>> EtcdProcess::StartImpl(const EtcdTls* tls, const std::string& data_dir) {
  std::unique_ptr<EtcdProcess> p(new EtcdProcess());
  if (tls != nullptr) {
    p->tls_on_ = true;
    p->tls_ = *tls;
  }
  const char* env = std::getenv("GK_ETCD");
  p->binary_ = env != nullptr && *env != '\0' ? env : kDefaultEtcd;
  if (::access(p->binary_.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "etcd: no executable at ", p->binary_,
        "; the etcd tests need a real etcd: install etcd-server (scripts/deps.sh) or set GK_ETCD to its path"));
  }
  p->work_dir_ = MakeEtcdDir();
  if (p->work_dir_.empty()) return absl::InternalError("etcd: cannot create a temporary directory");
  p->log_file_ = p->work_dir_ + "/etcd.log";
  const bool own_data = data_dir.empty();
  p->data_dir_ = own_data ? p->work_dir_ + "/data" : data_dir;
  absl::Status last;
  for (int attempt = 0; attempt < kPortAttempts; ++attempt) {
    absl::StatusOr<std::pair<int, int>> ports = FreePorts();
    if (!ports.ok()) return ports.status();
    p->client_port_ = ports->first;
    p->peer_port_ = ports->second;
    const size_t log_size = p->Log().size();
    last = p->Launch(kStartTimeout);
    if (last.ok()) return p;
    // Another process took a port between FreePort() and etcd's bind: try
    // new ones. A data dir of ours starts clean again (etcd records its
    // peer URL there).
    if (!absl::StrContains(p->Log().substr(log_size), "address already in use")) break;
    if (own_data) {
      std::error_code ec;
      std::filesystem::remove_all(p->data_dir_, ec);
    }
  }
  return last;
}

EtcdProcess::~EtcdProcess() {
  Kill();
  std::error_code ec;
  if (!work_dir_.empty()) std::filesystem::remove_all(work_dir_, ec);
}

std::string EtcdProcess::endpoint() const { return absl::StrCat("127.0.0.1:", client_port_); }

absl::Status EtcdProcess::Launch(absl::Duration timeout) {
  const std::string client_url = absl::StrCat(tls_on_ ? "https" : "http", "://127.0.0.1:", client_port_);
  const std::string peer_url = absl::StrCat("http://127.0.0.1:", peer_port_);
  std::vector<std::string> args = {
      binary_,
      "--name=default",
      "--data-dir=" + data_dir_,
      "--listen-client-urls=" + client_url,
      "--advertise-client-urls=" + client_url,
      "--listen-peer-urls=" + peer_url,
      "--initial-advertise-peer-urls=" + peer_url,
      "--initial-cluster=default=" + peer_url,
      "--logger=zap",
      "--log-outputs=stderr",
      "--log-level=warn",
      // A single member elects itself after one election timeout.
      "--heartbeat-interval=25",
      "--election-timeout=250",
      "--snapshot-count=10000",
      "--quota-backend-bytes=268435456",
      "--experimental-watch-progress-notify-interval=1s",
  };
  if (tls_on_) {
    args.push_back("--cert-file=" + tls_.cert_file);
    args.push_back("--key-file=" + tls_.key_file);
    if (!tls_.client_ca_file.empty()) {
      args.push_back("--client-cert-auth");
      args.push_back("--trusted-ca-file=" + tls_.client_ca_file);
    }
  }
  {
    std::ofstream log(log_file_, std::ios::app);
    log << "=== gangkeeper test harness: starting etcd on " << client_url << " (peer " << peer_url << ")\n";
  }
  pid_ = SpawnEtcd(args, log_file_);
  if (pid_ < 0) {
    pid_ = -1;
    return absl::InternalError("etcd: fork failed");
  }
  base::Stopwatch waited;
  while (waited.Elapsed() < timeout) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::FailedPreconditionError(absl::StrCat("etcd exited while starting (status ", status, "); log:\n",
                                                        Tail(Log())));
    }
    if (Healthy(client_port_, tls_on_ ? &tls_ : nullptr)) return absl::OkStatus();
    absl::SleepFor(kPollInterval);
  }
  Kill();
  return absl::FailedPreconditionError(absl::StrCat("etcd was not healthy after ", absl::FormatDuration(timeout),
                                                    "; log:\n", Tail(Log())));
}

void EtcdProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

void EtcdProcess::Stop(absl::Duration grace) {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  base::Stopwatch waited;
  while (waited.Elapsed() < grace) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  Kill();
}

absl::Status EtcdProcess::Restart() {
  Stop();
  // The ports were etcd's a moment ago; a clash is unlikely but possible
  // while the old sockets linger, so try a few times.
  absl::Status last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const size_t log_size = Log().size();
    last = Launch(kStartTimeout);
    if (last.ok() || !absl::StrContains(Log().substr(log_size), "address already in use")) return last;
    absl::SleepFor(absl::Milliseconds(200));
  }
  return last;
}

absl::Status EtcdProcess::Freeze() {
  if (pid_ <= 0) return absl::FailedPreconditionError("etcd is not running");
  if (::kill(pid_, SIGSTOP) != 0) return absl::InternalError("kill(SIGSTOP) failed");
  const std::string tasks = absl::StrCat("/proc/", pid_, "/task");
  base::Stopwatch waited;
  while (waited.Elapsed() < absl::Seconds(10)) {
    bool all_stopped = true;
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
      // /proc/PID/task/TID/stat: "TID (comm) S ..."; the state follows the
      // last ')' (comm may hold one).
      const std::string stat = ReadWhole((task.path() / "stat").string());
      const size_t paren = stat.rfind(')');
      if (paren == std::string::npos || paren + 2 >= stat.size()) continue;  // thread gone
      const char state = stat[paren + 2];
      if (state != 'T' && state != 't') {
        all_stopped = false;
        break;
      }
    }
    if (ec) return absl::InternalError(absl::StrCat("cannot list ", tasks, ": ", ec.message()));
    if (all_stopped) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(2));
  }
  return absl::DeadlineExceededError("etcd's threads did not all stop within 10 s of SIGSTOP");
}

void EtcdProcess::Thaw() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

std::string EtcdProcess::Log() const { return ReadWhole(log_file_); }

}  // namespace gangkeeper::testing
