// What every ZeRO context over a device mesh shares (--tp or --pp with --shard): the base
// dist::ShardContext shards over the mesh's data-parallel group, while the run is numbered and
// reported by world rank, metrics are summed over the data-parallel group (DeviceMesh::metric_sum)
// and broadcasts and barriers span the world.
#pragma once

#include <memory>

#include "train/dist/shard_context.h"
#include "train/parallel/device_mesh.h"

namespace gpulab::train::parallel {

class MeshShardContext : public dist::ShardContext {
 public:
  void all_reduce_sum(torch::Tensor& t) override;       // DeviceMesh::metric_sum
  void broadcast(torch::Tensor& t, int root) override;  // over the world
  void barrier() override;                              // over the world
  bool overflow_anywhere(bool mine) override;           // over the world

 protected:
  MeshShardContext(std::shared_ptr<DeviceMesh> mesh, const launch::RankPlace& place,
                   const dist::ShardContextOptions& opts);

  // torch's clip_grad_norm_ given the whole model's gradient norm: every gradient shard scaled
  // by max_norm / (norm + 1e-6) when that is below 1. Returns the norm.
  double clip_shards(double norm, double max_norm);

  std::shared_ptr<DeviceMesh> mesh_;
};

}  // namespace gpulab::train::parallel
