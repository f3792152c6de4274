// The DistContext of a rank under --tp with --pp and --shard optimizer|gradients|full: one device
// mesh (TP innermost, pipeline stages next, data parallel outermost) whose data-parallel group
// shards the rank's TP piece of its stage as ZeRO-1/2/3 shards a whole model (dist::ShardContext
// over that group), Megatron's distributed optimizer on a TP x PP mesh. The schedule's backward
// passes accumulate locally; after the step's last flush the gradients are reduce-scattered over
// the data-parallel group, then the TP model's own sums run on the shards' pieces. The clipping
// norm sums every stage's shards (a tied embedding's copy on the last stage left out); checkpoints
// and the final weights are gathered over TP, then over the stages, into the ordinary layout.
#pragma once

#include <memory>

#include "train/dist/shard_context.h"
#include "train/parallel/device_mesh.h"
#include "train/parallel/tp_group.h"
#include "train/parallel/tp_stage_layout.h"

namespace gpulab::train::parallel {

class TpPipelineShardContext : public dist::ShardContext {
 public:
  // Every rank calls it together; throws what MeshLayout throws (tp x pp not dividing the world).
  TpPipelineShardContext(const launch::RankPlace& place, const dist::ShardContextOptions& opts,
                         int tp, int pp);
  ~TpPipelineShardContext() override;

  void before_backward(torch::nn::Module& model, bool sync) override;
  void after_backward(torch::nn::Module& model) override;
  double clip_grad_norm(torch::nn::Module& model, double max_norm) override;
  // DeviceMesh::metric_sum.
  void all_reduce_sum(torch::Tensor& t) override;
  void broadcast(torch::Tensor& t, int root) override;  // over the world
  void barrier() override;
  DeviceMesh* pipeline_mesh() override { return mesh_.get(); }
  TpGroup* tp_group() override { return group_.get(); }
  StateDict model_state(torch::nn::Module& model) override;
  bool save_checkpoint(const fs::path& dir, const TrainState& state, torch::nn::Module& model,
                       const torch::optim::Optimizer& opt, int keep) override;
  std::optional<Result<TrainState>> load_checkpoint(const CheckpointInfo& ckpt,
                                                    torch::nn::Module& model,
                                                    torch::optim::Optimizer& opt) override;

 private:
  TpPipelineShardContext(std::shared_ptr<DeviceMesh> mesh, const launch::RankPlace& place,
                         const dist::ShardContextOptions& opts);

  std::shared_ptr<DeviceMesh> mesh_;
  std::unique_ptr<TpGroup> group_;
  TpStageLayout layout_;
};

}  // namespace gpulab::train::parallel
