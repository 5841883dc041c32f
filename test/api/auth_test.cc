// gangkeeper: tests for API authentication — the tokens file (YAML, JSON,
// {tokens: [...]}), its errors, bearer tokens, roles, the per-address limit
// on failures and reloading the file when it changes.
#include "gangkeeper/api/auth.h"

#include <openssl/sha.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"
#include "test/testing/temp_dir.h"

namespace gangkeeper::api {
namespace {

using ::gangkeeper::testing::IsOk;
using ::gangkeeper::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string AuthSha256Hex(const std::string& s) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d);
  std::string out;
  for (unsigned char b : d) absl::StrAppend(&out, absl::Hex(b, absl::kZeroPad2));
  return out;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  ASSERT_TRUE(out.good()) << path;
}

const absl::Time kNow = absl::FromUnixSeconds(1'700'000'000);

// ---------------------------------------------------------------- ParseTokens

TEST(ParseTokensTest, YamlList) {
  const std::string text = absl::StrCat(R"(
- name: platform
  sha256: )", AuthSha256Hex("a"), R"(
  role: admin
- name: team-b-lead
  sha256: )", AuthSha256Hex("b"), R"(
  role: team-admin
  namespaces: [team-b, team-c]
- {name: dash, sha256: )", AuthSha256Hex("c"), R"(, role: viewer}
- {name: audit, sha256: )", AuthSha256Hex("d"), R"(, role: auditor}
- {name: prometheus, sha256: )", AuthSha256Hex("e"), R"(, role: metrics}
)");
  absl::StatusOr<std::vector<TokenEntry>> t = ParseTokens(text, "tokens.yaml");
  ASSERT_THAT(t, IsOk());
  ASSERT_EQ(t->size(), 5u);
  EXPECT_EQ((*t)[0].name, "platform");
  EXPECT_EQ((*t)[0].sha256_hex, AuthSha256Hex("a"));
  EXPECT_EQ((*t)[0].role, Role::kAdmin);
  EXPECT_THAT((*t)[0].namespaces, IsEmpty());
  EXPECT_EQ((*t)[1].name, "team-b-lead");
  EXPECT_EQ((*t)[1].role, Role::kTeamAdmin);
  EXPECT_THAT((*t)[1].namespaces, ElementsAre("team-b", "team-c"));
  EXPECT_EQ((*t)[2].role, Role::kViewer);
  EXPECT_EQ((*t)[3].role, Role::kAuditor);
  EXPECT_EQ((*t)[4].role, Role::kMetrics);
}

TEST(ParseTokensTest, JsonList) {
  const std::string text = absl::StrCat(R"([{"name": "platform", "sha256": ")", AuthSha256Hex("a"),
                                        R"(", "role": "admin"}, {"name": "lead", "sha256": ")", AuthSha256Hex("b"),
                                        R"(", "role": "team-admin", "namespaces": ["team-a"]}])");
  absl::StatusOr<std::vector<TokenEntry>> t = ParseTokens(text, "tokens.json");
  ASSERT_THAT(t, IsOk());
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].name, "platform");
  EXPECT_EQ((*t)[0].role, Role::kAdmin);
  EXPECT_EQ((*t)[1].name, "lead");
  EXPECT_EQ((*t)[1].role, Role::kTeamAdmin);
  EXPECT_THAT((*t)[1].namespaces, ElementsAre("team-a"));
}

TEST(ParseTokensTest, TokensMapFormInYamlAndJson) {
  absl::StatusOr<std::vector<TokenEntry>> y = ParseTokens(
      absl::StrCat("tokens:\n- {name: x, sha256: ", AuthSha256Hex("x"), ", role: viewer}\n"), "tokens.yaml");
  ASSERT_THAT(y, IsOk());
  ASSERT_EQ(y->size(), 1u);
  EXPECT_EQ((*y)[0].name, "x");
  EXPECT_EQ((*y)[0].role, Role::kViewer);
  absl::StatusOr<std::vector<TokenEntry>> j = ParseTokens(
      absl::StrCat(R"({"tokens": [{"name": "y", "sha256": ")", AuthSha256Hex("y"), R"(", "role": "auditor"}]})"),
      "tokens.json");
  ASSERT_THAT(j, IsOk());
  ASSERT_EQ(j->size(), 1u);
  EXPECT_EQ((*j)[0].name, "y");
  EXPECT_EQ((*j)[0].role, Role::kAuditor);
}

