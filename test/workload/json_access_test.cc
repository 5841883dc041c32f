// gangkeeper: tests for the checked RapidJSON helpers.
#include "src/workload/json_access.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/workload/test_util.h"

namespace gangkeeper::workload {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<std::string> Paths(const base::FieldErrors& errors) {
  std::vector<std::string> out;
  for (const base::FieldError& e : errors.errors()) out.push_back(e.path);
  return out;
}

std::string Details(const base::FieldErrors& errors) {
  std::string out;
  for (const base::FieldError& e : errors.errors()) absl::StrAppend(&out, e.path, ": ", e.detail, "\n");
  return out;
}

TEST(JsonAccessTest, MemberTreatsAbsentAndNullAlikeAndNeverTouchesNonObjects) {
  rapidjson::Document doc = ParseJson(R"({"a": 1, "b": null, "s": "x"})");
  const JsonNode root(doc, base::FieldPath("spec"));
  ASSERT_TRUE(Member(root, "a").has_value());
  EXPECT_EQ(Member(root, "a")->path().str(), "spec.a");
  EXPECT_FALSE(Member(root, "b").has_value());
  EXPECT_FALSE(Member(root, "missing").has_value());
  // A string is not an object: no member lookup (RapidJSON would assert).
  EXPECT_FALSE(Member(*Member(root, "s"), "x").has_value());
}

TEST(JsonAccessTest, TypedFieldsReportWrongTypesWithPaths) {
  rapidjson::Document doc = ParseJson(R"({"obj": [], "list": {}, "str": 5, "flag": "true"})");
  const JsonNode root(doc, base::FieldPath("spec"));
  base::FieldErrors errors;
  EXPECT_FALSE(ObjectField(root, "obj", &errors).has_value());
  EXPECT_FALSE(ListField(root, "list", &errors).has_value());
  EXPECT_FALSE(StringField(root, "str", &errors).has_value());
  EXPECT_FALSE(BoolField(root, "flag", &errors).has_value());
  EXPECT_FALSE(StringField(root, "name", &errors, Presence::kRequired).has_value());
  EXPECT_FALSE(ObjectField(root, "absent", &errors).has_value());  // optional: no error
  EXPECT_THAT(Paths(errors), ElementsAre("spec.obj", "spec.list", "spec.str", "spec.flag", "spec.name"));
  EXPECT_THAT(errors.errors()[0].detail, HasSubstr("must be an object, got list"));
  EXPECT_THAT(errors.errors()[1].detail, HasSubstr("must be a list, got object"));
  EXPECT_EQ(errors.errors()[4].type, base::FieldErrorType::kRequired);
}

TEST(JsonAccessTest, IntFieldAcceptsOnlyIntegersInRange) {
  rapidjson::Document doc = ParseJson(
      R"({"ok": 3, "zero": 0, "frac": 2.5, "str": "2", "neg": -1, "big": 1e300, "huge": 18446744073709551615,
          "top": 1000000, "over": 1000001})");
  const JsonNode root(doc, base::FieldPath());
  base::FieldErrors errors;
  EXPECT_EQ(IntField(root, "ok", 0, 1000000, &errors), 3);
  EXPECT_EQ(IntField(root, "zero", 0, 1000000, &errors), 0);
  EXPECT_EQ(IntField(root, "top", 0, 1000000, &errors), 1000000);
  EXPECT_EQ(IntField(root, "absent", 0, 1000000, &errors), std::nullopt);
  EXPECT_THAT(errors.errors(), IsEmpty());
  for (const char* bad : {"frac", "str", "neg", "big", "huge", "over"}) {
    SCOPED_TRACE(bad);
    base::FieldErrors e;
    EXPECT_EQ(IntField(root, bad, 0, 1000000, &e), std::nullopt);
    EXPECT_THAT(Paths(e), ElementsAre(bad));
    EXPECT_THAT(e.errors()[0].detail, HasSubstr("must be an integer from 0 to 1000000"));
  }
  base::FieldErrors e;
  IntField(root, "str", 0, 10, &e);
  EXPECT_THAT(e.errors()[0].detail, HasSubstr("got string \"2\""));
}

