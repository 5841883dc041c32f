// gangkeeper: ExtractWorkload on the seed manifests and Kueue's sample jobs,
// loaded unchanged from test/fixtures (YAML converted to JSON at test time).
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"
#include "test/workload/test_util.h"

namespace gangkeeper::workload {
namespace {

using ::gangkeeper::testing::IsOk;
using ::testing::ElementsAre;
using ::testing::SizeIs;
using SeedStrings = std::map<std::string, std::string>;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// The single document of `kind` in a seed file, extracted.
absl::StatusOr<Workload> ExtractSeed(const std::string& file, const std::string& kind, Kind want_kind,
                                     const model::PolicySet& policies = {}) {
  std::vector<std::string> docs = SeedDocuments(file, kind);
  if (docs.size() != 1) return absl::NotFoundError(absl::StrCat(file, " has ", docs.size(), " ", kind, "s"));
  return Extract(docs[0], want_kind, policies);
}

const SeedStrings kFourCpuGpu = {{"cpu", "4"}, {"memory", "16Gi"}, {"nvidia.com/gpu", "1"}};

TEST(SeedManifestTest, TheTwoWorkerKueueJob) {
  const std::string file = "seed000-L811-namespace-namespace-resourceflavor-clusterqueue.yaml";
  const model::PolicySet policies = Policies(ReadFile(SeedPath(file)));
  absl::StatusOr<Workload> w = ExtractSeed(file, "Job", Kind::kJob, policies);
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(w->name, "team-a-two-gpu-training");
  EXPECT_EQ(w->namespace_name, "team-a");
  EXPECT_EQ(w->queue_name, "gpu-queue");
  EXPECT_TRUE(w->suspended);
  EXPECT_THAT(PodSetNames(*w), ElementsAre("main"));
  EXPECT_THAT(PodSetCounts(*w), ElementsAre(2));
  EXPECT_EQ(Formatted(w->pod_sets[0].requests), kFourCpuGpu);
  EXPECT_EQ(Formatted(w->pod_sets[0].limits), kFourCpuGpu);
  ASSERT_THAT(w->pod_sets[0].tolerations, SizeIs(1));
  EXPECT_EQ(w->pod_sets[0].tolerations[0].key, "sku");
  EXPECT_EQ(w->pod_sets[0].tolerations[0].effect, "NoSchedule");
  EXPECT_EQ(w->priority, 0);
  EXPECT_EQ(w->priority_class_source, "");
  EXPECT_EQ(w->TotalPods(), 2);
}

TEST(SeedManifestTest, ThePyTorchJob) {
  absl::StatusOr<Workload> w = ExtractSeed("seed000-L506-namespace-pytorchjob.yaml", "PyTorchJob", Kind::kPyTorchJob);
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(w->api_version, "kubeflow.org/v1");
  EXPECT_THAT(PodSetNames(*w), ElementsAre("master", "worker"));
  EXPECT_THAT(PodSetCounts(*w), ElementsAre(1, 1));
  for (const PodSet& ps : w->pod_sets) {
    SCOPED_TRACE(ps.name);
    EXPECT_EQ(Formatted(ps.requests), kFourCpuGpu);
    EXPECT_EQ(ps.node_selector, (SeedStrings{{"accelerator", "nvidia"}}));
    EXPECT_THAT(ps.tolerations, SizeIs(1));
  }
  EXPECT_FALSE(w->suspended);
  EXPECT_EQ(w->queue_name, "");
}

TEST(SeedManifestTest, TheTFJob) {
  absl::StatusOr<Workload> w = ExtractSeed("seed000-L643-namespace-tfjob.yaml", "TFJob", Kind::kTFJob);
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(PodSetNames(*w), ElementsAre("worker"));
  EXPECT_THAT(PodSetCounts(*w), ElementsAre(2));
  EXPECT_EQ(Formatted(w->pod_sets[0].requests), kFourCpuGpu);
  EXPECT_EQ(w->namespace_name, "ml-training");
}

TEST(SeedManifestTest, TheMigJob) {
  absl::StatusOr<Workload> w = ExtractSeed("seed000-L351-namespace-configmap-namespace-job.yaml", "Job", Kind::kJob);
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(w->name, "mig-hyperparameter-trial");
  EXPECT_THAT(PodSetCounts(*w), ElementsAre(1));
  EXPECT_EQ(Formatted(w->pod_sets[0].requests),
            (SeedStrings{{"cpu", "2"}, {"memory", "8Gi"}, {"nvidia.com/mig-1g.10gb", "1"}}));
  EXPECT_EQ(w->pod_sets[0].node_selector,
            (SeedStrings{{"accelerator", "nvidia"},
                     {"nvidia.com/mig.config", "hptuning-1g10gb"},
                     {"nvidia.com/mig.config.state", "success"}}));
  EXPECT_EQ(w->labels, (SeedStrings{{"workload", "hyperparameter-tuning"}}));
}

TEST(SeedManifestTest, TheMixedMigPodsRequestTheirLimits) {
  std::vector<std::string> pods = SeedDocuments("seed002-mixed-mig-workloads.yaml", "Pod");
  ASSERT_THAT(pods, SizeIs(2));
  absl::StatusOr<Workload> big = Extract(pods[0], Kind::kPod);
  absl::StatusOr<Workload> small = Extract(pods[1], Kind::kPod);
  ASSERT_THAT(big, IsOk());
  ASSERT_THAT(small, IsOk());
  EXPECT_EQ(big->name, "mixed-mig-pod-3g");
  EXPECT_EQ(Formatted(big->pod_sets[0].requests), (SeedStrings{{"nvidia.com/mig-3g.40gb", "1"}}));
  EXPECT_EQ(Formatted(big->pod_sets[0].limits), (SeedStrings{{"nvidia.com/mig-3g.40gb", "1"}}));
  EXPECT_EQ(Formatted(small->pod_sets[0].requests), (SeedStrings{{"nvidia.com/mig-1g.10gb", "1"}}));
  EXPECT_EQ(small->pod_sets[0].node_selector, (SeedStrings{{"agentpool", "migmixed"}}));
  EXPECT_THAT(PodSetCounts(*small), ElementsAre(1));
}

TEST(SeedManifestTest, OtherJobsAndPods) {
  struct Case {
    const char* file;
    const char* kind;
    Kind want_kind;
    SeedStrings requests;
    bool pvc;
  };
  const Case cases[] = {
      {"seed000-L437-job.yaml", "Job", Kind::kJob, kFourCpuGpu, false},
      {"seed000-L1023-job.yaml", "Job", Kind::kJob, {{"cpu", "8"}, {"memory", "16Gi"}, {"nvidia.com/gpu", "1"}}, false},
      {"seed000-L95-persistentvolumeclaim-job.yaml", "Job", Kind::kJob, {{"cpu", "1"}, {"memory", "1Gi"}}, true},
      {"seed000-L1159-storageclass-persistentvolumeclaim-job.yaml", "Job", Kind::kJob, {}, true},
      {"seed000-L230-pod.yaml", "Pod", Kind::kPod, {{"cpu", "1"}, {"memory", "2Gi"}, {"nvidia.com/gpu", "1"}}, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    absl::StatusOr<Workload> w = ExtractSeed(c.file, c.kind, c.want_kind);
    ASSERT_THAT(w, IsOk());
    EXPECT_THAT(PodSetCounts(*w), ElementsAre(1));
    EXPECT_EQ(Formatted(w->pod_sets[0].requests), c.requests);
    EXPECT_EQ(w->pod_sets[0].has_persistent_volume, c.pvc);
  }
}

TEST(SeedManifestTest, EveryBatchJobInTheSeedsExtracts) {
  for (const char* file : {"seed000-L1231-storageclass-persistentvolumeclaim-job.yaml",
                           "seed000-L1312-storageclass-persistentvolumeclaim-job.yaml"}) {
    SCOPED_TRACE(file);
    std::vector<std::string> jobs = SeedDocuments(file, "Job");
    ASSERT_THAT(jobs, SizeIs(1));
    rapidjson::Document doc = ParseJson(jobs[0]);
    absl::StatusOr<Workload> w = ExtractWorkload(doc, InfoFor(Kind::kJob), {});
    ASSERT_THAT(w, IsOk());
    EXPECT_TRUE(w->pod_sets[0].has_persistent_volume);
  }
}

TEST(SeedManifestTest, TheVolcanoJobIsNotAManagedKind) {
  std::vector<std::string> jobs = SeedDocuments("seed000-L935-job.yaml", "Job");
  ASSERT_THAT(jobs, SizeIs(1));
  EXPECT_EQ(FindKind("batch.volcano.sh", "Job"), nullptr);
  // Handed to the Job extractor anyway, it is refused, not misread.
  EXPECT_THAT(Extract(jobs[0], Kind::kJob), gangkeeper::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                                                          "apiVersion"));
}

TEST(SeedManifestTest, PriorityClassesFromTheSeed) {
  const model::PolicySet policies = Policies(ReadFile(SeedPath("seed000-L991-priorityclass-priorityclass.yaml")));
  std::vector<std::string> jobs = SeedDocuments("seed000-L437-job.yaml", "Job");
  ASSERT_THAT(jobs, SizeIs(1));
  std::string json = jobs[0];
  json.replace(json.find(R"("restartPolicy")"), 0, R"("priorityClassName":"training-batch",)");
  absl::StatusOr<Workload> w = Extract(json, Kind::kJob, policies);
  ASSERT_THAT(w, IsOk());
  EXPECT_EQ(w->priority, 10000);
  EXPECT_EQ(w->priority_class_source, "PriorityClass");
  EXPECT_EQ(w->preemption_policy, model::PreemptionPolicy::kNever);
}

TEST(KueueSampleTest, TheSampleJobsExtract) {
  for (const char* file : {"jobs-sample-job.yaml", "getting-started-quick-start-job.yaml"}) {
    SCOPED_TRACE(file);
    absl::StatusOr<std::vector<std::string>> docs =
        testing::YamlFileToJson(std::string(GK_SOURCE_DIR) + "/test/fixtures/kueue/" + file);
    ASSERT_THAT(docs, IsOk());
    ASSERT_THAT(*docs, SizeIs(1));
    absl::StatusOr<Workload> w = Extract((*docs)[0], Kind::kJob);
    ASSERT_THAT(w, IsOk());
    EXPECT_EQ(w->queue_name, "user-queue");
    EXPECT_THAT(PodSetCounts(*w), ElementsAre(3));
    EXPECT_EQ(Formatted(w->pod_sets[0].requests), (SeedStrings{{"cpu", "1"}, {"memory", "200Mi"}}));
  }
}

// Kueue's partial-admission sample (site/static/examples/jobs): 20 pods,
// at least 5 (kueue.x-k8s.io/job-min-parallelism).
TEST(KueueSampleTest, ThePartialAdmissionSampleCarriesItsMinimum) {
  absl::StatusOr<std::vector<std::string>> docs = testing::YamlFileToJson(
      std::string(GK_SOURCE_DIR) + "/test/fixtures/kueue/jobs-sample-job-partial-admission.yaml");
  ASSERT_THAT(docs, IsOk());
  ASSERT_THAT(*docs, SizeIs(1));
  absl::StatusOr<Workload> w = Extract((*docs)[0], Kind::kJob);
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(PodSetCounts(*w), ElementsAre(20));
  EXPECT_EQ(w->pod_sets[0].min_count, 5);
  EXPECT_EQ(w->pod_sets[0].MinCount(), 5);
}

// What the actuator writes on a partial release: spec.parallelism is the
// admitted count, the annotation the Job's own; the gang stays 20 pods.
TEST(PartialAdmissionExtractTest, AReleasedJobIsReadWithItsOwnCount) {
  absl::StatusOr<Workload> w = Extract(R"({"apiVersion":"batch/v1","kind":"Job",
    "metadata":{"name":"j","namespace":"default","labels":{"kueue.x-k8s.io/queue-name":"user-queue"},
      "annotations":{"kueue.x-k8s.io/job-min-parallelism":"10","gangkeeper.io/full-parallelism":"20"}},
    "spec":{"parallelism":12,"completions":20,"template":{"spec":{"containers":[{"name":"c","image":"x",
      "resources":{"requests":{"cpu":"1"}}}]}}}})",
                                       Kind::kJob);
  ASSERT_THAT(w, IsOk());
  EXPECT_THAT(PodSetCounts(*w), ElementsAre(20));
  EXPECT_EQ(w->pod_sets[0].MinCount(), 10);
}

