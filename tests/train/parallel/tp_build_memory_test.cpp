// A tensor-parallel rank's host memory while it builds its model (2 and 4 real ranks started by
// the real launcher, Gloo), two ways: the whole ordinary model and then its shard (how --tp built
// it before), and the shard alone, each tensor drawn whole, cut and freed
// (build_tp_causal_lm(c, group, device), what `gpulab train --tp` does now). Both hold the same
// weights bit for bit; the second's peak growth of the resident set stays below the whole
// model's bytes and half the first's. Measured with the kernel's high-water mark (VmHWM, reset
// through /proc/self/clear_refs), each way in its own processes so that neither inherits the
// other's freed pages. Likewise for a TP rank of a pipeline stage (TP x PP).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "train/dist_worker.h"
#include "train/models/lm_families.h"
#include "train/parallel/device_mesh.h"
#include "train/parallel/tp_families.h"

using namespace gpulab;
using namespace gpulab::train;
using namespace gpulab::train::parallel;
namespace fs = std::filesystem;

namespace {

// GPT-2 with 30 M parameters (120 MB in float32): large beside what libtorch and Gloo allocate
// on the way, small enough to draw in a fraction of a second. The tied token embedding (4.2 M) is
// its largest tensor.
DecoderConfig memory_shape(int64_t hidden) {
  DecoderConfig c;
  c.family = "gpt2";
  c.name = "gpt2-tp-build";
  c.vocab_size = 8192;
  c.hidden_size = hidden;
  c.intermediate_size = 4 * hidden;
  c.num_layers = 8;
  c.num_heads = 8;
  c.num_kv_heads = 8;
  c.max_positions = 1024;
  c.tie_word_embeddings = true;
  return c;
}

// A /proc/self/status field in bytes ("VmRSS:", "VmHWM:").
int64_t status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(field.size())) * 1024;
  return -1;
}

// The first of two pipeline stages: the embeddings (the tied token table) and the first half of
// the blocks.
ModelPart first_stage(const DecoderConfig& c) {
  ModelPart part;
  part.blocks.assign(static_cast<size_t>(c.num_layers), false);
  for (int64_t i = 0; i < c.num_layers / 2; ++i) part.blocks[static_cast<size_t>(i)] = true;
  part.head = false;
  return part;
}

// `stage`: the first pipeline stage's TP shard (TP x PP), else the whole model's (TP alone).
std::shared_ptr<TpCausalLm> build(const DecoderConfig& c, TpGroup& g, bool whole_first,
                                  bool stage) {
  torch::manual_seed(5);
  const ModelPart part = stage ? first_stage(c) : ModelPart{};
  if (!whole_first) return build_tp_causal_lm(c, g, torch::kCPU, part);
  auto whole = build_causal_lm(c, torch::kCPU, part);  // TP x PP: the stage whole, then split
  StateDict held;
  for (const auto& [name, t] : module_state_dict(*whole))
    if (!t.is_meta()) held[name] = t;
  return build_tp_causal_lm(c, g, held, part);
}

// Writes [peak growth, the rank's parameter bytes, whether the peak could be reset] and each
// parameter's sum and sum of squares (fp64).
int build_scenario(bool whole_first, bool stage = false) {
  dist::Communicator world = train::testing::worker_world();
  DeviceMesh mesh(world, world.size(), 1);
  TpGroup g(mesh.tp());
  build(memory_shape(64), g, whole_first, stage);  // the same code paths once, on a small shape
  const bool reset = static_cast<bool>(std::ofstream("/proc/self/clear_refs") << "5");
  const int64_t before = status_bytes("VmRSS:");
  auto model = build(memory_shape(512), g, whole_first, stage);
  const int64_t peak = status_bytes("VmHWM:") - before;
  int64_t bytes = 0;
  std::vector<torch::Tensor> sums;
  for (const auto& p : model->parameters()) {
    if (p.is_meta()) continue;  // another stage's
    bytes += p.numel() * static_cast<int64_t>(p.element_size());
    const auto d = p.detach().to(torch::kDouble);
    sums.push_back(torch::stack({d.sum(), d.square().sum()}));
  }
  train::testing::save_tensors(
      "b" + std::to_string(g.rank()),
      {torch::tensor({peak, bytes, static_cast<int64_t>(reset)}), torch::stack(sums)});
  return 0;
}
train::testing::DistScenario whole_worker("tp_build_whole", [] { return build_scenario(true); });
train::testing::DistScenario shard_worker("tp_build_shard", [] { return build_scenario(false); });
train::testing::DistScenario stage_whole_worker("tp_build_stage_whole",
                                                [] { return build_scenario(true, true); });
train::testing::DistScenario stage_shard_worker("tp_build_stage_shard",
                                                [] { return build_scenario(false, true); });

