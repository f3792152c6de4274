// The mesh planner's arithmetic: parameter counts against the published sizes of Llama 3 8B and
// 70B, how TP, PP and the ZeRO stages divide them, and Korthikanti et al.'s activation formulas
// (their consistency at TP 1 and the paper's "about 5x" for sequence parallelism with selective
// recomputation at GPT-3 175B).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <vector>

#include "train/parallel/mesh_memory.h"
#include "train/parallel/pipeline_split.h"

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

TEST(MeshMemory, PipelineStagesAreThePipelinesOwnSplit) {
  const auto m = llama3_70b();
  const auto split = stage_layers(m, 4, 2048);
  ASSERT_EQ(split.size(), 4u);
  // One home: the planner's stages are the pipeline library's (pipeline_split.h), costed by the
  // training FLOPs of the same pieces (a block's matrices and attention, the lookup, the head).
  const int64_t matrices = layer_params(m, 1) - 2 * m.hidden;
  const auto spans =
      split_stages(80, 4, 1, decoder_stage_costs(m.hidden, matrices, m.hidden, m.vocab, 2048));
  for (size_t s = 0; s < 4; ++s) EXPECT_EQ(split[s], spans[s].num_blocks) << "stage " << s;
  int64_t sum = 0;
  for (int64_t n : split) sum += n;
  EXPECT_EQ(sum, 80);
  // The output layer (6 h V = 6.3 GFLOPs per token, 1.2 blocks' worth here) pushes layers off the
  // last stage; the lookup (2 h) is too cheap to move any off the first.
  EXPECT_LT(split.back(), *std::max_element(split.begin(), split.end() - 1));
  EXPECT_EQ(stage_layers(m, 1, 2048), std::vector<int64_t>{80});
  EXPECT_EQ(stage_layers(m, 80, 2048), std::vector<int64_t>(80, 1));
}

TEST(MeshMemory, PipelineAndZeroStagesDivideWhatEachRankHolds) {
  MeshMemoryQuery q{.model = llama3_70b(), .tp = 8, .pp = 4, .dp = 2};
  // The rank that holds the most: the fullest stage of the balanced split.
  const auto split = stage_layers(q.model, 4, q.seq_len);
  auto none = mesh_memory(q);
  const size_t s = static_cast<size_t>(none.stage);
  const int64_t held = split[s] * layer_params(q.model, 8) + (s == 0 ? 128256 / 8 * 8192 : 0) +
                       (s == 3 ? 128256 / 8 * 8192 + 8192 : 0);
  EXPECT_EQ(none.stage_layers, split[s]);
  EXPECT_EQ(none.params_per_gpu, held);
  EXPECT_EQ(none.params, 2 * held);
  EXPECT_EQ(none.optimizer, 12 * held);
  const int64_t half = (held + 1) / 2;
  q.shard = 1;
  auto z1 = mesh_memory(q);
  EXPECT_EQ(z1.optimizer, 12 * half);
  EXPECT_EQ(z1.grads, none.grads);
  q.shard = 3;
  auto z3 = mesh_memory(q);
  EXPECT_EQ(z3.params, 2 * half);
  EXPECT_EQ(z3.grads, 2 * half);
  // 1F1B: stage 0 keeps min(pp, micro-batches) = 4 micro-batches of its layers, stage s 4 - s;
  // the rank that holds the most is one of them, and at least the first stage's activations.
  q.micro_batches = 8;
  q.shard = 0;
  const auto busy = mesh_memory(q);
  EXPECT_EQ(busy.activations, busy.stage_layers * (4 - busy.stage) * layer_activation_bytes(q));
  EXPECT_GE(busy.total(), none.params + none.grads + none.optimizer);
  // 16 bytes a parameter: 2 + 2 of gradient + 12 of optimizer state.
  EXPECT_GE(busy.total(), (split[0] * layer_params(q.model, 8) + 128256 / 8 * 8192) * 16 +
                              split[0] * 4 * layer_activation_bytes(q));
}

TEST(MeshMemory, ActivationFormulasOfKorthikanti) {
  // GPT-3 175B: a 96, h 12288, s 2048, t 8, b 1.
  MeshMemoryQuery q{.model = {.layers = 96,
                              .hidden = 12288,
                              .ffn = 49152,
                              .heads = 96,
                              .kv_heads = 96,
                              .vocab = 51200,
                              .gated_mlp = false,
                              .dropout = true},
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
