// TpShardContext: ZeRO over the data-parallel group of a tensor-parallel mesh.
#include "train/parallel/tp_shard_context.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/dist/sharded_checkpoint.h"
#include "train/parallel/mesh_checkpoint.h"
#include "train/parallel/mesh_export.h"
#include "train/parallel/tp_causal_lm.h"
#include "train/parallel/tp_shard_checkpoint.h"
#include "train/parallel/tp_stage_layout.h"

namespace gpulab::train::parallel {

std::vector<TpCausalLm::NamedGrad> shard_gradients(TpCausalLm& lm, dist::ShardedModel& sharded) {
  std::map<const void*, std::string> name_of;
  for (const auto& p : lm.named_parameters()) name_of[p.value().unsafeGetTensorImpl()] = p.key();
  std::vector<TpCausalLm::NamedGrad> out;
  for (auto* g : sharded.groups()) {
    const auto& grad = g->shard().grad();
    if (!grad.defined()) continue;
    const int64_t lo = g->shard_numel() * g->rank(), hi = lo + g->shard_numel();
    for (size_t i = 0; i < g->params().size(); ++i) {
      const auto& p = g->params()[i];
      const int64_t a = std::max(lo, g->offset_of(i)),
                    b = std::min(hi, g->offset_of(i) + p.numel());
      if (a < b)
        out.push_back({name_of.at(p.unsafeGetTensorImpl()), grad.narrow(0, a - lo, b - a)});
    }
  }
  return out;
}

TpShardContext::TpShardContext(const launch::RankPlace& place,
                               const dist::ShardContextOptions& opts, int tp)
    : MeshShardContext(mesh_over_world(place, opts.ddp.comm, tp, 1), place, opts),
      group_(std::make_unique<TpGroup>(mesh_->tp())) {}

TpShardContext::~TpShardContext() = default;

void TpShardContext::after_backward(torch::nn::Module& model) {
  ShardContext::after_backward(model);  // gradient shards: the data-parallel mean
  auto& lm = tp_model_of(model);
  lm.finish_gradients(shard_gradients(lm, *sharded()));
}

double TpShardContext::clip_grad_norm(torch::nn::Module& model, double max_norm) {
  auto& lm = tp_model_of(model);
  return lm.clip_grad_norm(shard_gradients(lm, *sharded()), max_norm, &mesh_->dp());
}

// After gather_parameters (the trainer's order for the final weights): every parameter present.
std::unique_ptr<TensorStream> TpShardContext::model_stream(torch::nn::Module& model) {
  TpStageLayout layout;
  return mesh_model_stream(*mesh_, tp_model_of(model), layout);
}

bool TpShardContext::save_checkpoint(const fs::path& dir, const TrainState& state,
                                     torch::nn::Module& model, const torch::optim::Optimizer& opt,
                                     int keep) {
  save_tp_shard_checkpoint(dir, state, *mesh_, tp_model_of(model), *sharded(), opt, keep);
  return true;
}

std::optional<Result<TrainState>> TpShardContext::load_checkpoint(const CheckpointInfo& ckpt,
                                                                  torch::nn::Module& model,
                                                                  torch::optim::Optimizer& opt) {
  if (dist::is_sharded_checkpoint(ckpt)) return std::nullopt;  // the trainer's refusal
  return load_tp_shard_checkpoint(ckpt, mesh_->world(), tp_model_of(model), *sharded(), opt);
}

}  // namespace gpulab::train::parallel
