// All-gather and reduce-scatter of flat groups (Gloo: reduce-scatter as all-reduce + slice).
#include "train/dist/shard_collectives.h"

namespace gpulab::train::dist {

PendingGather start_gather(Communicator& comm, FlatGroup& g, const std::string& what) {
  PendingGather p;
  g.allocate();
  p.input = g.shard().detach();
  if (comm.size() == 1) {
    g.full().copy_(p.input);
    return p;
  }
  p.work = comm.allgather_async(g.full(), p.input, what);
  return p;
}

void finish_gather(Communicator& comm, FlatGroup& g, PendingGather& p, const std::string& what) {
  if (p.work) comm.wait(p.work, what);
  p = {};
  g.mark_gathered();
}

PendingReduce start_reduce_scatter(Communicator& comm, FlatGroup& g, torch::Tensor flat_grad,
                                   const std::string& what) {
  PendingReduce p;
  p.flat = std::move(flat_grad);
  if (comm.size() == 1) return p;
  if (comm.has_reduce_scatter()) {
    p.out = torch::empty({g.shard_numel()}, p.flat.options());
    p.work = comm.reduce_scatter_async(p.out, p.flat, what);
  } else {
    p.work = comm.allreduce_async(p.flat, what);
  }
  return p;
}

void finish_reduce_scatter(Communicator& comm, FlatGroup& g, PendingReduce& p,
                           const std::string& what) {
  if (p.work) comm.wait(p.work, what);
  torch::Tensor mine = p.out.defined()
                           ? p.out
                           : p.flat.narrow(0, g.shard_numel() * g.rank(), g.shard_numel()).clone();
  auto& grad = g.shard().mutable_grad();
  grad = mine.to(g.shard().scalar_type());
  p = {};
}

}  // namespace gpulab::train::dist
