// The DistContext of a rank under --pp: the world's communicator and one device mesh over it
// (pipeline stages inside a model replica, data parallel outermost). The model is the rank's
// pipeline stage (the family's model with the other stages' pieces on the meta device); its
// gradients are averaged over the data-parallel group, clipped by the norm over every stage,
// metrics summed over the data-parallel group; checkpoints and the final weights are gathered
// into the ordinary layout, so any --pp (one included) resumes them.
#pragma once

#include <memory>

#include "train/dist/ddp_context.h"
#include "train/parallel/device_mesh.h"
#include "train/parallel/pipeline_checkpoint.h"

namespace gpulab::train::parallel {

class PipelineContext : public dist::DdpContext {
 public:
  // Every rank calls it together; throws what MeshLayout throws (pp not dividing the world).
  PipelineContext(const launch::RankPlace& place, const dist::DdpOptions& opts, int pp);
  ~PipelineContext() override;

  void prepare_model(torch::nn::Module& model) override;
  void after_backward(torch::nn::Module& model) override;
  // DeviceMesh::metric_sum.
  void all_reduce_sum(torch::Tensor& t) override;
  std::vector<std::vector<torch::Tensor>> optimizer_groups() override;
  double clip_grad_norm(torch::nn::Module& model, double max_norm) override;
  // fp16: over the world (the ranks hold different gradients), so they skip a step together.
  bool overflow_anywhere(bool mine) override;
  bool splits_model() const override { return true; }
  DeviceMesh* pipeline_mesh() override { return mesh_.get(); }
  std::unique_ptr<TensorStream> model_stream(torch::nn::Module& model) override;
  bool save_checkpoint(const fs::path& dir, const TrainState& state, torch::nn::Module& model,
                       const torch::optim::Optimizer& opt, int keep) override;
  std::optional<Result<TrainState>> load_checkpoint(const CheckpointInfo& ckpt,
                                                    torch::nn::Module& model,
                                                    torch::optim::Optimizer& opt) override;

 protected:
  // A mesh of `tp`-rank tensor-parallel groups inside the stages (TpPipelineContext), whose
  // tensors meet the ordinary layout through `layout`.
  PipelineContext(const launch::RankPlace& place, const dist::DdpOptions& opts, int tp, int pp,
                  std::unique_ptr<StageLayout> layout);

 private:
  std::shared_ptr<DeviceMesh> mesh_;
  std::unique_ptr<StageLayout> layout_;  // the identity for a stage of the ordinary model
  torch::nn::Module* model_ = nullptr;   // the stage's model (prepare_model)
};

}  // namespace gpulab::train::parallel
