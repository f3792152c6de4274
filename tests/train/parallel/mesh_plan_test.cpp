// `gpulab plan`'s device-mesh layouts and GRPO split, through the real binary: llama3-70b on 16
// H100s lists only layouts that fit and recommends TP inside a node; llama3-8b on 8; MI300X's
// 192 GB changes the recommendation; qwen2.5-1.5b's GRPO split on 8 MI300X says yes with its
// numbers; impossible layouts are refused (exit 2) naming what fits. The printed figures are
// checked against the library's own (mesh_layouts), not against numbers written here.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "train/dist/memory_plan.h"
#include "train/parallel/mesh_plan.h"
#include "train/trainer_test_util.h"

using namespace gpulab;
using namespace gpulab::train::parallel;

namespace {

struct Row {
  int tp, pp, dp;
  std::string shard, fits;
};

// The mesh table's rows (they start with the tp, pp and dp numbers, after the mesh header).
std::vector<Row> mesh_rows(const std::string& out) {
  std::vector<Row> rows;
  const auto at = out.find("Device mesh layouts");
  std::istringstream in(at == std::string::npos ? "" : out.substr(at));
  static const std::regex row(
      R"(^\s*(\d+)\s+(\d+)\s+(\d+)\s+(none|optimizer|gradients|full)\s.*\s(yes|checkpointing|no)\s*$)");
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_match(line, m, row))
      rows.push_back({std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3]), m[4], m[5]});
  return rows;
}

struct Pick {
  int tp = 0, pp = 0, dp = 0;
  std::string shard;
};

Pick recommended(const std::string& out) {
  static const std::regex re(R"(Recommended: TP (\d+) x PP (\d+) x DP (\d+), --shard (\w+))");
  std::smatch m;
  Pick p;
  if (std::regex_search(out, m, re)) p = {std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3]), m[4]};
  return p;
}

ProcessResult plan(const std::vector<std::string>& args) {
  std::vector<std::string> a{"plan"};
  a.insert(a.end(), args.begin(), args.end());
  return train::testing::run_gpulab(a);
}

// The library's layouts for the same question the command answered (defaults as plan's: fp32,
// AdamW, one 2048-token sequence a micro-batch).
std::vector<LayoutPlan> library_layouts(const std::string& model, int gpus,
                                        const std::string& gpu) {
  MeshPlanQuery q;
  q.model = train::find_decoder_config(model).value_or_throw();
  q.gpus = gpus;
  q.capacity_bytes = train::dist::device_memory_bytes(gpu);
  q.base.model = decoder_shape(q.model);
  q.base.param_bytes = q.base.grad_bytes = q.base.activation_bytes = 4;
  q.base.optimizer_bytes = 8;
  return mesh_layouts(q);
}

int fitting(const std::vector<LayoutPlan>& all) {
  int n = 0;
  for (const auto& l : all) n += l.fit != FitLevel::kNoFit;
  return n;
}

// Every printed row fits (yes, or with checkpointing), keeps TP inside an 8-GPU node, and the
// table has as many rows as the library finds fitting layouts; the recommendation is among them.
void expect_only_fitting(const std::string& out, const std::vector<LayoutPlan>& all) {
  const auto rows = mesh_rows(out);
  ASSERT_FALSE(rows.empty()) << out;
  for (const auto& r : rows) {
    EXPECT_NE(r.fits, "no") << out;
    EXPECT_EQ(8 % r.tp, 0) << "TP " << r.tp << " spans nodes";
  }
  EXPECT_EQ(static_cast<int>(rows.size()), fitting(all)) << out;
  const Pick p = recommended(out);
  bool listed = false;
  for (const auto& r : rows)
    listed = listed || (r.tp == p.tp && r.pp == p.pp && r.shard == p.shard);
  EXPECT_TRUE(listed) << out;
}

// The planner counts every listed shape's parameters as the shape itself does (which
// DecoderShapes.ListedCountsEqualTransformers checks against transformers): GPT-2's biases,
// LayerNorm biases and position table, Qwen2's q/k/v biases, tied and untied output layers.
TEST(MeshPlan, ParameterCountOfEveryListedShapeIsTheModels) {
  int families = 0;
  for (const auto& c : train::decoder_shapes()) {
    EXPECT_EQ(model_params(decoder_shape(c)), c.num_parameters()) << c.name;
    families |= c.family == "gpt2" ? 1 : c.family == "qwen2" ? 2 : 4;
  }
  EXPECT_EQ(families, 7) << "a family without a listed shape";
}

