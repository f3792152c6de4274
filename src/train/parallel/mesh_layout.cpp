// MeshLayout: the checks on (world, tp, pp) and the rank <-> coordinate arithmetic.
#include "train/parallel/mesh_layout.h"

#include <numeric>
#include <string>

#include "core/error.h"

namespace gpulab::train::parallel {

MeshLayout::MeshLayout(int world, int tp, int pp) : world_(world), tp_(tp), pp_(pp) {
  const std::string shape = "world size " + std::to_string(world) + ", --tp " + std::to_string(tp) +
                            ", --pp " + std::to_string(pp);
  if (world < 1 || tp < 1 || pp < 1)
    throw Exception(Code::kInvalidArgument,
                    "a device mesh needs sizes of at least 1 (" + shape + ")",
                    "use --tp 1 --pp 1 for data parallelism alone");
  if (world % (tp * pp) != 0) {
    // Divisors of what was asked (a TP size that divided the heads still does) that tile it.
    const int tp_ok = std::gcd(world, tp);
    const int pp_ok = std::gcd(world / tp_ok, pp);
    throw Exception(Code::kInvalidArgument,
                    "tp x pp = " + std::to_string(tp * pp) + " does not divide the " + shape +
                        ": the data-parallel size world / (tp x pp) must be whole",
                    "use a world size that is a multiple of " + std::to_string(tp * pp) +
                        ", or e.g. --tp " + std::to_string(tp_ok) + " --pp " +
                        std::to_string(pp_ok));
  }
}

MeshCoord MeshLayout::coord(int rank) const {
  GPULAB_ASSERT(rank >= 0 && rank < world_, "mesh rank out of range");
  return {rank % tp_, (rank / tp_) % pp_, rank / (tp_ * pp_)};
}

std::vector<int> MeshLayout::tp_group(int rank) const {
  MeshCoord c = coord(rank);
  std::vector<int> out;
  for (c.tp = 0; c.tp < tp_; ++c.tp) out.push_back(this->rank(c));
  return out;
}

std::vector<int> MeshLayout::pp_group(int rank) const {
  MeshCoord c = coord(rank);
  std::vector<int> out;
  for (c.pp = 0; c.pp < pp_; ++c.pp) out.push_back(this->rank(c));
  return out;
}

std::vector<int> MeshLayout::dp_group(int rank) const {
  MeshCoord c = coord(rank);
  std::vector<int> out;
  for (c.dp = 0; c.dp < dp(); ++c.dp) out.push_back(this->rank(c));
  return out;
}

bool tp_inside_node(int tp, int ranks_per_node, int nnodes) {
  return nnodes <= 1 || ranks_per_node % tp == 0;
}

}  // namespace gpulab::train::parallel
