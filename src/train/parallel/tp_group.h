// The tensor-parallel group as the TP layers see it: the collectives they need (sum, max,
// gather along the last dimension) on a Communicator, and the bytes each rank hands them, so a
// step's communication volume can be checked against its formula.
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
  // Every rank's `t` side by side along the last dimension, in rank order.
  torch::Tensor gather_last_dim(const torch::Tensor& t, const char* what);

  // Payload bytes this rank has handed to collectives (a tensor's size per all-reduce; its
  // own part per all-gather), not what the algorithm puts on the wire.
  int64_t bytes() const { return bytes_; }
  void reset_bytes() { bytes_ = 0; }

 private:
  dist::Communicator& comm_;
  int64_t bytes_ = 0;
};

}  // namespace gpulab::train::parallel
