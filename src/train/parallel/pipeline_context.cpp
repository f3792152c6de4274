// PipelineContext: the trainer's hooks for a pipeline-parallel rank.
#include "train/parallel/pipeline_context.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "train/dist/sharded_checkpoint.h"
#include "train/parallel/mesh_checkpoint.h"
#include "train/parallel/mesh_export.h"
#include "train/parallel/pipeline_checkpoint.h"

namespace gpulab::train::parallel {

namespace o = torch::optim;

PipelineContext::PipelineContext(const launch::RankPlace& place, const dist::DdpOptions& opts,
                                 int pp)
    : PipelineContext(place, opts, 1, pp, std::make_unique<StageLayout>()) {}

PipelineContext::PipelineContext(const launch::RankPlace& place, const dist::DdpOptions& opts,
                                 int tp, int pp, std::unique_ptr<StageLayout> layout)
    : DdpContext(place, opts), layout_(std::move(layout)) {
  mesh_ = std::make_shared<DeviceMesh>(*comm_, tp, pp);
  data_rank = mesh_->coord().dp;
  data_world_size = mesh_->layout().dp();
}

PipelineContext::~PipelineContext() = default;

// Every rank built its stage from the same seed's whole model (CausalLm::init_normal), so the
// replicas of a stage start equal without a broadcast.
void PipelineContext::prepare_model(torch::nn::Module& model) {
  (void)stage_model(model);
  model_ = &model;
}

// The data-parallel mean of the stage's gradients, in one flat all-reduce after the schedule's
// backward passes (the executor runs several per step, so no per-bucket hooks).
void PipelineContext::after_backward(torch::nn::Module& model) {
  if (data_world_size == 1) return;
  std::vector<torch::Tensor> grads;
  for (const auto& [name, p] : held_parameters(model))
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return;
  std::vector<torch::Tensor> flat_parts;
  for (const auto& g : grads) flat_parts.push_back(g.reshape({-1}));
  auto flat = torch::cat(flat_parts).to(mesh_->dp().device());
  mesh_->dp().allreduce_sum(flat, "gradient all-reduce (data parallel)");
  flat = flat.to(grads.front().device()).div_(static_cast<double>(data_world_size));
  torch::NoGradGuard no_grad;
  int64_t at = 0;
  for (auto& g : grads) {
    g.copy_(flat.narrow(0, at, g.numel()).view(g.sizes()));
    at += g.numel();
  }
}

void PipelineContext::all_reduce_sum(torch::Tensor& t) {
  mesh_->metric_sum(t);
}

std::vector<std::vector<torch::Tensor>> PipelineContext::optimizer_groups() {
  GPULAB_ASSERT(model_ != nullptr, "the optimizer is made after prepare_model");
  return decay_groups(*model_);
}

bool PipelineContext::overflow_anywhere(bool mine) {
  return mesh_->world().any_rank(mine, "whether any stage's gradients overflowed");
}

// torch's clip_grad_norm_ over the whole model: the stages' squared norms summed over the
// pipeline group, a tied weight (held by the first and the last stage) counted once.
double PipelineContext::clip_grad_norm(torch::nn::Module& model, double max_norm) {
  const auto& lm = stage_model(model);
  const bool tied = lm.config().tie_word_embeddings && mesh_->coord().pp > 0;
  const std::string tied_name(lm.config().traits().token_embedding);
  std::vector<torch::Tensor> grads;
  auto sum_sq = torch::zeros({1}, torch::kDouble);
  for (const auto& [name, p] : held_parameters(model)) {
    if (!p.grad().defined()) continue;
    grads.push_back(p.grad());
    if (!(tied && name == tied_name)) sum_sq += p.grad().norm(2).to(torch::kDouble).pow(2).cpu();
  }
  sum_sq = sum_sq.to(mesh_->pp().device());
  mesh_->pp().allreduce_sum(sum_sq, "gradient norm (pipeline)");
  const double total = std::sqrt(sum_sq.cpu().item<double>());
  const double coef = std::min(1.0, max_norm / (total + 1e-6));
  torch::NoGradGuard no_grad;
  for (auto& g : grads) g.mul_(coef);
  return total;
}

std::unique_ptr<TensorStream> PipelineContext::model_stream(torch::nn::Module& model) {
  return mesh_model_stream(*mesh_, model, *layout_);
}

bool PipelineContext::save_checkpoint(const fs::path& dir, const TrainState& state,
                                      torch::nn::Module& model, const o::Optimizer& opt, int keep) {
  save_mesh_checkpoint(dir, state, *mesh_, model, opt, keep, *layout_);
  return true;
}

std::optional<Result<TrainState>> PipelineContext::load_checkpoint(const CheckpointInfo& ckpt,
                                                                   torch::nn::Module& model,
                                                                   o::Optimizer& opt) {
  if (dist::is_sharded_checkpoint(ckpt)) return std::nullopt;  // the trainer's refusal
  return agree_loaded(mesh_->world(), load_stage_checkpoint(ckpt, model, opt, *layout_));
}

}  // namespace gpulab::train::parallel
