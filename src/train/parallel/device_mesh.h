// One device mesh over the world's communicator: this rank's coordinates and its tensor-,
// pipeline- and data-parallel process groups (each a Communicator of the same backend).
#pragma once

#include <memory>

#include "train/dist/communicator.h"
#include "train/parallel/mesh_layout.h"

namespace gpulab::train::parallel {

class DeviceMesh {
 public:
  // Every world rank calls it together (it connects each group). Throws what MeshLayout throws,
  // before any group is made.
  DeviceMesh(dist::Communicator& world, int tp, int pp);

  const MeshLayout& layout() const { return layout_; }
  MeshCoord coord() const { return coord_; }
  dist::Communicator& world() { return world_; }
  dist::Communicator& tp() { return *tp_; }
  dist::Communicator& pp() { return *pp_; }
  dist::Communicator& dp() { return *dp_; }

  // A metric summed over the data-parallel group, then the max over the model-parallel groups
  // (tensor, pipeline): each model replica's ranks hold its figure alike (the last stage's, which
  // every stage receives), so the result is the data-parallel sum, and a stop flag raised on any
  // rank reaches all of them.
  void metric_sum(torch::Tensor& t);

 private:
  dist::Communicator& world_;
  MeshLayout layout_;
  MeshCoord coord_;
  std::unique_ptr<dist::Communicator> tp_, pp_, dp_;
};

// The world's communicator (connected from `place`) and a mesh over it, which keeps the world
// alive: for a context whose base class is given one of the mesh's groups.
std::shared_ptr<DeviceMesh> mesh_over_world(const launch::RankPlace& place,
                                            const dist::CommOptions& comm, int tp, int pp);

}  // namespace gpulab::train::parallel
