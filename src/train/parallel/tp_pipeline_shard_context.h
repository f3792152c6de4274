// The DistContext of a rank under --tp with --pp and --shard optimizer|gradients|full: the
// pipeline's ZeRO context (PipelineShardContext: the mesh's data-parallel group shards each
// rank's piece of its stage; backward passes accumulate locally and the step's last flush
// reduce-scatters them; checkpoints in the ordinary layout) over a mesh with TP groups inside the
// stages, Megatron's distributed optimizer on a TP x PP mesh. The TP model's own sums run on the
// shards' pieces after the reduce-scatter; the clipping norm is each stage's (TP group and
// data-parallel shards) summed over the stages, a tied embedding's copy on the last stage left
// out; the stage's tensors meet the ordinary layout through TpStageLayout (gathered over TP).
#pragma once

#include <memory>

#include "train/parallel/pipeline_shard_context.h"
#include "train/parallel/tp_group.h"

namespace gpulab::train::parallel {

class TpPipelineShardContext : public PipelineShardContext {
 public:
  // Every rank calls it together; throws what MeshLayout throws (tp x pp not dividing the world).
  TpPipelineShardContext(const launch::RankPlace& place, const dist::ShardContextOptions& opts,
                         int tp, int pp);
  ~TpPipelineShardContext() override;

  void after_backward(torch::nn::Module& model) override;
  double clip_grad_norm(torch::nn::Module& model, double max_norm) override;
  TpGroup* tp_group() override { return group_.get(); }

 private:
  std::unique_ptr<TpGroup> group_;
};

}  // namespace gpulab::train::parallel
