// MeshShardContext: ZeRO over a device mesh's data-parallel group (mesh_shard_context.h).
#include "train/parallel/mesh_shard_context.h"

#include <utility>

namespace gpulab::train::parallel {

MeshShardContext::MeshShardContext(std::shared_ptr<DeviceMesh> mesh, const launch::RankPlace& place,
                                   const dist::ShardContextOptions& opts)
    : ShardContext(std::shared_ptr<dist::Communicator>(mesh, &mesh->dp()), place, opts),
      mesh_(std::move(mesh)) {
  // The base took the data-parallel group's numbering; the run is reported by world rank 0.
  rank = mesh_->world().rank();
  world_size = mesh_->world().size();
  data_rank = mesh_->coord().dp;
  data_world_size = mesh_->layout().dp();
}

double MeshShardContext::clip_shards(double norm, double max_norm) {
  const double coef = max_norm / (norm + 1e-6);
  torch::NoGradGuard no_grad;
  if (coef < 1.0)
    for (const auto& s : sharded()->all_shards())
      if (s.grad().defined()) s.grad().mul_(coef);
  return norm;
}

void MeshShardContext::all_reduce_sum(torch::Tensor& t) {
  mesh_->metric_sum(t);
}

void MeshShardContext::broadcast(torch::Tensor& t, int root) {
  mesh_->world().broadcast(t, root);
}

void MeshShardContext::barrier() {
  mesh_->world().barrier();
}

bool MeshShardContext::overflow_anywhere(bool mine) {
  return mesh_->world().any_rank(mine, "whether any rank's gradients overflowed");
}

}  // namespace gpulab::train::parallel
