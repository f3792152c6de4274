// The two collectives of sharded data parallel on a FlatGroup, started asynchronously and
// finished later so they overlap with compute: the all-gather of the shards into the full
// buffer, and the reduce-scatter of a flat gradient into this rank's gradient shard.
// NCCL has both. Gloo (libtorch 1.13) has all-gather but no reduce-scatter: there it is an
// all-reduce of the whole flat gradient of which each rank keeps its slice, so each rank sends
// and receives about 2 (N-1)/N of the gradient instead of (N-1)/N (twice a reduce-scatter's
// volume, the volume of DDP's all-reduce).
#pragma once

#include <torch/torch.h>

#include <string>

#include "train/dist/communicator.h"
#include "train/dist/flat_group.h"

namespace gpulab::train::dist {

struct PendingGather {
  WorkPtr work;
  torch::Tensor input;  // kept alive until the collective is done
};

// Gives `g` its full buffer back and starts filling it from every rank's shard.
PendingGather start_gather(Communicator& comm, FlatGroup& g, const std::string& what);
// Waits; then the parameters hold their gathered values.
void finish_gather(Communicator& comm, FlatGroup& g, PendingGather& p, const std::string& what);

struct PendingReduce {
  WorkPtr work;
  torch::Tensor flat;  // the mean flat gradient (all of it on Gloo)
  torch::Tensor out;   // NCCL: this rank's reduced shard
};

// Starts reducing `flat_grad` (already divided by the world size) into this rank's shard.
PendingReduce start_reduce_scatter(Communicator& comm, FlatGroup& g, torch::Tensor flat_grad,
                                   const std::string& what);
// Waits; then g.shard().grad() holds this rank's slice of the mean gradient.
void finish_reduce_scatter(Communicator& comm, FlatGroup& g, PendingReduce& p,
                           const std::string& what);

}  // namespace gpulab::train::dist
