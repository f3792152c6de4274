// TP x ZeRO checkpoints through a per-parameter optimizer (tp_shard_checkpoint.h).
#include "train/parallel/tp_shard_checkpoint.h"

#include "train/parallel/mesh_checkpoint.h"
#include "train/parallel/tp_checkpoint.h"
#include "train/parallel/tp_stage_layout.h"
#include "train/parallel/zero_state.h"

namespace gpulab::train::parallel {

void save_tp_shard_checkpoint(const fs::path& dir, const TrainState& state, DeviceMesh& mesh,
                              TpCausalLm& model, dist::ShardedModel& sharded,
                              const torch::optim::Optimizer& opt, int keep) {
  sharded.gather_all();  // ZeRO-3: every parameter present to be written
  TpStageLayout layout;
  const auto slices = zero_slices(sharded, model, 0, layout, layout.ordinary_layout(model));
  save_sharded_mesh_checkpoint(dir, state, mesh, model, opt, slices, keep, layout);
}

Result<TrainState> load_tp_shard_checkpoint(const CheckpointInfo& ckpt, dist::Communicator& world,
                                            TpCausalLm& model, dist::ShardedModel& sharded,
                                            torch::optim::Optimizer& opt) {
  sharded.gather_all();            // the parameters are loaded in place
  if (is_mesh_checkpoint(ckpt)) {  // each rank reads its own slice of the moments
    TpStageLayout layout;
    const auto slices = zero_slices(sharded, model, 0, layout, layout.ordinary_layout(model));
    auto s = agree_loaded(world, load_sharded_mesh_checkpoint(ckpt, model, opt, slices, layout));
    if (s) params_into_shards(sharded);
    return s;
  }
  auto per = per_parameter_optimizer(sharded, opt);
  auto s = agree_loaded(world, load_tp_checkpoint(ckpt, model, *per));
  if (!s) return s;
  flatten_state(sharded, *per, opt);
  return s;
}

}  // namespace gpulab::train::parallel