TEST(ParseTokensTest, UpperCaseDigestIsStoredLowerCase) {
  std::string upper = AuthSha256Hex("a");
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  absl::StatusOr<std::vector<TokenEntry>> t =
      ParseTokens(absl::StrCat("- {name: x, sha256: ", upper, ", role: admin}"), "f");
  ASSERT_THAT(t, IsOk());
  EXPECT_EQ((*t)[0].sha256_hex, AuthSha256Hex("a"));
}

TEST(ParseTokensTest, EmptyListHasNoTokens) {
  absl::StatusOr<std::vector<TokenEntry>> t = ParseTokens("[]", "f");
  ASSERT_THAT(t, IsOk());
  EXPECT_THAT(*t, IsEmpty());
}

TEST(ParseTokensTest, MissingNameNamesTheEntryAndField) {
  const std::string text = absl::StrCat("- {name: ok, sha256: ", AuthSha256Hex("a"), ", role: admin}\n",
                                        "- {sha256: ", AuthSha256Hex("b"), ", role: admin}\n");
  EXPECT_THAT(ParseTokens(text, "tokens.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, "tokens.yaml: [1].name: required"));
}

TEST(ParseTokensTest, DuplicateNameNamesTheSecondEntry) {
  const std::string text = absl::StrCat("- {name: dup, sha256: ", AuthSha256Hex("a"), ", role: admin}\n",
                                        "- {name: other, sha256: ", AuthSha256Hex("b"), ", role: viewer}\n",
                                        "- {name: dup, sha256: ", AuthSha256Hex("c"), ", role: viewer}\n");
  absl::StatusOr<std::vector<TokenEntry>> t = ParseTokens(text, "tokens.yaml");
  EXPECT_THAT(t, StatusIs(absl::StatusCode::kInvalidArgument, "tokens.yaml: [2].name"));
  EXPECT_THAT(t, StatusIs(absl::StatusCode::kInvalidArgument, "\"dup\" is given twice"));
}

TEST(ParseTokensTest, BadDigestNamesTheEntryAndField) {
  const std::string good = AuthSha256Hex("a");
  const std::vector<std::string> bad = {
      good.substr(0, 63),                 // too short
      good + "0",                         // too long
      std::string(63, 'a') + "g",         // not hex
      "",                                 // missing
      "plain-token-instead-of-a-digest",  // the token itself
  };
  for (const std::string& digest : bad) {
    const std::string text = absl::StrCat("- {name: ok, sha256: ", good, ", role: admin}\n",
                                          "- {name: bad, sha256: '", digest, "', role: admin}\n");
    absl::StatusOr<std::vector<TokenEntry>> t = ParseTokens(text, "tokens.yaml");
    EXPECT_THAT(t, StatusIs(absl::StatusCode::kInvalidArgument, "tokens.yaml: [1].sha256: expected 64 hex digits"))
        << digest;
  }
}

TEST(ParseTokensTest, UnknownRoleNamesTheEntryFieldAndRoles) {
  const std::string text = absl::StrCat("- {name: x, sha256: ", AuthSha256Hex("a"), ", role: superuser}\n");
  absl::StatusOr<std::vector<TokenEntry>> t = ParseTokens(text, "tokens.yaml");
  EXPECT_THAT(t, StatusIs(absl::StatusCode::kInvalidArgument, "tokens.yaml: [0].role: \"superuser\" is not a role"));
  EXPECT_THAT(t, StatusIs(absl::StatusCode::kInvalidArgument, "admin, team-admin, viewer, auditor, metrics"));
  // A missing role is an unknown one too.
  EXPECT_THAT(ParseTokens(absl::StrCat("- {name: x, sha256: ", AuthSha256Hex("a"), "}\n"), "f"),
              StatusIs(absl::StatusCode::kInvalidArgument, "f: [0].role"));
}

TEST(ParseTokensTest, TeamAdminWithoutNamespacesIsRefused) {
  const std::string digest = AuthSha256Hex("a");
  EXPECT_THAT(ParseTokens(absl::StrCat("- {name: lead, sha256: ", digest, ", role: team-admin}\n"), "tokens.yaml"),
              StatusIs(absl::StatusCode::kInvalidArgument, "tokens.yaml: [0].namespaces: a team-admin needs"));
  EXPECT_THAT(
      ParseTokens(absl::StrCat("- {name: lead, sha256: ", digest, ", role: team-admin, namespaces: []}\n"), "f"),
      StatusIs(absl::StatusCode::kInvalidArgument, "f: [0].namespaces"));
  EXPECT_THAT(
      ParseTokens(absl::StrCat("- {name: lead, sha256: ", digest, ", role: team-admin, namespaces: team-a}\n"), "f"),
      StatusIs(absl::StatusCode::kInvalidArgument, "f: [0].namespaces: expected a list"));
}

TEST(ParseTokensTest, NotAListOrNotYamlIsRefused) {
  EXPECT_THAT(ParseTokens("name: x\nrole: admin\n", "f"),
              StatusIs(absl::StatusCode::kInvalidArgument, "f: expected a list"));
  EXPECT_THAT(ParseTokens("[{\"name\": \"x\"", "f"), StatusIs(absl::StatusCode::kInvalidArgument, "f: not YAML"));
  EXPECT_THAT(ParseTokens("- just-a-string\n", "f"),
              StatusIs(absl::StatusCode::kInvalidArgument, "f: [0]: expected a map"));
}

// ---------------------------------------------------------------- Principal

TEST(PrincipalTest, MayReadPerRole) {
  Principal admin{"p", Role::kAdmin, {}};
  Principal viewer{"v", Role::kViewer, {}};
  Principal lead{"l", Role::kTeamAdmin, {"team-a", "team-c"}};
  Principal audit{"a", Role::kAuditor, {}};
  Principal scraper{"m", Role::kMetrics, {}};
  for (const char* ns : {"team-a", "team-b", "kube-system"}) {
    EXPECT_TRUE(admin.MayRead(ns)) << ns;
    EXPECT_TRUE(viewer.MayRead(ns)) << ns;
    EXPECT_FALSE(audit.MayRead(ns)) << ns;
    EXPECT_FALSE(scraper.MayRead(ns)) << ns;
  }
  EXPECT_TRUE(lead.MayRead("team-a"));
  EXPECT_TRUE(lead.MayRead("team-c"));
  EXPECT_FALSE(lead.MayRead("team-b"));
  EXPECT_FALSE(lead.MayRead(""));
  EXPECT_TRUE(admin.MayReadAudit());
  EXPECT_TRUE(audit.MayReadAudit());
  EXPECT_FALSE(viewer.MayReadAudit());
  EXPECT_FALSE(lead.MayReadAudit());
  EXPECT_FALSE(scraper.MayReadAudit());
  // Quota objects, queue status and workloads (which of them: scope.h).
  EXPECT_TRUE(admin.MayReadQuota());
  EXPECT_TRUE(viewer.MayReadQuota());
  EXPECT_TRUE(lead.MayReadQuota());
  EXPECT_FALSE(audit.MayReadQuota());
  EXPECT_FALSE(scraper.MayReadQuota());
  // /metrics: admin, viewer and the metrics role.
  EXPECT_TRUE(admin.MayReadMetrics());
  EXPECT_TRUE(viewer.MayReadMetrics());
  EXPECT_TRUE(scraper.MayReadMetrics());
  EXPECT_FALSE(lead.MayReadMetrics());
  EXPECT_FALSE(audit.MayReadMetrics());
}

TEST(PrincipalTest, RoleNames) {
  EXPECT_STREQ(RoleName(Role::kAdmin), "admin");
  EXPECT_STREQ(RoleName(Role::kTeamAdmin), "team-admin");
  EXPECT_STREQ(RoleName(Role::kViewer), "viewer");
  EXPECT_STREQ(RoleName(Role::kAuditor), "auditor");
  EXPECT_STREQ(RoleName(Role::kMetrics), "metrics");
}

// ---------------------------------------------------------------- TokenStore

class TokenStoreTest : public ::testing::Test {
 protected:
  std::string TokensYaml() const {
    return absl::StrCat("- {name: platform, sha256: ", AuthSha256Hex("admin-secret"), ", role: admin}\n",
                        "- {name: team-b-lead, sha256: ", AuthSha256Hex("lead-secret"),
                        ", role: team-admin, namespaces: [team-b]}\n");
  }
  std::unique_ptr<TokenStore> LoadFile(const std::string& text) {
    WriteFile(path_, text);
    absl::StatusOr<std::unique_ptr<TokenStore>> s = TokenStore::Load(path_);
    EXPECT_THAT(s, IsOk());
    return s.ok() ? *std::move(s) : nullptr;
  }

  testing::TempDir dir_;
  const std::string path_ = dir_.File("tokens.yaml");
};

TEST_F(TokenStoreTest, TheBearerSchemeIsCaseInsensitive) {
  std::unique_ptr<TokenStore> store = LoadFile(TokensYaml());
  ASSERT_NE(store, nullptr);
  for (const char* header : {"Bearer admin-secret", "bearer admin-secret", "BEARER admin-secret"}) {
    absl::StatusOr<Principal> who = store->Authenticate(header, "10.0.0.9", kNow);
    ASSERT_THAT(who, IsOk()) << header;
    EXPECT_EQ(who->name, "platform");
  }
  EXPECT_THAT(store->Authenticate("Bearer", "10.0.0.9", kNow), StatusIs(absl::StatusCode::kUnauthenticated));
}

TEST(ParseTokensTest, TwoNamesWithOneTokenAreRefused) {
  const std::string text = absl::StrCat("- {name: a, sha256: ", AuthSha256Hex("same"), ", role: admin}\n",
                                        "- {name: b, sha256: ", AuthSha256Hex("same"), ", role: viewer}\n");
  EXPECT_THAT(ParseTokens(text, "f"), StatusIs(absl::StatusCode::kInvalidArgument, "[1].sha256"));
}

TEST_F(TokenStoreTest, NoTokensFileRefusesEveryCallAndSaysHowToConfigure) {
  absl::StatusOr<std::unique_ptr<TokenStore>> s = TokenStore::Load("");
  ASSERT_THAT(s, IsOk());
  TokenStore& store = **s;
  EXPECT_EQ(store.size(), 0u);
  for (const char* header : {"", "Bearer admin-secret", "Bearer x", "Basic dXNlcjpwdw=="}) {
    EXPECT_THAT(store.Authenticate(header, "10.0.0.1", kNow),
                StatusIs(absl::StatusCode::kUnauthenticated, "--tokens"))
        << header;
  }
  // Every call, however many: never "too many failed authentications".
  for (int i = 0; i < 2 * TokenStore::kMaxFailuresPerMinute; ++i) {
    ASSERT_THAT(store.Authenticate("Bearer x", "10.0.0.1", kNow),
                StatusIs(absl::StatusCode::kUnauthenticated, "--tokens"))
        << "call " << i;
  }
}

TEST_F(TokenStoreTest, MissingOrBrokenFileFailsToLoad) {
  EXPECT_THAT(TokenStore::Load(dir_.File("absent.yaml")), StatusIs(absl::StatusCode::kNotFound, "--tokens"));
  WriteFile(path_, "- {name: x, role: admin}\n");
  EXPECT_THAT(TokenStore::Load(path_), StatusIs(absl::StatusCode::kInvalidArgument, "[0].sha256"));
}

TEST_F(TokenStoreTest, RightTokenGivesThePrincipal) {
  std::unique_ptr<TokenStore> store = LoadFile(TokensYaml());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->size(), 2u);
  absl::StatusOr<Principal> admin = store->Authenticate("Bearer admin-secret", "10.0.0.1", kNow);
  ASSERT_THAT(admin, IsOk());
  EXPECT_EQ(admin->name, "platform");
  EXPECT_EQ(admin->role, Role::kAdmin);
  EXPECT_THAT(admin->namespaces, IsEmpty());
  absl::StatusOr<Principal> lead = store->Authenticate("Bearer lead-secret", "10.0.0.1", kNow);
  ASSERT_THAT(lead, IsOk());
  EXPECT_EQ(lead->name, "team-b-lead");
  EXPECT_EQ(lead->role, Role::kTeamAdmin);
  EXPECT_THAT(lead->namespaces, ElementsAre("team-b"));
}

TEST_F(TokenStoreTest, WrongOrMalformedTokensAreUnauthenticated) {
  std::unique_ptr<TokenStore> store = LoadFile(TokensYaml());
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(store->Authenticate("Bearer wrong", "10.0.0.1", kNow),
              StatusIs(absl::StatusCode::kUnauthenticated, "not known"));
  // The digest is not the token.
  EXPECT_THAT(store->Authenticate(absl::StrCat("Bearer ", AuthSha256Hex("admin-secret")), "10.0.0.1", kNow),
              StatusIs(absl::StatusCode::kUnauthenticated, "not known"));
  EXPECT_THAT(store->Authenticate("Bearer admin-secre", "10.0.0.1", kNow),
              StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(store->Authenticate("Bearer admin-secret2", "10.0.0.1", kNow),
              StatusIs(absl::StatusCode::kUnauthenticated));
  for (const char* header : {"", "admin-secret", "Bearer", "Bearer ", "Basic admin-secret", "Token admin-secret"}) {
    EXPECT_THAT(store->Authenticate(header, "10.0.0.1", kNow),
                StatusIs(absl::StatusCode::kUnauthenticated, "Authorization: Bearer TOKEN"))
        << "'" << header << "'";
  }
}

TEST_F(TokenStoreTest, TooManyFailuresLimitOnlyInvalidTokensFromThatAddress) {
  std::unique_ptr<TokenStore> store = LoadFile(TokensYaml());
  ASSERT_NE(store, nullptr);
  const std::string shared = "192.0.2.7";  // an ingress: every caller has this address
  for (int i = 0; i < TokenStore::kMaxFailuresPerMinute; ++i) {
    ASSERT_THAT(store->Authenticate(absl::StrCat("Bearer guess-", i), shared, kNow + absl::Seconds(i)),
                StatusIs(absl::StatusCode::kUnauthenticated))
        << "failure " << i;
  }
  // Now invalid tokens (and missing ones) from that address are refused...
  EXPECT_THAT(store->Authenticate("Bearer guess-x", shared, kNow + absl::Seconds(30)),
              StatusIs(absl::StatusCode::kResourceExhausted, "too many failed authentications"));
  EXPECT_THAT(store->Authenticate("", shared, kNow + absl::Seconds(30)),
              StatusIs(absl::StatusCode::kResourceExhausted));
  // ...while every valid token still authenticates from it, as often as it likes.
  for (int i = 0; i < 3 * TokenStore::kMaxFailuresPerMinute; ++i) {
    absl::StatusOr<Principal> admin = store->Authenticate("Bearer admin-secret", shared, kNow + absl::Seconds(31));
    ASSERT_THAT(admin, IsOk()) << i;
    EXPECT_EQ(admin->name, "platform");
  }
  absl::StatusOr<Principal> lead = store->Authenticate("Bearer lead-secret", shared, kNow + absl::Seconds(31));
  ASSERT_THAT(lead, IsOk());
  EXPECT_EQ(lead->name, "team-b-lead");
  // A success does not reset the count of failures: guessing stays limited.
  EXPECT_THAT(store->Authenticate("Bearer guess-y", shared, kNow + absl::Seconds(32)),
              StatusIs(absl::StatusCode::kResourceExhausted));
  // Another address is not affected.
  EXPECT_THAT(store->Authenticate("Bearer wrong", "192.0.2.8", kNow + absl::Seconds(30)),
              StatusIs(absl::StatusCode::kUnauthenticated));
  // A minute after the window opened, invalid tokens are counted again.
  EXPECT_THAT(store->Authenticate("Bearer guess-z", shared, kNow + absl::Minutes(1) + absl::Seconds(1)),
              StatusIs(absl::StatusCode::kUnauthenticated, "not known"));
}

TEST_F(TokenStoreTest, ManyAddressesKeepMemoryBoundedAndNeverBlockValidTokens) {
  std::unique_ptr<TokenStore> store = LoadFile(TokensYaml());
  ASSERT_NE(store, nullptr);
  auto address = [](size_t i) { return absl::StrCat("10.", i / 65536, ".", (i / 256) % 256, ".", i % 256); };
  // A scan from more addresses than are tracked, one failure each.
  for (size_t i = 0; i < TokenStore::kMaxTrackedAddresses; ++i) {
    ASSERT_THAT(store->Authenticate("Bearer nope", address(i), kNow), StatusIs(absl::StatusCode::kUnauthenticated))
        << i;
  }
  // The addresses beyond share one count: together they are limited.
  const size_t beyond = TokenStore::kMaxTrackedAddresses;
  for (int i = 0; i < TokenStore::kMaxFailuresPerMinute; ++i) {
    ASSERT_THAT(store->Authenticate("Bearer nope", address(beyond + i), kNow),
                StatusIs(absl::StatusCode::kUnauthenticated))
        << i;
  }
  EXPECT_THAT(store->Authenticate("Bearer nope", address(beyond + 100), kNow),
              StatusIs(absl::StatusCode::kResourceExhausted));
  // Valid tokens pass from a tracked address, an untracked one and a new one.
  EXPECT_THAT(store->Authenticate("Bearer admin-secret", address(0), kNow), IsOk());
  EXPECT_THAT(store->Authenticate("Bearer admin-secret", address(beyond + 100), kNow), IsOk());
  EXPECT_THAT(store->Authenticate("Bearer lead-secret", "198.51.100.200", kNow), IsOk());
  // A tracked address keeps its own count meanwhile.
  EXPECT_THAT(store->Authenticate("Bearer nope", address(1), kNow), StatusIs(absl::StatusCode::kUnauthenticated));
  // A minute later the expired entries are swept and a new address is
  // tracked on its own again.
  const absl::Time later = kNow + absl::Minutes(1) + absl::Seconds(1);
  for (int i = 0; i < TokenStore::kMaxFailuresPerMinute; ++i) {
    ASSERT_THAT(store->Authenticate("Bearer nope", "198.51.100.201", later),
                StatusIs(absl::StatusCode::kUnauthenticated, "not known"))
        << i;
  }
  EXPECT_THAT(store->Authenticate("Bearer nope", "198.51.100.201", later),
              StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(store->Authenticate("Bearer nope", "198.51.100.202", later),
              StatusIs(absl::StatusCode::kUnauthenticated, "not known"));
}

TEST_F(TokenStoreTest, FewerFailuresThanTheLimitDoNotBlock) {
  std::unique_ptr<TokenStore> store = LoadFile(TokensYaml());
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < TokenStore::kMaxFailuresPerMinute - 1; ++i) {
    ASSERT_THAT(store->Authenticate("Bearer nope", "192.0.2.7", kNow), StatusIs(absl::StatusCode::kUnauthenticated));
  }
  EXPECT_THAT(store->Authenticate("Bearer admin-secret", "192.0.2.7", kNow), IsOk());
}

TEST_F(TokenStoreTest, WindowResetsAfterAMinuteAndCountsAgain) {
  std::unique_ptr<TokenStore> store = LoadFile(TokensYaml());
  ASSERT_NE(store, nullptr);
  const std::string addr = "198.51.100.1";
  auto exhaust = [&](absl::Time at) {
    for (int i = 0; i < TokenStore::kMaxFailuresPerMinute; ++i) {
      ASSERT_THAT(store->Authenticate("Bearer nope", addr, at), StatusIs(absl::StatusCode::kUnauthenticated));
    }
    ASSERT_THAT(store->Authenticate("Bearer nope", addr, at), StatusIs(absl::StatusCode::kResourceExhausted));
  };
  exhaust(kNow);
  // Still blocked just under a minute later.
  EXPECT_THAT(store->Authenticate("Bearer nope", addr, kNow + absl::Seconds(59)),
              StatusIs(absl::StatusCode::kResourceExhausted));
  // A new window: failures count from zero again, up to the limit.
  const absl::Time next = kNow + absl::Minutes(2);
  exhaust(next);
  EXPECT_THAT(store->Authenticate("Bearer admin-secret", addr, next), IsOk());
}

TEST_F(TokenStoreTest, RewrittenFileIsPickedUp) {
  std::unique_ptr<TokenStore> store = LoadFile(TokensYaml());
  ASSERT_NE(store, nullptr);
  ASSERT_THAT(store->Authenticate("Bearer admin-secret", "10.0.0.1", kNow), IsOk());
  // Rotate: a new token replaces the old one (different size, so the change
  // is seen even within one mtime tick).
  WriteFile(path_, absl::StrCat("- {name: platform-rotated, sha256: ", AuthSha256Hex("new-admin-secret"),
                                ", role: admin}\n- {name: dashboards, sha256: ", AuthSha256Hex("dash-secret"),
                                ", role: viewer}\n- {name: auditing, sha256: ", AuthSha256Hex("audit-secret"),
                                ", role: auditor}\n"));
  absl::StatusOr<Principal> rotated = store->Authenticate("Bearer new-admin-secret", "10.0.0.1", kNow);
  ASSERT_THAT(rotated, IsOk());
  EXPECT_EQ(rotated->name, "platform-rotated");
  EXPECT_EQ(store->size(), 3u);
  absl::StatusOr<Principal> dash = store->Authenticate("Bearer dash-secret", "10.0.0.1", kNow);
  ASSERT_THAT(dash, IsOk());
  EXPECT_EQ(dash->role, Role::kViewer);
  EXPECT_THAT(store->Authenticate("Bearer admin-secret", "10.0.0.1", kNow),
              StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(store->Authenticate("Bearer lead-secret", "10.0.0.1", kNow),
              StatusIs(absl::StatusCode::kUnauthenticated));
}

TEST_F(TokenStoreTest, ExplicitReloadIfChangedPicksUpTheFile) {
  std::unique_ptr<TokenStore> store = LoadFile(TokensYaml());
  ASSERT_NE(store, nullptr);
  WriteFile(path_,
            absl::StrCat(R"([{"name": "only", "sha256": ")", AuthSha256Hex("only"), R"(", "role": "viewer"}])"));
  store->ReloadIfChanged();
  EXPECT_EQ(store->size(), 1u);
}

TEST_F(TokenStoreTest, BrokenRewrittenFileKeepsTheOldTokens) {
  std::unique_ptr<TokenStore> store = LoadFile(TokensYaml());
  ASSERT_NE(store, nullptr);
  // An unknown role in the new file: the whole file is refused.
  WriteFile(path_, absl::StrCat("- {name: platform, sha256: ", AuthSha256Hex("new-secret"), ", role: root}\n"));
  absl::StatusOr<Principal> old = store->Authenticate("Bearer admin-secret", "10.0.0.1", kNow);
  ASSERT_THAT(old, IsOk());
  EXPECT_EQ(old->name, "platform");
  EXPECT_EQ(store->size(), 2u);
  EXPECT_THAT(store->Authenticate("Bearer new-secret", "10.0.0.1", kNow),
              StatusIs(absl::StatusCode::kUnauthenticated));
  // Not YAML at all: still the old tokens.
  WriteFile(path_, "[{\"name\": \"half-written");
  EXPECT_THAT(store->Authenticate("Bearer lead-secret", "10.0.0.1", kNow), IsOk());
  EXPECT_EQ(store->size(), 2u);
  // Removed: still the old tokens.
  std::filesystem::remove(path_);
  EXPECT_THAT(store->Authenticate("Bearer admin-secret", "10.0.0.1", kNow), IsOk());
  // Fixed: the new tokens take over.
  WriteFile(path_, absl::StrCat("- {name: fixed, sha256: ", AuthSha256Hex("new-secret"), ", role: admin}\n"));
  absl::StatusOr<Principal> fixed = store->Authenticate("Bearer new-secret", "10.0.0.1", kNow);
  ASSERT_THAT(fixed, IsOk());
  EXPECT_EQ(fixed->name, "fixed");
  EXPECT_THAT(store->Authenticate("Bearer admin-secret", "10.0.0.1", kNow),
              StatusIs(absl::StatusCode::kUnauthenticated));
}

}  // namespace
}  // namespace gangkeeper::api
