// The mesh planner's arithmetic: parameter counts against the published sizes of Llama 3 8B and
// 70B, how TP, PP and the ZeRO stages divide them, and Korthikanti et al.'s activation formulas
// (their consistency at TP 1 and the paper's "about 5x" for sequence parallelism with selective
// recomputation at GPT-3 175B).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>

#include "train/parallel/mesh_memory.h"

using namespace gpulab::train::parallel;

namespace {

// config.json of meta-llama/Meta-Llama-3-70B and -8B.
DecoderShape llama3_70b() {
  return {.layers = 80, .hidden = 8192, .ffn = 28672, .heads = 64, .kv_heads = 8, .vocab = 128256};
}
DecoderShape llama3_8b() {
  return {.layers = 32, .hidden = 4096, .ffn = 14336, .heads = 32, .kv_heads = 8, .vocab = 128256};
}

TEST(MeshMemory, ParameterCountsAreThePublishedOnes) {
  // What transformers' num_parameters() reports for the two checkpoints.
  EXPECT_EQ(model_params(llama3_70b()), 70'553'706'496);
  EXPECT_EQ(model_params(llama3_8b()), 8'030'261'248);
}

TEST(MeshMemory, TensorParallelSplitsMatricesAndReplicatesNorms) {
  const auto m = llama3_70b();
  const int64_t norms = 2 * m.hidden;
  // kv heads (8) >= tp 8: every matrix splits, only the two norms are on every rank.
  EXPECT_EQ(8 * layer_params(m, 8), layer_params(m, 1) + 7 * norms);
  // tp 16 > 8 kv heads: each pair of ranks keeps the same K/V group (8 extra K/V copies).
  const int64_t kv = 2 * m.hidden * m.kv_heads * (m.hidden / m.heads);
  EXPECT_EQ(16 * layer_params(m, 16), layer_params(m, 1) + 15 * norms + kv);
}

TEST(MeshMemory, PipelineAndZeroStagesDivideWhatEachRankHolds) {
  MeshMemoryQuery q{.model = llama3_70b(), .tp = 8, .pp = 4, .dp = 2};
  // The last stage holds the most: 20 layers, its slice of the output layer (as large as the
  // first stage's of the embedding) and the final norm.
  const int64_t last = 20 * layer_params(q.model, 8) + 128256 / 8 * 8192 + 8192;
  auto none = mesh_memory(q);
  EXPECT_EQ(none.params_per_gpu, last);
  EXPECT_EQ(none.params, 2 * last);
  EXPECT_EQ(none.optimizer, 12 * last);
  const int64_t half = (last + 1) / 2;
  q.shard = 1;
  auto z1 = mesh_memory(q);
  EXPECT_EQ(z1.optimizer, 12 * half);
  EXPECT_EQ(z1.grads, none.grads);
  q.shard = 3;
  auto z3 = mesh_memory(q);
  EXPECT_EQ(z3.params, 2 * half);
  EXPECT_EQ(z3.grads, 2 * half);
  // 1F1B: the first stage keeps min(pp, micro-batches) micro-batches of its 20 layers.
  q.micro_batches = 8;
  EXPECT_EQ(mesh_memory(q).activations, 20 * 4 * layer_activation_bytes(q));
}

TEST(MeshMemory, ActivationFormulasOfKorthikanti) {
  // GPT-3 175B: a 96, h 12288, s 2048, t 8, b 1.
  MeshMemoryQuery q{.model = {.layers = 96,
                              .hidden = 12288,
                              .ffn = 49152,
                              .heads = 96,
                              .kv_heads = 96,
                              .vocab = 51200,
                              .gated_mlp = false},
                    .tp = 8,
                    .seq_len = 2048};
  q.sequence_parallel = false;
  const double tp_alone = static_cast<double>(layer_activation_bytes(q));
  // s b h (10 + 24/8 + 5 * 96 * 2048 / (12288 * 8)) = 2048 * 12288 * 23
  EXPECT_EQ(layer_activation_bytes(q), 2048LL * 12288 * 23);
  q.sequence_parallel = true;
  q.recompute = Recompute::kSelective;
  const double sp_selective = static_cast<double>(layer_activation_bytes(q));
  EXPECT_GT(tp_alone / sp_selective, 5.0);  // the paper's "about 5x": 23 / 4.25 = 5.4
  EXPECT_LT(tp_alone / sp_selective, 6.0);
  // At t = 1 sequence parallelism changes nothing: 10 + 24 = 34.
  q.tp = 1;
  q.recompute = Recompute::kNone;
  const int64_t with_sp = layer_activation_bytes(q);
  q.sequence_parallel = false;
  EXPECT_EQ(layer_activation_bytes(q), with_sp);
}

TEST(MeshMemory, Llama70bOnSixteenGpusPrintsItsLayouts) {
  for (auto [tp, pp, dp, shard] : {std::array{8, 2, 1, 0}, std::array{8, 1, 2, 1},
                                   std::array{4, 4, 1, 0}, std::array{8, 1, 2, 3}}) {
    MeshMemoryQuery q{.model = llama3_70b(),
                      .tp = tp,
                      .pp = pp,
                      .dp = dp,
                      .shard = shard,
                      .seq_len = 4096,
                      .micro_batch = 1,
                      .micro_batches = 8,
                      .recompute = Recompute::kSelective};
    auto r = mesh_memory(q);
    const double gib = 1024.0 * 1024 * 1024;
    std::printf(
        "llama3-70b tp %d pp %d dp %d zero-%d: params %.1f GiB, grads %.1f, optimizer "
        "%.1f, activations %.1f, total %.1f GiB per GPU\n",
        tp, pp, dp, shard, r.params / gib, r.grads / gib, r.optimizer / gib, r.activations / gib,
        r.total() / gib);
    EXPECT_GT(r.total(), 0);
  }
}

}  // namespace
