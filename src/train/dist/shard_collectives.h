// The two collectives of sharded data parallel on a FlatGroup, started asynchronously and
// finished later so they overlap with compute: the all-gather of the shards into the full
// buffer, and the reduce-scatter of a flat gradient into this rank's gradient shard.
// NCCL has both. Gloo (libtorch 1.13) has all-gather but no reduce-scatter: there every rank
// sends each peer that peer's slice of its flat gradient (point to point, all started at once)
// and adds the N-1 slices it receives to its own, in rank order (the same sum on every run).
// Each rank sends and receives (N-1)/N of the gradient, a reduce-scatter's volume (an all-reduce
// of the whole gradient, the earlier way, moved twice that), and holds N-1 received slices
// until the sum; the additions are this rank's shard only, in the master dtype.
// Mixed precision: the all-gather moves compute copies (bf16: half the bytes), the reduce-scatter
// the flat gradient in the reduce dtype the caller made it in.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "train/dist/communicator.h"
#include "train/dist/flat_group.h"

namespace gpulab::train::dist {

struct PendingGather {
  WorkPtr work;
  torch::Tensor input;  // kept alive until the collective is done
};

// Gives `g` its full buffer back (a kept one from `pool` when it has one) and starts filling it
// from every rank's shard.
PendingGather start_gather(Communicator& comm, FlatGroup& g, const std::string& what,
                           BufferPool* pool = nullptr);
// Waits; then the parameters hold their gathered values.
void finish_gather(Communicator& comm, FlatGroup& g, PendingGather& p, const std::string& what);

struct PendingReduce {
  std::vector<WorkPtr> works;
  torch::Tensor flat;                   // the mean flat gradient (sent from until done)
  torch::Tensor out;                    // NCCL: this rank's reduced shard
  std::vector<torch::Tensor> incoming;  // Gloo: each rank's slice for this rank (own: undefined)
};

// Starts reducing `flat_grad` (this rank's whole gradient) into this rank's shard.
PendingReduce start_reduce_scatter(Communicator& comm, FlatGroup& g, torch::Tensor flat_grad,
                                   const std::string& what);
// Waits; then g.shard().grad() holds this rank's slice of the mean gradient (the sum over ranks
// divided by their number).
void finish_reduce_scatter(Communicator& comm, FlatGroup& g, PendingReduce& p,
                           const std::string& what);

}  // namespace gpulab::train::dist
