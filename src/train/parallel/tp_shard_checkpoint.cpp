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
  auto per = per_parameter_optimizer(sharded, opt);
  // The first data-parallel replica writes the checkpoint (save_mesh_checkpoint).
  unflatten_state(sharded, const_cast<torch::optim::Optimizer&>(opt), *per, mesh.coord().dp == 0);
  TpStageLayout layout;
  save_mesh_checkpoint(dir, state, mesh, model, *per, keep, layout);
}

Result<TrainState> load_tp_shard_checkpoint(const CheckpointInfo& ckpt, dist::Communicator& world,
                                            TpCausalLm& model, dist::ShardedModel& sharded,
                                            torch::optim::Optimizer& opt) {
  sharded.gather_all();  // the parameters are loaded in place
  auto per = per_parameter_optimizer(sharded, opt);
  auto s = agree_loaded(world, load_tp_checkpoint(ckpt, model, *per));
  if (!s) return s;
  flatten_state(sharded, *per, opt);
  return s;
}

}  // namespace gpulab::train::parallel
