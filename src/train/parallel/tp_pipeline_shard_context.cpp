// TpPipelineShardContext: ZeRO over the data-parallel group of a TP x PP mesh.
#include "train/parallel/tp_pipeline_shard_context.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "train/dist/sharded_checkpoint.h"
#include "train/parallel/pipeline_checkpoint.h"
#include "train/parallel/tp_causal_lm.h"
#include "train/parallel/tp_shard_context.h"
#include "train/parallel/zero_state.h"

namespace gpulab::train::parallel {

TpPipelineShardContext::TpPipelineShardContext(const launch::RankPlace& place,
                                               const dist::ShardContextOptions& opts, int tp,
                                               int pp)
    : TpPipelineShardContext(mesh_over_world(place, opts.ddp.comm, tp, pp), place, opts) {}

TpPipelineShardContext::TpPipelineShardContext(std::shared_ptr<DeviceMesh> mesh,
                                               const launch::RankPlace& place,
                                               const dist::ShardContextOptions& opts)
    : ShardContext(std::shared_ptr<dist::Communicator>(mesh, &mesh->dp()), place, opts),
      mesh_(std::move(mesh)) {
  group_ = std::make_unique<TpGroup>(mesh_->tp());
  // The base took the data-parallel group's numbering; the run is reported by world rank 0.
  rank = mesh_->world().rank();
  world_size = mesh_->world().size();
  data_rank = mesh_->coord().dp;
  data_world_size = mesh_->layout().dp();
}

TpPipelineShardContext::~TpPipelineShardContext() = default;

// The schedule runs several backward passes per flush (and --grad_accum several flushes per
// step): each adds to the stage's whole gradients, without communication.
void TpPipelineShardContext::before_backward(torch::nn::Module& model, bool /*sync*/) {
  ShardContext::before_backward(model, false);
}

// After the step's last flush: the data-parallel mean of this rank's shards, then the TP group's
// sums (sequence-parallel norms, shared kv heads) on their pieces; both linear, so in any order.
void TpPipelineShardContext::after_backward(torch::nn::Module& model) {
  sharded()->prepare(true);
  ShardContext::after_backward(model);
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
  if (lm.config().tie_word_embeddings && mesh_->coord().pp > 0) {
    const std::string tied(lm.config().traits().token_embedding);
    std::erase_if(grads, [&](const auto& g) { return g.name == tied; });
  }
  const double stage =
      lm.clip_grad_norm(grads, std::numeric_limits<double>::infinity(), &mesh_->dp());
  auto sum_sq = torch::full({1}, stage * stage, torch::kDouble).to(mesh_->pp().device());
  mesh_->pp().allreduce_sum(sum_sq, "gradient norm (TP x pipeline x data parallel)");
  const double total = std::sqrt(sum_sq.cpu().item<double>());
  const double coef = max_norm / (total + 1e-6);
  torch::NoGradGuard no_grad;
  if (coef < 1.0)
    for (const auto& s : sharded()->all_shards())
      if (s.grad().defined()) s.grad().mul_(coef);
  return total;
}

void TpPipelineShardContext::all_reduce_sum(torch::Tensor& t) {
  mesh_->metric_sum(t);
}

void TpPipelineShardContext::broadcast(torch::Tensor& t, int root) {
  mesh_->world().broadcast(t, root);
}

void TpPipelineShardContext::barrier() {
  mesh_->world().barrier();
}

// After gather_parameters (the trainer's order for the final weights): every parameter present.
StateDict TpPipelineShardContext::model_state(torch::nn::Module& model) {
  return gather_pipeline_model(mesh_->pp(), model, layout_);
}

bool TpPipelineShardContext::save_checkpoint(const fs::path& dir, const TrainState& state,
                                             torch::nn::Module& model,
                                             const torch::optim::Optimizer& opt, int keep) {
  sharded()->gather_all();  // ZeRO-3: every parameter present to be gathered
  auto per = per_parameter_optimizer(*sharded(), opt);
  unflatten_state(*sharded(), const_cast<torch::optim::Optimizer&>(opt), *per);
  save_pipeline_checkpoint(dir, state, mesh_->pp(), model, *per, keep, is_main(), layout_);
  return true;
}

std::optional<Result<TrainState>> TpPipelineShardContext::load_checkpoint(
    const CheckpointInfo& ckpt, torch::nn::Module& model, torch::optim::Optimizer& opt) {
  if (dist::is_sharded_checkpoint(ckpt)) return std::nullopt;  // the trainer's refusal
  sharded()->gather_all();                                     // the parameters are loaded in place
  auto per = per_parameter_optimizer(*sharded(), opt);
  auto s = load_pipeline_checkpoint(ckpt, model, *per, layout_);
  if (!s) return s;
  flatten_state(*sharded(), *per, opt);
  return s;
}

}  // namespace gpulab::train::parallel
