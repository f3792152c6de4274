// The arithmetic of a device mesh (no libtorch): which tensor-, pipeline- and data-parallel
// coordinates a world rank has, and which world ranks share each of its groups. Tensor parallel
// is innermost (consecutive ranks, so a TP group stays inside a node), pipeline stages next,
// data parallel outermost, as Megatron-LM lays them out.
#pragma once

#include <vector>

namespace gpulab::train::parallel {

struct MeshCoord {
  int tp = 0;
  int pp = 0;
  int dp = 0;
};

class MeshLayout {
 public:
  // Throws gpulab::Exception (kInvalidArgument) naming the numbers when a size is below 1 or
  // tp·pp does not divide the world, with a layout that would work.
  MeshLayout(int world, int tp, int pp);

  int world() const { return world_; }
  int tp() const { return tp_; }
  int pp() const { return pp_; }
  int dp() const { return world_ / (tp_ * pp_); }

  MeshCoord coord(int rank) const;
  int rank(MeshCoord c) const { return c.tp + tp_ * (c.pp + pp_ * c.dp); }

  // World ranks of `rank`'s groups, in group order (the group rank is the coordinate).
  std::vector<int> tp_group(int rank) const;
  std::vector<int> pp_group(int rank) const;
  std::vector<int> dp_group(int rank) const;

 private:
  int world_;
  int tp_;
  int pp_;
};

// Whether every TP group (`tp` consecutive ranks) stays inside a node, with `ranks_per_node`
// ranks on each of `nnodes` nodes: one node, or tp dividing a node's ranks. Where it does not,
// every layer's all-reduces cross the network: gpulab train refuses such a layout and gpulab
// plan leaves it out unless --allow_tp_across_nodes.
bool tp_inside_node(int tp, int ranks_per_node, int nnodes);

}  // namespace gpulab::train::parallel
