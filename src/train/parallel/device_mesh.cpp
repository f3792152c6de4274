// DeviceMesh: connects this rank's three groups, in the same order on every rank.
#include "train/parallel/device_mesh.h"

#include <string>

namespace gpulab::train::parallel {

DeviceMesh::DeviceMesh(dist::Communicator& world, int tp, int pp)
    : world_(world), layout_(world.size(), tp, pp), coord_(layout_.coord(world.rank())) {
  // Group names carry the other two coordinates, which every member shares and no other group
  // has. Every rank connects TP, then PP, then DP: each group's members are all connecting it
  // at the same time, so no rank waits on one that is connecting another group.
  const int r = world.rank();
  const auto c = coord_;
  tp_ = std::make_unique<dist::Communicator>(
      world, layout_.tp_group(r), "tp/" + std::to_string(c.pp) + "/" + std::to_string(c.dp));
  pp_ = std::make_unique<dist::Communicator>(
      world, layout_.pp_group(r), "pp/" + std::to_string(c.tp) + "/" + std::to_string(c.dp));
  dp_ = std::make_unique<dist::Communicator>(
      world, layout_.dp_group(r), "dp/" + std::to_string(c.tp) + "/" + std::to_string(c.pp));
}

void DeviceMesh::metric_sum(torch::Tensor& t) {
  dp_->allreduce_sum(t, "metric all-reduce (data parallel)");
  if (tp_->size() > 1) tp_->allreduce_max(t, "metric all-reduce (tensor parallel)");
  if (pp_->size() > 1) pp_->allreduce_max(t, "metric all-reduce (pipeline)");
}

std::shared_ptr<DeviceMesh> mesh_over_world(const launch::RankPlace& place,
                                            const dist::CommOptions& comm, int tp, int pp) {
  auto world = std::make_shared<dist::Communicator>(place, comm);
  return std::shared_ptr<DeviceMesh>(new DeviceMesh(*world, tp, pp),
                                     [world](DeviceMesh* m) { delete m; });
}

}  // namespace gpulab::train::parallel
