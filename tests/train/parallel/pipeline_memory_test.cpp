// The mesh planner's pipeline memory (mesh_memory.h) against real pipeline stages
// (pipeline_stage.h) run in 1F1B order (pipeline_schedule.h) on the CPU in fp64: the blocks each
// stage gets are the pipeline's own split, the parameters a stage holds are the planner's count
// exactly, the micro-batches a stage keeps in flight are the planner's min(P - s, M), and the
// activations those keep (the heap's growth up to the stage's first backward) are within 10 % of
// its formula.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "train/models/lm_families.h"
#include "train/parallel/mesh_memory.h"
#include "train/parallel/mesh_plan.h"
#include "train/parallel/pipeline_schedule.h"
#include "train/parallel/pipeline_stage.h"

using namespace gpulab;
using namespace gpulab::train;
using namespace gpulab::train::parallel;

namespace {

// tp_memory_test.cpp's block (hidden 256, FFN 896, 8 heads over 4 kv heads, 2 x 64 tokens), 8 of
// them: a stage's 4 blocks keep about 24 MB a micro-batch, against which what the embedding, the
// final norm, the output layer and the loss keep (under 1 MB) is small.
constexpr int64_t kMemoryBatch = 2, kMemorySeq = 64;
constexpr int kStages = 2, kMicroBatches = 4;

DecoderConfig eight_blocks() {
  DecoderConfig c;
  c.name = "llama-pp-memory";
  c.vocab_size = 64;
  c.hidden_size = 256;
  c.intermediate_size = 896;
  c.num_layers = 8;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.max_positions = kMemorySeq;
  return c;
}

int64_t heap_bytes() {
  const struct mallinfo2 mi = mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
}

MeshMemoryQuery query(const DecoderConfig& c) {
  MeshMemoryQuery q;
  q.model = decoder_shape(c);
  q.pp = kStages;
  q.seq_len = kMemorySeq;
  q.micro_batch = kMemoryBatch;
  q.micro_batches = kMicroBatches;
  q.sequence_parallel = false;
  // As tp_memory_test.cpp: gpulab's attention kernel keeps no scores (the selective variant),
  // and gpulab's own accounting of the norms.
  q.recompute = Recompute::kSelective;
  q.activation_model = ActivationModel::kGpulab;
  q.activation_bytes = 8;
  q.param_bytes = 8;
  return q;
}

// One micro-batch through `stage`, kept for its backward: the logits' loss on the last stage.
torch::Tensor stage_forward(PipelineStage& stage, const torch::Tensor& input,
                            const torch::Tensor& ids) {
  auto out = stage.forward(stage.stage(), input);  // one chunk a stage: chunk s
  if (stage.stage() + 1 < kStages) return out;
  return torch::nn::functional::cross_entropy(out.view({-1, out.size(-1)}), ids.view({-1}));
}

struct Kept {
  int64_t in_flight = 0;  // forwards before the stage's first backward
  int64_t bytes = 0;      // what they keep
};

// Runs `stage`'s 1F1B actions up to its first backward (where the most micro-batches are in
// flight), after one forward pass that makes libtorch's lazy buffers.
Kept run_to_first_backward(PipelineStage& stage, const DecoderConfig& c) {
  const auto ids = torch::randint(c.vocab_size, {kMemoryBatch, kMemorySeq});
  // What a later stage receives: hidden states it needs the gradient of.
  const auto hidden =
      torch::randn({kMemoryBatch, kMemorySeq, c.hidden_size}, torch::kDouble).requires_grad_(true);
  const torch::Tensor& input = stage.stage() == 0 ? ids : hidden;
  stage_forward(stage, input, ids);
  std::vector<torch::Tensor> kept;
  const int64_t before = heap_bytes();
  for (const PipeAction& a : pipeline_schedule({kStages, 1, kMicroBatches}, stage.stage())) {
    if (a.op == PipeOp::kBackward) break;
    kept.push_back(stage_forward(stage, input, ids));
  }
  return {static_cast<int64_t>(kept.size()), heap_bytes() - before};
}

TEST(PipelineMemory, PlannerMatchesWhatStagesHold) {
#if defined(__SANITIZE_ADDRESS__)  // the sanitize-train tree (GCC)
  GTEST_SKIP() << "built with AddressSanitizer, whose allocator is not the glibc heap mallinfo2 "
                  "reads";
#endif
  // mallinfo2 reads the main arena: every tensor of this test is made on this thread.
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const DecoderConfig c = eight_blocks();
  torch::manual_seed(3);
  auto whole = build_causal_lm(c);
  whole->to(torch::kDouble);
  const StateDict full = module_state_dict(*whole);
  const MeshMemoryQuery q = query(c);
  const auto layers = stage_layers(q.model, kStages, kMemorySeq);
  const auto spans = split_stages(c.num_layers, kStages, 1, decoder_stage_costs(c, kMemorySeq));
  const MeshMemory fullest = mesh_memory(q);
  for (int s = 0; s < kStages; ++s) {
    PipelineStage stage(c, {kStages, 1, kMicroBatches}, spans, s, full);
    stage.model().set_fused_attention(true);
    EXPECT_EQ(spans[static_cast<size_t>(s)].num_blocks, layers[static_cast<size_t>(s)]) << s;
    int64_t params = 0;
    for (const auto& p : stage.parameters()) params += p.numel();
    if (s == fullest.stage) {
      EXPECT_EQ(params, fullest.params_per_gpu) << "stage " << s;
    }
    const Kept k = run_to_first_backward(stage, c);
    EXPECT_EQ(k.in_flight, std::min(kStages - s, kMicroBatches)) << "stage " << s;
    const double planned = static_cast<double>(k.in_flight * layers[static_cast<size_t>(s)] *
                                               layer_activation_bytes(q));
    const double measured = static_cast<double>(k.bytes);
    std::printf(
        "PP %d stage %d: %lld blocks, %lld parameters, %lld micro-batches in flight, "
        "activations measured %.0f bytes, planned %.0f (%+.1f %%)\n",
        kStages, s, static_cast<long long>(layers[static_cast<size_t>(s)]),
        static_cast<long long>(params), static_cast<long long>(k.in_flight), measured, planned,
        100.0 * (planned - measured) / measured);
    EXPECT_LE(std::abs(planned - measured), 0.10 * measured) << "stage " << s;
  }
  at::set_num_threads(threads);
}

}  // namespace
