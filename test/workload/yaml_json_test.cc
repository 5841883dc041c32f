// gangkeeper: tests for the YAML-to-JSON test helper the seed tests rely on.
#include "test/testing/yaml_json.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gangkeeper::testing {
namespace {

using ::testing::ElementsAre;

TEST(YamlToJsonTest, TypesPlainScalarsLikeTheApiServer) {
  absl::StatusOr<std::vector<std::string>> got = YamlToJson(R"(
a: 1
b: "1"
c: 16Gi
d: 0.5
e: true
f: 'false'
g: null
h: ~
i:
j: 2e3
k: -7
l: 007
m: 1.
n: +3
o: 99999999999999999999
p: .inf
q: |
  line "one"
  line two
r: [x, 2, {s: t}]
)");
  ASSERT_THAT(got, IsOk());
  EXPECT_THAT(*got, ElementsAre(
      R"({"a":1,"b":"1","c":"16Gi","d":0.5,"e":true,"f":"false","g":null,"h":null,"i":null,"j":2000,"k":-7,)"
      R"("l":7,"m":1,"n":3,"o":1e+20,"p":".inf","q":"line \"one\"\nline two\n","r":["x",2,{"s":"t"}]})"));
}

TEST(YamlToJsonTest, OneJsonTextPerDocument) {
  absl::StatusOr<std::vector<std::string>> got = YamlToJson("# comment\n---\nkind: A\n---\n---\nkind: B\n");
  ASSERT_THAT(got, IsOk());
  EXPECT_THAT(*got, ElementsAre(R"({"kind":"A"})", R"({"kind":"B"})"));
}

TEST(YamlToJsonTest, SyntaxErrorsAreInvalidArgumentWithTheLine) {
  EXPECT_THAT(YamlToJson("a: [1, 2\nb: c\n"), StatusIs(absl::StatusCode::kInvalidArgument, "line"));
  EXPECT_THAT(YamlFileToJson("/nonexistent/file.yaml"), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace gangkeeper::testing
