#include "src/cli/certs.h"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <fstream>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::cli {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::gangkeeper::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

X509* LoadCert(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return nullptr;
  X509* c = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  return c;
}

std::vector<std::string> Sans(X509* cert) {
  std::vector<std::string> out;
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    GENERAL_NAME* n = sk_GENERAL_NAME_value(names, i);
    if (n->type == GEN_DNS) {
      out.push_back("DNS:" + std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(n->d.dNSName))));
    } else if (n->type == GEN_IPADD && ASN1_STRING_length(n->d.iPAddress) == 4) {
      const unsigned char* ip = ASN1_STRING_get0_data(n->d.iPAddress);
      out.push_back("IP:" + std::to_string(ip[0]) + "." + std::to_string(ip[1]) + "." + std::to_string(ip[2]) + "." +
                    std::to_string(ip[3]));
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

int Mode(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return -1;
  return st.st_mode & 0777;
}

TEST(CertsTest, ServingCertificateHasServiceSansAndVerifiesAgainstTheCa) {
  TempDir dir;
  CertOptions o;
  o.out_dir = dir.File("out");
  o.service = "gk-webhook";
  o.namespace_name = "gpu-system";
  auto r = GenerateCertificates(o);
  ASSERT_THAT(r, IsOk());
  EXPECT_TRUE(r->ca_created);
  X509* leaf = LoadCert(r->cert_file);
  X509* ca = LoadCert(r->ca_file);
  ASSERT_NE(leaf, nullptr);
  ASSERT_NE(ca, nullptr);
  EXPECT_THAT(Sans(leaf), UnorderedElementsAre("DNS:gk-webhook", "DNS:gk-webhook.gpu-system",
                                               "DNS:gk-webhook.gpu-system.svc",
                                               "DNS:gk-webhook.gpu-system.svc.cluster.local", "DNS:localhost",
                                               "IP:127.0.0.1"));
  // ECDSA P-256, signed by the CA, serverAuth.
  EVP_PKEY* pub = X509_get0_pubkey(leaf);
  EXPECT_EQ(EVP_PKEY_get_base_id(pub), EVP_PKEY_EC);
  EXPECT_EQ(EVP_PKEY_get_bits(pub), 256);
  EXPECT_EQ(X509_verify(leaf, X509_get0_pubkey(ca)), 1);
  EXPECT_NE(X509_get_extended_key_usage(leaf) & XKU_SSL_SERVER, 0u);
  EXPECT_EQ(X509_check_ca(ca), 1);
  EXPECT_EQ(X509_check_ca(leaf), 0);
  // Keys are private; the caBundle is the CA's PEM in base64.
  EXPECT_EQ(Mode(r->key_file), 0600);
  EXPECT_EQ(Mode(dir.File("out/ca.key")), 0600);
  std::string decoded;
  ASSERT_TRUE(absl::Base64Unescape(r->ca_bundle_base64, &decoded));
  EXPECT_EQ(decoded, Read(r->ca_file));
  EXPECT_TRUE(ServingCertificateUsable(o.out_dir, absl::Hours(24)));
  EXPECT_FALSE(ServingCertificateUsable(o.out_dir, absl::Hours(24 * 400)));
  X509_free(leaf);
  X509_free(ca);
}

TEST(CertsTest, ReusesAValidCaAndIssuesAFreshLeaf) {
  TempDir dir;
  CertOptions o;
  o.out_dir = dir.path();
  auto first = GenerateCertificates(o);
  ASSERT_THAT(first, IsOk());
  const std::string ca_pem = Read(first->ca_file);
  const std::string leaf_pem = Read(first->cert_file);
  auto second = GenerateCertificates(o);
  ASSERT_THAT(second, IsOk());
  EXPECT_FALSE(second->ca_created);
  EXPECT_EQ(Read(second->ca_file), ca_pem);
  EXPECT_NE(Read(second->cert_file), leaf_pem);
  o.new_ca = true;
  auto third = GenerateCertificates(o);
  ASSERT_THAT(third, IsOk());
  EXPECT_TRUE(third->ca_created);
  EXPECT_NE(Read(third->ca_file), ca_pem);
}

TEST(CertsTest, RejectsNamesThatAreNotDnsLabels) {
  TempDir dir;
  CertOptions o;
  o.out_dir = dir.path();
  o.service = "Bad_Name";
  EXPECT_THAT(GenerateCertificates(o), StatusIs(absl::StatusCode::kInvalidArgument, "--service"));
  o.service = "ok";
  o.namespace_name = "-x";
  EXPECT_THAT(GenerateCertificates(o), StatusIs(absl::StatusCode::kInvalidArgument, "--namespace"));
}

TEST(CertsTest, AtomicWriteReplacesContentAndSetsMode) {
  TempDir dir;
  const std::string path = dir.File("f");
  ASSERT_THAT(WriteFileAtomically(path, "one", 0600), IsOk());
  ASSERT_THAT(WriteFileAtomically(path, "two", 0644), IsOk());
  EXPECT_EQ(Read(path), "two");
  EXPECT_EQ(Mode(path), 0644);
  EXPECT_THAT(WriteFileAtomically(dir.File("no/such/dir/f"), "x", 0600), StatusIs(absl::StatusCode::kInternal));
}

}  // namespace
}  // namespace gangkeeper::cli
