// TpPipelineShardContext: ZeRO over the data-parallel group of a TP x PP mesh.
#include "train/parallel/tp_pipeline_shard_context.h"

#include <cmath>
#include <limits>
#include <string>

#include "train/parallel/tp_causal_lm.h"
#include "train/parallel/tp_pipeline_context.h"
#include "train/parallel/tp_shard_context.h"
#include "train/parallel/tp_stage_layout.h"

namespace gpulab::train::parallel {

TpPipelineShardContext::TpPipelineShardContext(const launch::RankPlace& place,
                                               const dist::ShardContextOptions& opts, int tp,
                                               int pp)
    : PipelineShardContext(place, opts, tp, pp, std::make_unique<TpStageLayout>()),
      group_(std::make_unique<TpGroup>(mesh_->tp())) {}

TpPipelineShardContext::~TpPipelineShardContext() = default;

// After the pipeline's reduce-scatter (the data-parallel mean of this rank's shards): the TP
// group's sums (sequence-parallel norms, shared kv heads) on their pieces; both linear.
void TpPipelineShardContext::after_backward(torch::nn::Module& model) {
  PipelineShardContext::after_backward(model);
  auto& lm = tp_model_of(model);
  lm.finish_gradients(shard_gradients(lm, *sharded()));
}

// torch's clip_grad_norm_ over the whole model. The TP model takes its stage's norm over the TP
// group and the data-parallel shards (unscaled: an infinite bound); its square summed over the
// stages gives the whole model's. The last stage's copy of a tied embedding (the first stage's
// gradient, summed between them) is scaled but not counted.
double TpPipelineShardContext::clip_grad_norm(torch::nn::Module& model, double max_norm) {
  auto& lm = tp_model_of(model);
  auto grads = shard_gradients(lm, *sharded());
  (void)take_tied_copy(lm, mesh_->coord().pp, grads);  // clip_shards scales every shard
  // Unbounded: the TP model measures the norm and scales nothing.
  const double stage =
      lm.clip_grad_norm(grads, std::numeric_limits<double>::infinity(), &mesh_->dp());
  auto sum_sq = torch::full({1}, stage * stage, torch::kDouble).to(mesh_->pp().device());
  mesh_->pp().allreduce_sum(sum_sq, "gradient norm (TP x pipeline x data parallel)");
  return clip_shards(std::sqrt(sum_sq.cpu().item<double>()), max_norm);
}

}  // namespace gpulab::train::parallel
