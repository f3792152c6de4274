// The tensor-parallel group as the TP layers see it: the collectives they need (sum, max,
// gather and reduce-scatter along a dimension) on a Communicator, and the bytes each rank hands
// them, so a step's communication volume can be checked against its formula.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "train/dist/communicator.h"

namespace gpulab::train::parallel {

class TpGroup {
 public:
  explicit TpGroup(dist::Communicator& comm) : comm_(comm) {}

  // A handle autograd functions can keep (an IValue holds no raw pointer); the group outlives
  // every graph built on it (the mesh owns it for the run).
  int64_t id() { return static_cast<int64_t>(reinterpret_cast<intptr_t>(this)); }
  static TpGroup& from_id(int64_t id) {
    return *reinterpret_cast<TpGroup*>(static_cast<intptr_t>(id));
  }

  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }

  // In place, over the group; a group of one does nothing (and counts nothing).
  void allreduce_sum(torch::Tensor& t, const char* what);
  void allreduce_max(torch::Tensor& t, const char* what);
  // Every rank's `t` side by side along dimension `dim`, in rank order.
  torch::Tensor gather_dim(const torch::Tensor& t, int64_t dim, const char* what);
  torch::Tensor gather_last_dim(const torch::Tensor& t, const char* what) {
    return gather_dim(t, -1, what);
  }
  // This rank's slice along `dim` (which the group size divides) of the sum over the group.
  // NCCL reduce-scatters; Gloo has no reduce-scatter, so there the whole sum is all-reduced and
  // sliced (the same values; the wire carries an all-reduce).
  torch::Tensor reduce_scatter_dim(const torch::Tensor& t, int64_t dim, const char* what);

  // Payload bytes this rank has handed to collectives (a tensor's size per all-reduce and per
  // reduce-scatter; its own part per all-gather), not what the algorithm puts on the wire.
  int64_t bytes() const { return bytes_; }
  // What ring algorithms send from this rank for the same collectives, with p ranks and N the
  // whole tensor: 2 (p-1)/p N per all-reduce, (p-1)/p N per all-gather and per reduce-scatter
  // (NCCL's volumes; bandwidth-bound collectives cost this).
  int64_t ring_bytes() const { return ring_bytes_; }
  void reset_bytes() { bytes_ = ring_bytes_ = 0; }

 private:
  void count_allreduce(const torch::Tensor& t);

  dist::Communicator& comm_;
  int64_t bytes_ = 0;
  int64_t ring_bytes_ = 0;
};

}  // namespace gpulab::train::parallel
