// PipelineShardContext: ZeRO over the data-parallel group of each pipeline stage.
#include "train/parallel/pipeline_shard_context.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "train/dist/sharded_checkpoint.h"
#include "train/parallel/mesh_checkpoint.h"
#include "train/parallel/mesh_export.h"
#include "train/parallel/pipeline_checkpoint.h"
#include "train/parallel/zero_state.h"

namespace gpulab::train::parallel {

namespace {

// The tied embedding's copy on a stage after the first (its gradient is the first stage's, which
// counts it), or an undefined tensor.
torch::Tensor tied_copy(torch::nn::Module& model, int stage) {
  for (const auto& [n, p] : held_parameters(model))
    if (is_tied_copy(stage_model(model), stage, n)) return p;
  return {};
}

// The squared 2-norm of this rank's gradient shards, `skip`'s elements left out (in double).
torch::Tensor shard_sum_of_squares(dist::ShardedModel& sharded, const torch::Tensor& skip) {
  torch::NoGradGuard no_grad;
  auto total = torch::zeros({1}, torch::kDouble);
  for (auto* g : sharded.groups()) {
    torch::Tensor grad = g->shard().grad();
    if (!grad.defined()) continue;
    const int64_t lo = g->shard_numel() * g->rank(), hi = lo + g->shard_numel();
    for (size_t i = 0; i < g->params().size(); ++i) {
      if (!skip.defined() || !g->params()[i].is_same(skip)) continue;
      const int64_t a = std::max(lo, g->offset_of(i)),
                    b = std::min(hi, g->offset_of(i) + skip.numel());
      if (a < b) {
        grad = grad.clone();
        grad.narrow(0, a - lo, b - a).zero_();
      }
    }
    total += grad.to(torch::kDouble).pow(2).sum().cpu();
  }
  return total;
}

}  // namespace

PipelineShardContext::PipelineShardContext(const launch::RankPlace& place,
                                           const dist::ShardContextOptions& opts, int pp)
    : PipelineShardContext(place, opts, 1, pp, std::make_unique<StageLayout>()) {}

PipelineShardContext::PipelineShardContext(const launch::RankPlace& place,
                                           const dist::ShardContextOptions& opts, int tp, int pp,
                                           std::unique_ptr<StageLayout> layout)
    : MeshShardContext(mesh_over_world(place, opts.ddp.comm, tp, pp), place, opts),
      layout_(std::move(layout)) {}

PipelineShardContext::~PipelineShardContext() = default;

// The schedule runs several backward passes per flush (and --grad_accum several flushes per
// step): each adds to the stage's whole gradients, without communication.
void PipelineShardContext::before_backward(torch::nn::Module& model, bool /*sync*/) {
  ShardContext::before_backward(model, false);
}

// After the step's last flush (the tied embedding's gradient summed between its stages): every
// unit's gradient reduce-scattered into the data-parallel mean of this rank's shard.
void PipelineShardContext::after_backward(torch::nn::Module& model) {
  sharded()->prepare(true);
  ShardContext::after_backward(model);
}

// torch's clip_grad_norm_ over the whole model: every shard of every stage once.
double PipelineShardContext::clip_grad_norm(torch::nn::Module& model, double max_norm) {
  auto sum_sq = shard_sum_of_squares(*sharded(), tied_copy(model, mesh_->coord().pp));
  sum_sq = sum_sq.to(mesh_->world().device());
  mesh_->world().allreduce_sum(sum_sq, "gradient norm (pipeline x data parallel)");
  return clip_shards(std::sqrt(sum_sq.cpu().item<double>()), max_norm);
}

// After gather_parameters (the trainer's order for the final weights): every parameter present.
std::unique_ptr<TensorStream> PipelineShardContext::model_stream(torch::nn::Module& model) {
  return mesh_model_stream(*mesh_, model, *layout_);
}

bool PipelineShardContext::save_checkpoint(const fs::path& dir, const TrainState& state,
                                           torch::nn::Module& model,
                                           const torch::optim::Optimizer& opt, int keep) {
  sharded()->gather_all();  // ZeRO-3: every parameter present to be written
  const auto slices =
      zero_slices(*sharded(), model, mesh_->coord().pp, *layout_, layout_->ordinary_layout(model));
  save_sharded_mesh_checkpoint(dir, state, *mesh_, model, opt, slices, keep, *layout_);
  return true;
}

std::optional<Result<TrainState>> PipelineShardContext::load_checkpoint(
    const CheckpointInfo& ckpt, torch::nn::Module& model, torch::optim::Optimizer& opt) {
  if (dist::is_sharded_checkpoint(ckpt)) return std::nullopt;  // the trainer's refusal
  sharded()->gather_all();                                     // the parameters are loaded in place
  if (is_mesh_checkpoint(ckpt)) {  // each rank reads its own slice of the moments
    const auto slices = zero_slices(*sharded(), model, mesh_->coord().pp, *layout_,
                                    layout_->ordinary_layout(model));
    auto s = agree_loaded(mesh_->world(),
                          load_sharded_mesh_checkpoint(ckpt, model, opt, slices, *layout_));
    if (s) params_into_shards(*sharded());
    return s;
  }
  auto per = per_parameter_optimizer(*sharded(), opt);
  auto s = agree_loaded(mesh_->world(), load_stage_checkpoint(ckpt, model, *per, *layout_));
  if (!s) return s;
  flatten_state(*sharded(), *per, opt);
  return s;
}

}  // namespace gpulab::train::parallel
