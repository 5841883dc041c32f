// Truncated, mutated and random manifests never crash the decoder (the test
// command also runs this under ASan/UBSan). Deterministic and bounded.
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "gtest/gtest.h"
#include "test/model/test_util.h"

namespace gangkeeper::model {
namespace {

std::vector<std::string> Corpus() {
  std::vector<std::string> texts;
  for (const char* dir : {"test/fixtures/seed", "test/fixtures/kueue", "policies"}) {
    for (const auto& e : std::filesystem::directory_iterator(std::string(GK_SOURCE_DIR) + "/" + dir)) {
      if (e.path().extension() != ".yaml") continue;
      std::ifstream in(e.path());
      std::stringstream ss;
      ss << in.rdbuf();
      texts.push_back(ss.str());
    }
  }
  texts.push_back(R"({"apiVersion":"kueue.x-k8s.io/v1beta2","kind":"ClusterQueue","metadata":{"name":"q"},)"
                  R"("spec":{"namespaceSelector":{},"resourceGroups":[{"coveredResources":["cpu"],"flavors":)"
                  R"([{"name":"f","resources":[{"name":"cpu","nominalQuota":"1"}]}]}]}})");
  return texts;
}

// Every diagnostic says something.
void CheckWellFormed(const Decoded& d) {
  for (const Diagnostic& diag : d.diagnostics.items) {
    ASSERT_FALSE(diag.message.empty());
  }
}

TEST(FuzzTest, EveryTruncationDecodes) {
  std::vector<std::string> corpus = Corpus();
  ASSERT_GT(corpus.size(), 20u);
  size_t runs = 0;
  for (const std::string& text : corpus) {
    const size_t step = std::max<size_t>(1, text.size() / 150);
    for (size_t cut = 0; cut < text.size(); cut += step) {
      CheckWellFormed(Decode(text.substr(0, cut)));
      ++runs;
    }
  }
  EXPECT_GT(runs, 2000u);
}

TEST(FuzzTest, RandomMutationsDecode) {
  std::vector<std::string> corpus = Corpus();
  std::mt19937 rng(20261202);
  const std::string alphabet = ":-[]{}\"'#&*!|>%@`\n\t ,0123456789abcXYZ.~?";
  for (int i = 0; i < 3000; ++i) {
    std::string text = corpus[rng() % corpus.size()];
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      size_t pos = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[pos] = alphabet[rng() % alphabet.size()]; break;
        case 1: text.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
        default: text.erase(pos, 1 + rng() % 16); break;
      }
    }
    CheckWellFormed(Decode(text));
  }
}

TEST(FuzzTest, RandomBytesAndHostileShapesDecode) {
  std::mt19937 rng(7);
  for (int i = 0; i < 500; ++i) {
    std::string text(rng() % 512, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 256);
    CheckWellFormed(Decode(text));
  }
  // Deep nesting, alias bombs, huge numbers, wrong top-level types.
  std::string deep = "a: " + std::string(5000, '[') + std::string(5000, ']');
  Decoded d1 = Decode(deep);
  EXPECT_TRUE(d1.diagnostics.HasErrors());
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 0; i < 9; ++i) {
    bomb += std::string(1, static_cast<char>('b' + i)) + ": &" + std::string(1, static_cast<char>('b' + i)) + " [*" +
            std::string(1, static_cast<char>('a' + i)) + ", *" + std::string(1, static_cast<char>('a' + i)) + ", *" +
            std::string(1, static_cast<char>('a' + i)) + ", *" + std::string(1, static_cast<char>('a' + i)) + ", *" +
            std::string(1, static_cast<char>('a' + i)) + ", *" + std::string(1, static_cast<char>('a' + i)) + ", *" +
            std::string(1, static_cast<char>('a' + i)) + ", *" + std::string(1, static_cast<char>('a' + i)) + ", *" +
            std::string(1, static_cast<char>('a' + i)) + ", *" + std::string(1, static_cast<char>('a' + i)) + "]\n";
  }
  Decoded d2 = Decode(bomb);
  EXPECT_TRUE(d2.diagnostics.HasErrors());
  Decoded d3 = Decode(R"({"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","metadata":{"name":"p"},)"
                      R"("value":1e400})");
  EXPECT_TRUE(d3.diagnostics.HasErrors());
  Decoded d4 = Decode("42\n---\n\"text\"\n---\nnull\n---\n[1, 2]\n");
  EXPECT_EQ(d4.diagnostics.Count(Diagnostic::Severity::kError), 3);
}

}  // namespace
}  // namespace gangkeeper::model
