// A tensor-parallel rank's host memory while it builds its model (2 and 4 real ranks started by
// the real launcher, Gloo), two ways: the whole ordinary model and then its shard (how --tp built
// it before), and the shard alone, each tensor drawn whole, cut and freed
// (build_tp_causal_lm(c, group, device), what `gpulab train --tp` does now). Both hold the same
// weights bit for bit; the second's peak growth of the resident set stays below the whole
// model's bytes and half the first's. Measured with the kernel's high-water mark (VmHWM, reset
// through /proc/self/clear_refs), each way in its own processes so that neither inherits the
// other's freed pages.
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

std::shared_ptr<TpCausalLm> build(const DecoderConfig& c, TpGroup& g, bool whole_first) {
  torch::manual_seed(5);
  if (!whole_first) return build_tp_causal_lm(c, g, torch::kCPU);
  auto whole = build_causal_lm(c);
  return build_tp_causal_lm(c, g, module_state_dict(*whole));
}

// Writes [peak growth, the rank's parameter bytes, whether the peak could be reset] and each
// parameter's sum and sum of squares (fp64).
int build_scenario(bool whole_first) {
  dist::Communicator world = train::testing::worker_world();
  DeviceMesh mesh(world, world.size(), 1);
  TpGroup g(mesh.tp());
  build(memory_shape(64), g, whole_first);  // the same code paths once, on a small shape
  const bool reset = static_cast<bool>(std::ofstream("/proc/self/clear_refs") << "5");
  const int64_t before = status_bytes("VmRSS:");
  auto model = build(memory_shape(512), g, whole_first);
  const int64_t peak = status_bytes("VmHWM:") - before;
  int64_t bytes = 0;
  std::vector<torch::Tensor> sums;
  for (const auto& p : model->parameters()) {
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

INSTANTIATE_TEST_SUITE_P(Sizes, TpBuildMemory, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "tp" + std::to_string(info.param);
                         });

}  // namespace