TEST(MeshPlanCli, Llama70bOnSixteenH100sListsWhatFitsAndKeepsTpInANode) {
  auto r = plan({"--model", "llama3-70b", "--gpus", "16", "--gpu", "h100"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::printf("%s", r.out.substr(r.out.find("Device mesh")).c_str());
  const auto all = library_layouts("llama3-70b", 16, "h100");
  expect_only_fitting(r.out, all);
  // Some layouts do not fit (ZeRO-less TP 1 would need ~1 TB a GPU) and are left out.
  EXPECT_LT(fitting(all), static_cast<int>(all.size()));
  const Pick p = recommended(r.out);
  EXPECT_GT(p.tp, 1);
  EXPECT_EQ(8 % p.tp, 0);
  EXPECT_NE(r.out.find("inside a node"), std::string::npos) << r.out;
  // ZeRO-3 across the two nodes is not what it recommends (it all-gathers every layer there).
  EXPECT_FALSE(p.shard == "full" && (p.dp - 1) * p.tp * p.pp >= 8) << r.out;
}

TEST(MeshPlanCli, Llama8bOnEightGpus) {
  auto r = plan({"--model", "llama3-8b", "--gpus", "8", "--gpu", "h100"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  expect_only_fitting(r.out, library_layouts("llama3-8b", 8, "h100"));
  EXPECT_GT(recommended(r.out).tp, 0) << r.out;
}

TEST(MeshPlanCli, Mi300xMemoryChangesTheRecommendation) {
  auto h100 = plan({"--model", "llama3-70b", "--gpus", "16", "--gpu", "h100"});
  auto mi300x = plan({"--model", "llama3-70b", "--gpus", "16", "--gpu", "mi300x"});
  ASSERT_EQ(mi300x.exit_code, 0) << mi300x.out << mi300x.err;
  expect_only_fitting(mi300x.out, library_layouts("llama3-70b", 16, "mi300x"));
  const Pick a = recommended(h100.out), b = recommended(mi300x.out);
  std::printf("llama3-70b on 16: H100 TP %d x PP %d x DP %d %s; MI300X TP %d x PP %d x DP %d %s\n",
              a.tp, a.pp, a.dp, a.shard.c_str(), b.tp, b.pp, b.dp, b.shard.c_str());
  // 192 GB: a smaller model-parallel size fits (more data parallelism), or it fits without
  // the recomputation H100 needs.
  const bool lighter = mi300x.out.find("fits without recomputation") != std::string::npos &&
                       h100.out.find("fits only with activation") != std::string::npos;
  EXPECT_TRUE(b.tp * b.pp < a.tp * a.pp || lighter) << h100.out << mi300x.out;
  EXPECT_GT(fitting(library_layouts("llama3-70b", 16, "mi300x")),
            fitting(library_layouts("llama3-70b", 16, "h100")));
}

TEST(MeshPlanCli, GrpoSplitOnEightMi300x) {
  auto r = plan({"--model", "qwen2.5-1.5b", "--gpus", "8", "--gpu", "mi300x", "--generation_gpus",
                 "1", "--shard", "gradients", "--precision", "bf16"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::printf("%s", r.out.c_str());
  EXPECT_NE(r.out.find("1 generation GPU(s), 7 training GPUs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fits yes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("The split fits: yes, training with --shard gradients"), std::string::npos)
      << r.out;
  // 70B's weights alone (282 GB in fp32) overflow one 24 GB generation GPU: a clear no.
  auto no = plan({"--model", "llama3-70b", "--gpus", "8", "--gpu", "rtx4090", "--generation_gpus",
                  "1", "--shard", "full"});
  ASSERT_EQ(no.exit_code, 0) << no.out << no.err;
  EXPECT_NE(no.out.find("The split fits: no (the generation GPU)"), std::string::npos) << no.out;
}

void expect_refused(const std::vector<std::string>& args, const std::string& says,
                    const std::string& hint) {
  auto r = plan(args);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(hint), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("Device mesh"), std::string::npos) << "printed before refusing";
}

TEST(MeshPlanCli, ImpossibleLayoutsAreRefusedNamingWhatFits) {
  // TP 16 spans the two 8-GPU nodes; TP 3 divides neither the GPUs nor the 64 heads.
  expect_refused({"--model", "llama3-70b", "--gpus", "16", "--tp", "16"}, "--tp 16",
                 "use --tp 1, 2, 4, 8");
  expect_refused({"--model", "llama3-70b", "--gpus", "16", "--tp", "3"}, "--tp 3", "use --tp");
  expect_refused({"--model", "llama3-8b", "--gpus", "64", "--tp", "1", "--pp", "64"}, "--pp 64",
                 "use --pp 1, 2, 4, 8, 16, 32");  // 32 layers
  expect_refused({"--model", "llama3-70b", "--gpus", "12"}, "not a whole number of nodes",
                 "use --gpus 8 or 16");
  expect_refused({"--model", "qwen2.5-1.5b", "--gpus", "8", "--generation_gpus", "8"},
                 "leaves none of the 8 GPUs", "--generation_gpus 7 or fewer");
  expect_refused({"--model", "resnet50", "--gpus", "8", "--tp", "2"}, "--tp plans a language model",
                 "gpulab models");
  expect_refused({"--model", "qwen2.5-1.5b", "--gpus", "8", "--generation_gpus", "1",
                  "--max_new_tokens", "40000"},
                 "beyond", "or less");
}

}  // namespace
