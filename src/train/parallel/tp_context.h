// The DistContext of a rank under --tp: the world's communicator and one device mesh over it
// (tensor parallel innermost, data parallel outermost). The model is split over the TP group;
// gradients are averaged over the data-parallel group alone (DDP's bucketed reducer on the dp
// communicator), metrics summed over it, and checkpoints and the final weights written in the
// ordinary layout (gathered to rank 0), so any TP size resumes them.
#pragma once

#include <memory>

#include "train/dist/ddp_context.h"
#include "train/parallel/device_mesh.h"
#include "train/parallel/tp_group.h"

namespace gpulab::train::parallel {

class TpContext : public dist::DdpContext {
 public:
  // Every rank calls it together; throws what MeshLayout throws (tp not dividing the world).
  TpContext(const launch::RankPlace& place, const dist::DdpOptions& opts, int tp);
  ~TpContext() override;

  void prepare_model(torch::nn::Module& model) override;
  void after_backward(torch::nn::Module& model) override;
  // DeviceMesh::metric_sum.
  void all_reduce_sum(torch::Tensor& t) override;
  double clip_grad_norm(torch::nn::Module& model, double max_norm) override;
  // fp16: over the world (the ranks hold different gradients), so they skip a step together.
  bool overflow_anywhere(bool mine) override;
  TpGroup* tp_group() override { return group_.get(); }
  bool splits_model() const override { return true; }
  std::unique_ptr<TensorStream> model_stream(torch::nn::Module& model) override;
  bool save_checkpoint(const fs::path& dir, const TrainState& state, torch::nn::Module& model,
                       const torch::optim::Optimizer& opt, int keep) override;
  std::optional<Result<TrainState>> load_checkpoint(const CheckpointInfo& ckpt,
                                                    torch::nn::Module& model,
                                                    torch::optim::Optimizer& opt) override;

  DeviceMesh& mesh() { return *mesh_; }

 private:
  std::shared_ptr<DeviceMesh> mesh_;
  std::unique_ptr<TpGroup> group_;
};

}  // namespace gpulab::train::parallel
