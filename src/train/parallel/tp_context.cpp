// TpContext: the trainer's hooks for a tensor-parallel rank.
#include "train/parallel/tp_context.h"

#include "core/error.h"
#include "train/dist/sharded_checkpoint.h"
#include "train/parallel/mesh_checkpoint.h"
#include "train/parallel/mesh_export.h"
#include "train/parallel/tp_causal_lm.h"
#include "train/parallel/tp_checkpoint.h"
#include "train/parallel/tp_stage_layout.h"

namespace gpulab::train::parallel {

TpContext::TpContext(const launch::RankPlace& place, const dist::DdpOptions& opts, int tp)
    : DdpContext(place, opts) {
  mesh_ = std::make_shared<DeviceMesh>(*comm_, tp, 1);
  group_ = std::make_unique<TpGroup>(mesh_->tp());
  data_rank = mesh_->coord().dp;
  data_world_size = mesh_->layout().dp();
}

TpContext::~TpContext() = default;

void TpContext::prepare_model(torch::nn::Module& model) {
  // Every rank built its shard from the same seed's whole model, so the replicas of a shard
  // (one per data-parallel rank) start equal without a broadcast.
  if (data_world_size == 1) return;
  // The reducer holds the mesh's dp communicator (an alias that keeps the mesh alive).
  std::shared_ptr<dist::Communicator> dp(mesh_, &mesh_->dp());
  reducer_ = dist::GradReducer::create(dp, model.parameters(), opts_.reducer);
}

void TpContext::after_backward(torch::nn::Module& model) {
  DdpContext::after_backward(model);  // the data-parallel mean, when there is more than one
  tp_model_of(model).finish_gradients();
}

void TpContext::all_reduce_sum(torch::Tensor& t) {
  mesh_->metric_sum(t);
}

bool TpContext::overflow_anywhere(bool mine) {
  return mesh_->world().any_rank(mine, "whether any rank's gradient slices overflowed");
}

double TpContext::clip_grad_norm(torch::nn::Module& model, double max_norm) {
  return tp_model_of(model).clip_grad_norm(max_norm);
}

std::unique_ptr<TensorStream> TpContext::model_stream(torch::nn::Module& model) {
  TpStageLayout layout;
  return mesh_model_stream(*mesh_, model, layout);
}

bool TpContext::save_checkpoint(const fs::path& dir, const TrainState& state,
                                torch::nn::Module& model, const torch::optim::Optimizer& opt,
                                int keep) {
  TpStageLayout layout;
  save_mesh_checkpoint(dir, state, *mesh_, model, opt, keep, layout);
  return true;
}

std::optional<Result<TrainState>> TpContext::load_checkpoint(const CheckpointInfo& ckpt,
                                                             torch::nn::Module& model,
                                                             torch::optim::Optimizer& opt) {
  if (dist::is_sharded_checkpoint(ckpt)) return std::nullopt;  // the trainer's refusal
  return agree_loaded(mesh_->world(), load_tp_checkpoint(ckpt, tp_model_of(model), opt));
}

}  // namespace gpulab::train::parallel
