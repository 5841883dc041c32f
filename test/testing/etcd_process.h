// gangkeeper tests: a real etcd (Debian's etcd-server) as a child process.
//
// EtcdProcess starts a single-member etcd on 127.0.0.1 with free ports, a
// data dir (a fresh temporary one unless given) and its output in a log
// file, and waits (bounded) until /health says the member has a leader.
// The binary is $GK_ETCD when set, else /usr/bin/etcd; scripts/deps.sh
// installs it, and a missing binary is an error, not a reason to skip.
//
// The settings suit tests: a short election timeout (the member leads
// within ~0.3 s of starting, and the shortest lease TTL is 1 s), watch
// progress notifications every second, and a 256 MiB backend quota.
// StartTls() puts TLS (optionally with client certificates) on the client
// port.
//
// The destructor kills a running etcd and removes the temporary files.
// Thread-compatible. Start() and Restart() should come from a thread that
// outlives the process: the child is killed when the thread that forked it
// exits (PR_SET_PDEATHSIG), so that a crashed test leaves no etcd behind.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace gangkeeper::testing {

// TLS on etcd's client port (PEM files).
struct EtcdTls {
  std::string cert_file, key_file;  // etcd's serving certificate
  // When set, etcd requires client certificates signed by this CA, and the
  // harness's own health checks present client_cert_file/client_key_file.
  // cert_file must then allow client authentication as well (extended key
  // usage clientAuth): etcd's JSON gateway dials etcd's own gRPC server with
  // it, and without it every gateway call fails with "connection closed".
  std::string client_ca_file;
  std::string client_cert_file, client_key_file;
};

// Makes `dir`/{ca,server,client}.{crt,key} with the openssl tool (ECDSA
// P-256, valid for a day): a CA, etcd's certificate for 127.0.0.1 (which
// allows client authentication too: with client certificates required,
// etcd's JSON gateway dials etcd's own gRPC port presenting it), and a
// client certificate. Returns the EtcdTls that requires client
// certificates from that CA.
[[nodiscard]] absl::StatusOr<EtcdTls> MakeEtcdCerts(const std::string& dir);

class EtcdProcess {
 public:
  // Starts etcd on `data_dir` (a temporary dir, removed at the end, when
  // empty). FailedPrecondition with etcd's log when it exits or does not
  // become healthy within 20 s.
  static absl::StatusOr<std::unique_ptr<EtcdProcess>> Start(const std::string& data_dir = "");
  // The same with TLS on the client port (HTTPS, same endpoint() form).
  static absl::StatusOr<std::unique_ptr<EtcdProcess>> StartTls(const EtcdTls& tls, const std::string& data_dir = "");
  ~EtcdProcess();
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  // "127.0.0.1:PORT", the client endpoint.
  std::string endpoint() const;
  int client_port() const { return client_port_; }
  const std::string& data_dir() const { return data_dir_; }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  // SIGKILL and reap: a crash, nothing flushed.
  void Kill();
  // SIGTERM, then SIGKILL when etcd has not exited after `grace`.
  void Stop(absl::Duration grace = absl::Seconds(5));
  // Stops etcd if running and starts it again on the same ports and data
  // dir; waits until it is healthy.
  [[nodiscard]] absl::Status Restart();
  // SIGSTOP, then waits (bounded) until every thread of etcd is stopped:
  // kill() only queues the signal, and a request sent at once could still
  // be answered by a thread that has not stopped yet. Connections are then
  // accepted by the kernel and never answered. Thaw() sends SIGCONT.
  [[nodiscard]] absl::Status Freeze();
  void Thaw();

  // etcd's output (stdout and stderr, every run).
  std::string Log() const;

 private:
  EtcdProcess() = default;
  // Spawns etcd and waits for /health; on failure the process is reaped.
  absl::Status Launch(absl::Duration timeout);

  static absl::StatusOr<std::unique_ptr<EtcdProcess>> StartImpl(const EtcdTls* tls, const std::string& data_dir);

  std::string binary_;
  bool tls_on_ = false;
  EtcdTls tls_;
  std::string work_dir_;  // temporary: the log, and the data dir when owned
  std::string data_dir_;
  std::string log_file_;
  int client_port_ = 0;
  int peer_port_ = 0;
  pid_t pid_ = -1;
};

// A test suite sharing one etcd across its tests (started before the first,
// killed after the last): SetUp() fails the test with the reason when etcd
// could not start. Derived fixtures call SharedEtcdTest::SetUp() first.
class SharedEtcdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<EtcdProcess>> p = EtcdProcess::Start();
    if (p.ok()) {
      etcd_ = p->release();
    } else {
      start_error_ = new std::string(p.status().ToString());
    }
  }
  static void TearDownTestSuite() {
    delete etcd_;
    etcd_ = nullptr;
    delete start_error_;
    start_error_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(etcd_, nullptr) << "cannot start etcd: " << (start_error_ != nullptr ? *start_error_ : "");
  }

  static inline EtcdProcess* etcd_ = nullptr;
  static inline std::string* start_error_ = nullptr;
};

}  // namespace gangkeeper::testing
