#include "src/server/tls.h"

#include <openssl/ssl.h>

#include <fstream>

#include "gangkeeper/base/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/process.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::server {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::gangkeeper::testing::TempDir;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* sub : {"a", "b"}) {
      auto r = testing::RunCommand(
          {testing::GangkeeperBinary(), "certs", "--out", dir_.File(sub), "--new-ca"}, absl::Seconds(30));
      ASSERT_THAT(r, IsOk());
      ASSERT_EQ(r->exit_code, 0) << r->err;
    }
  }
  TempDir dir_;
  base::SimulatedClock clock_{absl::Now()};
};

TEST_F(TlsTest, PairFromPemRejectsGarbageMismatchAndExpiry) {
  const std::string cert_a = Read(dir_.File("a/tls.crt"));
  const std::string key_a = Read(dir_.File("a/tls.key"));
  const std::string key_b = Read(dir_.File("b/tls.key"));
  auto ok = CertificatePair::FromPem(cert_a, key_a, absl::Now());
  ASSERT_THAT(ok, IsOk());
  EXPECT_FALSE((*ok)->serial().empty());
  EXPECT_GT((*ok)->not_after(), absl::Now() + absl::Hours(24 * 300));
  EXPECT_THAT(CertificatePair::FromPem("junk", key_a, absl::Now()),
              StatusIs(absl::StatusCode::kInvalidArgument, "certificate"));
  EXPECT_THAT(CertificatePair::FromPem(cert_a, "junk", absl::Now()),
              StatusIs(absl::StatusCode::kInvalidArgument, "private key"));
  EXPECT_THAT(CertificatePair::FromPem(cert_a, key_b, absl::Now()),
              StatusIs(absl::StatusCode::kInvalidArgument, "does not match"));
  EXPECT_THAT(CertificatePair::FromPem(cert_a, key_a, absl::Now() + absl::Hours(24 * 800)),
              StatusIs(absl::StatusCode::kInvalidArgument, "expired"));
}

TEST_F(TlsTest, SourceSwapsOnlyToAValidNewPair) {
  auto source = CertificateSource::Create(dir_.File("a/tls.crt"), dir_.File("a/tls.key"), &clock_);
  ASSERT_THAT(source, IsOk());
  const std::string first = (*source)->current()->serial();
  bool changed = true;
  ASSERT_THAT((*source)->Reload(&changed), IsOk());
  EXPECT_FALSE(changed);  // nothing on disk changed

  { std::ofstream(dir_.File("a/tls.crt"), std::ios::trunc) << Read(dir_.File("b/tls.crt")); }
  EXPECT_THAT((*source)->Reload(&changed), StatusIs(absl::StatusCode::kInvalidArgument, "does not match"));
  EXPECT_EQ((*source)->current()->serial(), first);

  { std::ofstream(dir_.File("a/tls.key"), std::ios::trunc) << Read(dir_.File("b/tls.key")); }
  ASSERT_THAT((*source)->Reload(&changed), IsOk());
  EXPECT_TRUE(changed);
  EXPECT_NE((*source)->current()->serial(), first);
}

TEST_F(TlsTest, CreateNamesMissingFiles) {
  EXPECT_THAT(CertificateSource::Create("", "", &clock_), StatusIs(absl::StatusCode::kInvalidArgument, "--tls-cert"));
  EXPECT_THAT(CertificateSource::Create(dir_.File("none.crt"), dir_.File("none.key"), &clock_),
              StatusIs(absl::StatusCode::kNotFound, "none.crt"));
}

// The expiry check reads the injected clock, not the machine's.
TEST_F(TlsTest, SourceChecksExpiryAgainstItsClock) {
  clock_.AdvanceTime(absl::Hours(24 * 800));
  EXPECT_THAT(CertificateSource::Create(dir_.File("a/tls.crt"), dir_.File("a/tls.key"), &clock_),
              StatusIs(absl::StatusCode::kInvalidArgument, "expired"));
}

TEST(TlsPolicyTest, ContextAllowsOnlyTls12And13WithAeadEcdheSuites) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  ASSERT_THAT(ApplyTlsPolicy(ctx, ""), IsOk());
  EXPECT_EQ(SSL_CTX_get_min_proto_version(ctx), TLS1_2_VERSION);
  EXPECT_EQ(SSL_CTX_get_max_proto_version(ctx), TLS1_3_VERSION);
  EXPECT_NE(SSL_CTX_get_options(ctx) & SSL_OP_NO_COMPRESSION, 0u);
  EXPECT_NE(SSL_CTX_get_options(ctx) & SSL_OP_NO_RENEGOTIATION, 0u);
  SSL* ssl = SSL_new(ctx);
  STACK_OF(SSL_CIPHER)* ciphers = SSL_get1_supported_ciphers(ssl);
  ASSERT_NE(ciphers, nullptr);
  int n = sk_SSL_CIPHER_num(ciphers);
  EXPECT_GT(n, 0);
  for (int i = 0; i < n; ++i) {
    const SSL_CIPHER* c = sk_SSL_CIPHER_value(ciphers, i);
    std::string name = SSL_CIPHER_get_name(c);
    SCOPED_TRACE(name);
    EXPECT_TRUE(name.find("GCM") != std::string::npos || name.find("CHACHA20") != std::string::npos);
    if (SSL_CIPHER_get_protocol_id(c) < 0x1301 || SSL_CIPHER_get_protocol_id(c) > 0x13ff) {
      EXPECT_EQ(name.rfind("ECDHE-", 0), 0u);  // TLS 1.2 suites: ECDHE only
    }
  }
  sk_SSL_CIPHER_free(ciphers);
  SSL_free(ssl);
  SSL_CTX_free(ctx);
}

TEST(TlsPolicyTest, BadClientCaIsAnError) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  EXPECT_THAT(ApplyTlsPolicy(ctx, "/nonexistent/ca.crt"), StatusIs(absl::StatusCode::kInvalidArgument, "--client-ca"));
  SSL_CTX_free(ctx);
}

}  // namespace
}  // namespace gangkeeper::server
