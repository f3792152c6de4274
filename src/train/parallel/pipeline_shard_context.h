// The DistContext of a rank under --pp with --shard optimizer|gradients|full: one device mesh
// (pipeline stages inside a model replica, data parallel outermost) whose data-parallel group
// shards the rank's pipeline stage as ZeRO-1/2/3 shards a whole model (dist::ShardContext over
// that group). The schedule's backward passes accumulate the stage's gradients locally, as
// accumulation micro-steps do; after the optimizer step's last flush they are reduce-scattered
// at once. The clipping norm sums the gradient shards' squares over the whole mesh (a tied
// embedding, held by the first and the last stage, counted once); checkpoints and the final
// weights are gathered into the ordinary layout, so any --pp and any --shard resumes them.
#pragma once

#include <memory>

#include "train/parallel/mesh_shard_context.h"
#include "train/parallel/pipeline_checkpoint.h"

namespace gpulab::train::parallel {

class PipelineShardContext : public MeshShardContext {
 public:
  // Every rank calls it together; throws what MeshLayout throws (pp not dividing the world).
  PipelineShardContext(const launch::RankPlace& place, const dist::ShardContextOptions& opts,
                       int pp);
  ~PipelineShardContext() override;

  void before_backward(torch::nn::Module& model, bool sync) override;
  void after_backward(torch::nn::Module& model) override;
  double clip_grad_norm(torch::nn::Module& model, double max_norm) override;
  DeviceMesh* pipeline_mesh() override { return mesh_.get(); }
  std::unique_ptr<TensorStream> model_stream(torch::nn::Module& model) override;
  bool save_checkpoint(const fs::path& dir, const TrainState& state, torch::nn::Module& model,
                       const torch::optim::Optimizer& opt, int keep) override;
  std::optional<Result<TrainState>> load_checkpoint(const CheckpointInfo& ckpt,
                                                    torch::nn::Module& model,
                                                    torch::optim::Optimizer& opt) override;

 protected:
  // TP groups of `tp` ranks inside the stages (TpPipelineShardContext), whose tensors meet the
  // ordinary layout through `layout`.
  PipelineShardContext(const launch::RankPlace& place, const dist::ShardContextOptions& opts,
                       int tp, int pp, std::unique_ptr<StageLayout> layout);

 private:
  std::unique_ptr<StageLayout> layout_;  // the identity for a stage of the ordinary model
};

}  // namespace gpulab::train::parallel