class TpBuildMemory : public ::testing::TestWithParam<int> {};

TEST_P(TpBuildMemory, ShardAloneNeverHoldsTheWholeModel) {
  const int tp = GetParam();
#if defined(__SANITIZE_ADDRESS__)  // the sanitize-train tree (GCC)
  GTEST_SKIP() << "built with AddressSanitizer, whose allocator keeps freed memory in quarantine "
                  "(the resident set's peak then counts every freed tensor)";
#endif
  const auto run = [&](const std::string& way) {
    const auto dir = fs::temp_directory_path() / ("gpulab-tp-build-" + std::to_string(::getpid()));
    return train::testing::run_ranks_for_tensors("tp_build_" + way, tp, dir, "b");
  };
  const auto before = run("whole"), now = run("shard");
  ASSERT_EQ(before.size(), static_cast<size_t>(tp));
  ASSERT_EQ(now.size(), static_cast<size_t>(tp));
  const auto c = memory_shape(512);
  const double whole = static_cast<double>(c.num_parameters()) * 4;  // float32
  for (int r = 0; r < tp; ++r) {
    const auto& a = before[static_cast<size_t>(r)];
    const auto& b = now[static_cast<size_t>(r)];
    ASSERT_EQ(a[0][2].item<int64_t>(), 1) << "could not reset VmHWM (/proc/self/clear_refs)";
    EXPECT_TRUE(torch::equal(a[1], b[1])) << "rank " << r << ": the shard differs";
    EXPECT_EQ(a[0][1].item<int64_t>(), b[0][1].item<int64_t>());
    const double old_peak = a[0][0].item<double>(), new_peak = b[0][0].item<double>();
    const double shard = b[0][1].item<double>();
    std::printf(
        "TP %d rank %d: peak growth while building, whole model then shard %.1f MB, shard alone "
        "%.1f MB (the rank's parameters %.1f MB, the whole model %.1f MB)\n",
        tp, r, old_peak / 1e6, new_peak / 1e6, shard / 1e6, whole / 1e6);
    EXPECT_LT(new_peak, whole);
    EXPECT_LT(new_peak, old_peak / 2);
  }
}

// TP x PP: a TP rank of the first of two pipeline stages, built as --tp --pp built it before
// (the stage's pieces whole, then its shard) and as now (build_tp_causal_lm with the stage's
// part: the shard alone, every tensor still drawn whole so the values are the same). The peak
// growth stays below the stage's own bytes (its TP shard and the largest single tensor).
TEST(TpPpBuildMemory, StageShardAloneNeverHoldsTheStage) {
#if defined(__SANITIZE_ADDRESS__)  // the sanitize-train tree (GCC)
  GTEST_SKIP() << "built with AddressSanitizer, whose allocator keeps freed memory in quarantine "
                  "(the resident set's peak then counts every freed tensor)";
#endif
  const auto run = [&](const std::string& way) {
    const auto dir =
        fs::temp_directory_path() / ("gpulab-tppp-build-" + std::to_string(::getpid()));
    return train::testing::run_ranks_for_tensors("tp_build_stage_" + way, 2, dir, "b");
  };
  const auto before = run("whole"), now = run("shard");
  ASSERT_EQ(before.size(), 2u);
  ASSERT_EQ(now.size(), 2u);
  // The first stage's ordinary bytes: the token and position tables and half the blocks.
  const auto c = memory_shape(512);
  auto stage = build_causal_lm(c, torch::kCPU, first_stage(c));
  double stage_bytes = 0;
  for (const auto& p : stage->parameters())
    if (!p.is_meta()) stage_bytes += static_cast<double>(p.numel()) * 4;
  for (int r = 0; r < 2; ++r) {
    const auto& a = before[static_cast<size_t>(r)];
    const auto& b = now[static_cast<size_t>(r)];
    ASSERT_EQ(a[0][2].item<int64_t>(), 1) << "could not reset VmHWM (/proc/self/clear_refs)";
    EXPECT_TRUE(torch::equal(a[1], b[1])) << "rank " << r << ": the stage's shard differs";
    const double old_peak = a[0][0].item<double>(), new_peak = b[0][0].item<double>();
    std::printf(
        "TP 2 x PP 2, stage 0, rank %d: peak growth while building, the stage whole then its "
        "shard %.1f MB, the shard alone %.1f MB (the rank's parameters %.1f MB, the stage %.1f "
        "MB)\n",
        r, old_peak / 1e6, new_peak / 1e6, b[0][1].item<double>() / 1e6, stage_bytes / 1e6);
    EXPECT_LT(new_peak, stage_bytes);
    EXPECT_LT(new_peak, old_peak);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, TpBuildMemory, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "tp" + std::to_string(info.param);
                         });

}  // namespace
