// Integration test: testssl.sh (Debian package testssl.sh) scans the real
// webhook listener and must find only TLS 1.2/1.3, only ECDHE key exchange
// with AES-GCM or ChaCha20-Poly1305, no client renegotiation and no
// compression. Takes about a minute; ctest label `tls-scan`.
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::RunCommand;
using ::gangkeeper::testing::ServerProcess;
using ::gangkeeper::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kTestssl[] = "/usr/bin/testssl";

TEST(TlsScanTest, TestsslFindsOnlyModernProtocolsAndAeadEcdheSuites) {
  if (::access(kTestssl, X_OK) != 0) GTEST_SKIP() << "testssl.sh is not installed (scripts/deps.sh test installs it)";
  TempDir dir;
  auto certs = RunCommand({testing::GangkeeperBinary(), "certs", "--out", dir.File("certs")}, absl::Seconds(30));
  ASSERT_THAT(certs, IsOk());
  ASSERT_EQ(certs->exit_code, 0) << certs->err;
  auto server = ServerProcess::Start({"--webhook-addr=127.0.0.1:0", "--api-addr=127.0.0.1:0",
                                      "--tls-cert=" + dir.File("certs/tls.crt"),
                                      "--tls-key=" + dir.File("certs/tls.key"), "--data-dir=" + dir.File("data")},
                                     dir.path());
  ASSERT_THAT(server, IsOk());
  const std::string json_file = dir.File("scan.json");
  auto scan = RunCommand({kTestssl, "--quiet", "--color", "0", "--warnings", "batch", "-p", "-E", "-R", "-C",
                          "--jsonfile", json_file, "--ip", "127.0.0.1",
                          "https://localhost:" + std::to_string((*server)->webhook_port())},
                         absl::Minutes(5));
  ASSERT_THAT(scan, IsOk());
  std::ifstream in(json_file);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json findings = nlohmann::json::parse(text.str(), nullptr, false);
  ASSERT_FALSE(findings.is_discarded()) << "testssl wrote no JSON; output:\n" << scan->out << scan->err;
  ASSERT_TRUE(findings.is_array());

  std::map<std::string, std::string> by_id;
  int tls12_ciphers = 0, tls13_ciphers = 0;
  for (const auto& f : findings) {
    if (!f.contains("id") || !f.contains("finding")) continue;
    std::string id = f["id"].get<std::string>();
    std::string finding = f["finding"].get<std::string>();
    by_id[id] = finding;
    if (absl::StartsWith(id, "cipher-tls1_2_")) {
      ++tls12_ciphers;
      SCOPED_TRACE(finding);
      EXPECT_THAT(finding, HasSubstr("ECDHE-"));
      EXPECT_TRUE(absl::StrContains(finding, "GCM") || absl::StrContains(finding, "CHACHA20"));
    } else if (absl::StartsWith(id, "cipher-tls1_3_")) {
      ++tls13_ciphers;
    } else if (absl::StartsWith(id, "cipher-")) {
      ADD_FAILURE() << "cipher offered outside TLS 1.2/1.3: " << finding;
    }
  }
  EXPECT_EQ(by_id["SSLv2"], "not offered");
  EXPECT_EQ(by_id["SSLv3"], "not offered");
  EXPECT_EQ(by_id["TLS1"], "not offered");
  EXPECT_EQ(by_id["TLS1_1"], "not offered");
  EXPECT_THAT(by_id["TLS1_2"], StartsWith("offered"));
  EXPECT_THAT(by_id["TLS1_3"], StartsWith("offered"));
  EXPECT_EQ(by_id["secure_client_renego"], "not vulnerable");
  EXPECT_EQ(by_id["CRIME_TLS"], "not vulnerable");
  EXPECT_GE(tls12_ciphers, 2);
  EXPECT_EQ(tls13_ciphers, 3);
}

}  // namespace
}  // namespace gangkeeper