TEST(PartialAdmissionExtractTest, AMinimumOutsideOneToCountMinusOneIsRefused) {
  for (const char* bad : {"0", "20", "25", "-1", "ten"}) {
    SCOPED_TRACE(bad);
    absl::StatusOr<Workload> w = Extract(absl::StrCat(R"({"apiVersion":"batch/v1","kind":"Job",
      "metadata":{"name":"j","namespace":"default","annotations":{"kueue.x-k8s.io/job-min-parallelism":")",
                                                      bad, R"("}},
      "spec":{"parallelism":20,"template":{"spec":{"containers":[{"name":"c","image":"x"}]}}}})"),
                                         Kind::kJob);
    EXPECT_FALSE(w.ok());
    EXPECT_THAT(std::string(w.status().message()), ::testing::HasSubstr("job-min-parallelism"));
  }
  // Without the annotation only the whole count.
  absl::StatusOr<Workload> whole = Extract(R"({"apiVersion":"batch/v1","kind":"Job",
      "metadata":{"name":"j","namespace":"default"},
      "spec":{"parallelism":20,"template":{"spec":{"containers":[{"name":"c","image":"x"}]}}}})",
                                           Kind::kJob);
  ASSERT_THAT(whole, IsOk());
  EXPECT_FALSE(whole->pod_sets[0].min_count.has_value());
  EXPECT_EQ(whole->pod_sets[0].MinCount(), 20);
}

TEST(PartialAdmissionExtractTest, RestoreMinCountsReadsTheAnnotation) {
  Workload w;
  w.kind = Kind::kJob;
  w.pod_sets.push_back(PodSet{.name = "main", .count = 20});
  EXPECT_FALSE(RestoreMinCounts(&w));
  w.annotations[std::string(kJobMinParallelismAnnotation)] = "10";
  EXPECT_TRUE(RestoreMinCounts(&w));
  EXPECT_EQ(w.pod_sets[0].MinCount(), 10);
  EXPECT_FALSE(RestoreMinCounts(&w));  // already set
}

}  // namespace
}  // namespace gangkeeper::workload