TEST(JsonAccessTest, QuantitiesComeAsStringsOrNumbers) {
  rapidjson::Document doc = ParseJson(
      R"({"s": "16Gi", "i": 1, "f": 0.5, "e": 2e3, "m": "500m", "neg": "-1", "negnum": -2, "bad": "four",
          "bool": true, "obj": {}, "far": 1e30, "farstr": "10E"})");
  const JsonNode root(doc, base::FieldPath("requests"));
  base::FieldErrors errors;
  EXPECT_EQ(AsQuantity(*Member(root, "s"), &errors), Q("16Gi"));
  EXPECT_EQ(AsQuantity(*Member(root, "i"), &errors), Q("1"));
  EXPECT_EQ(AsQuantity(*Member(root, "f"), &errors), Q("500m"));
  EXPECT_EQ(AsQuantity(*Member(root, "e"), &errors), Q("2k"));
  EXPECT_EQ(AsQuantity(*Member(root, "m"), &errors), Q("0.5"));
  EXPECT_THAT(errors.errors(), IsEmpty()) << Details(errors);

  struct Bad {
    const char* field;
    const char* want;
  };
  for (const Bad& b : {Bad{"neg", "\"-1\" must not be negative"}, Bad{"negnum", "\"-2\" must not be negative"},
                       Bad{"bad", "\"four\" is not a quantity"}, Bad{"bool", "must be a quantity"},
                       Bad{"obj", "got object"}, Bad{"far", "\"1e+30\" is out of range"},
                       Bad{"farstr", "\"10E\" is out of range"}}) {
    SCOPED_TRACE(b.field);
    base::FieldErrors e;
    EXPECT_EQ(AsQuantity(*Member(root, b.field), &e), std::nullopt);
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e.errors()[0].path, absl::StrCat("requests.", b.field));
    EXPECT_THAT(e.errors()[0].detail, HasSubstr(b.want));
  }
}

TEST(JsonAccessTest, ResourceMapsKeyPathsByResourceName) {
  rapidjson::Document doc = ParseJson(R"({"requests": {"cpu": "2", "nvidia.com/gpu": "four", "": "1"}})");
  const JsonNode root(doc, base::FieldPath("resources"));
  base::FieldErrors errors;
  std::map<std::string, quantity::Quantity> got = ResourceMapField(root, "requests", &errors);
  EXPECT_EQ(Formatted(got), (std::map<std::string, std::string>{{"cpu", "2"}}));
  EXPECT_THAT(Paths(errors), ElementsAre("resources.requests[nvidia.com/gpu]", "resources.requests[]"));
}

TEST(JsonAccessTest, StringMapsRejectNonStringValues) {
  rapidjson::Document doc = ParseJson(R"({"labels": {"a": "1", "b": 2, "c": null}})");
  const JsonNode root(doc, base::FieldPath("metadata"));
  base::FieldErrors errors;
  EXPECT_EQ(StringMapField(root, "labels", &errors), (std::map<std::string, std::string>{{"a", "1"}}));
  EXPECT_THAT(Paths(errors), ElementsAre("metadata.labels[b]", "metadata.labels[c]"));
}

TEST(JsonAccessTest, ListsAndMapsAreBounded) {
  std::string items;
  std::string members;
  for (size_t i = 0; i <= kMaxItems; ++i) {
    absl::StrAppend(&items, i == 0 ? "" : ",", "{}");
    absl::StrAppend(&members, i == 0 ? "" : ",", "\"k", i, "\":\"v\"");
  }
  rapidjson::Document doc = ParseJson(absl::StrCat(R"({"list": [)", items, R"(], "map": {)", members, "}}"));
  const JsonNode root(doc, base::FieldPath("spec"));
  base::FieldErrors errors;
  EXPECT_FALSE(ListField(root, "list", &errors).has_value());
  EXPECT_THAT(StringMapField(root, "map", &errors), IsEmpty());
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors.errors()[0].type, base::FieldErrorType::kTooMany);
  EXPECT_THAT(errors.errors()[0].detail, HasSubstr("has 1001 items; at most 1000"));
  EXPECT_THAT(errors.errors()[1].detail, HasSubstr("has 1001 entries; at most 1000"));
}

TEST(JsonAccessTest, ItemsCarryIndexedPaths) {
  rapidjson::Document doc = ParseJson(R"({"containers": [{}, 3]})");
  const JsonNode root(doc, base::FieldPath("spec"));
  base::FieldErrors errors;
  std::optional<JsonNode> list = ListField(root, "containers", &errors);
  ASSERT_TRUE(list.has_value());
  std::vector<JsonNode> items = Items(*list);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[1].path().str(), "spec.containers[1]");
  EXPECT_TRUE(ExpectObject(items[0], &errors));
  EXPECT_FALSE(ExpectObject(items[1], &errors));
  EXPECT_THAT(Paths(errors), ElementsAre("spec.containers[1]"));
  EXPECT_THAT(Items(*Member(root, "containers")), ::testing::SizeIs(2));
}

TEST(JsonAccessTest, DescribeJsonQuotesAndCutsStrings) {
  rapidjson::Document doc = ParseJson(R"({"s": "a\"b", "n": 2.5, "b": false, "l": []})");
  EXPECT_EQ(DescribeJson(doc["s"]), R"("a\"b")");
  EXPECT_EQ(DescribeJson(doc["n"]), "2.5");
  EXPECT_EQ(DescribeJson(doc["b"]), "false");
  EXPECT_EQ(DescribeJson(doc["l"]), "list");
  const std::string long_text(100, 'x');
  rapidjson::Value v(rapidjson::StringRef(long_text.data(), long_text.size()));
  EXPECT_EQ(DescribeJson(v), "\"" + std::string(64, 'x') + "\"...");
}

}  // namespace
}  // namespace gangkeeper::workload
